//! Who is calling: bearer tokens from `airlock token` ([`tokens`]) and OAuth 2.1 access tokens
//! (JWTs) from a configured issuer ([`jwt`]), with the Protected Resource Metadata document
//! (RFC 9728) that tells clients where to get one ([`metadata`]).
//!
//! The outcome of a request is an [`Identity`] (or no identity when the listener has no
//! authentication configured: loopback only). Failures answer 401 with a `WWW-Authenticate`
//! challenge pointing at the resource metadata, or 403 `insufficient_scope`.

pub mod jwt;
mod keys;
pub mod metadata;
pub mod tokens;

use std::path::PathBuf;
use std::sync::Mutex;

use serde::Serialize;

use jwt::{JwtFailure, JwtSettings, JwtValidator};
use tokens::{TOKEN_PREFIX, TokenCache};

/// How a caller proved who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// A token from `airlock token create`.
    Token,
    /// An access token (JWT) from the configured issuer.
    Jwt,
}

/// An authenticated caller: the name policies (`[identities.NAME]`, `who`) and the audit log use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    /// The token's name, or the JWT's identity claim (default `sub`).
    pub name: String,
    pub method: AuthMethod,
    /// The JWT's scopes (empty for airlock tokens).
    pub scopes: Vec<String>,
}

/// `[http.auth]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthSettings {
    /// Accept tokens from this store (`airlock token`), when set.
    pub tokens: Option<PathBuf>,
    pub jwt: Option<JwtSettings>,
}

impl AuthSettings {
    /// At least one way to authenticate is configured.
    pub fn enabled(&self) -> bool {
        self.tokens.is_some() || self.jwt.is_some()
    }
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("authentication required: send `Authorization: Bearer <token>`")]
    Missing,
    #[error("{0}")]
    Invalid(String),
    #[error("the token lacks a required scope")]
    InsufficientScope,
    /// The token store or the issuer's keys cannot be read: nobody gets in (fail closed).
    #[error("authentication is unavailable: {0}")]
    Unavailable(String),
}

impl AuthFailure {
    pub fn status(&self) -> u16 {
        match self {
            AuthFailure::Missing | AuthFailure::Invalid(_) => 401,
            AuthFailure::InsufficientScope => 403,
            AuthFailure::Unavailable(_) => 503,
        }
    }
}

/// Checks the `Authorization` header of every request.
pub struct Authenticator {
    tokens: Option<Mutex<TokenCache>>,
    jwt: Option<JwtValidator>,
}

impl Authenticator {
    pub fn new(settings: &AuthSettings) -> Authenticator {
        Authenticator {
            tokens: settings
                .tokens
                .clone()
                .map(|path| Mutex::new(TokenCache::new(path))),
            jwt: settings.jwt.clone().map(JwtValidator::new),
        }
    }

    pub fn enabled(&self) -> bool {
        self.tokens.is_some() || self.jwt.is_some()
    }

