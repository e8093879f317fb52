//! A real authorization server for the OAuth specs: a loopback HTTP server
//! (on `hostile.rs`) that serves RFC 8414 metadata and a JWKS, and signs
//! access tokens with keys generated here (RSA 2048, P-256, Ed25519). The
//! spec chooses which keys it publishes and how its JWKS answers (served,
//! never answered, or endless), and counts the JWKS fetches.
//!
//! It also signs people in as a provider does for a public client: dynamic
//! client registration (RFC 7591, `/register`), `/authorize` (approves at once
//! as the person the spec chose: redirects to the client's registered
//! `redirect_uri` with a code and the `state`), and `/token` (the
//! authorization_code grant: the code once, for the client and redirect URI
//! it was issued to, and only with the PKCE verifier of its S256 challenge),
//! answering a JWT signed with the first key, for the `resource` asked for
//! (RFC 8707) or the default audience, with the scopes asked for.

use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{self, KeyPair};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;
use serde_json::{json, Value};
use sha2::Digest;

use super::hostile::{endless, respond, Hostile, Request};

/// How the JWKS answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jwks {
    Served,
    /// The connection is taken and nothing is ever sent.
    Hangs,
    /// A 200 whose body never ends.
    Endless,
}

/// One signing key: its private half for signing, its public JWK.
#[derive(Clone)]
pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    pub private: EncodingKey,
    pub jwk: Value,
    /// The public key's DER (PKCS#1 for RSA), the bytes an HS256 forger would use.
    pub public_der: Vec<u8>,
}

impl SigningKey {
    pub fn rsa(kid: &str) -> SigningKey {
        let key = rsa::PrivateKey::new(&mut getrandom::SysRng, 2048).unwrap();
        let der = key.to_pkcs1_der().unwrap();
        let public = key.to_public_key();
        let public_der = rsa::pkcs1::EncodeRsaPublicKey::to_pkcs1_der(&public)
            .unwrap()
            .as_bytes()
            .to_vec();
        SigningKey {
            kid: kid.to_string(),
            alg: Algorithm::RS256,
            private: EncodingKey::from_rsa_der(der.as_bytes()),
            jwk: json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                "n": URL_SAFE_NO_PAD.encode(public.n_bytes()),
                "e": URL_SAFE_NO_PAD.encode(public.e_bytes())}),
            public_der,
        }
    }

    pub fn p256(kid: &str) -> SigningKey {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
        let point = pair.public_key().as_ref().to_vec();
        SigningKey {
            kid: kid.to_string(),
            alg: Algorithm::ES256,
            private: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256",
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..])}),
            public_der: point,
        }
    }

    pub fn ed25519(kid: &str) -> SigningKey {
        let rng = SystemRandom::new();
        let pkcs8 = signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let public = pair.public_key().as_ref().to_vec();
        SigningKey {
            kid: kid.to_string(),
            alg: Algorithm::EdDSA,
            private: EncodingKey::from_ed_der(pkcs8.as_ref()),
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA",
                "x": URL_SAFE_NO_PAD.encode(&public)}),
            public_der: public,
        }
    }

    /// `claims` signed with this key, its kid in the header.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        encode(&header, claims, &self.private).unwrap()
    }
}

struct State {
    published: Vec<Value>,
    jwks: Jwks,
    /// The key `/token` signs with.
    signer: Option<SigningKey>,
    /// `aud` of a token asked for without a `resource`.
    audience: String,
    /// Who `/authorize` signs in: `sub` and a verified email.
    person: (String, Option<String>),
    /// Each client id and its redirect URIs.
    clients: Vec<(String, Vec<String>)>,
    /// Codes not yet traded.
    codes: Vec<Grant>,
    issued: usize,
}

/// What one authorization code was issued for.
#[derive(Clone)]
struct Grant {
    code: String,
    client_id: String,
    redirect_uri: String,
    challenge: String,
    scope: String,
    resource: Option<String>,
}

pub struct AuthServer {
    /// The issuer: `http://127.0.0.1:<port>`.
    pub issuer: String,
    server: Hostile,
    state: Arc<Mutex<State>>,
}

