//! The page's sign-in: authorization code with PKCE (S256) as the public
//! client `MIRAI_OAUTH_PAGE_CLIENT_ID`. The provider's authorization and
//! token endpoints come from its metadata (the document the keys are found
//! from), fetched when first needed and kept; a failed look is tried again at
//! most once per refresh interval. What `GET /oauth/page-client` tells the
//! page, and the one origin the page's CSP lets it connect to besides its own
//! (the token endpoint's).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::keys::{secure_url, Keys};
use super::scopes::SCOPES;
use super::settings::OAuthSettings;

/// Where the page comes back to from the provider, under `MIRAI_PUBLIC_URL`.
pub const SIGNED_IN_PATH: &str = "/ui/signed-in";

/// The provider's endpoints the page uses.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoints {
    authorization: String,
    token: String,
}

#[derive(Default)]
struct Found {
    endpoints: Option<Endpoints>,
    /// When the last failed look started, and why it failed.
    failed: Option<(Instant, String)>,
}

/// The page's client: its id and the endpoints, once found.
pub struct PageClient {
    client_id: String,
    interval: Duration,
    found: Mutex<Found>,
}

impl PageClient {
    pub fn new(settings: &OAuthSettings) -> Option<PageClient> {
        Some(PageClient {
            client_id: settings.page_client_id.clone()?,
            interval: settings.refresh_interval,
            found: Mutex::new(Found::default()),
        })
    }

    /// The endpoints, looked up in the issuer's metadata when not yet known
    /// (bounded by the fetch timeout; call it off the async threads).
    fn endpoints(&self, keys: &Keys) -> Result<Endpoints, String> {
        let mut found = self.found.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(endpoints) = &found.endpoints {
            return Ok(endpoints.clone());
        }
        if let Some((at, why)) = &found.failed {
            if at.elapsed() < self.interval {
                return Err(why.clone());
            }
        }
        let started = Instant::now();
        let looked = keys.metadata(|url, metadata| {
            for field in ["authorization_endpoint", "token_endpoint"] {
                match metadata.get(field).and_then(Value::as_str) {
                    Some(endpoint) if secure_url(endpoint) => {}
                    Some(_) => {
                        return Err(format!(
                            "{url} names a {field} that is neither https nor loopback"
                        ))
                    }
                    None => return Err(format!("{url} has no {field}")),
                }
            }
            Ok(())
        });
        match looked {
            Ok(metadata) => {
                let endpoints = Endpoints {
                    authorization: metadata["authorization_endpoint"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    token: metadata["token_endpoint"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                };
                found.endpoints = Some(endpoints.clone());
                found.failed = None;
                Ok(endpoints)
            }
            Err(why) => {
                log::warn!("oauth: the page's sign-in endpoints could not be found: {why}");
                found.failed = Some((started, why.clone()));
                Err(why)
            }
        }
    }

    /// What the page needs to sign in: the endpoints, the client id, the
    /// scopes to ask for, the redirect URI and the resource (RFC 8707).
    pub fn document(&self, settings: &OAuthSettings, keys: &Keys) -> Result<Value, String> {
        let endpoints = self.endpoints(keys)?;
        Ok(json!({
            "issuer": settings.issuer,
            "authorization_endpoint": endpoints.authorization,
            "token_endpoint": endpoints.token,
            "client_id": self.client_id,
            "scopes": SCOPES.iter().map(|(scope, _)| *scope).collect::<Vec<_>>(),
            "redirect_uri": format!("{}{SIGNED_IN_PATH}", settings.public_url),
            "resource": settings.audience,
            "code_challenge_method": "S256",
        }))
    }

    /// The token endpoint's origin (`scheme://host[:port]`), the one the
    /// page's `connect-src` adds to its own; `None` until it is known.
    pub fn token_origin(&self, keys: &Keys) -> Option<String> {
        let token = self.endpoints(keys).ok()?.token;
        let url = url::Url::parse(&token).ok()?;
        let origin = url.origin();
        origin.is_tuple().then(|| origin.ascii_serialization())
    }
}
