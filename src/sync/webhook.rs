//! The push webhook's credential: GitHub's `X-Hub-Signature-256` header,
//! `sha256=<hex HMAC-SHA256 of the raw body with MIRAI_WEBHOOK_SECRET>`
//! (Gitea and GitLab-compatible forges send the same). Compared in constant
//! time; the body itself is trusted for nothing (a valid call only says
//! "pull now").

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header a forge signs its push webhook with.
pub const SIGNATURE_HEADER: &str = "X-Hub-Signature-256";

/// Whether `header` (the signature header's value, if any) is the HMAC of `body` under `secret`.
pub fn verify(secret: &str, body: &[u8], header: Option<&str>) -> bool {
    let Some(hex) = header.and_then(|h| h.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Some(sent) = decode_hex(hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&sent).is_ok()
}

/// The signature header value for `body` (for forges' tests and this crate's).
#[expect(clippy::expect_used, reason = "HMAC takes a key of any length")]
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_documented_example_verifies() {
        // From GitHub's "Validating webhook deliveries" page.
        let header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(verify(
            "It's a Secret to Everybody",
            b"Hello, World!",
            Some(header)
        ));
        assert_eq!(sign("It's a Secret to Everybody", b"Hello, World!"), header);
    }

    #[test]
    fn anything_else_is_refused() {
        let good = sign("s", b"body");
        assert!(verify("s", b"body", Some(&good)));
        assert!(!verify("s", b"other body", Some(&good)));
        assert!(!verify("t", b"body", Some(&good)));
        assert!(!verify("s", b"body", None));
        assert!(!verify("s", b"body", Some("")));
        assert!(!verify(
            "s",
            b"body",
            Some(&good.replace("sha256=", "sha1="))
        ));
        assert!(!verify("s", b"body", Some(&good[..good.len() - 2])));
        assert!(!verify("s", b"body", Some("sha256=zz")));
    }
}
