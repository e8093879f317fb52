//! The network half of sync, through libgit2's own transports (no `git`
//! subprocess): fetching the followed branch into `refs/remotes/mirai/<branch>`,
//! pushing it (never forced), and the remote's default branch for a clone.
//! Credentials come from the configuration only; every message that leaves
//! here is stripped of URLs' user information and of the secrets themselves.

use git2::{
    CertificateCheckStatus, Cred, CredentialType, FetchOptions, PushOptions, RemoteCallbacks,
    Repository,
};

use super::settings::{GitCredentials, SyncConfig, Transport};
use crate::error::{Error, ErrorCode, Result};

/// Where the remote's branch is kept locally (not `origin`: a person's own
/// remote-tracking refs stay theirs).
pub const TRACKING_PREFIX: &str = "refs/remotes/mirai/";

/// The ref a fetch of `branch` updates.
pub fn tracking_ref(branch: &str) -> String {
    format!("{TRACKING_PREFIX}{branch}")
}

/// `text` with the configured secrets and URL user information masked.
pub fn scrub(config: &SyncConfig, text: &str) -> String {
    let mut text = crate::redact::urls(text).into_owned();
    let mut secrets: Vec<&str> = Vec::new();
    match &config.credentials {
        GitCredentials::Token { token, .. } => secrets.push(token),
        GitCredentials::SshKey {
            passphrase: Some(passphrase),
            ..
        } => secrets.push(passphrase),
        _ => {}
    }
    if let Some(password) = url_password(&config.remote) {
        text = text.replace(&password, crate::redact::MASK);
    }
    for secret in secrets.into_iter().filter(|s| !s.is_empty()) {
        text = text.replace(secret, crate::redact::MASK);
    }
    text
}

/// The password of a URL's user information, percent-decoded.
fn url_password(remote: &str) -> Option<String> {
    let url = url::Url::parse(remote).ok()?;
    let password = url.password()?;
    Some(percent_decode(password).unwrap_or_else(|| password.to_string()))
}

fn url_username(remote: &str) -> Option<String> {
    let url = url::Url::parse(remote).ok()?;
    (!url.username().is_empty()).then(|| percent_decode(url.username()).unwrap_or_default())
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' && at + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[at + 1..at + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A failure to talk to the remote: 503 `remote_unavailable`, secrets masked.
fn unavailable(config: &SyncConfig, doing: &str, e: &git2::Error) -> Error {
    Error::new(
        ErrorCode::RemoteUnavailable,
        scrub(
            config,
            &format!(
                "cannot {doing} {}: {}; nothing was changed locally; check MIRAI_GIT_REMOTE, \
                 the credentials and the network, then sync again",
                config.shown_remote(),
                e.message()
            ),
        ),
    )
}

/// Credentials (asked once: a refusal is final) and the ssh host key check.
fn callbacks(config: &SyncConfig) -> RemoteCallbacks<'_> {
    let mut callbacks = RemoteCallbacks::new();
    let mut tried = false;
    callbacks.credentials(move |_url, username_from_url, allowed| {
        let user = username_from_url.unwrap_or("git");
        if allowed.contains(CredentialType::USERNAME) {
            return Cred::username(user);
        }
        if tried {
            return Err(git2::Error::from_str(
                "the remote refused mirai's credentials (MIRAI_GIT_TOKEN, MIRAI_GIT_USERNAME or MIRAI_GIT_SSH_KEY)",
            ));
        }
        tried = true;
        match &config.credentials {
            GitCredentials::Token { username, token }
                if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) =>
            {
                Cred::userpass_plaintext(username, token)
            }
            GitCredentials::SshKey {
                key, passphrase, ..
            } if allowed.contains(CredentialType::SSH_KEY) => {
                Cred::ssh_key(user, None, key, passphrase.as_deref())
            }
            GitCredentials::None if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) => {
                match (url_username(&config.remote), url_password(&config.remote)) {
                    (Some(name), Some(password)) => Cred::userpass_plaintext(&name, &password),
                    _ => Err(git2::Error::from_str(
                        "the remote asks for credentials; set MIRAI_GIT_TOKEN",
                    )),
                }
            }
            _ => Err(git2::Error::from_str(
                "the remote asks for credentials mirai does not have (MIRAI_GIT_TOKEN for https, MIRAI_GIT_SSH_KEY for ssh)",
            )),
        }
    });
    callbacks.certificate_check(move |cert, host| {
        let Some(hostkey) = cert.as_hostkey() else {
            // TLS: libgit2's own verification against the system's CAs stands.
            return Ok(CertificateCheckStatus::CertificatePassthrough);
        };
        let GitCredentials::SshKey { known_hosts, .. } = &config.credentials else {
            return Err(git2::Error::from_str("an ssh remote needs MIRAI_GIT_SSH_KNOWN_HOSTS"));
        };
        let listed = std::fs::read_to_string(known_hosts).unwrap_or_default();
        let port = url::Url::parse(&config.remote).ok().and_then(|u| u.port());
        let matches = match (hostkey.hostkey(), hostkey.hostkey_type()) {
            (Some(key), Some(kind)) => {
                super::known_hosts::accepts(&listed, host, port, kind.name(), key)
            }
            _ => false,
        };
        if matches {
            Ok(CertificateCheckStatus::CertificateOk)
        } else {
            Err(git2::Error::from_str(&format!(
                "the host key of {host} is not listed in MIRAI_GIT_SSH_KNOWN_HOSTS (add it with ssh-keyscan after checking its fingerprint)"
            )))
        }
    });
    callbacks
}

