//! The sync's settings: the remote mirai follows (`MIRAI_GIT_REMOTE`), how it
//! is reached and what mirai proves itself with. Read and validated by
//! `config::sync`.

use std::path::PathBuf;

use crate::redact::presence;

/// Seconds between pulls when `MIRAI_SYNC_INTERVAL` is not set.
pub const DEFAULT_SYNC_INTERVAL_SECS: u64 = 60;

/// The username a token is sent with when `MIRAI_GIT_USERNAME` is not set
/// (what GitHub and Gitea accept with any token).
pub const DEFAULT_GIT_USERNAME: &str = "x-access-token";

/// How a remote URL is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Https,
    /// Plain `http://`; `loopback` when the host is this machine.
    Http {
        loopback: bool,
    },
    /// `ssh://` or scp-like `user@host:path`.
    Ssh,
    /// A path on this machine or `file://`.
    Local,
}

impl Transport {
    /// What `url` is, or why it is not a remote mirai can use.
    pub fn of(url: &str) -> Result<Transport, String> {
        let with_host = |url: &str| -> Result<url::Url, String> {
            let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
            match parsed.host_str() {
                Some(host) if !host.is_empty() => Ok(parsed),
                _ => Err("the URL names no host".to_string()),
            }
        };
        if let Some((scheme, _)) = url.split_once("://") {
            return match scheme.to_ascii_lowercase().as_str() {
                "https" => with_host(url).map(|_| Transport::Https),
                "http" => {
                    let parsed = with_host(url)?;
                    let loopback = parsed
                        .host()
                        .is_some_and(|host| crate::origin::is_loopback(&host.to_owned()));
                    Ok(Transport::Http { loopback })
                }
                "ssh" => with_host(url).map(|_| Transport::Ssh),
                "file" => Ok(Transport::Local),
                other => Err(format!("the scheme {other}:// is not supported")),
            };
        }
        // git's rule: a colon before any slash makes `[user@]host:path` an ssh address.
        match (url.find(':'), url.find('/')) {
            (Some(colon), slash) if colon > 0 && slash.is_none_or(|slash| colon < slash) => {
                Ok(Transport::Ssh)
            }
            _ => Ok(Transport::Local),
        }
    }
}

/// What mirai proves itself to the remote with. Its `Debug` form never shows a secret.
#[derive(Clone, PartialEq, Eq)]
pub enum GitCredentials {
    /// Nothing of mirai's own (a local path, or a URL that carries its own user information).
    None,
    /// HTTPS basic auth: `MIRAI_GIT_USERNAME` (default `x-access-token`) and `MIRAI_GIT_TOKEN`.
    Token { username: String, token: String },
    /// An SSH private key file (`MIRAI_GIT_SSH_KEY`, `MIRAI_GIT_SSH_KEY_PASSPHRASE`); the
    /// server's host key must be listed in `known_hosts` (`MIRAI_GIT_SSH_KNOWN_HOSTS`).
    SshKey {
        key: PathBuf,
        passphrase: Option<String>,
        known_hosts: PathBuf,
    },
}

impl std::fmt::Debug for GitCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitCredentials::None => f.write_str("None"),
            GitCredentials::Token { username, token } => f
                .debug_struct("Token")
                .field("username", username)
                .field("token", &presence(&Some(token.clone())))
                .finish(),
            GitCredentials::SshKey {
                key,
                passphrase,
                known_hosts,
            } => f
                .debug_struct("SshKey")
                .field("key", key)
                .field("passphrase", &presence(passphrase))
                .field("known_hosts", known_hosts)
                .finish(),
        }
    }
}

/// The git remote mirai follows (`MIRAI_GIT_REMOTE` and the settings around it).
#[derive(Clone, PartialEq, Eq)]
pub struct SyncConfig {
    /// The URL as configured: may carry user information, so it is shown only
    /// through [`SyncConfig::shown_remote`].
    pub remote: String,
    pub transport: Transport,
    /// The branch to follow (`MIRAI_GIT_BRANCH`); `None`: the current branch.
    pub branch: Option<String>,
    pub credentials: GitCredentials,
    /// Seconds between pulls (`MIRAI_SYNC_INTERVAL`); 0: only on demand.
    pub interval_secs: u64,
}

impl std::fmt::Debug for SyncConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so a new field cannot be added without deciding how it is shown.
        let SyncConfig {
            remote: _,
            transport,
            branch,
            credentials,
            interval_secs,
        } = self;
        f.debug_struct("SyncConfig")
            .field("remote", &self.shown_remote())
            .field("transport", transport)
            .field("branch", branch)
            .field("credentials", credentials)
            .field("interval_secs", interval_secs)
            .finish()
    }
}

impl SyncConfig {
    /// The remote's URL without user information or query (what logs, status and `/config` show).
    pub fn shown_remote(&self) -> String {
        crate::redact::urls(&self.remote).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_are_classified_as_git_reads_them() {
        for (url, transport) in [
            ("https://github.com/me/notes.git", Transport::Https),
            (
                "http://127.0.0.1:8080/notes.git",
                Transport::Http { loopback: true },
            ),
            ("http://[::1]/n.git", Transport::Http { loopback: true }),
            ("http://git.lan/n.git", Transport::Http { loopback: false }),
            ("ssh://git@host:22/me/notes.git", Transport::Ssh),
            ("git@github.com:me/notes.git", Transport::Ssh),
            ("/srv/notes.git", Transport::Local),
            ("../notes.git", Transport::Local),
            ("file:///srv/notes.git", Transport::Local),
            ("dir/with:colon", Transport::Local),
        ] {
            assert_eq!(Transport::of(url), Ok(transport), "{url}");
        }
        assert!(Transport::of("ftp://host/x").is_err());
        assert!(Transport::of("https://").is_err());
    }
}
