//! `airlock explain net:SERVER HOST:PORT`: would the server reach HOST on PORT, and which entry
//! says so. Pure: the same matching the resolver and the connect hand-over use, without resolving anything.

use std::net::IpAddr;

use super::addr::{IpNet, STAND_IN_NET, canonical, non_public_reason};
use super::allow::{AllowEntry, AllowList, DEFAULT_PORTS, normalize_name};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allowed {
        entry: AllowEntry,
        /// What still applies at connect time (a name's addresses are checked then).
        note: String,
    },
    Refused {
        why: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not HOST:PORT (e.g. api.github.com:443, 10.1.2.3:5432, [::1]:8080)")]
pub struct TargetError(pub String);

/// A target as `explain` takes it: `host:port`, `[v6]:port`, or a host alone (port 443).
pub fn parse_target(text: &str) -> Result<(String, u16), TargetError> {
    let bad = || TargetError(text.to_string());
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        (host, after.strip_prefix(':'))
    } else if text.matches(':').count() > 1 {
        (text, None)
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => DEFAULT_PORTS[1],
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(bad)?,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// Would the allow list let the server reach `host` on `port`?
pub fn explain(allow: &AllowList, host: &str, port: u16) -> Answer {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return explain_address(allow, canonical(ip), port);
    }
    let name = match normalize_name(host) {
        Ok(name) => name,
        Err(why) => {
            return Answer::Refused {
                why: format!("{host:?} is not a host name: {why}"),
            };
        }
    };
    if let Some(entry) = allow.name_entry(&name, port) {
        return Answer::Allowed {
            entry: entry.clone(),
            note: format!(
                "{name} resolves in the sandbox to a stand-in address; airlock then resolves it outside and connects only to its public addresses (loopback, private and link-local ones only if listed as addresses)"
            ),
        };
    }
    let why = if allow.resolves(&name) {
        let ports: Vec<String> = allow
            .entries
            .iter()
            .filter(|entry| entry.rule.matches_name(&name))
            .flat_map(|entry| entry.rule.ports.iter().map(u16::to_string))
            .collect();
        format!(
            "{name} resolves in the sandbox, but port {port} is not allowed for it (allowed: {})",
            ports.join(", ")
        )
    } else {
        format!("{name} is not on the allow list: it does not resolve in the sandbox")
    };
    Answer::Refused { why }
}

fn explain_address(allow: &AllowList, ip: IpAddr, port: u16) -> Answer {
    if STAND_IN_NET.contains(ip) {
        return Answer::Refused {
            why: format!(
                "{ip} is in {STAND_IN_NET}, airlock's stand-in range: only names lead there"
            ),
        };
    }
    match allow.address_entry(ip, port) {
        Some(entry) => Answer::Allowed {
            entry: entry.clone(),
            note: match non_public_reason(ip) {
                Some(kind) => {
                    format!("{ip} is {kind}: reached because the list names it as an address")
                }
                None => format!("airlock connects to {ip} port {port} from outside the sandbox"),
            },
        },
        None => Answer::Refused {
            why: format!(
                "{} port {port} is not on the allow list (addresses are reached only when listed, e.g. \"{}:{port}\")",
                ip,
                IpNet {
                    addr: ip,
                    prefix: if ip.is_ipv4() { 32 } else { 128 }
                }
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowList {
        AllowList::of(entries, "user p.toml:2")
    }

    #[test]
    fn answers_for_names_ports_and_addresses() {
        let allow = list(&["api.github.com", "*.githubusercontent.com", "10.1.2.3:5432"]);
        assert!(matches!(
            explain(&allow, "api.github.com", 443),
            Answer::Allowed { entry, .. } if entry.rule.to_string() == "api.github.com"
        ));
        assert!(matches!(
            explain(&allow, "RAW.githubusercontent.com", 80),
            Answer::Allowed { .. }
        ));
        assert!(matches!(
            explain(&allow, "api.github.com", 22),
            Answer::Refused { why } if why.contains("port 22 is not allowed") && why.contains("80, 443")
        ));
        assert!(matches!(
            explain(&allow, "evil.example", 443),
            Answer::Refused { why } if why.contains("does not resolve")
        ));
        assert!(matches!(
            explain(&allow, "10.1.2.3", 5432),
            Answer::Allowed { note, .. } if note.contains("private")
        ));
        assert!(matches!(
            explain(&allow, "10.1.2.3", 443),
            Answer::Refused { .. }
        ));
        assert!(matches!(
            explain(&allow, "198.18.0.1", 443),
            Answer::Refused { .. }
        ));
        assert!(matches!(
            explain(&allow, "exa mple", 443),
            Answer::Refused { .. }
        ));
    }

    #[test]
    fn targets_parse_with_a_default_port() {
        assert_eq!(
            parse_target("api.github.com:443"),
            Ok(("api.github.com".into(), 443))
        );
        assert_eq!(
            parse_target("api.github.com"),
            Ok(("api.github.com".into(), 443))
        );
        assert_eq!(parse_target("[::1]:8080"), Ok(("::1".into(), 8080)));
        assert_eq!(parse_target("::1"), Ok(("::1".into(), 443)));
        assert!(parse_target("x:0").is_err());
        assert!(parse_target(":443").is_err());
    }
}