impl AuthServer {
    /// Serves metadata naming `/jwks`, which publishes `keys`.
    pub fn start(keys: &[&SigningKey]) -> AuthServer {
        let state = Arc::new(Mutex::new(State {
            published: keys.iter().map(|k| k.jwk.clone()).collect(),
            jwks: Jwks::Served,
            signer: keys.first().map(|k| (*k).clone()),
            audience: String::new(),
            person: ("sub-page".to_string(), None),
            clients: Vec::new(),
            codes: Vec::new(),
            issued: 0,
        }));
        let issuer = Arc::new(Mutex::new(String::new()));
        let (seen_state, seen_issuer) = (state.clone(), issuer.clone());
        let server = Hostile::start(move |request: &Request, stream: &mut TcpStream| {
            let issuer = seen_issuer.lock().unwrap().clone();
            answer(&issuer, &seen_state, request, stream);
        });
        *issuer.lock().unwrap() = server.base.clone();
        AuthServer {
            issuer: server.base.clone(),
            server,
            state,
        }
    }

    /// Publishes `key` too (a rotation).
    pub fn publish(&self, key: &SigningKey) {
        self.state.lock().unwrap().published.push(key.jwk.clone());
    }

    /// A public client registered ahead (the page's): its id and redirect URI.
    pub fn register(&self, client_id: &str, redirect_uri: &str) {
        self.state
            .lock()
            .unwrap()
            .clients
            .push((client_id.to_string(), vec![redirect_uri.to_string()]));
    }

    /// The person `/authorize` signs in, and the `aud` of tokens asked for
    /// without a `resource`.
    pub fn sign_in_as(&self, sub: &str, email: Option<&str>, audience: &str) {
        let mut state = self.state.lock().unwrap();
        state.person = (sub.to_string(), email.map(str::to_string));
        state.audience = audience.to_string();
    }

