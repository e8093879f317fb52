//! A real authorization server for the OAuth specs: a loopback HTTP server
//! (on `hostile.rs`) that serves RFC 8414 metadata and a JWKS, and signs
//! access tokens with keys generated here (RSA 2048, P-256, Ed25519). The
//! spec chooses which keys it publishes and how its JWKS answers (served,
//! never answered, or endless), and counts the JWKS fetches.

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
    match request.target.as_str() {
        "/.well-known/oauth-authorization-server" => {
            let metadata = json!({
                "issuer": issuer,
                "authorization_endpoint": format!("{issuer}/authorize"),
                "token_endpoint": format!("{issuer}/token"),
                "jwks_uri": format!("{issuer}/jwks"),
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
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
