//! `[http]` in airlock.toml: the listener's address, limits and authentication. Strict like the
//! rest of the file: unknown keys and bad values are errors with file:line:col and the fix.
//!
//! ```toml
//! [http]
//! listen = "127.0.0.1:8080"            # or "unix:/run/airlock/mcp.sock"; --listen overrides
//! path = "/mcp"
//! public_url = "https://mcp.example.com/mcp"   # behind a proxy: the URL clients use
//! allowed_hosts = ["mcp.example.com"]
//! allowed_origins = ["https://app.example.com"]
//! max_body_bytes = 4194304
//! max_sessions = 1024
//! sessions_per_client = 128
//! session_idle_timeout = 1800          # seconds
//! rate_limit = 100                     # requests per second per client; 0 = off
//! rate_burst = 200
//!
//! [http.auth]
//! tokens = true                        # `airlock token` tokens (or a path to a token store)
//!
//! [http.auth.jwt]
//! issuer = "https://auth.example.com"
//! jwks_url = "https://auth.example.com/.well-known/jwks.json"   # or jwks_file = "/etc/airlock/jwks.json"
//! audience = "https://mcp.example.com/mcp"   # default: public_url
//! scopes = ["mcp"]
//! identity_claim = "sub"
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::auth::AuthSettings;
use super::auth::jwt::{JwtSettings, KeySource};
use super::limits::Limits;
use super::listen::ListenAddr;
use super::settings::{DEFAULT_PATH, HttpSettings};
use crate::diagnostic::{SourceError, from_toml_error};

