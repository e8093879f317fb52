//! The network half of sync, through libgit2's own transports (no `git`
//! subprocess): fetching the followed branch into `refs/remotes/mirai/<branch>`,
//! pushing it (never forced), and the remote's default branch for a clone.
//! Credentials come from the configuration only; every message that leaves
//! here is stripped of URLs' user information and of the secrets themselves.

use git2::{
    CertificateCheckStatus, Cred, CredentialType, FetchOptions, PushOptions, RemoteCallbacks,
    Repository,
};

use crate::config::{GitCredentials, SyncConfig};
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

/// Fetches `branch` into its tracking ref and answers the commit the remote
/// has there (`None`: the remote has no such branch yet).
pub fn fetch(git: &Repository, config: &SyncConfig, branch: &str) -> Result<Option<git2::Oid>> {
    let mut remote = git
        .remote_anonymous(&config.remote)
        .map_err(|e| unavailable(config, "reach", &e))?;
    let mut options = FetchOptions::new();
    options.remote_callbacks(callbacks(config));
    options.download_tags(git2::AutotagOption::None);
    let tracking = tracking_ref(branch);
    let refspec = format!("+refs/heads/{branch}:{tracking}");
    remote
        .fetch(
            &[refspec.as_str()],
            Some(&mut options),
            Some("mirai: fetch"),
        )
        .map_err(|e| unavailable(config, "fetch from", &e))?;
    // An anonymous remote's fetch keeps what it fetched in FETCH_HEAD; the tracking ref is ours to set.
    let mut fetched = None;
    git.fetchhead_foreach(|name, _url, oid, _merge| {
        if name == format!("refs/heads/{branch}") {
            fetched = Some(*oid);
        }
        true
    })
    .ok();
    match fetched {
        Some(oid) => {
            git.reference(&tracking, oid, true, "mirai: fetch")
                .map_err(|e| {
                    Error::git(format!("cannot record the fetched commit: {}", e.message()))
                })?;
            Ok(Some(oid))
        }
        None => Ok(None),
    }
}

/// Pushes the local `branch` (at `local`) to the remote's branch of the same
/// name, never forced: a remote that moved on refuses it. On success the
/// tracking ref follows.
pub fn push(git: &Repository, config: &SyncConfig, branch: &str, local: git2::Oid) -> Result<()> {
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
    git.reference(&tracking_ref(branch), local, true, "mirai: push")
        .map_err(|e| Error::git(format!("cannot record the pushed commit: {}", e.message())))?;
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
