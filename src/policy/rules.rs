//! Compiled tool rules and the decision procedure.
//!
//! Entries keep the order of authority (org first, then user, config, project; file order within
//! a file), so the rule reported for a decision is the most authoritative one that matched.
//! Deny beats ask beats allow regardless of layer; no match falls to `tools.default`.
//!
//! Lookup is indexed: entries whose server part is a literal are bucketed by server, and within a
//! server by literal tool name, so a decision touches only the handful of rules that can match
//! instead of scanning all of them (`benches/decide.rs` measures 1,000 rules).

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::pattern::{Glob, GlobToken, ToolPattern};
use super::{Action, Call, Decision, Origin, Sourced};
use crate::paths as path;

/// How one argument value is compared.
#[derive(Debug, Clone)]
pub enum ArgMatcher {
    Prefix(String),
    Glob(Glob),
    Regex(regex::Regex),
}

/// A condition on one named argument of a call.
#[derive(Debug, Clone)]
pub struct Condition {
    pub argument: String,
    pub matcher: ArgMatcher,
    /// The condition holds when the value does NOT match.
    pub negate: bool,
    /// Normalise values as paths before matching.
    pub normalize_path: bool,
}

impl Condition {
    fn value_matches(&self, raw: &str) -> bool {
        let owned;
        let value = if self.normalize_path {
            owned = path::normalize(raw.strip_prefix("file://").unwrap_or(raw));
            owned.as_str()
        } else {
            raw
        };
        let matched = match &self.matcher {
            ArgMatcher::Prefix(prefix) if self.normalize_path => path::is_under(value, prefix),
            ArgMatcher::Prefix(prefix) => value.starts_with(prefix.as_str()),
            ArgMatcher::Glob(glob) => glob.matches(value),
            ArgMatcher::Regex(regex) => regex.is_match(value),
        };
        matched != self.negate
    }

    /// Whether the condition holds for a call's arguments, for a rule with `action`.
    ///
    /// A list argument (say, several paths) must satisfy an `allow` rule with every element, while a
    /// `deny` or `ask` rule fires on any element: a list can never smuggle one forbidden value past
    /// a rule. A missing argument never matches (so it satisfies only a `negate` condition).
    fn holds(&self, arguments: Option<&Value>, action: Action) -> bool {
        let value = arguments.and_then(|args| args.get(&self.argument));
        match value {
            None | Some(Value::Null) => self.negate,
            Some(Value::String(text)) => self.value_matches(text),
            Some(Value::Array(items)) => {
                let mut each = items.iter().map(|item| match item {
                    Value::String(text) => self.value_matches(text),
                    other => self.value_matches(&other.to_string()),
                });
                if action == Action::Allow {
                    each.all(|ok| ok)
                } else {
                    each.any(|ok| ok)
                }
            }
            Some(other) => self.value_matches(&other.to_string()),
        }
    }

    fn describe(&self) -> String {
        let (kind, what) = match &self.matcher {
            ArgMatcher::Prefix(prefix) => ("prefix", prefix.clone()),
            ArgMatcher::Glob(glob) => ("glob", glob.to_string()),
            ArgMatcher::Regex(regex) => ("regex", regex.as_str().to_string()),
        };
        let negation = if self.negate { "not " } else { "" };
        format!("{} {negation}{kind} {what:?}", self.argument)
    }
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub action: Action,
    pub pattern: ToolPattern,
    pub condition: Option<Condition>,
    /// As written, for humans: `tools.deny "mcp:fs__write_*"`.
    pub rule: String,
    pub origin: Origin,
    /// Written by a layer that may only narrow (the project layer, or a layer under an org
    /// lock). Such an `ask` raises a decision to ask but never lowers one: against a `deny`
    /// default it must not turn a denial into a question.
    pub only_narrows: bool,
}

/// A summary of one entry for `airlock check`.
#[derive(Debug, Clone, Serialize)]
pub struct EntrySummary {
    pub action: Action,
    pub rule: String,
    pub origin: String,
}

#[derive(Debug, Clone, Default)]
struct ServerBucket {
    by_tool: HashMap<String, Vec<u32>>,
    any_tool: Vec<u32>,
}

/// Rules whose server part is a wildcard cannot be bucketed by server; they are compiled into one
/// `RegexSet` so a lookup costs one pass over the name instead of one match per rule.
#[derive(Debug, Clone, Default)]
struct WildcardServers {
    positions: Vec<u32>,
    /// `None` when there are none, or the set would exceed the regex size limit (then the
    /// positions are scanned one by one: slower, same answer).
    set: Option<regex::RegexSet>,
}

