//! The git settings: who mirai commits as (`MIRAI_GIT_AUTHOR_*`), the remote
//! it syncs with (`MIRAI_GIT_REMOTE` and the settings that go with it: how it
//! is reached, the credentials, the branch, the interval) and its push webhook
//! (`MIRAI_WEBHOOK_SECRET`).

use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::read::Env;
use super::settings::Config;
use crate::sync::{
    GitCredentials, SyncConfig, Transport, DEFAULT_GIT_USERNAME, DEFAULT_SYNC_INTERVAL_SECS,
};

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    if let Some(name) = env.trimmed("MIRAI_GIT_AUTHOR_NAME") {
        config.git_identity.name = name;
    }
    if let Some(email) = env.trimmed("MIRAI_GIT_AUTHOR_EMAIL") {
        config.git_identity.email = email;
    }
    config.sync = remote(&|name| env.non_empty(name))?;
    config.webhook_secret = env.non_empty("MIRAI_WEBHOOK_SECRET");
    if config.webhook_secret.is_some() && config.sync.is_none() {
        return Err(ConfigError::Sync(
            "MIRAI_WEBHOOK_SECRET is set but MIRAI_GIT_REMOTE is not: a push webhook has \
             nothing to pull from; set MIRAI_GIT_REMOTE or unset the secret"
                .to_string(),
        ));
    }
    Ok(())
}

/// Reads `MIRAI_GIT_REMOTE` and the settings that go with it; `None` when
/// no remote is set (and then none of them may be).
fn remote(non_empty: &dyn Fn(&str) -> Option<String>) -> Result<Option<SyncConfig>, ConfigError> {
    let bad = |message: String| ConfigError::Sync(message);
    let Some(remote) = non_empty("MIRAI_GIT_REMOTE").map(|r| r.trim().to_string()) else {
        for name in [
            "MIRAI_GIT_TOKEN",
            "MIRAI_GIT_SSH_KEY",
            "MIRAI_GIT_BRANCH",
            "MIRAI_SYNC_INTERVAL",
        ] {
            if non_empty(name).is_some() {
                return Err(bad(format!(
                        "{name} is set but MIRAI_GIT_REMOTE is not; set the remote's URL or unset {name}"
                    )));
            }
        }
        return Ok(None);
    };
    let transport = Transport::of(&remote).map_err(|why| {
        bad(format!(
            "invalid MIRAI_GIT_REMOTE: {} ({why}; expected https://, http://, ssh://, \
                 user@host:path, file:// or a local path)",
            crate::redact::urls(&remote)
        ))
    })?;
    let shown = crate::redact::urls(&remote).into_owned();
    let url_has_secret = shown != remote;
    let token = non_empty("MIRAI_GIT_TOKEN").map(|t| t.trim().to_string());
    let key = non_empty("MIRAI_GIT_SSH_KEY").map(|k| PathBuf::from(k.trim()));
    if token.is_some() && key.is_some() {
        return Err(bad(
                "MIRAI_GIT_TOKEN and MIRAI_GIT_SSH_KEY are both set; set the one the remote's URL uses (https: the token, ssh: the key)".to_string(),
            ));
    }
    if let Transport::Http { loopback: false } = transport {
        if token.is_some() || url_has_secret {
            return Err(bad(format!(
                "refusing to send git credentials over plain http:// to {shown}: use https:// \
                     (plain http is allowed only to a loopback host)"
            )));
        }
    }
    let credentials = match (token, key) {
        (Some(token), None) => {
            if !matches!(transport, Transport::Https | Transport::Http { .. }) {
                return Err(bad(format!(
                    "MIRAI_GIT_TOKEN is for https:// remotes, but MIRAI_GIT_REMOTE is {shown}; \
                         use MIRAI_GIT_SSH_KEY for ssh, or an https:// URL"
                )));
            }
            let username = non_empty("MIRAI_GIT_USERNAME")
                .map(|u| u.trim().to_string())
                .unwrap_or_else(|| DEFAULT_GIT_USERNAME.to_string());
            GitCredentials::Token { username, token }
        }
        (None, Some(key)) => {
            if transport != Transport::Ssh {
                return Err(bad(format!(
                    "MIRAI_GIT_SSH_KEY is for ssh remotes, but MIRAI_GIT_REMOTE is {shown}; \
                         use MIRAI_GIT_TOKEN for https, or an ssh URL"
                )));
            }
            readable_file("MIRAI_GIT_SSH_KEY", &key).map_err(bad)?;
            let Some(known_hosts) =
                non_empty("MIRAI_GIT_SSH_KNOWN_HOSTS").map(|k| PathBuf::from(k.trim()))
            else {
                return Err(bad(
                        "MIRAI_GIT_SSH_KNOWN_HOSTS is required with an ssh remote: mirai checks \
                         the server's host key; point it at a known_hosts file (ssh-keyscan HOST > known_hosts)"
                            .to_string(),
                    ));
            };
            readable_file("MIRAI_GIT_SSH_KNOWN_HOSTS", &known_hosts).map_err(bad)?;
            GitCredentials::SshKey {
                key,
                passphrase: non_empty("MIRAI_GIT_SSH_KEY_PASSPHRASE"),
                known_hosts,
            }
        }
        _ => {
            if transport == Transport::Ssh {
                return Err(bad(format!(
                    "MIRAI_GIT_REMOTE {shown} is an ssh remote: set MIRAI_GIT_SSH_KEY (a private \
                         key file) and MIRAI_GIT_SSH_KNOWN_HOSTS"
                )));
            }
            GitCredentials::None
        }
    };
    let branch = match non_empty("MIRAI_GIT_BRANCH").map(|b| b.trim().to_string()) {
        Some(branch) if !git2::Branch::name_is_valid(&branch).unwrap_or(false) => {
            return Err(ConfigError::Value {
                name: "MIRAI_GIT_BRANCH",
                value: branch,
                expected: "a valid git branch name such as main",
            })
        }
        branch => branch,
    };
    let interval_secs = match non_empty("MIRAI_SYNC_INTERVAL") {
        None => DEFAULT_SYNC_INTERVAL_SECS,
        Some(raw) => raw.trim().parse::<u64>().map_err(|_| ConfigError::Value {
            name: "MIRAI_SYNC_INTERVAL",
            value: raw,
            expected: "a number of seconds (0: pull only on demand)",
        })?,
    };
    Ok(Some(SyncConfig {
        remote,
        transport,
        branch,
        credentials,
        interval_secs,
    }))
}