/// How old a lock in mirai's own `refs/remotes/mirai/` must be to be taken
/// for a dead process's: a ref update holds it for microseconds.
const STALE_TRACKING_LOCK: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes a lock on `tracking` that a killed mirai left (older than
/// [`STALE_TRACKING_LOCK`]; the namespace is mirai's alone, nobody else
/// writes there), which would otherwise fail every later fetch.
fn clear_stale_tracking_lock(git: &Repository, tracking: &str) {
    let lock = git.path().join(format!("{tracking}.lock"));
    let stale = std::fs::symlink_metadata(&lock)
        .ok()
        .filter(|meta| meta.is_file())
        .and_then(|meta| meta.modified().ok())
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age > STALE_TRACKING_LOCK);
    if stale && std::fs::remove_file(&lock).is_ok() {
        log::warn!("sync: removed a stale .git/{tracking}.lock left by a mirai that died");
    }
}

/// Fetches `branch` into its tracking ref and answers the commit the remote
/// has there (`None`: the remote has no such branch yet). FETCH_HEAD is not
/// written (a kill there would leave a lock that fails a person's `git fetch`
/// too); the answer is what the remote advertised. The objects are fetched
/// first, without moving any ref, and the tracking ref moves only once every
/// new object passed [`super::vet`] (a tree, and over a path a file, up to
/// `max_file_bytes`).
pub fn fetch(
    git: &Repository,
    config: &SyncConfig,
    branch: &str,
    max_file_bytes: u64,
) -> Result<Option<git2::Oid>> {
    let tracking = tracking_ref(branch);
    clear_stale_tracking_lock(git, &tracking);
    let mut remote = git
        .remote_anonymous(&config.remote)
        .map_err(|e| unavailable(config, "reach", &e))?;
    let mut options = FetchOptions::new();
    options.remote_callbacks(callbacks(config));
    options.download_tags(git2::AutotagOption::None);
    options.update_fetchhead(false);
    // No destination: the objects come in, no ref moves until they are checked.
    let refspec = format!("refs/heads/{branch}");
    if config.transport == Transport::Local {
        check_local(git, config, branch, max_file_bytes)?;
    }
    let before = super::vet::packs(git);
    remote
        .fetch(
            &[refspec.as_str()],
            Some(&mut options),
            Some("mirai: fetch"),
        )
        .map_err(|e| unavailable(config, "fetch from", &e))?;
    let wanted = format!("refs/heads/{branch}");
    let fetched = remote
        .list()
        .map_err(|e| unavailable(config, "list the branches of", &e))?
        .iter()
        .find(|head| head.name() == wanted)
        .map(|head| head.oid());
    match fetched {
        Some(oid) => {
            super::vet::check_new_packs(git, &before, max_file_bytes)?;
            git.reference(&tracking, oid, true, "mirai: fetch")
                .map_err(|e| {
                    Error::git(format!("cannot record the fetched commit: {}", e.message()))
                })?;
            Ok(Some(oid))
        }
        None => Ok(None),
    }
}

