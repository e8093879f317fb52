//! `MIRAI_PUBLIC_URL` and `MIRAI_OAUTH_*`: mirai as an OAuth resource server.
//! `MIRAI_OAUTH_ISSUER` turns it on and needs `MIRAI_PUBLIC_URL` (where the
//! protected resource metadata is, and the default audience); an `http://`
//! issuer or JWKS URL is refused unless its host is loopback; the other
//! `MIRAI_OAUTH_*` settings without an issuer are refused too.

use std::time::Duration;

use super::error::ConfigError;
use super::read::{invalid, Env};
use super::settings::Config;
use crate::callers::{Right, Rights};
use crate::oauth::{OAuthSettings, DEFAULT_FETCH_TIMEOUT_MS, DEFAULT_REFRESH_SECS};

const SECURE_URL: &str = "an https:// URL (http:// only to a loopback host such as 127.0.0.1 or localhost), without a query or fragment";

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    let public_url = match env.trimmed("MIRAI_PUBLIC_URL") {
        Some(raw) => Some(public_url(&raw).ok_or_else(|| {
            invalid(
                "MIRAI_PUBLIC_URL",
                raw,
                "mirai's URL as its clients reach it, such as https://notes.example.org (http or https, no query or fragment)",
            )
        })?),
        None => None,
    };
    let Some(issuer) = env.trimmed("MIRAI_OAUTH_ISSUER") else {
        for name in [
            "MIRAI_OAUTH_AUDIENCE",
            "MIRAI_OAUTH_JWKS_URL",
            "MIRAI_OAUTH_DEFAULT_CAN",
            "MIRAI_OAUTH_FETCH_TIMEOUT_MS",
            "MIRAI_OAUTH_REFRESH_SECONDS",
            "MIRAI_OAUTH_PAGE_CLIENT_ID",
        ] {
            if env.non_empty(name).is_some() {
                return Err(ConfigError::OAuth(format!(
                    "{name} is set but MIRAI_OAUTH_ISSUER is not: set the issuer (your identity provider's URL) to take access tokens, or unset {name}"
                )));
            }
        }
        return Ok(());
    };
    if !secure(&issuer) {
        return Err(invalid("MIRAI_OAUTH_ISSUER", issuer, SECURE_URL));
    }
    let Some(public_url) = public_url else {
        return Err(ConfigError::OAuth(
            "MIRAI_OAUTH_ISSUER needs MIRAI_PUBLIC_URL: set it to mirai's URL as clients reach it (https://notes.example.org), which is where they find how to sign in"
                .to_string(),
        ));
    };
    let audience = env
        .trimmed("MIRAI_OAUTH_AUDIENCE")
        .unwrap_or_else(|| public_url.clone());
    let jwks_url = match env.trimmed("MIRAI_OAUTH_JWKS_URL") {
        Some(url) if !secure(&url) => return Err(invalid("MIRAI_OAUTH_JWKS_URL", url, SECURE_URL)),
        url => url,
    };
    let default_can = match env.trimmed("MIRAI_OAUTH_DEFAULT_CAN") {
        None => {
            let mut read = Rights::none();
            read.add(Right::Read);
            read
        }
        Some(raw) => rights(&raw).ok_or_else(|| {
            invalid(
                "MIRAI_OAUTH_DEFAULT_CAN",
                raw,
                "comma-separated rights from read, write, propose, review, sync, or none",
            )
        })?,
    };
    let fetch_timeout = env
        .number_in(
            "MIRAI_OAUTH_FETCH_TIMEOUT_MS",
            100..=60_000,
            "milliseconds from 100 to 60000",
        )?
        .unwrap_or(DEFAULT_FETCH_TIMEOUT_MS);
    let refresh = env
        .number_in(
            "MIRAI_OAUTH_REFRESH_SECONDS",
            1..=86_400,
            "seconds from 1 to 86400",
        )?
        .unwrap_or(DEFAULT_REFRESH_SECS);
    let page_client_id = match env.trimmed("MIRAI_OAUTH_PAGE_CLIENT_ID") {
        Some(id) if !client_id(&id) => {
            return Err(invalid(
                "MIRAI_OAUTH_PAGE_CLIENT_ID",
                id,
                "the id of the public client the page signs in as (1 to 255 visible ASCII characters, registered at the identity provider with the redirect URI <MIRAI_PUBLIC_URL>/ui/signed-in)",
            ))
        }
        id => id,
    };
    config.oauth = Some(OAuthSettings {
        issuer,
        audience,
        public_url,
        jwks_url,
        default_can,
        fetch_timeout: Duration::from_millis(fetch_timeout),
        refresh_interval: Duration::from_secs(refresh),
        page_client_id,
    });
    Ok(())
}

