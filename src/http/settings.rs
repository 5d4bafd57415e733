//! The listener's settings, resolved from `[http]` in airlock.toml and `--listen`, and the one
//! start-up rule that cannot be bent: an address other machines can reach needs authentication.

use super::auth::AuthSettings;
use super::auth::metadata;
use super::limits::Limits;
use super::listen::ListenAddr;
use super::origin::{HostGuard, host_name};

/// The default MCP endpoint path.
pub const DEFAULT_PATH: &str = "/mcp";

/// Everything the listener needs.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    pub listen: ListenAddr,
    /// The MCP endpoint's path (`/mcp`).
    pub path: String,
    /// The canonical URL clients use (the OAuth resource and JWT audience). Default:
    /// `http://ADDR:PORT/mcp`; set `[http] public_url` behind a proxy or TLS terminator.
    pub public_url: Option<String>,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub limits: Limits,
    pub auth: AuthSettings,
}

/// Why the listener will not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExposureError {
    #[error(
        "refusing to listen on {listen} without authentication: anyone who can reach that address could use every configured server"
    )]
    Unauthenticated { listen: String },
    #[error("[http] public_url `{0}` is not an absolute http(s) URL without query or fragment")]
    PublicUrl(String),
}

impl ExposureError {
    pub fn fix(&self) -> &'static str {
        match self {
            ExposureError::Unauthenticated { .. } => {
                "listen on loopback (--listen 127.0.0.1:PORT), or configure authentication: `[http.auth] tokens = true` in the config and `airlock token create NAME`, or an issuer in `[http.auth.jwt]` (docs/http.md)"
            }
            ExposureError::PublicUrl(_) => "write it like https://mcp.example.com/mcp",
        }
    }
}

impl HttpSettings {
    /// Defaults for `listen`: `/mcp`, no extra hosts or origins, default limits, no auth.
    pub fn new(listen: ListenAddr) -> HttpSettings {
        HttpSettings {
            listen,
            path: DEFAULT_PATH.to_string(),
            public_url: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            limits: Limits::default(),
            auth: AuthSettings::default(),
        }
    }

    /// The start-up checks: refuse what would expose the gateway.
    pub fn check(&self) -> Result<(), ExposureError> {
        if !self.listen.is_local() && !self.auth.enabled() {
            return Err(ExposureError::Unauthenticated {
                listen: self.listen.to_string(),
            });
        }
        if let Some(url) = &self.public_url
            && metadata::split_origin(url).is_none()
        {
            return Err(ExposureError::PublicUrl(url.clone()));
        }
        Ok(())
    }

    /// The gateway's canonical URL (`public_url`, else derived from the listen address).
    pub fn resource(&self) -> String {
        if let Some(url) = &self.public_url {
            return url.trim_end_matches('/').to_string();
        }
        match &self.listen {
            ListenAddr::Tcp(addr) => format!("http://{addr}{}", self.path),
            ListenAddr::Unix(_) => format!("http://localhost{}", self.path),
        }
    }

    /// The `Host`/`Origin` guard for this listener.
    pub fn guard(&self) -> HostGuard {
        let mut hosts: Vec<String> = self.allowed_hosts.iter().map(|h| host_name(h)).collect();
        if let Some((origin, _)) = self.public_url.as_deref().and_then(metadata::split_origin) {
            let host = origin.split_once("://").map_or(origin, |(_, host)| host);
            hosts.push(host_name(host));
        }
        HostGuard {
            loopback: self.listen.is_local(),
            unix: matches!(self.listen, ListenAddr::Unix(_)),
            hosts,
            origins: self
                .allowed_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn settings(listen: &str) -> HttpSettings {
        HttpSettings::new(ListenAddr::parse(listen).unwrap())
    }

    #[test]
    fn a_reachable_address_without_authentication_is_refused() {
        assert_eq!(settings("127.0.0.1:8080").check(), Ok(()));
        assert_eq!(settings("unix:/run/a.sock").check(), Ok(()));
        let open = settings("0.0.0.0:8080");
        let err = open.check().unwrap_err();
        assert!(
            err.to_string().contains("0.0.0.0:8080") && err.fix().contains("airlock token create")
        );
        let mut with_tokens = open.clone();
        with_tokens.auth.tokens = Some(PathBuf::from("/x/tokens.json"));
        assert_eq!(with_tokens.check(), Ok(()));
    }

    #[test]
    fn the_resource_url_defaults_to_the_listen_address() {
        assert_eq!(
            settings("127.0.0.1:8080").resource(),
            "http://127.0.0.1:8080/mcp"
        );
        assert_eq!(settings("unix:/a.sock").resource(), "http://localhost/mcp");
        let mut behind_proxy = settings("127.0.0.1:8080");
        behind_proxy.public_url = Some("https://mcp.example.com/team/mcp/".into());
        assert_eq!(behind_proxy.resource(), "https://mcp.example.com/team/mcp");
        assert!(
            behind_proxy
                .guard()
                .hosts
                .contains(&"mcp.example.com".to_string())
        );
        behind_proxy.public_url = Some("mcp.example.com".into());
        assert!(matches!(
            behind_proxy.check(),
            Err(ExposureError::PublicUrl(_))
        ));
    }
}