#[derive(Debug, Clone, Default)]
struct ActionIndex {
    by_server: HashMap<String, ServerBucket>,
    any_server: WildcardServers,
}

/// The anchored regex for a glob, over `server \0 tool`.
fn glob_regex(glob: &Glob) -> String {
    match glob {
        Glob::Literal(text) => regex::escape(text),
        Glob::Wildcard(tokens) => tokens
            .iter()
            .map(|token| match token {
                GlobToken::Text(text) => regex::escape(text),
                GlobToken::AnyOne => "[^\\x00]".to_string(),
                GlobToken::AnyRun => "[^\\x00]*".to_string(),
            })
            .collect(),
    }
}

impl WildcardServers {
    fn build(positions: Vec<u32>, entries: &[ToolEntry]) -> WildcardServers {
        if positions.is_empty() {
            return WildcardServers::default();
        }
        let patterns = positions.iter().map(|&p| {
            let pattern = &entries[p as usize].pattern;
            format!(
                "^{}\\x00{}$",
                glob_regex(&pattern.server),
                glob_regex(&pattern.tool)
            )
        });
        let set = regex::RegexSet::new(patterns).ok();
        WildcardServers { positions, set }
    }

    /// Positions (ascending) whose pattern matches the call.
    fn matching(&self, call: &Call<'_>) -> Vec<u32> {
        match &self.set {
            Some(set) => {
                let haystack = format!("{}\0{}", call.server, call.tool);
                set.matches(&haystack)
                    .iter()
                    .map(|i| self.positions[i])
                    .collect()
            }
            None => self.positions.clone(),
        }
    }
}

/// All tool rules of the merged policy, indexed for lookup.
#[derive(Debug, Clone)]
pub struct ToolRules {
    entries: Vec<ToolEntry>,
    /// Indexed by [`slot`]: allow, ask, deny, and narrowing-only ask.
    index: [ActionIndex; 4],
    default: Sourced<Action>,
}

const ALLOW: usize = 0;
const ASK: usize = 1;
const DENY: usize = 2;
const NARROWING_ASK: usize = 3;

fn slot(entry: &ToolEntry) -> usize {
    match (entry.action, entry.only_narrows) {
        (Action::Allow, _) => ALLOW,
        (Action::Ask, false) => ASK,
        (Action::Ask, true) => NARROWING_ASK,
        (Action::Deny, _) => DENY,
    }
}

impl ToolRules {
    pub fn new(entries: Vec<ToolEntry>, default: Sourced<Action>) -> ToolRules {
        let mut index: [ActionIndex; 4] = Default::default();
        let mut wildcard_positions: [Vec<u32>; 4] = Default::default();
        for (position, entry) in entries.iter().enumerate() {
            let Ok(position) = u32::try_from(position) else {
                break;
            };
            let slot = &mut index[slot(entry)];
            match entry.pattern.server.literal() {
                None => wildcard_positions[self::slot(entry)].push(position),
                Some(server) => {
                    let bucket = slot.by_server.entry(server.to_string()).or_default();
                    match entry.pattern.tool.literal() {
                        Some(tool) => bucket
                            .by_tool
                            .entry(tool.to_string())
                            .or_default()
                            .push(position),
                        None => bucket.any_tool.push(position),
                    }
                }
            }
        }
        for (slot, positions) in index.iter_mut().zip(wildcard_positions) {
            slot.any_server = WildcardServers::build(positions, &entries);
        }
        ToolRules {
            entries,
            index,
            default,
        }
    }

    pub fn default_action(&self) -> &Sourced<Action> {
        &self.default
    }

    pub fn entries(&self) -> &[ToolEntry] {
        &self.entries
    }

    /// The most authoritative entry in index `slot_index` that matches the call, if any.
    fn first_match(&self, slot_index: usize, call: &Call<'_>) -> Option<&ToolEntry> {
        let slot = &self.index[slot_index];
        let bucket = slot.by_server.get(call.server);
        let wildcard_matches = slot.any_server.matching(call);
        let candidate_lists = [
            bucket
                .and_then(|b| b.by_tool.get(call.tool))
                .map(Vec::as_slice),
            bucket.map(|b| b.any_tool.as_slice()),
            Some(wildcard_matches.as_slice()),
        ];
        candidate_lists
            .into_iter()
            .flatten()
            .filter_map(|positions| {
                positions.iter().copied().find(|&position| {
                    let entry = &self.entries[position as usize];
                    entry.pattern.matches(call.server, call.tool)
                        && entry
                            .condition
                            .as_ref()
                            .is_none_or(|condition| condition.holds(call.arguments, entry.action))
                })
            })
            .min()
            .map(|position| &self.entries[position as usize])
    }

