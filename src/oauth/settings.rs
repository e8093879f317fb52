//! `OAuthSettings`: what the resource server needs, read and checked by
//! `config/oauth.rs` at start-up.

use std::time::Duration;

use crate::callers::Rights;

/// Default bound on one refresh of the keys (metadata and JWKS together).
pub const DEFAULT_FETCH_TIMEOUT_MS: u64 = 5_000;
/// Default shortest time between two refreshes of the keys.
pub const DEFAULT_REFRESH_SECS: u64 = 60;

/// mirai as an OAuth 2.1 resource server (`MIRAI_OAUTH_ISSUER` set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The authorization server's issuer, exactly as its tokens' `iss`.
    pub issuer: String,
    /// The resource tokens must be issued for (their `aud`); its `/mcp`
    /// form is accepted too.
    pub audience: String,
    /// mirai's public URL (`MIRAI_PUBLIC_URL`), no trailing slash: where the
    /// protected resource metadata is found.
    pub public_url: String,
    /// The JWKS's URL when given; else found from the issuer's metadata.
    pub jwks_url: Option<String>,
    /// The rights of a signed-in subject with no entry in the callers file.
    pub default_can: Rights,
    /// Bound on one refresh of the keys.
    pub fetch_timeout: Duration,
    /// Shortest time between two refreshes.
    pub refresh_interval: Duration,
    /// The client id mirai's page signs in as (`MIRAI_OAUTH_PAGE_CLIENT_ID`:
    /// a public client, authorization code with PKCE); `None`: the page
    /// offers no sign-in.
    pub page_client_id: Option<String>,
}
