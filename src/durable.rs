//! Files replaced whole, durably: a new version is written to a temp file
//! beside the old one (never following a link, never reusing a name), synced,
//! then renamed over it, and the folder synced, so a crash leaves the old
//! version or the new one, never a mix. The lowest floor: it knows cap-std
//! and nothing of mirai. mirai's own state under `.mirai/` (the index and its
//! binary form, embeddings, proposals, the replay map) is written this way;
//! start-up sweeps the temp files a crash left by their `<name>.tmp-` prefix.
//! Notes themselves are written in two phases by `notes::root`'s slots (the
//! temp is made before the commit, renamed after), with a hidden temp name.

use std::io::{self, Write};
use std::time::SystemTime;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

/// Creates a new temp file for `file_name` in `dir`: its name and the file,
/// open for writing. For writers that stream (the index's two forms); the
/// caller syncs, renames, and removes it on failure.
pub fn create_temp(dir: &Dir, file_name: &str) -> io::Result<(String, std::fs::File)> {
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
    let file = dir.open_with(&tmp, &options)?.into_std();
    Ok((tmp, file))
}

/// Replaces `file_name` in `dir` with `bytes`: temp file, sync, rename, then
/// the folder synced so the rename itself survives a crash. On failure the
/// temp file is removed and the old file is untouched.
pub fn replace(dir: &Dir, file_name: &str, bytes: &[u8]) -> io::Result<()> {
    let (tmp, mut file) = create_temp(dir, file_name)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| dir.rename(&tmp, dir, file_name));
    if let Err(e) = written {
        let _ = dir.remove_file(&tmp);
        return Err(e);
    }
    sync_folder(dir);
    Ok(())
}

/// Syncs `dir` itself, so renames in it are durable. Best effort: a folder
/// that cannot be opened or synced (some filesystems refuse) is left as it is.
pub fn sync_folder(dir: &Dir) {
    if let Ok(folder) = dir.open(".") {
        let _ = folder.into_std().sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replace_leaves_the_new_bytes_and_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        replace(&dir, "state.json", b"one").unwrap();
        replace(&dir, "state.json", b"two").unwrap();
        assert_eq!(
            std::fs::read(tmp.path().join("state.json")).unwrap(),
            b"two"
        );
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn a_failed_replace_keeps_the_old_file_and_removes_its_temp() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        replace(&dir, "state.json", b"old").unwrap();
        // A folder in the way of the rename: the write fails, nothing else changes.
        std::fs::create_dir(tmp.path().join("blocked")).unwrap();
        std::fs::write(tmp.path().join("blocked/keep"), b"x").unwrap();
        assert!(replace(&dir, "blocked", b"new").is_err());
        assert_eq!(
            std::fs::read(tmp.path().join("state.json")).unwrap(),
            b"old"
        );
        let mut names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["blocked", "state.json"]);
    }
}
