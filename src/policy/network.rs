//! `[sandbox] network`: its three forms and how layers combine them.
//!
//! - `"none"` (the default): no network at all;
//! - `{ allow = ["api.github.com", "*.githubusercontent.com", "example.org:8443", "10.1.2.3:5432"] }`:
//!   those names and addresses only, through airlock's resolver and connect hand-over (see `crate::net`);
//! - `[443, 80]`: any name on these ports, the same mechanism (`"*:443"`, `"*:80"`);
//! - `"host"`: the host's network, unconfined (the explicit opt-out).
//!
//! Layering: `"none"` and `"host"` replace what came before. An allow list from the org, user or
//! config layer adds its entries to an allow list already in force (like the other granting
//! lists), and replaces `"none"` or `"host"`. The project layer may only narrow, so its allow
//! list replaces the one in force (every entry must be covered by it). Widening (an entry not
//! covered by what is in force, or `"host"`) is refused where the layer may not widen.

use std::fmt;

use super::{Layer, Sourced};
use crate::net::{AllowEntry, AllowList, NetRule};

/// Network reach of a sandboxed server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    None,
    /// The names and addresses on the list, through airlock's resolver and connect hand-over.
    Allow(Vec<Sourced<NetRule>>),
    Host,
}

/// A `network` value that is not one of the three forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkError {
    pub message: String,
    pub fix: String,
}

impl NetworkError {
    fn shape() -> NetworkError {
        NetworkError {
            message: "`network` must be \"none\", \"host\", { allow = [...] } or a list of TCP ports"
                .into(),
            fix: "write network = \"none\", network = { allow = [\"api.github.com\"] }, network = [443] or network = \"host\"".into(),
        }
    }
}

/// The value as written, before origins are attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declared {
    None,
    Allow(Vec<NetRule>),
    Host,
}

/// Parses a `network` value.
pub fn parse(value: &toml::Value) -> Result<Declared, NetworkError> {
    match value {
        toml::Value::String(mode) if mode == "none" => Ok(Declared::None),
        toml::Value::String(mode) if mode == "host" => Ok(Declared::Host),
        toml::Value::Array(items) => {
            let mut rules: Vec<NetRule> = Vec::new();
            for item in items {
                let port = item
                    .as_integer()
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|&p| p > 0)
                    .ok_or_else(NetworkError::shape)?;
                // Port 53 was how DNS was opened before airlock answered lookups itself.
                let rule = NetRule::any_name(port);
                if port != crate::net::allow::DNS_PORT && !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
            rules.sort_by_key(|rule| rule.ports[0]);
            Ok(Declared::Allow(rules))
        }
        toml::Value::Table(table) => {
            if let Some(key) = table.keys().find(|key| *key != "allow") {
                return Err(NetworkError {
                    message: format!("unknown key `{key}` in `network`"),
                    fix: "the table form has one key: network = { allow = [\"api.github.com\"] }"
                        .into(),
                });
            }
            let Some(toml::Value::Array(items)) = table.get("allow") else {
                return Err(NetworkError::shape());
            };
            let mut rules: Vec<NetRule> = Vec::new();
            // Every bad entry is named at once, not only the first.
            let mut bad: Vec<NetworkError> = Vec::new();
            for item in items {
                let Some(text) = item.as_str() else {
                    bad.push(NetworkError {
                        message: format!("network allow entry {item} is not a string"),
                        fix: "quote each entry: allow = [\"api.github.com\", \"10.1.2.3:5432\"]"
                            .into(),
                    });
                    continue;
                };
                match NetRule::parse(text) {
                    Ok(rule) if !rules.contains(&rule) => rules.push(rule),
                    Ok(_) => {}
                    Err(err) => bad.push(NetworkError {
                        message: format!("network allow entry {err}"),
                        fix: err.fix().into(),
                    }),
                }
            }
            if !bad.is_empty() {
                let mut fixes: Vec<String> = Vec::new();
                for error in &bad {
                    if !fixes.contains(&error.fix) {
                        fixes.push(error.fix.clone());
                    }
                }
                let messages: Vec<String> = bad.into_iter().map(|e| e.message).collect();
                return Err(NetworkError {
                    message: messages.join("; "),
                    fix: fixes.join("; "),
                });
            }
            Ok(Declared::Allow(rules))
        }
        _ => Err(NetworkError::shape()),
    }
}

impl Declared {
    pub fn with_origin(self, origin: &super::Origin) -> Network {
        match self {
            Declared::None => Network::None,
            Declared::Host => Network::Host,
            Declared::Allow(rules) => Network::Allow(
                rules
                    .into_iter()
                    .map(|value| Sourced {
                        value,
                        origin: origin.clone(),
                    })
                    .collect(),
            ),
        }
    }
}

impl Network {
    /// True when `self` lets the server reach something `other` does not.
    pub fn is_wider_than(&self, other: &Network) -> bool {
        match (self, other) {
            (_, Network::Host) | (Network::None, _) => false,
            (Network::Host, _) => true,
            (Network::Allow(mine), Network::None) => !mine.is_empty(),
            (Network::Allow(mine), Network::Allow(theirs)) => {
                let theirs = theirs.iter().map(|rule| &rule.value);
                mine.iter()
                    .any(|rule| !rule.value.is_covered_by(theirs.clone()))
            }
        }
    }