    /// The targets of the requests made to `path` (query included).
    pub fn requests_to(&self, path: &str) -> Vec<super::hostile::Request> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.target.split('?').next() == Some(path))
            .collect()
    }

    pub fn set_jwks(&self, jwks: Jwks) {
        self.state.lock().unwrap().jwks = jwks;
    }

    /// How many times the JWKS was asked for.
    pub fn jwks_fetches(&self) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| r.target == "/jwks")
            .count()
    }

    /// Claims for `sub` from this issuer for `audience`, valid for an hour,
    /// with `scope`; `extra` is merged over them.
    pub fn claims(&self, audience: &str, sub: &str, scope: &str, extra: Value) -> Value {
        let now = now();
        let mut claims = json!({"iss": self.issuer, "aud": audience, "sub": sub,
            "scope": scope, "iat": now, "exp": now + 3600});
        if let Value::Object(extra) = extra {
            for (key, value) in extra {
                claims[key] = value;
            }
        }
        claims
    }
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn answer(issuer: &str, state: &Mutex<State>, request: &Request, stream: &mut TcpStream) {
    let (path, query) = request
        .target
        .split_once('?')
        .unwrap_or((request.target.as_str(), ""));
    match path {
        "/authorize" => authorize(state, query, stream),
        "/token" => token(issuer, state, request, stream),
        "/register" => register(state, request, stream),
        "/.well-known/oauth-authorization-server" => {
            let metadata = json!({
                "issuer": issuer,
                "authorization_endpoint": format!("{issuer}/authorize"),
                "token_endpoint": format!("{issuer}/token"),
                "registration_endpoint": format!("{issuer}/register"),
                "jwks_uri": format!("{issuer}/jwks"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code"],
                "token_endpoint_auth_methods_supported": ["none"],
                "code_challenge_methods_supported": ["S256"],
                "scopes_supported": ["notes:read", "notes:write", "notes:propose",
                    "proposals:review", "repo:sync"],
            });
            respond(stream, 200, metadata.to_string().as_bytes());
        }
        "/jwks" => {
            let (jwks, published) = {
                let state = state.lock().unwrap();
                (state.jwks, state.published.clone())
            };
            match jwks {
                Jwks::Served => respond(
                    stream,
                    200,
                    json!({"keys": published}).to_string().as_bytes(),
                ),
                Jwks::Hangs => std::thread::sleep(Duration::from_secs(20)),
                Jwks::Endless => endless(stream, b"{\"keys\":[                              "),
            }
        }
        _ => respond(stream, 404, b"{}"),
    }
}

/// The pairs of a query string or a form body.
fn pairs(text: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(text.as_bytes())
        .into_owned()
        .collect()
}

fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// An answer with extra header lines (each ending in `\r\n`).
fn respond_with(stream: &mut TcpStream, status: u16, headers: &str, body: &[u8]) {
    use std::io::Write;
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

/// `/authorize`: approves at once when the client and redirect URI are
/// registered and a S256 challenge is sent; 400 otherwise (never a redirect
/// to a URI it does not know).
fn authorize(state: &Mutex<State>, query: &str, stream: &mut TcpStream) {
    let query = pairs(query);
    let mut state = state.lock().unwrap();
    let client_id = field(&query, "client_id").unwrap_or_default().to_string();
    let redirect_uri = field(&query, "redirect_uri")
        .unwrap_or_default()
        .to_string();
    let known = state
        .clients
        .iter()
        .any(|(id, uris)| *id == client_id && uris.contains(&redirect_uri));
    let challenge = field(&query, "code_challenge")
        .unwrap_or_default()
        .to_string();
    if !known
        || field(&query, "response_type") != Some("code")
        || field(&query, "code_challenge_method") != Some("S256")
        || challenge.is_empty()
    {
        return respond(stream, 400, b"{\"error\":\"invalid_request\"}");
    }
    state.issued += 1;
    let code = format!("code-{}-{}", state.issued, now());
    state.codes.push(Grant {
        code: code.clone(),
        client_id,
        redirect_uri: redirect_uri.clone(),
        challenge,
        scope: field(&query, "scope").unwrap_or_default().to_string(),
        resource: field(&query, "resource").map(str::to_string),
    });
    let mut location = url::Url::parse(&redirect_uri).unwrap();
    location.query_pairs_mut().append_pair("code", &code);
    if let Some(sent) = field(&query, "state") {
        location.query_pairs_mut().append_pair("state", sent);
    }
    respond_with(stream, 302, &format!("location: {location}\r\n"), b"");
}

/// `/token`: the authorization_code grant, checked as a provider checks it.
fn token(issuer: &str, state: &Mutex<State>, request: &Request, stream: &mut TcpStream) {
    // Browsers read the answer only with this (the page's fetch is cross-origin).
    let cors = "access-control-allow-origin: *\r\n";
    let form = pairs(&String::from_utf8_lossy(&request.body));
    let mut state = state.lock().unwrap();
    let code = field(&form, "code").unwrap_or_default();
    let Some(at) = state.codes.iter().position(|g| g.code == code) else {
        return respond_with(stream, 400, cors, b"{\"error\":\"invalid_grant\"}");
    };
    // A code is traded once, whatever the outcome.
    let grant = state.codes.remove(at);
    let verifier = field(&form, "code_verifier").unwrap_or_default();
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    if field(&form, "grant_type") != Some("authorization_code")
        || field(&form, "client_id") != Some(grant.client_id.as_str())
        || field(&form, "redirect_uri") != Some(grant.redirect_uri.as_str())
        || challenge != grant.challenge
    {
        return respond_with(stream, 400, cors, b"{\"error\":\"invalid_grant\"}");
    }
    let audience = field(&form, "resource")
        .map(str::to_string)
        .or(grant.resource.clone())
        .unwrap_or_else(|| state.audience.clone());
    let (sub, email) = state.person.clone();
    let now = now();
    let mut claims = json!({"iss": issuer, "aud": audience, "sub": sub, "scope": grant.scope,
        "client_id": grant.client_id, "iat": now, "exp": now + 3600});
    if let Some(email) = email {
        claims["email"] = json!(email);
        claims["email_verified"] = json!(true);
    }
    let Some(signer) = state.signer.clone() else {
        return respond_with(stream, 500, cors, b"{\"error\":\"server_error\"}");
    };
    let answer = json!({"access_token": signer.sign(&claims), "token_type": "Bearer",
        "expires_in": 3600, "scope": grant.scope});
    respond_with(stream, 200, cors, answer.to_string().as_bytes());
}

/// `/register` (RFC 7591): a public client with the redirect URIs it sent.
fn register(state: &Mutex<State>, request: &Request, stream: &mut TcpStream) {
    let Ok(sent) = serde_json::from_slice::<Value>(&request.body) else {
        return respond(stream, 400, b"{\"error\":\"invalid_client_metadata\"}");
    };
    let uris: Vec<String> = sent["redirect_uris"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if uris.is_empty() {
        return respond(stream, 400, b"{\"error\":\"invalid_redirect_uri\"}");
    }
    let mut state = state.lock().unwrap();
    state.issued += 1;
    let client_id = format!("client-{}", state.issued);
    state.clients.push((client_id.clone(), uris.clone()));
    let mut answer = sent.clone();
    answer["client_id"] = json!(client_id);
    answer["client_id_issued_at"] = json!(now());
    answer["redirect_uris"] = json!(uris);
    answer["token_endpoint_auth_method"] = json!("none");
    answer["grant_types"] = json!(["authorization_code"]);
    answer["response_types"] = json!(["code"]);
    respond(stream, 201, answer.to_string().as_bytes());
}