    pub fn decide(&self, call: &Call<'_>) -> Decision {
        let from_entry = |entry: &ToolEntry| Decision {
            action: entry.action,
            rule: entry.rule.clone(),
            layer: entry.origin.layer,
            source: location(&entry.origin),
        };
        if let Some(entry) = self.first_match(DENY, call) {
            return from_entry(entry);
        }
        if let Some(entry) = self.first_match(ASK, call) {
            return from_entry(entry);
        }
        let decided = match self.first_match(ALLOW, call) {
            Some(entry) => from_entry(entry),
            None => Decision {
                action: self.default.value,
                rule: "tools.default".to_string(),
                layer: self.default.origin.layer,
                source: location(&self.default.origin),
            },
        };
        match self.first_match(NARROWING_ASK, call) {
            Some(entry) if decided.action < Action::Ask => from_entry(entry),
            _ => decided,
        }
    }

    /// Whether a tool should appear in `tools/list`: everything not denied outright. Argument
    /// rules cannot be judged without arguments, so a tool hidden here is one no call could use.
    pub fn lists_tool(&self, server: &str, tool: &str) -> bool {
        let call = Call {
            server,
            tool,
            arguments: None,
        };
        let unconditional_deny = self.index[DENY]
            .by_server
            .get(server)
            .into_iter()
            .flat_map(|b| b.by_tool.get(tool).into_iter().flatten().chain(&b.any_tool))
            .chain(&self.index[DENY].any_server.positions)
            .any(|&position| {
                let entry = &self.entries[position as usize];
                entry.condition.is_none() && entry.pattern.matches(server, tool)
            });
        if unconditional_deny {
            return false;
        }
        // Default deny with no allow/ask rule that could ever match: hidden too.
        if self.default.value == Action::Deny {
            return self.entries.iter().any(|entry| {
                entry.action != Action::Deny && entry.pattern.matches(call.server, call.tool)
            });
        }
        true
    }

    pub fn summaries(&self) -> Vec<EntrySummary> {
        self.entries
            .iter()
            .map(|entry| EntrySummary {
                action: entry.action,
                rule: entry.rule.clone(),
                origin: entry.origin.to_string(),
            })
            .collect()
    }
}

fn location(origin: &Origin) -> String {
    match origin.line {
        Some(line) => format!("{}:{line}", origin.file.display()),
        None => origin.file.display().to_string(),
    }
}

