//! What both stored forms of the index (the JSON artifact and its binary
//! form) share: the metadata a load answers, and the rule a stored note path
//! must meet before it is believed. Both are written through
//! [`crate::durable::create_temp`].

use chrono::{DateTime, Utc};

/// What the artifact says about itself, beyond the index it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactMeta {
    /// Truncated to whole seconds, as written.
    pub generated_at: DateTime<Utc>,
    pub notes_commit: Option<String>,
    /// Size of the artifact file.
    pub byte_size: u64,
}

/// A stored note path is relative, in plain components: not empty, no leading
/// `/`, no NUL, no empty, `.` or `..` component (the artifact is read as
/// hostile input: a shared repository may carry one).
pub fn is_safe_path(p: &str) -> bool {
    !(p.is_empty()
        || p.starts_with('/')
        || p.contains('\0')
        || p.split('/').any(|c| c.is_empty() || c == "." || c == ".."))
}
