//! OAuth 2.1 resource-server role: access tokens are JWTs signed by a configured issuer, checked
//! against the issuer's published keys (JWKS): signature, `iss`, `aud` (this gateway's resource
//! URL unless configured), `exp` (and `nbf`), and the scopes the gateway requires.
//!
//! [`verify`] is pure over a key set; [`JwtValidator`] (`keys.rs`) fetches and caches the key set.

use std::path::PathBuf;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde_json::{Map, Value};

/// `[http.auth.jwt]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    /// `iss` must equal this.
    pub issuer: String,
    /// `aud` must contain one of these (default: the gateway's resource URL).
    pub audience: Vec<String>,
    pub keys: KeySource,
    /// Scopes every token must carry (`scope` string or `scp` list).
    pub required_scopes: Vec<String>,
    /// The claim that names the caller (default `sub`).
    pub identity_claim: String,
}

/// Where the issuer's public keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A JWKS URL (the issuer's `jwks_uri`).
    Url(String),
    /// A JWKS document on disk (air-gapped deployments, key pinning).
    File(PathBuf),
}

/// A token that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub subject: String,
    pub scopes: Vec<String>,
}

/// Why a token was refused. Everything but `InsufficientScope` is a 401.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtFailure {
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token is signed with a key the issuer does not publish")]
    UnknownKey,
    #[error("the token's algorithm is not accepted (asymmetric algorithms matching the key only)")]
    Algorithm,
    #[error("the token's signature is not valid")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued by another issuer")]
    Issuer,
    #[error("the token was issued for another audience")]
    Audience,
    #[error("the token lacks the `{0}` claim")]
    MissingClaim(String),
    #[error("the token lacks required scopes")]
    InsufficientScope,
    #[error("the issuer's keys cannot be loaded: {0}")]
    Keys(String),
}

/// The algorithms a JWKS-verified token may use: asymmetric only (an HMAC "key" in a public key
/// set would let anyone who reads it sign tokens).
const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Checks `token` against `keys` and `settings`. Pure (apart from reading the clock for `exp`).
pub fn verify(settings: &JwtSettings, keys: &JwkSet, token: &str) -> Result<Verified, JwtFailure> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| JwtFailure::Malformed)?;
    if !ASYMMETRIC.contains(&header.alg) {
        return Err(JwtFailure::Algorithm);
    }
    let jwk = pick_key(keys, header.kid.as_deref())?;
    if let Some(alg) = jwk_algorithm(jwk)
        && alg != header.alg
    {
        return Err(JwtFailure::Algorithm);
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|_| JwtFailure::UnknownKey)?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&settings.issuer]);
    validation.set_audience(&settings.audience);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.validate_nbf = true;
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|err| failure_of(err.kind()))?;
    let claims = data.claims;
    let subject = match claims.get(&settings.identity_claim) {
        Some(Value::String(text)) if !text.is_empty() => text.clone(),
        _ => return Err(JwtFailure::MissingClaim(settings.identity_claim.clone())),
    };
    let scopes = scopes_of(&claims);
    if !settings
        .required_scopes
        .iter()
        .all(|needed| scopes.contains(needed))
    {
        return Err(JwtFailure::InsufficientScope);
    }
    Ok(Verified { subject, scopes })
}

fn pick_key<'a>(keys: &'a JwkSet, kid: Option<&str>) -> Result<&'a Jwk, JwtFailure> {
    match kid {
        Some(kid) => keys.find(kid).ok_or(JwtFailure::UnknownKey),
        // No `kid`: acceptable only when there is no doubt which key is meant.
        None if keys.keys.len() == 1 => keys.keys.first().ok_or(JwtFailure::UnknownKey),
        None => Err(JwtFailure::UnknownKey),
    }
}

fn jwk_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    jwk.common
        .key_algorithm
        .and_then(|alg| alg.to_string().parse::<Algorithm>().ok())
}

fn failure_of(kind: &ErrorKind) -> JwtFailure {
    match kind {
        ErrorKind::ExpiredSignature => JwtFailure::Expired,
        ErrorKind::ImmatureSignature => JwtFailure::NotYetValid,
        ErrorKind::InvalidIssuer => JwtFailure::Issuer,
        ErrorKind::InvalidAudience => JwtFailure::Audience,
        ErrorKind::MissingRequiredClaim(claim) => JwtFailure::MissingClaim(claim.clone()),
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => JwtFailure::Algorithm,
        ErrorKind::InvalidSignature => JwtFailure::Signature,
        _ => JwtFailure::Malformed,
    }
}

/// Scopes from `scope` (space-separated, RFC 9068) or `scp` (a list, as some issuers write it).
fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(text)), _) => text.split_whitespace().map(String::from).collect(),
        (_, Some(Value::Array(items))) => items
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        (_, Some(Value::String(text))) => text.split_whitespace().map(String::from).collect(),
        _ => Vec::new(),
    }
}

pub use super::keys::JwtValidator;

#[cfg(test)]
#[path = "jwt_tests.rs"]
pub(in crate::http::auth) mod tests;
