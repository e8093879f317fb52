//! Start-up preparation of the notes root: create it, make it a git
//! repository with a welcome note when it is not one, keep `.mirai/` out of
//! git, and refuse roots that cannot serve.

use std::fs;
use std::io::Write;
use std::path::Path;

use git2::{Repository, Signature};
use thiserror::Error;

use crate::ops::PolicyMode;
use crate::repo::GitIdentity;
use crate::sync::SyncConfig;

/// The note committed into a freshly initialized notes repository.
pub const WELCOME_NOTE: &str = "welcome.md";

const WELCOME_TEXT: &str = "# Welcome to mirai\n\
\n\
This folder is a git repository of markdown notes served by mirai.\n\
Every change made through mirai is a reviewed unified diff and one git commit.\n";

/// Why the notes root cannot be served. Start-up prints it and exits 2.
#[derive(Debug, Error)]
pub enum BootstrapError {
    #[error("notes root {0} exists but is not a directory")]
    NotADirectory(String),
    #[error("notes root {path} cannot be created: {reason}")]
    CannotCreate { path: String, reason: String },
    #[error("notes root {path} is not writable ({reason}); fix its permissions or set MIRAI_POLICY_MODE=read_only")]
    NotWritable { path: String, reason: String },
    #[error("notes root {path} could not be made a git repository: {reason}")]
    Git { path: String, reason: String },
}

/// What preparation did, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    Existing,
    Created,
    Initialized,
}

/// Makes `root` ready to serve. In `read_only` mode nothing is written.
pub fn prepare_notes_root(
    root: &Path,
    policy: PolicyMode,
    identity: &GitIdentity,
) -> Result<Prepared, BootstrapError> {
    let shown = root.display().to_string();
    let mut created = false;
    match fs::metadata(root) {
        Ok(meta) if !meta.is_dir() => return Err(BootstrapError::NotADirectory(shown)),
        Ok(_) => {}
        Err(_) => {
            fs::create_dir_all(root).map_err(|e| BootstrapError::CannotCreate {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            created = true;
        }
    }
    if policy == PolicyMode::ReadOnly {
        return Ok(if created {
            Prepared::Created
        } else {
            Prepared::Existing
        });
    }
    check_writable(root).map_err(|e| BootstrapError::NotWritable {
        path: shown.clone(),
        reason: e.to_string(),
    })?;

    let git_err = |e: git2::Error| BootstrapError::Git {
        path: shown.clone(),
        reason: e.message().to_string(),
    };
    // The root itself is the repository, never a parent found by discovery
    // (ARCHITECTURE.md, "The root is the repository").
    let outcome = match Repository::open(root) {
        Ok(repo) => {
            crate::repo::exclude_mirai_folder(repo.path()).map_err(|e| BootstrapError::Git {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            if created {
                Prepared::Created
            } else {
                Prepared::Existing
            }
        }
        Err(_) => {
            let repo = Repository::init(root).map_err(git_err)?;
            crate::repo::exclude_mirai_folder(repo.path()).map_err(|e| BootstrapError::Git {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            commit_welcome_note(&repo, root, identity).map_err(git_err)?;
            Prepared::Initialized
        }
    };
    Ok(outcome)
}

fn check_writable(root: &Path) -> std::io::Result<()> {
    let probe = root.join(format!(".mirai-write-check-{}", std::process::id()));
    let result = fs::File::create(&probe).and_then(|mut f| f.write_all(b"ok"));
    let _ = fs::remove_file(&probe);
    result
}

fn commit_welcome_note(
    repo: &Repository,
    root: &Path,
    identity: &GitIdentity,
) -> Result<(), git2::Error> {
    let note = root.join(WELCOME_NOTE);
    if !note.exists() {
        fs::write(&note, WELCOME_TEXT).map_err(|e| git2::Error::from_str(&e.to_string()))?;
    }
    let mut index = repo.index()?;
    index.add_path(Path::new(WELCOME_NOTE))?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let signature = Signature::now(&identity.name, &identity.email)?;
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        "mirai: initialize notes repository\n",
        &tree,
        &[],
    )?;
    Ok(())
}

/// With a remote and a missing or empty `root`: makes `root` an empty
/// repository whose unborn HEAD names the branch to follow (`MIRAI_GIT_BRANCH`,
/// else the remote's default), ready for the first pull to fill it (mirai
/// writes the working tree itself, as in every pull: no libgit2 checkout).
/// Answers that branch; `None` when the root has files, or the remote has no
/// branch yet (then the root is prepared as without a remote, and the first
/// push creates the branch).
pub fn clone_into_empty(root: &Path, sync: &SyncConfig) -> Result<Option<String>, String> {
    let shown = root.display();
    match fs::read_dir(root) {
        Ok(entries) => {
            if entries.into_iter().next().is_some() {
                return Ok(None);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("notes root {shown} cannot be read: {e}")),
    }
    let branch = match &sync.branch {
        Some(branch) => branch.clone(),
        None => match crate::sync::remote::default_branch(sync) {
            Ok(Some(branch)) => branch,
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("cannot clone into {shown}: {}", e.message)),
        },
    };
    fs::create_dir_all(root).map_err(|e| format!("notes root {shown} cannot be created: {e}"))?;
    let mut options = git2::RepositoryInitOptions::new();
    options.initial_head(&branch);
    let repo = Repository::init_opts(root, &options).map_err(|e| {
        format!(
            "notes root {shown} could not be made a git repository: {}",
            e.message()
        )
    })?;
    crate::repo::exclude_mirai_folder(repo.path())
        .map_err(|e| format!("cannot keep .mirai/ out of git in {shown}: {e}"))?;
    Ok(Some(branch))
}