/// Start-up's check that a file a setting names can be read.
fn readable_file(name: &str, path: &Path) -> Result<(), String> {
    match std::fs::File::open(path).and_then(|f| f.metadata()) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(format!("{name} {} is not a file", path.display())),
        Err(e) => Err(format!("{name} {} cannot be read: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;
    use crate::repo::GitIdentity;
    use crate::sync::GitCredentials;

    #[test]
    fn git_identity_defaults_and_overrides() {
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert_eq!(c.git_identity, GitIdentity::default());
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GIT_AUTHOR_NAME", "Ada"),
                ("MIRAI_GIT_AUTHOR_EMAIL", "ada@example.org"),
            ]))
            .unwrap();
        assert_eq!(c.git_identity.name, "Ada");
        assert_eq!(c.git_identity.email, "ada@example.org");
    }

    #[test]
    fn no_remote_means_no_sync_and_its_settings_alone_are_refused() {
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert_eq!(c.sync, None);
        for name in [
            "MIRAI_GIT_TOKEN",
            "MIRAI_WEBHOOK_SECRET",
            "MIRAI_SYNC_INTERVAL",
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(name, "5")]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            let line = err.to_string();
            assert!(
                line.contains(name) && line.contains("MIRAI_GIT_REMOTE"),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn sync_settings_are_read_with_defaults() {
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GIT_REMOTE", "https://github.com/me/notes.git"),
                ("MIRAI_GIT_TOKEN", "ghp-s3cret"),
                ("MIRAI_WEBHOOK_SECRET", "hook-s3cret"),
            ]))
            .unwrap();
        let sync = c.sync.clone().unwrap();
        assert_eq!(sync.interval_secs, 60);
        assert_eq!(sync.branch, None);
        assert_eq!(
            sync.credentials,
            GitCredentials::Token {
                username: "x-access-token".into(),
                token: "ghp-s3cret".into()
            }
        );
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("github.com/me/notes.git"), "{shown}");
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GIT_REMOTE", "/srv/notes.git"),
                ("MIRAI_GIT_BRANCH", "notes"),
                ("MIRAI_SYNC_INTERVAL", "0"),
            ]))
            .unwrap();
        let sync = c.sync.unwrap();
        assert_eq!(
            (sync.interval_secs, sync.branch.as_deref()),
            (0, Some("notes"))
        );
        assert_eq!(sync.credentials, GitCredentials::None);
    }

    #[test]
    fn bad_sync_settings_stop_start_up_with_one_line_and_no_secret() {
        for (pairs, expect) in [
            (
                &[
                    ("MIRAI_GIT_REMOTE", "http://git.lan/n.git"),
                    ("MIRAI_GIT_TOKEN", "t-s3cret"),
                ][..],
                "plain http://",
            ),
            (
                &[("MIRAI_GIT_REMOTE", "http://me:pw-s3cret@git.lan/n.git")][..],
                "plain http://",
            ),
            (&[("MIRAI_GIT_REMOTE", "gopher://x/y")][..], "gopher"),
            (
                &[("MIRAI_GIT_REMOTE", "git@host:n.git")][..],
                "MIRAI_GIT_SSH_KEY",
            ),
            (
                &[
                    ("MIRAI_GIT_REMOTE", "git@host:n.git"),
                    ("MIRAI_GIT_TOKEN", "t-s3cret"),
                ][..],
                "MIRAI_GIT_TOKEN is for https",
            ),
            (
                &[
                    ("MIRAI_GIT_REMOTE", "git@host:n.git"),
                    ("MIRAI_GIT_SSH_KEY", "/nonexistent/key"),
                ][..],
                "cannot be read",
            ),
            (
                &[
                    ("MIRAI_GIT_REMOTE", "/srv/n.git"),
                    ("MIRAI_GIT_BRANCH", "a..b"),
                ][..],
                "MIRAI_GIT_BRANCH",
            ),
            (
                &[
                    ("MIRAI_GIT_REMOTE", "/srv/n.git"),
                    ("MIRAI_SYNC_INTERVAL", "-1"),
                ][..],
                "MIRAI_SYNC_INTERVAL",
            ),
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(pairs.to_vec().into_boxed_slice());
            let line = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err()
                .to_string();
            assert!(line.contains(expect), "{line}");
            assert!(!line.contains("s3cret") && !line.contains('\n'), "{line}");
        }
        // A token over plain http to this machine is fine (tests, a sidecar forge).
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GIT_REMOTE", "http://localhost:3000/n.git"),
                ("MIRAI_GIT_TOKEN", "t"),
                ("MIRAI_GIT_USERNAME", "ada"),
            ]))
            .unwrap();
        assert!(matches!(
            c.sync.unwrap().credentials,
            GitCredentials::Token { username, .. } if username == "ada"
        ));
    }

    #[test]
    fn an_ssh_remote_needs_a_key_and_known_hosts() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("id");
        let hosts = dir.path().join("known_hosts");
        std::fs::write(&key, "k").unwrap();
        std::fs::write(&hosts, "h").unwrap();
        let (key, hosts) = (key.display().to_string(), hosts.display().to_string());
        let env = |known: bool| {
            let (key, hosts) = (key.clone(), hosts.clone());
            move |name: &str| match name {
                "MIRAI_GIT_REMOTE" => Some("ssh://git@host/n.git".to_string()),
                "MIRAI_GIT_SSH_KEY" => Some(key.clone()),
                "MIRAI_GIT_SSH_KEY_PASSPHRASE" => Some("pass-s3cret".to_string()),
                "MIRAI_GIT_SSH_KNOWN_HOSTS" if known => Some(hosts.clone()),
                _ => None,
            }
        };
        let err = Config::new("n").with_environment(&env(false)).unwrap_err();
        assert!(
            err.to_string().contains("MIRAI_GIT_SSH_KNOWN_HOSTS"),
            "{err}"
        );
        let c = Config::new("n").with_environment(&env(true)).unwrap();
        assert!(matches!(
            c.sync.as_ref().unwrap().credentials,
            GitCredentials::SshKey { .. }
        ));
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