    /// The entries of `self` not covered by `other` (what makes it wider), as text.
    pub fn widening_entries(&self, other: &Network) -> Vec<String> {
        match (self, other) {
            (Network::Allow(mine), Network::Allow(theirs)) => {
                let theirs = theirs.iter().map(|rule| &rule.value);
                mine.iter()
                    .filter(|rule| !rule.value.is_covered_by(theirs.clone()))
                    .map(|rule| format!("{:?}", rule.value.to_string()))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// `current` combined with a layer's `proposed` value (see the module documentation). The
    /// widening check is the caller's.
    pub fn merged(current: &Network, proposed: Network, layer: Layer) -> Network {
        match (current, proposed) {
            (Network::Allow(have), Network::Allow(new)) if layer != Layer::Project => {
                let mut merged = have.clone();
                for rule in new {
                    // An entry the list already covers adds nothing (and would only repeat).
                    let known = merged.iter().map(|known| &known.value);
                    if !rule.value.is_covered_by(known) {
                        merged.push(rule);
                    }
                }
                Network::Allow(merged)
            }
            (_, proposed) => proposed,
        }
    }

    /// The allow list the sandbox plan carries, each entry with its origin.
    pub fn allow_list(&self) -> Option<AllowList> {
        match self {
            Network::Allow(rules) => Some(AllowList {
                entries: rules
                    .iter()
                    .map(|rule| AllowEntry {
                        rule: rule.value.clone(),
                        origin: rule.origin.to_string(),
                    })
                    .collect(),
            }),
            _ => None,
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Network::None => f.write_str("none"),
            Network::Host => f.write_str("host"),
            Network::Allow(rules) => {
                let texts: Vec<String> = rules.iter().map(|r| r.value.to_string()).collect();
                write!(f, "allow [{}]", texts.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Origin;

    fn origin(layer: Layer) -> Origin {
        Origin {
            layer,
            file: "p.toml".into(),
            line: Some(1),
        }
    }

    fn value(text: &str) -> toml::Value {
        toml::from_str::<toml::Table>(&format!("v = {text}")).unwrap()["v"].clone()
    }

    fn network(text: &str, layer: Layer) -> Network {
        parse(&value(text)).unwrap().with_origin(&origin(layer))
    }

    #[test]
    fn every_bad_allow_entry_is_named_at_once() {
        let err = parse(&value(
            "{ allow = [\"b.com:0\", \"ok.com\", \"d.com:99999\", 7] }",
        ))
        .unwrap_err();
        for named in ["b.com:0", "d.com:99999", "7 is not a string"] {
            assert!(err.message.contains(named), "{named}: {}", err.message);
        }
        assert!(!err.message.contains("ok.com"), "{}", err.message);
    }

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(parse(&value("\"none\"")), Ok(Declared::None));
        assert_eq!(parse(&value("\"host\"")), Ok(Declared::Host));
        assert_eq!(
            parse(&value("[80, 443, 53, 443]")),
            Ok(Declared::Allow(vec![
                NetRule::any_name(80),
                NetRule::any_name(443)
            ]))
        );
        let Declared::Allow(rules) = parse(&value(
            "{ allow = [\"api.github.com\", \"example.org:8443\"] }",
        ))
        .unwrap() else {
            panic!("not an allow list")
        };
        assert_eq!(rules.len(), 2);
        for bad in [
            "\"wifi\"",
            "[70000]",
            "[0]",
            "{ allow = [1] }",
            "{ deny = [] }",
            "{ allow = [\"x.org:53\"] }",
            "{ allow = \"x.org\" }",
            "true",
        ] {
            assert!(parse(&value(bad)).is_err(), "{bad}");
        }
        let err = parse(&value("{ allow = [\"a b\"] }")).unwrap_err();
        assert!(err.message.contains("\"a b\""), "{}", err.message);
    }

    #[test]
    fn widening_is_about_reach() {
        let user = |text: &str| network(text, Layer::User);
        assert!(Network::Host.is_wider_than(&Network::None));
        assert!(user("[443]").is_wider_than(&Network::None));
        assert!(!user("[]").is_wider_than(&Network::None));
        assert!(user("[443, 80]").is_wider_than(&user("[443]")));
        assert!(!user("[443]").is_wider_than(&user("[443, 80]")));
        assert!(!Network::None.is_wider_than(&user("[443]")));
        assert!(!user("[1]").is_wider_than(&Network::Host));
        let gh = user("{ allow = [\"api.github.com\"] }");
        assert!(
            !gh.is_wider_than(&user("[443, 80]")),
            "any name covers a name"
        );
        assert!(user("[443]").is_wider_than(&gh));
        assert!(
            !user("{ allow = [\"a.example.org:443\"] }")
                .is_wider_than(&user("{ allow = [\"*.example.org\"] }"))
        );
        assert!(user("{ allow = [\"10.0.0.1:443\"] }").is_wider_than(&user("[443]")));
        assert_eq!(
            user("{ allow = [\"api.github.com\", \"b.org\"] }").widening_entries(&gh),
            vec!["\"b.org\"".to_string()]
        );
    }

    #[test]
    fn allow_lists_add_up_except_in_the_project_layer() {
        let user = network("{ allow = [\"a.org\"] }", Layer::User);
        let config = network("{ allow = [\"b.org\", \"a.org\"] }", Layer::Config);
        let merged = Network::merged(&user, config, Layer::Config);
        assert_eq!(merged.to_string(), "allow [a.org, b.org]");
        let project = network("{ allow = [\"b.org\"] }", Layer::Project);
        assert_eq!(
            Network::merged(&merged, project, Layer::Project).to_string(),
            "allow [b.org]"
        );
        assert_eq!(
            Network::merged(&Network::Host, network("[443]", Layer::User), Layer::User).to_string(),
            "allow [*:443]"
        );
        assert_eq!(
            Network::merged(&merged, Network::None, Layer::User),
            Network::None
        );
    }
}