/// A remote on this machine: its branch's new objects are checked before
/// libgit2's local transport packs them in this process ([`super::vet`]).
fn check_local(
    git: &Repository,
    config: &SyncConfig,
    branch: &str,
    max_file_bytes: u64,
) -> Result<()> {
    let remote = Repository::open(local_path(&config.remote))
        .map_err(|e| unavailable(config, "open", &e))?;
    match remote.refname_to_id(&format!("refs/heads/{branch}")) {
        Ok(tip) => super::vet::check_local_remote(git, &remote, tip, max_file_bytes),
        Err(_) => Ok(()), // no such branch: the fetch brings nothing
    }
}

/// Pushes the local `branch` (at `local`) to the remote's branch of the same
/// name, never forced: a remote that moved on refuses it. On success the
/// tracking ref follows.
///
/// `expected` is the remote's branch as the push was computed from (the last
/// fetch; `None`: it had no such branch): the remote's ref moves only if it
/// still holds that value. Over the network the server checks the old value it
/// advertised; a remote on this machine is written here, under its own ref lock
/// with the old value checked ([`push_local`]), because libgit2's local
/// transport moves the remote's ref by force.
pub fn push(
    git: &Repository,
    config: &SyncConfig,
    branch: &str,
    local: git2::Oid,
    expected: Option<git2::Oid>,
) -> Result<()> {
    if config.transport == Transport::Local {
        push_local(git, config, branch, local, expected)?;
    } else {
        push_network(git, config, branch)?;
    }
    git.reference(&tracking_ref(branch), local, true, "mirai: push")
        .map_err(|e| Error::git(format!("cannot record the pushed commit: {}", e.message())))?;
    Ok(())
}

/// The path of a remote on this machine (`file://` URLs decoded).
fn local_path(remote: &str) -> std::path::PathBuf {
    if remote.starts_with("file://") {
        if let Some(path) = url::Url::parse(remote)
            .ok()
            .and_then(|url| url.to_file_path().ok())
        {
            return path;
        }
    }
    std::path::PathBuf::from(remote)
}

