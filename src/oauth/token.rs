//! One access token checked: a JWT signed with RS256, ES256 or EdDSA by a key
//! the identity provider publishes (`none`, HMAC and every other algorithm
//! refused), issued by the configured issuer for this resource, within its
//! `exp` and `nbf` (with [`LEEWAY_SECS`] for clocks that differ), naming its
//! subject. What it says becomes a [`SignedIn`].

use jsonwebtoken::{decode, decode_header, Algorithm, Validation};
use serde_json::Value;

use super::keys::Keys;
use super::scopes::rights_of;
use super::settings::OAuthSettings;
use crate::callers::SignedIn;

/// The algorithms an access token may be signed with.
const ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
/// Clock difference allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 30;
/// Longest `sub` or `email` taken.
const MAX_NAME_CHARS: usize = 255;

/// Who `token` says signed in, or why it is refused (one sentence).
pub fn verify(settings: &OAuthSettings, keys: &Keys, token: &str) -> Result<SignedIn, String> {
    // The header is parsed before any check only to pick the key; an
    // algorithm jsonwebtoken does not know (`none`) fails here.
    let header = decode_header(token).map_err(|_| {
        "it is not a JWT signed with RS256, ES256 or EdDSA (alg none and unknown algorithms are refused)"
            .to_string()
    })?;
    if !ALGORITHMS.contains(&header.alg) {
        return Err(format!(
            "it is signed with {:?}; only RS256, ES256 and EdDSA are accepted",
            header.alg
        ));
    }
    let key = keys.find(header.kid.as_deref(), header.alg)?;
    let audience = settings.audience.trim_end_matches('/');
    let mut validation = Validation::new(header.alg);
    validation.leeway = LEEWAY_SECS;
    validation.validate_nbf = true;
    validation.set_issuer(&[settings.issuer.as_str()]);
    validation.set_audience(&[settings.audience.clone(), format!("{audience}/mcp")]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let data = decode::<Value>(token, &key, &validation).map_err(|e| {
        use jsonwebtoken::errors::ErrorKind;
        match e.kind() {
            ErrorKind::ExpiredSignature => "it has expired".to_string(),
            ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".to_string(),
            ErrorKind::InvalidIssuer => format!("it was not issued by {}", settings.issuer),
            ErrorKind::InvalidAudience => {
                format!(
                    "it was not issued for this resource ({})",
                    settings.audience
                )
            }
            ErrorKind::InvalidSignature => "its signature does not verify".to_string(),
            ErrorKind::MissingRequiredClaim(claim) => format!("it has no `{claim}` claim"),
            _ => "it is not a valid access token".to_string(),
        }
    })?;
    let claims = data.claims;
    let subject = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| plain_name(s))
        .ok_or("its `sub` is not a plain name")?
        .to_string();
    let verified = matches!(claims.get("email_verified"), Some(Value::Bool(true)))
        || claims.get("email_verified").and_then(Value::as_str) == Some("true");
    let email = claims
        .get("email")
        .and_then(Value::as_str)
        .filter(|e| verified && plain_name(e) && e.contains('@'))
        .map(str::to_string);
    let host = url::Url::parse(&settings.issuer)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| "oauth.invalid".to_string());
    Ok(SignedIn {
        fallback_email: format!("{subject}@{host}"),
        subject,
        email,
        scopes: rights_of(&claims),
        unlisted: settings.default_can,
    })
}

/// A name fit for a commit's author and a trailer: 1 to 255 characters, no
/// control characters, no `<` or `>`.
fn plain_name(text: &str) -> bool {
    !text.is_empty()
        && text.chars().count() <= MAX_NAME_CHARS
        && !text.chars().any(|c| c.is_control() || c == '<' || c == '>')
}
