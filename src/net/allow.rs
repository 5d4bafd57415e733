//! The network allow list: what one entry means, how a name or an address is matched, and when one
//! list covers another (the widening check of policy layering).
//!
//! Entry syntax (`[sandbox] network = { allow = [...] }`):
//! - `api.github.com`: that name, ports 443 and 80;
//! - `*.githubusercontent.com`: every name below it (not the name itself), ports 443 and 80;
//! - `example.org:8443`: one port;
//! - `*:443`: any name on that port (what the port-list form `network = [443]` means);
//! - `10.1.2.3:5432`, `10.0.0.0/8:5432`, `[::1]:8080`, `[2001:db8::/32]:443`, `10.1.2.3`:
//!   addresses, reached only as written (a name never leads to a private, loopback or link-local
//!   address; see [`super::addr::non_public_reason`]).

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::addr::{IpNet, STAND_IN_NET, canonical};

/// The ports of an entry that names none.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// Port 53 inside the sandbox is airlock's own resolver.
pub const DNS_PORT: u16 = 53;

/// What an entry lets the server reach.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Target {
    /// Any name (`*`).
    AnyName,
    /// Exactly this name (lowercase, no trailing dot).
    Name(String),
    /// Every name below this one (`*.example.org` stores `example.org`), not the name itself.
    Subdomains(String),
    /// An address or a range, written explicitly.
    Addresses(IpNet),
}

/// One allow-list entry: a target and the TCP ports it may be reached on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NetRule {
    pub target: Target,
    /// Sorted, without duplicates, never empty.
    pub ports: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("an empty network entry")]
    Empty,
    #[error("{entry:?}: port {port:?} is not a TCP port (1-65535)")]
    BadPort { entry: String, port: String },
    #[error(
        "{entry:?}: port 53 is the sandbox's own resolver (airlock answers every name lookup); DNS needs no entry"
    )]
    DnsPort { entry: String },
    #[error("{entry:?}: {why}")]
    BadName { entry: String, why: String },
    #[error("{entry:?}: {source}")]
    BadAddress {
        entry: String,
        source: super::addr::NetParseError,
    },
    #[error("{entry:?} is inside {STAND_IN_NET}, the range airlock's stand-in addresses come from")]
    StandInRange { entry: String },
    #[error("{entry:?} is a URL; an entry is a host name with an optional port: {host:?}")]
    Url { entry: String, host: String },
}

impl RuleError {
    /// The exact fix, for the load error.
    pub fn fix(&self) -> &'static str {
        match self {
            RuleError::Empty | RuleError::BadName { .. } => {
                "write a host name (\"api.github.com\"), a wildcard (\"*.example.org\"), \"*:PORT\", or an address (\"10.1.2.3:5432\")"
            }
            RuleError::BadPort { .. } => "write the port as NAME:PORT, e.g. \"example.org:8443\"",
            RuleError::DnsPort { .. } => {
                "remove the entry: names on the allow list resolve by themselves"
            }
            RuleError::BadAddress { .. } => {
                "write an address (\"10.1.2.3\"), a range (\"10.0.0.0/8\"), or IPv6 in brackets with a port (\"[::1]:8080\")"
            }
            RuleError::StandInRange { .. } => "list another address",
            RuleError::Url { .. } => {
                "write only the host, with a port when it is not 443 or 80 (\"example.org\", \"example.org:8443\")"
            }
        }
    }
}

impl NetRule {
    /// Any name on one port (an element of the port-list form).
    pub fn any_name(port: u16) -> NetRule {
        NetRule {
            target: Target::AnyName,
            ports: vec![port],
        }
    }

