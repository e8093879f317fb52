//! What both stored forms of the index (the JSON artifact and its binary
//! form) share: the metadata a load answers, and the rule a stored note path
//! must meet before it is believed, and how a new one starts: as a temp file
//! beside it (swept at start-up by its `<name>.tmp-` prefix).

use std::io;
use std::time::SystemTime;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
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

/// Creates a new temp file for `file_name` in `state` (never following a
/// link, never reusing a file): its name and the file, open for writing.
pub fn create_temp(state: &Dir, file_name: &str) -> io::Result<(String, std::fs::File)> {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = format!(
        "{file_name}.tmp-{}-{nanos}-{:?}",
        std::process::id(),
        std::thread::current().id()
    );
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create_new(true)
        .follow(FollowSymlinks::No)
        .mode(0o644);
    let file = state.open_with(&tmp, &options)?.into_std();
    Ok((tmp, file))
}