#[derive(Debug, Default, Deserialize)]
struct File {
    http: Option<Spanned<HttpSection>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSection {
    listen: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    public_url: Option<Spanned<String>>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    allowed_origins: Vec<String>,
    max_body_bytes: Option<Spanned<u64>>,
    max_sessions: Option<Spanned<u64>>,
    sessions_per_client: Option<Spanned<u64>>,
    session_idle_timeout: Option<Spanned<u64>>,
    rate_limit: Option<Spanned<u32>>,
    rate_burst: Option<Spanned<u32>>,
    auth: Option<AuthSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthSection {
    /// `true` (the default store), `false`, or a path.
    tokens: Option<Spanned<toml::Value>>,
    jwt: Option<Spanned<JwtSection>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JwtSection {
    issuer: Spanned<String>,
    jwks_url: Option<Spanned<String>>,
    jwks_file: Option<Spanned<String>>,
    audience: Option<toml::Value>,
    #[serde(default)]
    scopes: Vec<String>,
    identity_claim: Option<String>,
}

/// The `[http]` section, validated; the listen address may still come from `--listen`.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    pub listen: Option<ListenAddr>,
    /// Everything else, with a placeholder address until [`HttpConfig::settings`] sets it.
    settings: HttpSettings,
    /// `audience` was not written: it follows the resolved resource URL.
    audience_default: bool,
}

impl HttpConfig {
    /// The token store `[http.auth] tokens` names, if any.
    pub fn token_store(&self) -> Option<&Path> {
        self.settings.auth.tokens.as_deref()
    }

    /// The listener's settings for `listen` (`--listen`, else the config's).
    pub fn settings(&self, listen: ListenAddr) -> HttpSettings {
        let mut settings = self.settings.clone();
        settings.listen = listen;
        let resource = settings.resource();
        if self.audience_default
            && let Some(jwt) = &mut settings.auth.jwt
        {
            jwt.audience = vec![resource];
        }
        settings
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: None,
            settings: HttpSettings::new(ListenAddr::Unix(PathBuf::new())),
            audience_default: true,
        }
    }
}

/// Reads `[http]` from an airlock.toml's text (`None`: the file has none). `tokens_default` is
/// the token store `tokens = true` means.
pub fn load(
    path: &Path,
    text: &str,
    tokens_default: Option<PathBuf>,
) -> Result<HttpConfig, SourceError> {
    let file: File = toml::from_str(text).map_err(|err| from_toml_error(path, text, &err))?;
    let Some(section) = file.http else {
        return Ok(HttpConfig::default());
    };
    let at = |span: std::ops::Range<usize>, message: String| {
        SourceError::at_span(path, text, span, message)
    };
    let section = section.into_inner();
    let mut config = HttpConfig::default();
    if let Some(listen) = &section.listen {
        let parsed = ListenAddr::parse(listen.get_ref()).map_err(|err| {
            at(listen.span(), err.to_string())
                .with_fix("e.g. listen = \"127.0.0.1:8080\" or \"unix:/run/airlock/mcp.sock\"")
        })?;
        config.listen = Some(parsed);
    }
    let settings = &mut config.settings;
    if let Some(value) = &section.path {
        if !value.get_ref().starts_with('/') || value.get_ref().contains(['?', '#']) {
            return Err(at(
                value.span(),
                format!("`path` {:?} is not an absolute URL path", value.get_ref()),
            )
            .with_fix(format!("e.g. path = \"{DEFAULT_PATH}\"")));
        }
        settings.path = value.get_ref().clone();
    }
    settings.public_url = section.public_url.as_ref().map(|u| u.get_ref().clone());
    if let (Some(url), Some(spanned)) = (&settings.public_url, &section.public_url)
        && super::auth::metadata::split_origin(url).is_none()
    {
        return Err(at(
            spanned.span(),
            format!("`public_url` {url:?} is not an absolute http(s) URL"),
        )
        .with_fix("write the URL clients use, e.g. https://mcp.example.com/mcp"));
    }
    settings.allowed_hosts = section.allowed_hosts.clone();
    settings.allowed_origins = section.allowed_origins.clone();
    settings.limits = limits(&section, &at)?;
    if let Some(auth) = &section.auth {
        let (auth, audience_default) = auth_settings(auth, path, tokens_default, &at)?;
        settings.auth = auth;
        config.audience_default = audience_default;
    }
    Ok(config)
}

type At<'a> = dyn Fn(std::ops::Range<usize>, String) -> SourceError + 'a;

fn limits(section: &HttpSection, at: &At<'_>) -> Result<Limits, SourceError> {
    let mut limits = Limits::default();
    let positive = |value: &Option<Spanned<u64>>, name: &str| -> Result<Option<u64>, SourceError> {
        match value {
            Some(v) if *v.get_ref() == 0 => {
                Err(at(v.span(), format!("`{name}` must be at least 1")))
            }
            Some(v) => Ok(Some(*v.get_ref())),
            None => Ok(None),
        }
    };
    if let Some(bytes) = positive(&section.max_body_bytes, "max_body_bytes")? {
        limits.max_body_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    }
    if let Some(count) = positive(&section.max_sessions, "max_sessions")? {
        limits.max_sessions = usize::try_from(count).unwrap_or(usize::MAX);
    }
    if let Some(count) = positive(&section.sessions_per_client, "sessions_per_client")? {
        limits.sessions_per_client = usize::try_from(count).unwrap_or(usize::MAX);
    }
    if let Some(seconds) = positive(&section.session_idle_timeout, "session_idle_timeout")? {
        limits.session_idle = Duration::from_secs(seconds);
    }
    if let Some(rate) = &section.rate_limit {
        limits.rate_per_second = *rate.get_ref();
        limits.rate_burst = limits.rate_per_second.saturating_mul(2).max(1);
    }
    if let Some(burst) = &section.rate_burst {
        if *burst.get_ref() == 0 {
            return Err(at(burst.span(), "`rate_burst` must be at least 1".into()));
        }
        limits.rate_burst = *burst.get_ref();
    }
    Ok(limits)
}

fn auth_settings(
    section: &AuthSection,
    path: &Path,
    tokens_default: Option<PathBuf>,
    at: &At<'_>,
) -> Result<(AuthSettings, bool), SourceError> {
    // Relative paths are the config file's neighbours, made absolute so they mean the same
    // wherever the command runs (`airlock.toml` alone has an empty parent).
    let config_path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let base = config_path.parent().unwrap_or(Path::new("/"));
    let tokens = match &section.tokens {
        None => None,
        Some(value) => match value.get_ref() {
            toml::Value::Boolean(false) => None,
            toml::Value::Boolean(true) => Some(tokens_default.ok_or_else(|| {
                at(
                    value.span(),
                    "no default token store: neither XDG_CONFIG_HOME nor HOME is set".into(),
                )
                .with_fix("give the store's path: tokens = \"/etc/airlock/tokens.json\"")
            })?),
            toml::Value::String(file) => Some(base.join(file)),
            _ => {
                return Err(at(value.span(), "`tokens` is true, false or a path".into())
                    .with_fix("tokens = true uses the store `airlock token create` writes"));
            }
        },
    };
    // A store that is there but cannot be read would refuse every token (503): said now, with
    // the line, rather than found by the first client. A missing one is only empty so far.
    if let (Some(store), Some(value)) = (&tokens, &section.tokens)
        && let Err(err) = super::auth::tokens::list(store)
    {
        return Err(at(value.span(), format!("the token store cannot be used: {err}"))
            .with_fix("point `tokens` at a store `airlock token create NAME --file PATH` wrote, or remove the file to start an empty one"));
    }
    let mut audience_default = true;
    let jwt = match &section.jwt {
        None => None,
        Some(jwt) => {
            let span = jwt.span();
            let jwt = jwt.get_ref();
            let keys = match (&jwt.jwks_url, &jwt.jwks_file) {
                (Some(url), None) => KeySource::Url(url.get_ref().clone()),
                (None, Some(file)) => KeySource::File(base.join(file.get_ref())),
                _ => {
                    return Err(at(span, "[http.auth.jwt] needs exactly one of `jwks_url` and `jwks_file`".into())
                        .with_fix("jwks_url = the issuer's jwks_uri (see its /.well-known/openid-configuration)"));
                }
            };
            let audience = match &jwt.audience {
                None => Vec::new(),
                Some(toml::Value::String(one)) => vec![one.clone()],
                Some(toml::Value::Array(many)) => many
                    .iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect(),
                Some(_) => {
                    return Err(at(
                        span,
                        "`audience` is a string or a list of strings".into(),
                    ));
                }
            };
            audience_default = audience.is_empty();
            if jwt.issuer.get_ref().trim().is_empty() {
                return Err(at(jwt.issuer.span(), "`issuer` is empty".into()));
            }
            Some(JwtSettings {
                issuer: jwt.issuer.get_ref().clone(),
                audience,
                keys,
                required_scopes: jwt.scopes.clone(),
                identity_claim: jwt.identity_claim.clone().unwrap_or_else(|| "sub".into()),
            })
        }
    };
    Ok((AuthSettings { tokens, jwt }, audience_default))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<HttpConfig, SourceError> {
        load(
            Path::new("/etc/airlock/airlock.toml"),
            text,
            Some(PathBuf::from("/home/me/.config/airlock/tokens.json")),
        )
    }

    #[test]
    fn a_full_section_loads() {
        let config = load_text(
            r#"
[servers.x]
command = "npx"

[http]
listen = "0.0.0.0:8443"
public_url = "https://mcp.example.com/mcp"
allowed_origins = ["https://app.example.com"]
max_body_bytes = 1000
sessions_per_client = 4
session_idle_timeout = 60
rate_limit = 5

[http.auth]
tokens = true

[http.auth.jwt]
issuer = "https://auth.example.com"
jwks_file = "jwks.json"
scopes = ["mcp"]
"#,
        )
        .unwrap();
        assert_eq!(
            config.listen,
            Some(ListenAddr::parse("0.0.0.0:8443").unwrap())
        );
        let settings = config.settings(config.listen.clone().unwrap());
        assert_eq!(settings.limits.max_body_bytes, 1000);
        assert_eq!(
            (settings.limits.rate_per_second, settings.limits.rate_burst),
            (5, 10)
        );
        assert_eq!(settings.limits.session_idle, Duration::from_secs(60));
        assert_eq!(
            settings.auth.tokens,
            Some(PathBuf::from("/home/me/.config/airlock/tokens.json"))
        );
        assert_eq!(settings.check(), Ok(()));
        let jwt = settings.auth.jwt.unwrap();
        assert_eq!(
            jwt.audience,
            vec!["https://mcp.example.com/mcp".to_string()]
        );
        assert_eq!(
            jwt.keys,
            KeySource::File(PathBuf::from("/etc/airlock/jwks.json"))
        );
    }

    #[test]
    fn no_section_means_defaults() {
        let config = load_text("[servers.x]\ncommand = \"npx\"\n").unwrap();
        assert_eq!(config.listen, None);
        let settings = config.settings(ListenAddr::parse("127.0.0.1:1").unwrap());
        assert_eq!(settings.limits, Limits::default());
        assert!(!settings.auth.enabled());
    }

    #[test]
    fn mistakes_point_at_the_line() {
        for (text, needle) in [
            ("[http]\nlisten = \"8080\"\n", "2:10"),
            ("[http]\nlisen = \"127.0.0.1:1\"\n", "unknown field"),
            ("[http]\npath = \"mcp\"\n", "2:8"),
            ("[http]\nmax_sessions = 0\n", "at least 1"),
            ("[http.auth.jwt]\nissuer = \"x\"\n", "exactly one of"),
            ("[http.auth]\ntokens = 3\n", "true, false or a path"),
        ] {
            let err = load_text(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
