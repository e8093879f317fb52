//! The settings the rows honour: the policy mode, what a write does to a
//! note with uncommitted changes, and the guards against destructive writes.
//! Read and validated by `config::policy` and `config::guards`; [`Settings`]
//! is what a [`super::Context`] is built from.

use crate::repo::GitIdentity;

/// Which classes of operation a deployment allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyMode {
    AllowAll,
    ReadOnly,
    /// Every note-changing write becomes a proposal a person approves or rejects.
    Review,
}

impl PolicyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyMode::AllowAll => "allow_all",
            PolicyMode::ReadOnly => "read_only",
            PolicyMode::Review => "review",
        }
    }
}

/// What a write does to a note with someone else's uncommitted changes
/// (`MIRAI_DIRTY_NOTES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirtyNotes {
    /// Refuse with 409 `conflict` (the default).
    Refuse,
    /// Commit the note as it is on disk first, in a snapshot commit of its own,
    /// then write on top: for vaults edited by a person who never commits.
    Snapshot,
}

/// Which writes the guards against destructive writes check (`MIRAI_GUARDS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardMode {
    /// Writes whose author is a model: the sandbox, agent runs and MCP (the default).
    Models,
    /// Plain HTTP calls too.
    All,
    /// No write is guarded.
    Off,
}

/// The guards against destructive writes (`MIRAI_GUARD*`): where they apply
/// and their bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guards {
    pub mode: GuardMode,
    /// A write may remove at most this share of a note's lines, net
    /// (`MIRAI_GUARD_MAX_DELETE_RATIO`, default 0.5).
    pub max_delete_ratio: f64,
    /// Notes shorter than this many lines are not held to the ratio
    /// (`MIRAI_GUARD_MIN_LINES`, default 20).
    pub min_lines: usize,
    /// Whether added lines that look like elision placeholders are refused
    /// (`MIRAI_GUARD_PLACEHOLDERS`, `on` by default).
    pub placeholders: bool,
    /// Whether writes that drop a note's structure (its front matter, all its
    /// headings, most of its links, or most of a note of 5 lines or more) are
    /// refused (`MIRAI_GUARD_STRUCTURE`, `on` by default).
    pub structure: bool,
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            mode: GuardMode::Models,
            max_delete_ratio: 0.5,
            min_lines: 20,
            placeholders: true,
            structure: true,
        }
    }
}

/// The settings the rows honour, which [`super::Context::new`] takes.
#[derive(Clone)]
pub struct Settings {
    pub policy: PolicyMode,
    /// The request body limit: the largest note content a write may produce.
    pub max_body_bytes: usize,
    /// The largest note read, indexed or written (`MIRAI_MAX_NOTE_BYTES`).
    pub max_note_bytes: usize,
    /// The largest file a pull writes into the working tree (`MIRAI_MAX_FILE_BYTES`).
    pub max_file_bytes: usize,
    /// Whether `files.write` takes any extension (`MIRAI_FILES_ANY_TYPE`).
    pub files_any_type: bool,
    pub max_edits: usize,
    pub max_changes: usize,
    pub max_move_notes: usize,
    pub proposals_max_pending: usize,
    pub dirty_notes: DirtyNotes,
    pub guards: Guards,
    pub git_identity: GitIdentity,
}