impl Condition {
    pub fn summary(&self) -> String {
        self.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Layer;
    use serde_json::json;
    use std::path::PathBuf;

    fn origin(layer: Layer) -> Origin {
        Origin {
            layer,
            file: PathBuf::from(format!("{layer}.toml")),
            line: Some(1),
        }
    }

    fn entry(action: Action, pattern: &str, layer: Layer) -> ToolEntry {
        ToolEntry {
            action,
            pattern: ToolPattern::parse(pattern).unwrap(),
            condition: None,
            rule: format!("tools.{action} {pattern:?}"),
            origin: origin(layer),
            only_narrows: false,
        }
    }

    fn default(action: Action) -> Sourced<Action> {
        Sourced {
            value: action,
            origin: origin(Layer::Builtin),
        }
    }

    fn call<'a>(server: &'a str, tool: &'a str, arguments: Option<&'a Value>) -> Call<'a> {
        Call {
            server,
            tool,
            arguments,
        }
    }

    #[test]
    fn deny_beats_ask_beats_allow_whatever_the_layer() {
        let rules = ToolRules::new(
            vec![
                entry(Action::Allow, "mcp:fs__*", Layer::Org),
                entry(Action::Ask, "mcp:fs__write_*", Layer::Org),
                entry(Action::Deny, "mcp:fs__write_file", Layer::Project),
            ],
            default(Action::Allow),
        );
        let decision = rules.decide(&call("fs", "write_file", None));
        assert_eq!(decision.action, Action::Deny);
        assert_eq!(decision.layer, Layer::Project);
        assert_eq!(
            rules.decide(&call("fs", "write_dir", None)).action,
            Action::Ask
        );
        assert_eq!(
            rules.decide(&call("fs", "read", None)).action,
            Action::Allow
        );
    }

    #[test]
    fn no_match_falls_to_the_default_and_says_so() {
        let rules = ToolRules::new(
            vec![entry(Action::Allow, "mcp:fs", Layer::User)],
            default(Action::Deny),
        );
        let decision = rules.decide(&call("git", "log", None));
        assert_eq!(decision.action, Action::Deny);
        assert_eq!(decision.rule, "tools.default");
        assert_eq!(decision.layer, Layer::Builtin);
    }

    #[test]
    fn the_most_authoritative_matching_rule_is_reported() {
        let rules = ToolRules::new(
            vec![
                entry(Action::Deny, "mcp:*__exec", Layer::Org),
                entry(Action::Deny, "mcp:sh__exec", Layer::User),
            ],
            default(Action::Allow),
        );
        assert_eq!(rules.decide(&call("sh", "exec", None)).layer, Layer::Org);
    }

    #[test]
    fn a_narrowing_ask_raises_allow_but_never_lowers_deny() {
        let narrowing = ToolEntry {
            only_narrows: true,
            ..entry(Action::Ask, "mcp:fs", Layer::Project)
        };
        let closed = ToolRules::new(vec![narrowing.clone()], default(Action::Deny));
        assert_eq!(
            closed.decide(&call("fs", "read", None)).action,
            Action::Deny
        );
        let open = ToolRules::new(vec![narrowing], default(Action::Allow));
        let decision = open.decide(&call("fs", "read", None));
        assert_eq!(
            (decision.action, decision.layer),
            (Action::Ask, Layer::Project)
        );
    }

    fn prefix_rule(action: Action, prefix: &str, negate: bool) -> ToolEntry {
        ToolEntry {
            condition: Some(Condition {
                argument: "path".into(),
                matcher: ArgMatcher::Prefix(prefix.into()),
                negate,
                normalize_path: true,
            }),
            ..entry(action, "mcp:fs__write_file", Layer::User)
        }
    }

    #[test]
    fn argument_rules_see_through_dot_dot() {
        let rules = ToolRules::new(
            vec![prefix_rule(Action::Deny, "/tmp/", true)],
            default(Action::Allow),
        );
        let inside = json!({"path": "/tmp/notes.txt"});
        let escape = json!({"path": "/tmp/../etc/passwd"});
        let missing = json!({});
        assert_eq!(
            rules
                .decide(&call("fs", "write_file", Some(&inside)))
                .action,
            Action::Allow
        );
        assert_eq!(
            rules
                .decide(&call("fs", "write_file", Some(&escape)))
                .action,
            Action::Deny
        );
        assert_eq!(
            rules
                .decide(&call("fs", "write_file", Some(&missing)))
                .action,
            Action::Deny
        );
    }

    #[test]
    fn lists_cannot_smuggle_one_bad_value() {
        let deny = ToolRules::new(
            vec![prefix_rule(Action::Deny, "/etc", false)],
            default(Action::Allow),
        );
        let mixed = json!({"path": ["/tmp/a", "/etc/shadow"]});
        assert_eq!(
            deny.decide(&call("fs", "write_file", Some(&mixed))).action,
            Action::Deny
        );
        let allow = ToolRules::new(
            vec![prefix_rule(Action::Allow, "/tmp", false)],
            default(Action::Deny),
        );
        assert_eq!(
            allow.decide(&call("fs", "write_file", Some(&mixed))).action,
            Action::Deny
        );
        let good = json!({"path": ["/tmp/a", "/tmp/b"]});
        assert_eq!(
            allow.decide(&call("fs", "write_file", Some(&good))).action,
            Action::Allow
        );
    }

    #[test]
    fn regex_and_glob_conditions() {
        let regex_rule = ToolEntry {
            condition: Some(Condition {
                argument: "url".into(),
                matcher: ArgMatcher::Regex(regex::Regex::new("^https://internal\\.").unwrap()),
                negate: false,
                normalize_path: false,
            }),
            ..entry(Action::Deny, "mcp:web__fetch", Layer::Org)
        };
        let rules = ToolRules::new(vec![regex_rule], default(Action::Allow));
        let internal = json!({"url": "https://internal.corp/x"});
        let public = json!({"url": "https://example.com"});
        assert_eq!(
            rules.decide(&call("web", "fetch", Some(&internal))).action,
            Action::Deny
        );
        assert_eq!(
            rules.decide(&call("web", "fetch", Some(&public))).action,
            Action::Allow
        );
    }

    #[test]
    fn listing_hides_only_what_no_call_could_use() {
        let rules = ToolRules::new(
            vec![
                entry(Action::Deny, "mcp:fs__delete_*", Layer::User),
                prefix_rule(Action::Deny, "/etc", false),
            ],
            default(Action::Allow),
        );
        assert!(!rules.lists_tool("fs", "delete_file"));
        assert!(rules.lists_tool("fs", "write_file"));
        let closed = ToolRules::new(
            vec![entry(Action::Allow, "mcp:fs__read_*", Layer::User)],
            default(Action::Deny),
        );
        assert!(closed.lists_tool("fs", "read_file"));
        assert!(!closed.lists_tool("fs", "write_file"));
    }
}