    /// `Ok(None)`: no authentication configured (loopback); `Ok(Some)`: who it is.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
    ) -> Result<Option<Identity>, AuthFailure> {
        if !self.enabled() {
            return Ok(None);
        }
        let token = bearer(authorization).ok_or(AuthFailure::Missing)?;
        if token.starts_with(TOKEN_PREFIX) {
            return self.check_token(token).map(Some);
        }
        let Some(jwt) = &self.jwt else {
            return Err(AuthFailure::Invalid("the token is not valid".into()));
        };
        match jwt.authenticate(token).await {
            Ok(verified) => Ok(Some(Identity {
                name: verified.subject,
                method: AuthMethod::Jwt,
                scopes: verified.scopes,
            })),
            Err(JwtFailure::InsufficientScope) => Err(AuthFailure::InsufficientScope),
            Err(JwtFailure::Keys(reason)) => Err(AuthFailure::Unavailable(reason)),
            Err(other) => Err(AuthFailure::Invalid(other.to_string())),
        }
    }

    fn check_token(&self, token: &str) -> Result<Identity, AuthFailure> {
        let Some(cache) = &self.tokens else {
            return Err(AuthFailure::Invalid("the token is not valid".into()));
        };
        let mut cache = cache
            .lock()
            .map_err(|_| AuthFailure::Unavailable("token store lock poisoned".into()))?;
        match cache.verify(token) {
            Ok(Some(name)) => Ok(Identity {
                name,
                method: AuthMethod::Token,
                scopes: Vec::new(),
            }),
            // Wrong and revoked look the same: the hash is not in the store.
            Ok(None) => Err(AuthFailure::Invalid(
                "the token is not valid (unknown or revoked)".into(),
            )),
            Err(err) => Err(AuthFailure::Unavailable(err.to_string())),
        }
    }
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive, RFC 6750).
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The `WWW-Authenticate` value for a failure (RFC 6750 §3, RFC 9728 §5.1).
pub fn challenge(failure: &AuthFailure, metadata_url: &str, scopes: &[String]) -> String {
    let mut params = Vec::new();
    match failure {
        AuthFailure::Missing => {}
        AuthFailure::Invalid(reason) | AuthFailure::Unavailable(reason) => {
            params.push("error=\"invalid_token\"".to_string());
            params.push(format!("error_description=\"{}\"", quoted(reason)));
        }
        AuthFailure::InsufficientScope => params.push("error=\"insufficient_scope\"".into()),
    }
    if !scopes.is_empty() {
        params.push(format!("scope=\"{}\"", quoted(&scopes.join(" "))));
    }
    params.push(format!("resource_metadata=\"{}\"", quoted(metadata_url)));
    format!("Bearer {}", params.join(", "))
}

/// A quoted-string body: no quotes, backslashes or control characters.
fn quoted(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '"' || c == '\\' || c.is_control() {
                '\''
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_leniently_but_only_as_bearer() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer   abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(None), None);
    }

    #[test]
    fn challenges_point_at_the_metadata() {
        let url = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp";
        assert_eq!(
            challenge(&AuthFailure::Missing, url, &[]),
            format!("Bearer resource_metadata=\"{url}\"")
        );
        assert_eq!(
            challenge(
                &AuthFailure::Invalid("bad \"x\"".into()),
                url,
                &["mcp".into()]
            ),
            format!(
                "Bearer error=\"invalid_token\", error_description=\"bad 'x'\", scope=\"mcp\", resource_metadata=\"{url}\""
            )
        );
        assert!(
            challenge(&AuthFailure::InsufficientScope, url, &[]).contains("insufficient_scope")
        );
        assert_eq!(AuthFailure::InsufficientScope.status(), 403);
        assert_eq!(AuthFailure::Missing.status(), 401);
    }

    #[tokio::test]
    async fn tokens_from_the_store_identify_and_revocation_bites_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let token = tokens::create(&path, "alice", std::time::SystemTime::now()).unwrap();
        let auth = Authenticator::new(&AuthSettings {
            tokens: Some(path.clone()),
            jwt: None,
        });
        let header = format!("Bearer {token}");
        let identity = auth.authenticate(Some(&header)).await.unwrap().unwrap();
        assert_eq!(
            (identity.name.as_str(), identity.method),
            ("alice", AuthMethod::Token)
        );
        assert_eq!(auth.authenticate(None).await, Err(AuthFailure::Missing));
        assert!(matches!(
            auth.authenticate(Some("Bearer airlock_nope")).await,
            Err(AuthFailure::Invalid(_))
        ));
        assert!(matches!(
            auth.authenticate(Some("Bearer eyJ.a.b")).await,
            Err(AuthFailure::Invalid(_))
        ));
        tokens::revoke(&path, "alice").unwrap();
        assert!(matches!(
            auth.authenticate(Some(&header)).await,
            Err(AuthFailure::Invalid(_))
        ));
    }

    #[tokio::test]
    async fn without_authentication_configured_nobody_is_identified() {
        let auth = Authenticator::new(&AuthSettings::default());
        assert_eq!(auth.authenticate(Some("Bearer x")).await, Ok(None));
    }
}