    /// Parses one entry (see the module documentation).
    pub fn parse(text: &str) -> Result<NetRule, RuleError> {
        let entry = text.trim();
        if entry.is_empty() {
            return Err(RuleError::Empty);
        }
        // A URL pasted from a browser or a server's README: say so, not "bad port".
        if let Some((_, rest)) = entry.split_once("://") {
            let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
            return Err(RuleError::Url {
                entry: entry.to_string(),
                host: host.to_string(),
            });
        }
        let (host, port) = split_port(entry)?;
        let ports = match port {
            None => DEFAULT_PORTS.to_vec(),
            Some(port_text) => vec![parse_port(entry, port_text)?],
        };
        let target = parse_target(entry, host)?;
        if let Target::Addresses(net) = &target {
            // A range around the stand-in range is fine (stand-in addresses are names first).
            if STAND_IN_NET.contains_net(net) {
                return Err(RuleError::StandInRange {
                    entry: entry.to_string(),
                });
            }
        }
        Ok(NetRule { target, ports })
    }

    pub fn allows_port(&self, port: u16) -> bool {
        self.ports.binary_search(&port).is_ok()
    }

    /// Does the entry name `name` (lowercase, no trailing dot), on any of its ports?
    pub fn matches_name(&self, name: &str) -> bool {
        match &self.target {
            Target::AnyName => true,
            Target::Name(own) => own == name,
            Target::Subdomains(parent) => is_below(name, parent),
            Target::Addresses(_) => false,
        }
    }

    pub fn allows_name(&self, name: &str, port: u16) -> bool {
        self.allows_port(port) && self.matches_name(name)
    }

    pub fn allows_address(&self, ip: IpAddr, port: u16) -> bool {
        match &self.target {
            Target::Addresses(net) => self.allows_port(port) && net.contains(canonical(ip)),
            _ => false,
        }
    }

    /// True when everything this entry allows on `port` is allowed by `other` on `port`.
    fn covered_on_port_by(&self, other: &NetRule, port: u16) -> bool {
        other.allows_port(port)
            && match (&other.target, &self.target) {
                (Target::AnyName, Target::Addresses(_)) => false,
                (Target::AnyName, _) => true,
                (Target::Name(theirs), Target::Name(mine)) => theirs == mine,
                (Target::Subdomains(parent), Target::Name(mine)) => is_below(mine, parent),
                (Target::Subdomains(parent), Target::Subdomains(mine)) => {
                    mine == parent || is_below(mine, parent)
                }
                (Target::Addresses(theirs), Target::Addresses(mine)) => theirs.contains_net(mine),
                _ => false,
            }
    }

    /// What the entry reaches, in words: `api.github.com on ports 80, 443`.
    pub fn reach(&self) -> String {
        let what = match &self.target {
            Target::AnyName => "any name".to_string(),
            Target::Name(name) => name.clone(),
            Target::Subdomains(parent) => format!("every name below {parent}"),
            Target::Addresses(net) if net.is_single_address() => format!("address {net}"),
            Target::Addresses(net) => format!("addresses {net}"),
        };
        let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
        let noun = if ports.len() == 1 { "port" } else { "ports" };
        format!("{what} on {noun} {}", ports.join(", "))
    }

    /// True when `list` allows everything this entry allows.
    pub fn is_covered_by<'a>(&self, list: impl IntoIterator<Item = &'a NetRule> + Clone) -> bool {
        self.ports.iter().all(|&port| {
            list.clone()
                .into_iter()
                .any(|other| self.covered_on_port_by(other, port))
        })
    }
}

impl fmt::Display for NetRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bracket = matches!(&self.target, Target::Addresses(net) if net.addr.is_ipv6());
        match &self.target {
            Target::AnyName => f.write_str("*")?,
            Target::Name(name) => f.write_str(name)?,
            Target::Subdomains(parent) => write!(f, "*.{parent}")?,
            Target::Addresses(net) if bracket => write!(f, "[{net}]")?,
            Target::Addresses(net) => write!(f, "{net}")?,
        }
        if self.ports == DEFAULT_PORTS {
            return Ok(());
        }
        let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
        write!(f, ":{}", ports.join(","))
    }
}

