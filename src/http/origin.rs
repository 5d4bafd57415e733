//! `Host` and `Origin` checks against DNS rebinding: a web page whose name resolves to 127.0.0.1
//! must not reach a gateway listening there. Pure: the caller passes the headers.
//!
//! - Listening on loopback: `Host` must name loopback (`localhost`, `127.0.0.1`, `[::1]`, any
//!   port) or a host in `[http] allowed_hosts`; a present `Origin` must be one of those hosts or be
//!   listed in `[http] allowed_origins`.
//! - Elsewhere (authentication is then mandatory): `Host` is checked only when `allowed_hosts` is
//!   set; a present `Origin` must be same-host as the request, or listed.
//! - A unix socket cannot be reached by a browser: only a present `Origin` is checked.

/// What a request's `Host`/`Origin` are checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostGuard {
    /// Listening on loopback (or a unix socket): only local names are accepted.
    pub loopback: bool,
    /// Listening on a unix socket: no `Host` check.
    pub unix: bool,
    /// Extra host names (lower case, no port) from `[http] allowed_hosts` and `public_url`.
    pub hosts: Vec<String>,
    /// Extra origins (`scheme://host[:port]`, lower case) from `[http] allowed_origins`.
    pub origins: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "Host `{0}` is not served here (DNS rebinding protection); if clients reach this gateway under that name, add it to [http] allowed_hosts"
    )]
    Host(String),
    #[error(
        "Origin `{0}` is not allowed (DNS rebinding protection); to let that web app connect, add it to [http] allowed_origins"
    )]
    Origin(String),
    #[error("the request has no Host header")]
    MissingHost,
}

const LOOPBACK_NAMES: [&str; 4] = ["localhost", "127.0.0.1", "[::1]", "::1"];

impl HostGuard {
    pub fn check(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), Refusal> {
        let host_name = match host {
            Some(host) => Some(host_name(host)),
            None if self.unix => None,
            None => return Err(Refusal::MissingHost),
        };
        if let (Some(name), Some(host)) = (&host_name, host)
            && !self.unix
            && !self.host_allowed(name)
        {
            return Err(Refusal::Host(host.to_string()));
        }
        match origin {
            None => Ok(()),
            Some(origin) if self.origin_allowed(origin, host_name.as_deref()) => Ok(()),
            Some(origin) => Err(Refusal::Origin(origin.to_string())),
        }
    }

    fn host_allowed(&self, name: &str) -> bool {
        if self.hosts.iter().any(|h| h == name) {
            return true;
        }
        if self.loopback {
            return LOOPBACK_NAMES.contains(&name) || is_loopback_literal(name);
        }
        // Not loopback: authentication guards the door; names are pinned only when listed.
        self.hosts.is_empty()
    }

    fn origin_allowed(&self, origin: &str, request_host: Option<&str>) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        let Some(name) = origin_host(&origin) else {
            return false; // `null`, or not scheme://host
        };
        if self.hosts.contains(&name) {
            return true;
        }
        if self.loopback {
            return LOOPBACK_NAMES.contains(&name.as_str()) || is_loopback_literal(&name);
        }
        request_host.is_some_and(|host| host == name)
    }
}

/// The host name of a `Host` header value, lower case, without the port (`[::1]` keeps brackets).
pub fn host_name(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    if host.starts_with('[') {
        // After the bracket only a port may follow: `[::1]evil.com` is not `[::1]` (kept
        // whole, it matches no allowed name).
        return match host.find(']') {
            Some(end) if port_follows(&host[end + 1..]) => host[..=end].to_string(),
            _ => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name.to_string(),
        _ => host,
    }
}

/// Whether `rest` is nothing or `:` and a port's digits.
fn port_follows(rest: &str) -> bool {
    rest.is_empty()
        || rest
            .strip_prefix(':')
            .is_some_and(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
}

/// The host name of an origin `scheme://host[:port]`; `None` for `null` or anything else.
fn origin_host(origin: &str) -> Option<String> {
    let (scheme, rest) = origin.split_once("://")?;
    if scheme.is_empty() || rest.is_empty() || rest.contains('/') {
        return None;
    }
    Some(host_name(rest))
}

fn is_loopback_literal(name: &str) -> bool {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>()
        .is_ok_and(super::listen::is_loopback)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> HostGuard {
        HostGuard {
            loopback: true,
            ..HostGuard::default()
        }
    }

    #[test]
    fn loopback_accepts_local_names_and_refuses_others() {
        let guard = loopback();
        for host in [
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:80",
            "LOCALHOST",
            "127.0.0.2:5",
        ] {
            assert_eq!(guard.check(Some(host), None), Ok(()), "{host}");
        }
        assert_eq!(
            guard.check(Some("evil.example:8080"), None),
            Err(Refusal::Host("evil.example:8080".into()))
        );
        assert_eq!(guard.check(None, None), Err(Refusal::MissingHost));
    }

    #[test]
    fn a_foreign_origin_is_refused_even_with_a_local_host() {
        let guard = loopback();
        assert_eq!(
            guard.check(Some("127.0.0.1:8080"), Some("http://evil.example")),
            Err(Refusal::Origin("http://evil.example".into()))
        );
        assert_eq!(
            guard.check(Some("127.0.0.1:8080"), Some("null")),
            Err(Refusal::Origin("null".into()))
        );
        assert_eq!(
            guard.check(Some("127.0.0.1:8080"), Some("http://localhost:6274")),
            Ok(())
        );
    }

    #[test]
    fn listed_hosts_and_origins_are_accepted() {
        let guard = HostGuard {
            hosts: vec!["mcp.example.com".into()],
            origins: vec!["https://app.example.com".into()],
            ..loopback()
        };
        assert_eq!(guard.check(Some("mcp.example.com"), None), Ok(()));
        assert_eq!(
            guard.check(Some("localhost"), Some("https://App.Example.com")),
            Ok(())
        );
        assert!(
            guard
                .check(Some("localhost"), Some("https://app.example.com:8443"))
                .is_err()
        );
    }

    #[test]
    fn off_loopback_hosts_are_pinned_only_when_listed() {
        let open = HostGuard::default();
        assert_eq!(open.check(Some("10.0.0.5:8080"), None), Ok(()));
        assert_eq!(
            open.check(Some("10.0.0.5:8080"), Some("http://10.0.0.5:8080")),
            Ok(())
        );
        assert!(
            open.check(Some("10.0.0.5:8080"), Some("http://evil.example"))
                .is_err()
        );
        let pinned = HostGuard {
            hosts: vec!["mcp.example.com".into()],
            ..HostGuard::default()
        };
        assert!(pinned.check(Some("10.0.0.5:8080"), None).is_err());
    }

    #[test]
    fn unix_sockets_check_only_the_origin() {
        let guard = HostGuard {
            unix: true,
            ..loopback()
        };
        assert_eq!(guard.check(None, None), Ok(()));
        assert_eq!(guard.check(Some("whatever"), None), Ok(()));
        assert!(guard.check(None, Some("http://evil.example")).is_err());
    }

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("Example.COM:443"), "example.com");
        assert_eq!(host_name("[::1]:8080"), "[::1]");
        assert_eq!(host_name("example.com"), "example.com");
        // Only a port may follow the bracket.
        assert_eq!(host_name("[::1]evil.com"), "[::1]evil.com");
        assert_eq!(host_name("[::1]:"), "[::1]:");
        assert_eq!(host_name("[::1]"), "[::1]");
    }
}
