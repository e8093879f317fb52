//! Why a configuration cannot be used: one line for the operator, naming the
//! setting, the value and what is expected.

use thiserror::Error;

/// A configuration value that cannot be used. Start-up prints it and exits 2.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("invalid policy mode: {0} (expected allow_all, read_only or review)")]
    PolicyMode(String),
    #[error("invalid {name}: {value} (expected {expected})")]
    Value {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A sync setting that cannot be used (the message names it and the fix).
    #[error("{0}")]
    Sync(String),
    #[error("MIRAI_POLICY_MODE=review needs MIRAI_REVIEWER_TOKEN: approving and rejecting proposals over HTTP takes that second bearer token; set it (or use another policy mode)")]
    NoReviewerToken,
    /// An OAuth setting that cannot be used (the message names it and the fix).
    #[error("{0}")]
    OAuth(String),
    /// The callers file's problems, one line each.
    #[error("{0}")]
    Callers(crate::callers::CallersError),
    #[error("MIRAI_CACHE_DIR {0} is inside the notes root: compiled code must never live where notes (and anyone who can push to them) can put files; choose a folder outside NOTES_ROOT")]
    CacheInsideNotes(String),
}