/// `host:port`, `[v6]:port`, `[v6]`, bare IPv6 (several colons, no port) or `host`.
fn split_port(entry: &str) -> Result<(&str, Option<&str>), RuleError> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(|| RuleError::BadAddress {
            entry: entry.to_string(),
            source: super::addr::NetParseError::NotAnAddress(entry.to_string()),
        })?;
        return match after {
            "" => Ok((inside, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((inside, Some(port))),
                None => Err(RuleError::BadPort {
                    entry: entry.to_string(),
                    port: after.to_string(),
                }),
            },
        };
    }
    if entry.matches(':').count() > 1 {
        return Ok((entry, None));
    }
    Ok(match entry.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (entry, None),
    })
}

fn parse_port(entry: &str, text: &str) -> Result<u16, RuleError> {
    let bad = || RuleError::BadPort {
        entry: entry.to_string(),
        port: text.to_string(),
    };
    let port = text
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(bad)?;
    if port == DNS_PORT {
        return Err(RuleError::DnsPort {
            entry: entry.to_string(),
        });
    }
    Ok(port)
}

fn parse_target(entry: &str, host: &str) -> Result<Target, RuleError> {
    if host == "*" {
        return Ok(Target::AnyName);
    }
    let looks_like_address = host.contains(':')
        || host.contains('/')
        || host.chars().all(|c| c.is_ascii_digit() || c == '.');
    if looks_like_address {
        return IpNet::parse(host)
            .map(Target::Addresses)
            .map_err(|source| RuleError::BadAddress {
                entry: entry.to_string(),
                source,
            });
    }
    let bad_name = |why: &str| RuleError::BadName {
        entry: entry.to_string(),
        why: why.to_string(),
    };
    let (wildcard, name) = match host.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, host),
    };
    let name = normalize_name(name).map_err(|why| bad_name(&why.to_string()))?;
    if wildcard {
        Ok(Target::Subdomains(name))
    } else {
        Ok(Target::Name(name))
    }
}

/// Why a DNS name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsNameError {
    #[error("the name is empty")]
    Empty,
    #[error("write an internationalised name in its xn-- (punycode) form")]
    NotAscii,
    #[error("a name is at most 253 characters")]
    TooLong,
    #[error("each dot-separated label has 1 to 63 characters")]
    LabelLength,
    #[error("`*` is allowed only as a whole first label (\"*.example.org\") or alone (\"*:443\")")]
    MisplacedWildcard,
    #[error("label {0:?} has a character other than letters, digits, - and _")]
    Character(String),
    #[error("the last label is all digits: write an address in full (a.b.c.d)")]
    NumericLastLabel,
}

/// Lowercases a DNS name and checks it: ASCII labels of 1–63 letters, digits, `-` or `_`, at most
/// 253 characters, one optional trailing dot (dropped), and a last label that is not all digits
/// (that would be an address shorthand such as `10.1.2`).
pub fn normalize_name(raw: &str) -> Result<String, DnsNameError> {
    let trimmed = raw.strip_suffix('.').unwrap_or(raw);
    if trimmed.is_empty() {
        return Err(DnsNameError::Empty);
    }
    if !trimmed.is_ascii() {
        return Err(DnsNameError::NotAscii);
    }
    if trimmed.len() > 253 {
        return Err(DnsNameError::TooLong);
    }
    let name = trimmed.to_ascii_lowercase();
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(DnsNameError::LabelLength);
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(if label.contains('*') {
                DnsNameError::MisplacedWildcard
            } else {
                DnsNameError::Character(label.to_string())
            });
        }
    }
    if name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(DnsNameError::NumericLastLabel);
    }
    Ok(name)
}

/// `a.b.example.org` is below `example.org`; `example.org` is not below itself.
fn is_below(name: &str, parent: &str) -> bool {
    name.len() > parent.len() + 1
        && name.ends_with(parent)
        && name.as_bytes()[name.len() - parent.len() - 1] == b'.'
}

