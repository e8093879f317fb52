//! What a fetch brought in, checked from the objects' headers before anything
//! parses them. libgit2 reads an object whole to parse it (a commit to walk
//! the history, a tree to compare two commits), so a remote's 200 MB commit
//! message or tree would be held whole by the next pull, status or history
//! read. A fetch writes what it receives as a new pack; every object listed in
//! that pack's index is looked up by header only (kind and size, no content),
//! and the fetch is refused (the tracking ref does not move, so nothing reads
//! them) when a commit or tag is past [`MAX_COMMIT_BYTES`] or a tree past the
//! file limit. Large files are not refused here: a pull keeps a file past
//! `MIRAI_MAX_FILE_BYTES` in git and out of the working tree
//! ([`crate::repo::unheld`]).
//!
//! A remote on this machine is checked before the fetch instead
//! ([`check_local_remote`]): libgit2's local transport packs the remote's
//! objects in this process, reading each whole, so there a file past the limit
//! is refused too.

use std::collections::{BTreeSet, HashSet};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};

use crate::error::{Error, Result};

/// The largest commit or tag a fetch takes in (its message included): far
/// past any message a person writes.
pub const MAX_COMMIT_BYTES: usize = 1024 * 1024;

/// A pack index's magic number and the one version git and libgit2 write.
const IDX_MAGIC: [u8; 4] = [0xff, b't', b'O', b'c'];
const IDX_VERSION: u32 = 2;

/// The pack indexes in the repository now (names only).
pub fn packs(git: &Repository) -> BTreeSet<PathBuf> {
    let folder = git.path().join("objects").join("pack");
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "idx"))
        .collect()
}

/// Checks every object of the packs that are in the repository now and not
/// in `before`: `Err` names the first one past its limit.
pub fn check_new_packs(
    git: &Repository,
    before: &BTreeSet<PathBuf>,
    max_tree_bytes: u64,
) -> Result<()> {
    let odb = git
        .odb()
        .map_err(|e| Error::git(format!("cannot open the object database: {}", e.message())))?;
    for idx in packs(git).difference(before) {
        let oids = match pack_oids(idx) {
            Ok(oids) => oids,
            Err(e) => {
                log::warn!("sync: cannot list the objects of {}: {e}", idx.display());
                continue;
            }
        };
        for oid in oids {
            let oid = oid.map_err(|e| {
                Error::git(format!("cannot read the pack index {}: {e}", idx.display()))
            })?;
            let Ok((size, kind)) = odb.read_header(oid) else {
                continue; // a thin pack's base that is not stored: nothing to read
            };
            check(oid, size as u64, kind, max_tree_bytes, None)?;
        }
    }
    Ok(())
}

/// The most objects one fetch from a remote on this machine may bring in
/// (each one checked is remembered until the check ends).
pub const MAX_NEW_OBJECTS: usize = 2_000_000;

/// Before a fetch from the repository `remote` on this machine: walks what
/// `tip` reaches that this repository lacks (an object it has, it has with
/// everything below it), each object looked up by header in the remote's own
/// database before it is parsed, and refuses a commit or tag past
/// [`MAX_COMMIT_BYTES`], or a tree or file past `max_file_bytes`.
pub fn check_local_remote(
    git: &Repository,
    remote: &Repository,
    tip: Oid,
    max_file_bytes: u64,
) -> Result<()> {
    let cannot = |e: git2::Error| Error::git(format!("cannot read the remote: {}", e.message()));
    let (ours, theirs) = (git.odb().map_err(cannot)?, remote.odb().map_err(cannot)?);
    let mut seen = HashSet::new();
    let mut stack = vec![tip];
    while let Some(oid) = stack.pop() {
        if ours.exists(oid) || !seen.insert(oid) {
            continue;
        }
        if seen.len() > MAX_NEW_OBJECTS {
            return Err(Error::conflict(format!(
                "the remote holds more than {MAX_NEW_OBJECTS} objects this repository lacks; \
                 fetch them once with git (git fetch), then sync again"
            )));
        }
        let (size, kind) = theirs.read_header(oid).map_err(cannot)?;
        check(oid, size as u64, kind, max_file_bytes, Some(max_file_bytes))?;
        match kind {
            ObjectType::Commit => {
                let commit = remote.find_commit(oid).map_err(cannot)?;
                stack.push(commit.tree_id());
                stack.extend(commit.parent_ids());
            }
            ObjectType::Tree => {
                let tree = remote.find_tree(oid).map_err(cannot)?;
                // A submodule's commit lives in another repository.
                stack.extend(
                    tree.iter()
                        .filter(|entry| entry.kind() != Some(ObjectType::Commit))
                        .map(|entry| entry.id()),
                );
            }
            ObjectType::Tag => {
                let tag = remote.find_tag(oid).map_err(cannot)?;
                stack.push(tag.target_id());
            }
            _ => {}
        }
    }
    Ok(())
}

