//! The identity provider's signing keys: found from the issuer's metadata
//! (RFC 8414's `/.well-known/oauth-authorization-server`, then OpenID
//! Connect's `/.well-known/openid-configuration`) unless `MIRAI_OAUTH_JWKS_URL`
//! names them; fetched with one deadline and a size cap, kept, and fetched
//! again when a token names a key not held, at most once per refresh interval.
//! Only RS256, ES256 and EdDSA signing keys are kept; symmetric keys never.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

use super::settings::OAuthSettings;
use crate::outbound::{self, CallError};

/// Largest metadata document or JWKS read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Most keys kept from one JWKS.
const MAX_KEYS: usize = 64;

/// One usable signing key.
struct Key {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// The keys held, refreshed on demand.
pub struct Keys {
    http: reqwest::blocking::Client,
    issuer: String,
    jwks_url: Option<String>,
    timeout: Duration,
    interval: Duration,
    held: RwLock<Arc<Vec<Key>>>,
    /// When the last refresh started; held through a refresh, so a request
    /// that needs one waits for the one under way (bounded by its timeout).
    last_refresh: Mutex<Option<Instant>>,
}

impl Keys {
    pub fn new(settings: &OAuthSettings) -> Keys {
        Keys {
            http: outbound::client(),
            issuer: settings.issuer.clone(),
            jwks_url: settings.jwks_url.clone(),
            timeout: settings.fetch_timeout,
            interval: settings.refresh_interval,
            held: RwLock::new(Arc::new(Vec::new())),
            last_refresh: Mutex::new(None),
        }
    }