/// The TCP ports a list allows, sorted: a TCP connect to any other port is refused at once.
pub fn listening_ports<'a>(rules: impl IntoIterator<Item = &'a NetRule>) -> Vec<u16> {
    let mut ports: Vec<u16> = rules
        .into_iter()
        .flat_map(|rule| rule.ports.iter().copied())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// An allow list as the sandbox plan carries it: each entry with where it was written, for the
/// audit log and `explain`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowList {
    pub entries: Vec<AllowEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowEntry {
    pub rule: NetRule,
    /// `layer file:line`.
    pub origin: String,
}

impl AllowList {
    /// A list of `entries` (each parsed, or the test fails), all from `origin`: for tests.
    #[cfg(test)]
    #[allow(clippy::unwrap_used)] // test helper: an entry that does not parse is a broken test
    pub fn of(entries: &[&str], origin: &str) -> AllowList {
        AllowList {
            entries: entries
                .iter()
                .map(|text| AllowEntry {
                    rule: NetRule::parse(text).unwrap(),
                    origin: origin.into(),
                })
                .collect(),
        }
    }

    pub fn rules(&self) -> impl Iterator<Item = &NetRule> + Clone {
        self.entries.iter().map(|entry| &entry.rule)
    }

    /// Does any entry name `name` (on any port)? Such a name resolves inside the sandbox.
    pub fn resolves(&self, name: &str) -> bool {
        self.rules().any(|rule| rule.matches_name(name))
    }

    pub fn name_entry(&self, name: &str, port: u16) -> Option<&AllowEntry> {
        self.entries
            .iter()
            .find(|entry| entry.rule.allows_name(name, port))
    }

    pub fn address_entry(&self, ip: IpAddr, port: u16) -> Option<&AllowEntry> {
        self.entries
            .iter()
            .find(|entry| entry.rule.allows_address(ip, port))
    }

    /// The TCP ports a TCP connect of the server may go to (any other is refused).
    pub fn ports(&self) -> Vec<u16> {
        listening_ports(self.rules())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let texts: Vec<String> = self.rules().map(NetRule::to_string).collect();
        write!(f, "allow [{}]", texts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_told_apart_from_a_bad_port() {
        let err = NetRule::parse("https://registry.example.org/some/path").unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"https://registry.example.org/some/path\" is a URL; an entry is a host name with an optional port: \"registry.example.org\""
        );
        assert!(err.fix().contains("write only the host"));
    }

    fn rule(text: &str) -> NetRule {
        NetRule::parse(text).unwrap()
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(
            rule("API.GitHub.com."),
            NetRule {
                target: Target::Name("api.github.com".into()),
                ports: vec![80, 443]
            }
        );
        assert_eq!(
            rule("*.githubusercontent.com").target,
            Target::Subdomains("githubusercontent.com".into())
        );
        assert_eq!(rule("example.org:8443").ports, vec![8443]);
        assert_eq!(rule("*:443"), NetRule::any_name(443));
        assert_eq!(rule("10.1.2.3:5432").to_string(), "10.1.2.3:5432");
        assert_eq!(rule("10.0.0.0/8:5432").to_string(), "10.0.0.0/8:5432");
        assert_eq!(rule("[::1]:8080").to_string(), "[::1]:8080");
        assert_eq!(
            rule("[2001:db8::/32]:443").to_string(),
            "[2001:db8::/32]:443"
        );
        assert_eq!(rule("2001:db8::1").to_string(), "[2001:db8::1]");
        assert_eq!(rule("127.0.0.1").ports, vec![80, 443]);
        assert_eq!(rule("api.github.com").to_string(), "api.github.com");
    }

    #[test]
    fn rejects_what_is_not_an_entry() {
        for (bad, fragment) in [
            ("", "empty"),
            ("example.org:0", "not a TCP port"),
            ("example.org:http", "not a TCP port"),
            ("example.org:70000", "not a TCP port"),
            ("example.org:53", "port 53"),
            ("exa mple.org", "character"),
            ("a.*.example.org", "`*`"),
            ("*example.org", "`*`"),
            ("10.1.2", "not an IP address"),
            ("999.1.2.3", "not an IP address"),
            ("10.1.2.3/8", "write 10.0.0.0/8"),
            ("bücher.example", "punycode"),
            ("198.18.4.5:80", "stand-in"),
            ("198.18.0.0/15", "stand-in"),
            ("[::1", "not an IP address"),
            ("[::1]x", "not a TCP port"),
            ("a..b", "label"),
        ] {
            let err = NetRule::parse(bad).unwrap_err().to_string();
            assert!(err.contains(fragment), "{bad:?}: {err}");
        }
    }

    #[test]
    fn matches_names_ports_and_addresses() {
        let exact = rule("api.github.com");
        assert!(exact.allows_name("api.github.com", 443));
        assert!(exact.allows_name("api.github.com", 80));
        assert!(!exact.allows_name("api.github.com", 22));
        assert!(!exact.allows_name("x.api.github.com", 443));
        let below = rule("*.githubusercontent.com");
        assert!(below.allows_name("raw.githubusercontent.com", 443));
        assert!(below.allows_name("a.b.githubusercontent.com", 443));
        assert!(!below.allows_name("githubusercontent.com", 443));
        assert!(!below.allows_name("evilgithubusercontent.com", 443));
        assert!(rule("*:443").allows_name("anything.example", 443));
        assert!(!rule("*:443").allows_address("8.8.8.8".parse().unwrap(), 443));
        let addr = rule("10.1.2.3:5432");
        assert!(addr.allows_address("10.1.2.3".parse().unwrap(), 5432));
        assert!(addr.allows_address("::ffff:10.1.2.3".parse().unwrap(), 5432));
        assert!(!addr.allows_address("10.1.2.4".parse().unwrap(), 5432));
        assert!(!addr.allows_name("10.1.2.3", 5432));
    }

    #[test]
    fn coverage_is_per_port_and_by_containment() {
        let list = [
            rule("*.example.org"),
            rule("api.github.com:443"),
            rule("10.0.0.0/8:5432"),
        ];
        assert!(rule("a.example.org").is_covered_by(&list));
        assert!(rule("*.b.example.org:80").is_covered_by(&list));
        assert!(!rule("example.org").is_covered_by(&list));
        assert!(rule("api.github.com:443").is_covered_by(&list));
        assert!(
            !rule("api.github.com").is_covered_by(&list),
            "port 80 is not listed"
        );
        assert!(rule("10.1.0.0/16:5432").is_covered_by(&list));
        assert!(!rule("10.1.0.0/16:5433").is_covered_by(&list));
        assert!(!rule("*:443").is_covered_by(&list));
        let split = [rule("x.org:80"), rule("x.org:443")];
        assert!(rule("x.org").is_covered_by(&split));
        assert!(!rule("10.1.2.3:443").is_covered_by(&[rule("*:443")]));
    }

    #[test]
    fn listening_ports_are_the_union() {
        let list = [rule("a.org"), rule("b.org:8443"), rule("*:443")];
        assert_eq!(listening_ports(&list), vec![80, 443, 8443]);
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics_and_display_round_trips(text in "\\PC{0,40}") {
            if let Ok(parsed) = NetRule::parse(&text) {
                let again = NetRule::parse(&parsed.to_string()).unwrap();
                proptest::prop_assert_eq!(again, parsed);
            }
        }

        #[test]
        fn a_rule_covers_itself(text in "[a-z*.:0-9/\\[\\]]{1,30}") {
            if let Ok(parsed) = NetRule::parse(&text) {
                proptest::prop_assert!(parsed.is_covered_by(std::slice::from_ref(&parsed)));
            }
        }
    }
}