/// The refusal for one object past its limit (a blob only when `max_blob_bytes` is given).
fn check(
    oid: Oid,
    size: u64,
    kind: ObjectType,
    max_tree_bytes: u64,
    max_blob_bytes: Option<u64>,
) -> Result<()> {
    let limit = match (kind, max_blob_bytes) {
        (ObjectType::Commit | ObjectType::Tag, _) => MAX_COMMIT_BYTES as u64,
        (ObjectType::Tree, _) => max_tree_bytes,
        (ObjectType::Blob, Some(limit)) => limit,
        _ => return Ok(()),
    };
    if size <= limit {
        return Ok(());
    }
    let (what, setting, remedy) = match kind {
        ObjectType::Tree => (
            "a folder listing (tree)",
            "MIRAI_MAX_FILE_BYTES",
            "raise the limit or rewrite that commit on the remote",
        ),
        // Only a remote on this machine refuses a file (libgit2 packs it here).
        ObjectType::Blob => (
            "a file",
            "MIRAI_MAX_FILE_BYTES",
            "over a path on this machine libgit2 packs each object whole in this process; \
             serve the remote over https or ssh (a larger file then stays out of the working \
             tree), or raise the limit",
        ),
        ObjectType::Tag => (
            "a tag",
            "the 1 MiB a commit or tag may take, its message included",
            "rewrite it on the remote",
        ),
        _ => (
            "a commit",
            "the 1 MiB a commit or tag may take, its message included",
            "rewrite that commit on the remote",
        ),
    };
    Err(Error::conflict(format!(
        "the remote holds {what} {oid} of {size} bytes, past {setting} ({limit} bytes): mirai \
         would read it whole, so it takes nothing from this fetch; {remedy} (nothing here changed)"
    )))
}