/// A push to a repository on this machine, as `git push` makes it: the
/// objects the remote lacks go into its object database as one pack, then its
/// branch moves under the branch's own lock only while it still holds
/// `expected` (compare-and-swap), so a push that raced another never
/// overwrites it. A non-bare remote's checked-out branch is refused, as git
/// refuses it.
fn push_local(
    git: &Repository,
    config: &SyncConfig,
    branch: &str,
    local: git2::Oid,
    expected: Option<git2::Oid>,
) -> Result<()> {
    let remote = Repository::open(local_path(&config.remote))
        .map_err(|e| unavailable(config, "open", &e))?;
    let name = format!("refs/heads/{branch}");
    if !remote.is_bare() {
        let head = remote.find_reference("HEAD").ok();
        if head.as_ref().and_then(|h| h.symbolic_target()) == Some(name.as_str()) {
            return Err(Error::new(
                ErrorCode::RemoteUnavailable,
                scrub(
                    config,
                    &format!(
                        "the remote {} has {branch} checked out, and pushing would change files                          under someone's feet; use a bare repository as the remote (git clone --bare)",
                        config.shown_remote()
                    ),
                ),
            ));
        }
    }
    let moved = || {
        Error::conflict(scrub(
            config,
            &format!(
                "the remote's {branch} has commits mirai has not pulled yet; pull first (mirai never forces a push)"
            ),
        ))
    };
    let now = match remote.refname_to_id(&name) {
        Ok(id) => Some(id),
        Err(e) if e.code() == git2::ErrorCode::NotFound => None,
        Err(e) => return Err(unavailable(config, "read the branch of", &e)),
    };
    if now != expected {
        return Err(moved());
    }
    let copied = (|| -> std::result::Result<(), git2::Error> {
        let mut walk = git.revwalk()?;
        walk.push(local)?;
        if let Some(old) = expected {
            walk.hide(old)?;
        }
        let mut pack = git.packbuilder()?;
        pack.insert_walk(&mut walk)?;
        let odb = remote.odb()?;
        let mut writer = odb.packwriter()?;
        let mut failed = None;
        pack.foreach(
            |chunk| match std::io::Write::write_all(&mut writer, chunk) {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            },
        )?;
        if let Some(e) = failed {
            return Err(git2::Error::from_str(&e.to_string()));
        }
        writer.commit()?;
        Ok(())
    })();
    copied.map_err(|e| unavailable(config, "copy the commits to", &e))?;
    let updated = match expected {
        Some(old) => remote.reference_matching(&name, local, true, old, "push"),
        None => remote.reference(&name, local, false, "push"),
    };
    match updated {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.code(),
                git2::ErrorCode::Modified | git2::ErrorCode::Exists | git2::ErrorCode::Locked
            ) =>
        {
            Err(moved())
        }
        Err(e) => Err(unavailable(config, "move the branch of", &e)),
    }
}

/// A push over the network (https, http, ssh): the server compares the old
/// value it advertised, as receive-pack does.
fn push_network(git: &Repository, config: &SyncConfig, branch: &str) -> Result<()> {
    let mut remote = git
        .remote_anonymous(&config.remote)
        .map_err(|e| unavailable(config, "reach", &e))?;
    let mut rejected: Option<String> = None;
    {
        let mut callbacks = callbacks(config);
        callbacks.push_update_reference(|_refname, status| {
            if let Some(status) = status {
                rejected = Some(status.to_string());
            }
            Ok(())
        });
        let mut options = PushOptions::new();
        options.remote_callbacks(callbacks);
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
        remote
            .push(&[refspec.as_str()], Some(&mut options))
            .map_err(|e| {
                if e.class() == git2::ErrorClass::Reference || e.code() == git2::ErrorCode::NotFastForward {
                    Error::conflict(scrub(
                        config,
                        &format!(
                            "the remote's {branch} has commits mirai has not pulled yet ({}); pull first",
                            e.message()
                        ),
                    ))
                } else {
                    unavailable(config, "push to", &e)
                }
            })?;
    }
    if let Some(status) = rejected {
        return Err(Error::conflict(scrub(
            config,
            &format!("the remote refused the push of {branch}: {status}; pull first (mirai never forces a push)"),
        )));
    }
    Ok(())
}

/// The branch the remote's HEAD names (`None`: an empty remote), for a clone.
pub fn default_branch(config: &SyncConfig) -> Result<Option<String>> {
    let mut remote = git2::Remote::create_detached(config.remote.as_str())
        .map_err(|e| unavailable(config, "reach", &e))?;
    let connection = remote
        .connect_auth(git2::Direction::Fetch, Some(callbacks(config)), None)
        .map_err(|e| unavailable(config, "connect to", &e))?;
    let listed = connection
        .list()
        .map_err(|e| unavailable(config, "list the branches of", &e))?;
    if listed.is_empty() {
        return Ok(None);
    }
    let branch = connection
        .default_branch()
        .ok()
        .and_then(|name| name.as_str().map(str::to_string))
        .and_then(|name| name.strip_prefix("refs/heads/").map(str::to_string));
    Ok(branch)
}