    /// The key for a token signed with `alg` naming `kid`, fetching the keys
    /// again when none is held and the last refresh is old enough. Without a
    /// `kid`, the one key held for `alg`.
    pub fn find(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, String> {
        if let Some(key) = self.held_key(kid, alg) {
            return Ok(key);
        }
        let mut last = self.last_refresh.lock().unwrap_or_else(|p| p.into_inner());
        // A refresh that finished while this request waited may have brought it.
        if let Some(key) = self.held_key(kid, alg) {
            return Ok(key);
        }
        if last.is_some_and(|at| at.elapsed() < self.interval) {
            return Err(unknown(kid));
        }
        *last = Some(Instant::now());
        match self.fetch() {
            Ok(keys) => {
                log::info!("oauth: {} signing keys fetched", keys.len());
                *self.held.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
            }
            Err(why) => {
                log::warn!("oauth: cannot fetch the identity provider's keys: {why}");
                return Err(format!(
                    "the identity provider's signing keys could not be fetched ({why}); try again later"
                ));
            }
        }
        drop(last);
        self.held_key(kid, alg).ok_or_else(|| unknown(kid))
    }

    fn held_key(&self, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        let held = Arc::clone(&self.held.read().unwrap_or_else(|p| p.into_inner()));
        let mut matching = held.iter().filter(|k| k.alg == alg);
        match kid {
            Some(kid) => matching
                .find(|k| k.kid.as_deref() == Some(kid))
                .map(|k| k.key.clone()),
            None => {
                let first = matching.next()?;
                matching.next().is_none().then(|| first.key.clone())
            }
        }
    }

    /// The JWKS, found and read within one deadline.
    fn fetch(&self) -> Result<Vec<Key>, String> {
        let deadline = Instant::now() + self.timeout;
        let jwks_url = match &self.jwks_url {
            Some(url) => url.clone(),
            None => self.discover(deadline)?,
        };
        let body = self.get(&jwks_url, deadline)?;
        let jwks: Value = serde_json::from_slice(&body)
            .map_err(|_| format!("{} is not a JWKS (JSON)", crate::redact::urls(&jwks_url)))?;
        let list = jwks
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{} has no `keys` list", crate::redact::urls(&jwks_url)))?;
        Ok(list.iter().filter_map(key_of).take(MAX_KEYS).collect())
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414's document first,
    /// then OpenID Connect's; its `issuer` must be the one configured.
    fn discover(&self, deadline: Instant) -> Result<String, String> {
        let metadata = self.metadata_where(deadline, |url, metadata| {
            let jwks = metadata
                .get("jwks_uri")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{url} has no jwks_uri"))?;
            if !secure_url(jwks) {
                return Err(format!(
                    "{url} names a jwks_uri that is neither https nor loopback"
                ));
            }
            Ok(())
        })?;
        Ok(metadata["jwks_uri"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// The issuer's metadata document (RFC 8414's, then OpenID Connect's)
    /// naming the configured issuer and passing `fits`, fetched within the
    /// fetch timeout: for the page's sign-in, its endpoints.
    pub fn metadata(
        &self,
        fits: impl Fn(&str, &Value) -> Result<(), String>,
    ) -> Result<Value, String> {
        self.metadata_where(Instant::now() + self.timeout, fits)
    }

    fn metadata_where(
        &self,
        deadline: Instant,
        fits: impl Fn(&str, &Value) -> Result<(), String>,
    ) -> Result<Value, String> {
        let mut tried = Vec::new();
        for url in metadata_urls(&self.issuer) {
            let document = match self.get(&url, deadline) {
                Ok(body) => body,
                Err(why) => {
                    tried.push(why);
                    continue;
                }
            };
            let Ok(metadata) = serde_json::from_slice::<Value>(&document) else {
                tried.push(format!("{url} is not JSON"));
                continue;
            };
            if metadata.get("issuer").and_then(Value::as_str) != Some(self.issuer.as_str()) {
                tried.push(format!("{url} names another issuer"));
                continue;
            }
            match fits(&url, &metadata) {
                Ok(()) => return Ok(metadata),
                Err(why) => tried.push(why),
            }
        }
        Err(tried.join("; "))
    }

    fn get(&self, url: &str, deadline: Instant) -> Result<Vec<u8>, String> {
        outbound::get_capped(&self.http, url, deadline, MAX_DOCUMENT_BYTES).map_err(|e| match e {
            CallError::Deadline => format!(
                "no answer within {} ms (MIRAI_OAUTH_FETCH_TIMEOUT_MS)",
                self.timeout.as_millis()
            ),
            CallError::Failed(why) | CallError::TooLong(why) => why,
        })
    }
}

fn unknown(kid: Option<&str>) -> String {
    match kid {
        Some(kid) => format!(
            "it is signed with key {:?}, which the identity provider does not publish",
            kid.chars().take(100).collect::<String>()
        ),
        None => "it names no key (kid) and the identity provider publishes no single key for its algorithm".to_string(),
    }
}

/// Where the issuer's metadata may be: RFC 8414's well-known path inserted
/// before the issuer's path, then OpenID Connect's appended to it.
pub fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let mut urls = Vec::new();
    if let Ok(url) = url::Url::parse(trimmed) {
        let path = url.path().trim_end_matches('/');
        let mut inserted = url.clone();
        inserted.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
        urls.push(inserted.to_string());
    }
    urls.push(format!("{trimmed}/.well-known/openid-configuration"));
    urls
}

/// Whether `url` is https, or http to a loopback host.
pub fn secure_url(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match url.scheme() {
        "https" => url.host().is_some(),
        "http" => url.host().is_some_and(|host| {
            let host = host.to_owned();
            crate::origin::is_loopback(&host)
        }),
        _ => false,
    }
}

/// A JWK as a key for RS256, ES256 or EdDSA; anything else (symmetric keys,
/// encryption keys, other curves and algorithms) is left out.
fn key_of(jwk: &Value) -> Option<Key> {
    let text = |name: &str| jwk.get(name).and_then(Value::as_str);
    if text("use").is_some_and(|u| u != "sig") {
        return None;
    }
    let (alg, key) = match (text("kty")?, text("crv")) {
        ("RSA", _) => (
            Algorithm::RS256,
            DecodingKey::from_rsa_components(text("n")?, text("e")?).ok()?,
        ),
        ("EC", Some("P-256")) => (
            Algorithm::ES256,
            DecodingKey::from_ec_components(text("x")?, text("y")?).ok()?,
        ),
        ("OKP", Some("Ed25519")) => (
            Algorithm::EdDSA,
            DecodingKey::from_ed_components(text("x")?).ok()?,
        ),
        _ => return None,
    };
    let named = match alg {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        _ => "EdDSA",
    };
    if text("alg").is_some_and(|a| a != named) {
        return None;
    }
    Some(Key {
        kid: text("kid").map(str::to_string),
        alg,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_is_looked_for_where_both_specs_put_it() {
        assert_eq!(
            metadata_urls("https://id.example/realms/notes"),
            [
                "https://id.example/.well-known/oauth-authorization-server/realms/notes",
                "https://id.example/realms/notes/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("https://id.example/"),
            [
                "https://id.example/.well-known/oauth-authorization-server",
                "https://id.example/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn only_https_or_loopback_http_is_secure() {
        assert!(secure_url("https://id.example/jwks"));
        assert!(secure_url("http://127.0.0.1:9000/jwks"));
        assert!(secure_url("http://localhost/jwks"));
        assert!(!secure_url("http://id.example/jwks"));
        assert!(!secure_url("file:///etc/passwd"));
    }

    #[test]
    fn symmetric_encryption_and_mislabelled_keys_are_left_out() {
        assert!(key_of(&json!({"kty": "oct", "k": "c2VjcmV0"})).is_none());
        let ed = json!({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"});
        assert!(key_of(&ed).is_some());
        let mut enc = ed.clone();
        enc["use"] = json!("enc");
        assert!(key_of(&enc).is_none());
        let mut hs = ed;
        hs["alg"] = json!("HS256");
        assert!(key_of(&hs).is_none());
    }
}