/// The object ids a version-2 pack index lists, read 20 bytes at a time.
fn pack_oids(idx: &Path) -> std::io::Result<impl Iterator<Item = std::io::Result<Oid>>> {
    let meta = std::fs::symlink_metadata(idx)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a plain file"));
    }
    let mut file = BufReader::new(std::fs::File::open(idx)?);
    let mut header = [0u8; 8];
    file.read_exact(&mut header)?;
    if header[..4] != IDX_MAGIC || header[4..] != IDX_VERSION.to_be_bytes() {
        return Err(std::io::Error::other("not a version-2 pack index"));
    }
    let mut fanout = [0u8; 256 * 4];
    file.read_exact(&mut fanout)?;
    let mut count = [0u8; 4];
    count.copy_from_slice(&fanout[255 * 4..]);
    let count = u32::from_be_bytes(count);
    Ok((0..count).map(move |_| {
        let mut raw = [0u8; 20];
        file.read_exact(&mut raw)?;
        Oid::from_bytes(&raw).map_err(|e| std::io::Error::other(e.message().to_string()))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let git = Repository::init(dir.path()).unwrap();
        (dir, git)
    }

    /// A pack of `blobs` written through libgit2's packbuilder, as a fetch writes one.
    fn write_pack(git: &Repository, objects: &[Oid]) {
        let mut builder = git.packbuilder().unwrap();
        for oid in objects {
            builder.insert_object(*oid, None).unwrap();
        }
        let mut buf = git2::Buf::new();
        builder.write_buf(&mut buf).unwrap();
        let odb = git.odb().unwrap();
        let mut writer = odb.packwriter().unwrap();
        std::io::Write::write_all(&mut writer, &buf).unwrap();
        writer.commit().unwrap();
    }

    #[test]
    fn a_new_pack_is_listed_and_its_objects_pass_within_the_limits() {
        let (_dir, git) = repo();
        let before = packs(&git);
        let blob = git.blob(b"hello").unwrap();
        let mut tree = git.treebuilder(None).unwrap();
        tree.insert("a.md", blob, 0o100644).unwrap();
        let tree = tree.write().unwrap();
        write_pack(&git, &[blob, tree]);
        let new: Vec<_> = packs(&git).difference(&before).cloned().collect();
        assert_eq!(new.len(), 1);
        let listed: Vec<Oid> = pack_oids(&new[0])
            .unwrap()
            .map(|oid| oid.unwrap())
            .collect();
        assert!(
            listed.contains(&blob) && listed.contains(&tree),
            "{listed:?}"
        );
        check_new_packs(&git, &before, 1024).unwrap();
    }

    #[test]
    fn a_commit_past_the_limit_or_a_tree_past_the_file_limit_is_refused() {
        let (_dir, git) = repo();
        let signature = git2::Signature::now("a", "a@b").unwrap();
        let empty = git.treebuilder(None).unwrap().write().unwrap();
        let tree = git.find_tree(empty).unwrap();
        let message = "x".repeat(MAX_COMMIT_BYTES + 1);
        let huge = git
            .commit(None, &signature, &signature, &message, &tree, &[])
            .unwrap();
        let small = git
            .commit(None, &signature, &signature, "ok", &tree, &[])
            .unwrap();
        let before = packs(&git);
        write_pack(&git, &[small]);
        check_new_packs(&git, &before, 1024).unwrap();
        let before = packs(&git);
        write_pack(&git, &[huge]);
        let err = check_new_packs(&git, &before, 1024).unwrap_err();
        assert!(
            err.message.contains(&huge.to_string()) && err.message.contains("1 MiB"),
            "{}",
            err.message
        );

        let blob = git.blob(b"x").unwrap();
        let mut builder = git.treebuilder(None).unwrap();
        for n in 0..100 {
            builder
                .insert(format!("note-{n}.md"), blob, 0o100644)
                .unwrap();
        }
        let wide = builder.write().unwrap();
        let before = packs(&git);
        write_pack(&git, &[wide]);
        let err = check_new_packs(&git, &before, 1024).unwrap_err();
        assert!(
            err.message.contains("MIRAI_MAX_FILE_BYTES"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_local_remote_is_walked_by_header_from_what_this_repository_lacks() {
        let (_a, remote) = repo();
        let (_b, ours) = repo();
        let signature = git2::Signature::now("a", "a@b").unwrap();
        let commit = |git: &Repository, files: &[(&str, &[u8])], parents: &[Oid]| {
            let mut builder = git.treebuilder(None).unwrap();
            for (name, bytes) in files {
                builder
                    .insert(name, git.blob(bytes).unwrap(), 0o100644)
                    .unwrap();
            }
            let tree = git.find_tree(builder.write().unwrap()).unwrap();
            let parents: Vec<_> = parents
                .iter()
                .map(|p| git.find_commit(*p).unwrap())
                .collect();
            let parents: Vec<_> = parents.iter().collect();
            git.commit(None, &signature, &signature, "c", &tree, &parents)
                .unwrap()
        };
        let big = vec![b'x'; 4096];
        let first = commit(&remote, &[("big.md", &big)], &[]);
        let second = commit(&remote, &[("big.md", &big), ("a.md", b"a")], &[first]);
        let err = check_local_remote(&ours, &remote, second, 1024).unwrap_err();
        assert!(
            err.message.contains("a file") && err.message.contains("https or ssh"),
            "{}",
            err.message
        );
        check_local_remote(&ours, &remote, second, 8192).unwrap();
        // What this repository already has is not walked again: the big file's
        // commit is here, so only the new commit and its small note are checked.
        let copied = ours.odb().unwrap();
        let source = remote.odb().unwrap();
        for oid in [first, remote.find_commit(first).unwrap().tree_id()] {
            let object = source.read(oid).unwrap();
            copied.write(object.kind(), object.data()).unwrap();
        }
        let blob = remote.blob(&big).unwrap();
        copied.write(ObjectType::Blob, &big).unwrap();
        assert!(ours.odb().unwrap().exists(blob));
        check_local_remote(&ours, &remote, second, 1024).unwrap();
    }
}