/// `raw` as mirai's public URL (http or https, a host, no query or
/// fragment), without a trailing slash.
fn public_url(raw: &str) -> Option<String> {
    let url = url::Url::parse(raw).ok()?;
    let fine = matches!(url.scheme(), "http" | "https")
        && url.host().is_some()
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    fine.then(|| raw.trim_end_matches('/').to_string())
}

/// Whether `raw` is https, or http to a loopback host, with no query,
/// fragment or password.
fn secure(raw: &str) -> bool {
    crate::oauth::secure_url(raw)
        && url::Url::parse(raw).is_ok_and(|url| {
            url.query().is_none() && url.fragment().is_none() && url.password().is_none()
        })
}

/// Whether `id` may be an OAuth client id (RFC 6749's VSCHAR, bounded).
fn client_id(id: &str) -> bool {
    (1..=255).contains(&id.len()) && id.chars().all(|c| c.is_ascii_graphic() || c == ' ')
}

/// `read, write` as rights; `none` for none.
fn rights(raw: &str) -> Option<Rights> {
    let mut rights = Rights::none();
    if raw.trim().eq_ignore_ascii_case("none") {
        return Some(rights);
    }
    for name in raw.split(',').map(str::trim) {
        rights.add(Right::named(&name.to_ascii_lowercase())?);
    }
    Some(rights)
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;

    #[test]
    fn the_issuer_turns_it_on_with_the_public_url_as_audience() {
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_OAUTH_ISSUER", "https://id.example/realms/notes"),
                ("MIRAI_PUBLIC_URL", "https://notes.example/"),
            ]))
            .unwrap();
        let oauth = c.oauth.unwrap();
        assert_eq!(oauth.audience, "https://notes.example");
        assert_eq!(oauth.public_url, "https://notes.example");
        assert_eq!(oauth.default_can.names(), ["read"]);
        assert_eq!(oauth.jwks_url, None);
        assert_eq!(oauth.refresh_interval.as_secs(), 60);
    }

    #[test]
    fn plain_http_is_refused_unless_loopback_and_stray_settings_are_named() {
        for (pairs, needle) in [
            (
                &[
                    ("MIRAI_OAUTH_ISSUER", "http://id.example"),
                    ("MIRAI_PUBLIC_URL", "https://n.example"),
                ][..],
                "MIRAI_OAUTH_ISSUER",
            ),
            (
                &[("MIRAI_OAUTH_ISSUER", "https://id.example")][..],
                "needs MIRAI_PUBLIC_URL",
            ),
            (
                &[("MIRAI_OAUTH_AUDIENCE", "https://n.example")][..],
                "MIRAI_OAUTH_ISSUER is not",
            ),
            (
                &[
                    ("MIRAI_OAUTH_ISSUER", "https://id.example"),
                    ("MIRAI_PUBLIC_URL", "https://n.example"),
                    ("MIRAI_OAUTH_DEFAULT_CAN", "read,fly"),
                ][..],
                "MIRAI_OAUTH_DEFAULT_CAN",
            ),
            (
                &[
                    ("MIRAI_OAUTH_ISSUER", "https://id.example"),
                    ("MIRAI_PUBLIC_URL", "https://n.example"),
                    ("MIRAI_OAUTH_JWKS_URL", "http://id.example/jwks"),
                ][..],
                "MIRAI_OAUTH_JWKS_URL",
            ),
        ] {
            let pairs: &'static [(&'static str, &'static str)] =
                Box::leak(pairs.to_vec().into_boxed_slice());
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{needle} in {err}");
        }
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_OAUTH_ISSUER", "http://127.0.0.1:9000"),
                ("MIRAI_PUBLIC_URL", "http://127.0.0.1:4567"),
                ("MIRAI_OAUTH_DEFAULT_CAN", "none"),
            ]))
            .unwrap();
        assert!(c.oauth.unwrap().default_can.names().is_empty());
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_OAUTH_ISSUER", "http://127.0.0.1:9000"),
                ("MIRAI_PUBLIC_URL", "http://127.0.0.1:4567"),
                ("MIRAI_OAUTH_PAGE_CLIENT_ID", " mirai-page "),
            ]))
            .unwrap();
        assert_eq!(
            c.oauth.unwrap().page_client_id.as_deref(),
            Some("mirai-page")
        );
        let err = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_OAUTH_PAGE_CLIENT_ID", "mirai-page")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("MIRAI_OAUTH_ISSUER is not"), "{err}");
        let err = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_OAUTH_ISSUER", "http://127.0.0.1:9000"),
                ("MIRAI_PUBLIC_URL", "http://127.0.0.1:4567"),
                ("MIRAI_OAUTH_PAGE_CLIENT_ID", "bad\u{7}id"),
            ]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("MIRAI_OAUTH_PAGE_CLIENT_ID"), "{err}");
    }
}
