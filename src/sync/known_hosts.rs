//! The ssh server's host key, checked against the operator's `known_hosts`
//! file (`MIRAI_GIT_SSH_KNOWN_HOSTS`) as OpenSSH checks it: plain host
//! patterns (`host`, `[host]:port`, comma-separated, no wildcards) and hashed
//! ones (`|1|salt|HMAC-SHA1(salt, host)`); `@revoked` lines refuse the key,
//! other markers (`@cert-authority`) are not used. An unknown host is refused:
//! mirai never learns a key on first use.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha1::Sha1;

/// Whether `known_hosts` (the file's text) lists `key` (its wire bytes, of
/// type `key_type`, such as `ssh-ed25519`) for `host` on `port`.
pub fn accepts(
    known_hosts: &str,
    host: &str,
    port: Option<u16>,
    key_type: &str,
    key: &[u8],
) -> bool {
    let name = match port {
        Some(port) if port != 22 => format!("[{host}]:{port}"),
        _ => host.to_string(),
    };
    let mut accepted = false;
    for line in known_hosts.lines() {
        let mut fields = line.split_whitespace();
        let Some(mut first) = fields.next() else {
            continue;
        };
        if first.starts_with('#') {
            continue;
        }
        let revoked = first == "@revoked";
        if first.starts_with('@') {
            if !revoked {
                continue;
            }
            let Some(next) = fields.next() else { continue };
            first = next;
        }
        let (Some(kind), Some(encoded)) = (fields.next(), fields.next()) else {
            continue;
        };
        let same_key = kind == key_type
            && base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .is_ok_and(|decoded| decoded == key);
        if !same_key || !names_host(first, &name) {
            continue;
        }
        if revoked {
            return false;
        }
        accepted = true;
    }
    accepted
}

/// Whether the host field of a line names `name` (negated patterns refuse).
fn names_host(field: &str, name: &str) -> bool {
    if let Some(hashed) = field.strip_prefix("|1|") {
        let Some((salt, hash)) = hashed.split_once('|') else {
            return false;
        };
        let engine = base64::engine::general_purpose::STANDARD;
        let (Ok(salt), Ok(hash)) = (engine.decode(salt), engine.decode(hash)) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(&salt) else {
            return false;
        };
        mac.update(name.as_bytes());
        return mac.verify_slice(&hash).is_ok();
    }
    let mut matched = false;
    for pattern in field.split(',') {
        if let Some(negated) = pattern.strip_prefix('!') {
            if negated.eq_ignore_ascii_case(name) {
                return false;
            }
        } else if pattern.eq_ignore_ascii_case(name) {
            matched = true;
        }
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] =
        b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20abcdefghijklmnopqrstuvwxyz012345";

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn plain_and_bracketed_names_match_only_their_key() {
        let file = format!(
            "# comment\ngithub.com,140.82.121.4 ssh-ed25519 {k}\n[git.lan]:2222 ssh-ed25519 {k}\n",
            k = b64(KEY)
        );
        assert!(accepts(&file, "github.com", None, "ssh-ed25519", KEY));
        assert!(accepts(&file, "GitHub.com", Some(22), "ssh-ed25519", KEY));
        assert!(accepts(&file, "git.lan", Some(2222), "ssh-ed25519", KEY));
        assert!(!accepts(&file, "git.lan", None, "ssh-ed25519", KEY));
        assert!(!accepts(&file, "github.com", None, "ssh-rsa", KEY));
        assert!(!accepts(&file, "github.com", None, "ssh-ed25519", b"other"));
        assert!(!accepts(&file, "evil.example", None, "ssh-ed25519", KEY));
    }

    #[test]
    fn hashed_names_and_revoked_keys() {
        let salt = b"0123456789abcdefghij";
        let mut mac = Hmac::<Sha1>::new_from_slice(salt).unwrap();
        mac.update(b"git.example");
        let hash = mac.finalize().into_bytes();
        let file = format!("|1|{}|{} ssh-ed25519 {}\n", b64(salt), b64(&hash), b64(KEY));
        assert!(accepts(&file, "git.example", None, "ssh-ed25519", KEY));
        assert!(!accepts(&file, "git.other", None, "ssh-ed25519", KEY));
        let revoked = format!(
            "{file}@revoked * ssh-ed25519 {}\n@revoked git.example ssh-ed25519 {}\n",
            b64(KEY),
            b64(KEY)
        );
        assert!(!accepts(&revoked, "git.example", None, "ssh-ed25519", KEY));
    }
}
