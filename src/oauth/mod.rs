//! mirai as an OAuth 2.1 resource server (the MCP authorization spec): access
//! tokens are JWTs an existing identity provider signed, verified here
//! against its published keys ([`keys`]) and claims ([`token`]); the scopes
//! become rights ([`scopes`]). Also the protected resource metadata (RFC
//! 9728) mirai publishes, and the `WWW-Authenticate` challenge that points at
//! it. Knows no HTTP server, ops or git: the HTTP adapter asks [`Resource`].

mod keys;
mod page;
mod scopes;
mod settings;
mod token;

use serde_json::{json, Value};

use crate::callers::{Right, SignedIn};

pub use keys::secure_url;
pub use page::SIGNED_IN_PATH;
pub use scopes::{scope_of, SCOPES};
pub use settings::{OAuthSettings, DEFAULT_FETCH_TIMEOUT_MS, DEFAULT_REFRESH_SECS};

/// The well-known path of the protected resource metadata.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
/// The route whose resource has its own, path-suffixed metadata (RFC 9728 §3.1).
pub const MCP_PATH: &str = "/mcp";

/// The resource server: its settings and the provider's keys.
pub struct Resource {
    settings: OAuthSettings,
    keys: keys::Keys,
    page: Option<page::PageClient>,
}

impl Resource {
    pub fn new(settings: OAuthSettings) -> Resource {
        Resource {
            keys: keys::Keys::new(&settings),
            page: page::PageClient::new(&settings),
            settings,
        }
    }

    /// What the page signs in with (`GET /oauth/page-client`): `None` when
    /// `MIRAI_OAUTH_PAGE_CLIENT_ID` is not set, else the document or why the
    /// provider's endpoints are not known. May fetch the issuer's metadata:
    /// call it off the async threads.
    pub fn page_client(&self) -> Option<Result<Value, String>> {
        let page = self.page.as_ref()?;
        Some(page.document(&self.settings, &self.keys))
    }

    /// The origin the page may connect to besides its own: the token
    /// endpoint's, once known (may fetch, as [`Resource::page_client`]).
    pub fn page_connect_origin(&self) -> Option<String> {
        self.page.as_ref()?.token_origin(&self.keys)
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Who `token` says signed in, when it is a valid access token for this
    /// resource; else why not (a sentence for the 401). May fetch the keys
    /// (bounded by `MIRAI_OAUTH_FETCH_TIMEOUT_MS`): call it off the async threads.
    pub fn verify(&self, token: &str) -> Result<SignedIn, String> {
        token::verify(&self.settings, &self.keys, token)
    }

    /// The protected resource metadata served at `METADATA_PATH` followed by
    /// `suffix` (empty, or `MCP_PATH`).
    pub fn metadata(&self, suffix: &str) -> Value {
        json!({
            "resource": format!("{}{suffix}", self.settings.audience.trim_end_matches('/')),
            "authorization_servers": [self.settings.issuer],
            "scopes_supported": SCOPES.iter().map(|(scope, _)| scope).collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
            "resource_name": "mirai",
        })
    }

    /// Where the metadata of the resource at `path` is: the path-suffixed
    /// document for `/mcp`, the server's for every other route.
    pub fn challenge_url(&self, path: &str) -> String {
        let suffix = if path == MCP_PATH { MCP_PATH } else { "" };
        format!("{}{METADATA_PATH}{suffix}", self.settings.public_url)
    }

    /// The `WWW-Authenticate` value of a 401 on `path`: where the metadata is,
    /// and `error="invalid_token"` when a token was sent.
    pub fn challenge(&self, path: &str, token_sent: bool) -> String {
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.challenge_url(path));
        if token_sent {
            value.push_str(", error=\"invalid_token\"");
        }
        value
    }

    /// The `WWW-Authenticate` value of a 403 on `path` whose valid token
    /// lacks the scope granting `right` (RFC 6750 §3.1, the MCP spec's
    /// step-up): a client signs in again asking for that scope.
    pub fn insufficient_scope(&self, path: &str, right: Right) -> String {
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
            scope_of(right),
            self.challenge_url(path)
        )
    }
}

/// Whether `token` is shaped like a JWT (three dot-separated parts), so worth
/// verifying as an access token.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && !token.contains(char::is_whitespace)
}
