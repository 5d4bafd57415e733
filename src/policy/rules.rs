//! Compiled tool rules and the decision procedure.
//!
//! Entries keep the order of authority (org first, then user, config, project; file order within
//! a file), so the rule reported for a decision is the most authoritative one that matched.
//! Deny beats ask beats allow regardless of layer; no match falls to `tools.default`.
//!
//! Lookup is indexed: entries whose server part is a literal are bucketed by server, and within a
//! server by literal tool name, so a decision touches only the handful of rules that can match
//! instead of scanning all of them (`benches/decide.rs` measures 1,000 rules).

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::keys;
use super::pattern::{Glob, GlobToken, ToolPattern, fold_case};
use super::reading::{PathContext, Reading, read_path};
use super::value_texts;
use super::{Action, Call, Decision, Origin, Sourced};
use crate::paths as path;

/// How one argument value is compared.
#[derive(Debug, Clone)]
pub enum ArgMatcher {
    Prefix(String),
    /// The compiled glob and the text as the policy wrote it (`**` compiles to `*`: refusals,
    /// `explain` and the audit quote what the user wrote, which a search of the log finds).
    Glob(Glob, String),
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

/// How a condition met one call's argument: the keys that read as its argument, each value
/// with its readings, and whether it held. Carried in the [`Decision`] of the rule it decided, so
/// a denial and `airlock explain` can show how the value was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArgumentTrace {
    /// The argument the rule names.
    pub argument: String,
    /// The call's keys that read as it (`Path`, `path `, ...); two or more is ambiguous.
    pub keys: Vec<String>,
    pub values: Vec<ValueTrace>,
    /// Why the condition held or not, when it is not just "matched".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One rule's reading of the call's arguments (see [`ToolRules::argument_traces`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleTrace {
    /// The rule as written, as decisions name it.
    pub rule: String,
    pub trace: ArgumentTrace,
}

/// One value of an argument and the readings it was judged by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueTrace {
    pub raw: String,
    /// Path readings (`prefix`/`glob` rules); empty for a value compared as written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<Reading>,
}

impl Condition {
    /// Whether `value` matches; `None` when it cannot be told (a `~` prefix and no known home).
    fn matcher_matches(&self, value: &str, context: &PathContext) -> Option<bool> {
        Some(match &self.matcher {
            ArgMatcher::Prefix(prefix) if self.normalize_path && prefix.starts_with('~') => {
                if context.user_homes.is_empty() {
                    return None;
                }
                context.user_homes.iter().any(|home| {
                    path::expand_tilde(prefix, Some(home))
                        .is_some_and(|prefix| path::is_under(value, &prefix.to_string_lossy()))
                })
            }
            ArgMatcher::Prefix(prefix) if self.normalize_path => path::is_under(value, prefix),
            ArgMatcher::Prefix(prefix) => value.starts_with(prefix.as_str()),
            ArgMatcher::Glob(glob, _) => glob.matches(value),
            ArgMatcher::Regex(regex) => regex.is_match(value),
        })
    }

    /// Whether the condition holds for one value, for a rule with `action`. Path values are
    /// judged on every reading (see [`super::reading`]): an `allow` needs every reading to hold,
    /// a `deny`/`ask` fires on any; a value with an unresolvable reading never satisfies an
    /// `allow` and always fires a `deny`/`ask`.
    fn value_holds(&self, raw: &str, action: Action, context: &PathContext) -> (bool, ValueTrace) {
        if !self.normalize_path {
            let trace = ValueTrace {
                raw: raw.to_string(),
                readings: Vec::new(),
            };
            let matched = self.matcher_matches(raw, context).unwrap_or(false);
            return (matched != self.negate, trace);
        }
        let mut readings = read_path(raw, context);
        let fail_closed = action != Action::Allow;
        for reading in &mut readings {
            reading.holds = Some(match &reading.resolved {
                Some(resolved) => match self.matcher_matches(resolved, context) {
                    Some(matched) => matched != self.negate,
                    None => fail_closed,
                },
                None => fail_closed,
            });
        }
        let mut each = readings.iter().map(|r| r.holds == Some(true));
        let holds = if readings.iter().any(|r| r.resolved.is_none()) {
            fail_closed
        } else if action == Action::Allow {
            each.all(|held| held)
        } else {
            each.any(|held| held)
        };
        let trace = ValueTrace {
            raw: raw.to_string(),
            readings,
        };
        (holds, trace)
    }

    /// Whether the condition holds for a call's arguments, for a rule with `action`, and how the
    /// argument was read.
    ///
    /// The argument is every key that reads as the rule's (case, whitespace and Unicode forms
    /// aside); two such keys are ambiguous, which fails closed like an unreadable path. A list
    /// argument (say, several paths) must satisfy an `allow` rule with every element, while a
    /// `deny` or `ask` rule fires on any element: a list can never smuggle one forbidden value past
    /// a rule. For a `deny`/`ask` rule each value is also judged as whatever a lenient server may
    /// read it as (`1e0` as `1`, a list sent as a JSON string as its elements: [`value_texts`]);
    /// an `allow` rule judges it as written. A missing argument never matches (so it satisfies
    /// only a `negate` condition).
    pub fn evaluate(
        &self,
        arguments: Option<&Value>,
        action: Action,
        context: &PathContext,
    ) -> (bool, ArgumentTrace) {
        let as_sent = self.evaluate_in(arguments.and_then(Value::as_object), action, context);
        // `arguments` sent as a string holding a JSON object, as function-calling APIs send
        // them: a server that decodes it reads those arguments, so they are a second reading of
        // the call (a `deny`/`ask` fires on either, an `allow` holds only on both).
        let Some(Value::String(sent)) = arguments else {
            return as_sent;
        };
        let deny_like = action != Action::Allow;
        let said = "`arguments` is a string holding a JSON object; judged as that object too, which a server may decode";
        let fails_closed = |as_sent: (bool, ArgumentTrace), why: &str| {
            let (_, mut trace) = as_sent;
            trace.note = Some(why.to_string());
            (deny_like, trace)
        };
        // A string holding a string holding the object (encoded twice) is decoded as often, up
        // to `MAX_DECODES` times.
        let mut text = sent.clone();
        let mut decodes = 0;
        let decoded = loop {
            if decodes < MAX_DECODES
                && let value_texts::Lenient::Read(Value::String(inner)) =
                    value_texts::lenient_json(&text, '"')
            {
                decodes += 1;
                text = inner;
                continue;
            }
            match value_texts::lenient_json(&text, '{') {
                value_texts::Lenient::Read(Value::Object(decoded)) if names_no_key_twice(&text) => {
                    break decoded;
                }
                // A key twice (a decoder may keep either), or past what airlock can read: no
                // one reading to judge, which fails closed.
                value_texts::Lenient::Read(Value::Object(_)) | value_texts::Lenient::Unreadable => {
                    return fails_closed(
                        as_sent,
                        "`arguments` is a string that a server may decode as JSON, and airlock cannot read it as one object (a key twice, a value strict JSON has no spelling for, or nested too deep)",
                    );
                }
                // A string that opens an object no parser here reads as exactly one (a trailing
                // comma, comments, a second value after it, a control character): a lenient
                // decoder may still find arguments in it, so it fails closed too.
                value_texts::Lenient::NotJson if value_texts::opens_with(&text, '{') => {
                    return fails_closed(
                        as_sent,
                        "`arguments` is a string that opens a JSON object airlock cannot read as one (a lenient decoder may)",
                    );
                }
                value_texts::Lenient::Read(_) | value_texts::Lenient::NotJson => return as_sent,
            }
        };
        let (held, mut trace) = self.evaluate_in(Some(&decoded), action, context);
        trace.note = Some(match trace.note.take() {
            Some(note) => format!("{said}: {note}"),
            None => said.to_string(),
        });
        // The trace of the reading that decided: a deny's firing one, an allow's failing one.
        let decided_by_sent = if deny_like { as_sent.0 } else { !as_sent.0 };
        if decided_by_sent {
            return as_sent;
        }
        (held, trace)
    }

    /// [`Condition::evaluate`] on arguments that are an object (`None`: not one, or absent).
    fn evaluate_in(
        &self,
        arguments: Option<&serde_json::Map<String, Value>>,
        action: Action,
        context: &PathContext,
    ) -> (bool, ArgumentTrace) {
        let entries = match arguments {
            Some(map) => keys::entries_read_as(map, &self.argument),
            None => Vec::new(),
        };
        let mut trace = ArgumentTrace {
            argument: self.argument.clone(),
            keys: entries.iter().map(|(key, _)| key.to_string()).collect(),
            values: Vec::new(),
            note: None,
        };
        let value = match entries.as_slice() {
            [] => None,
            [(_, value)] => Some(*value),
            _ => {
                trace.note = Some(format!(
                    "ambiguous: {} keys read as `{}`; the server may use any of them",
                    entries.len(),
                    self.argument
                ));
                return (action != Action::Allow, trace);
            }
        };
        let read = match value {
            None | Some(Value::Null) => {
                trace.note = Some("absent".to_string());
                return (self.negate, trace);
            }
            Some(value) => value_texts::texts(value, self.normalize_path, action != Action::Allow),
        };
        if let Some(why) = read.unreadable {
            trace.note = Some(why.to_string());
            return (action != Action::Allow, trace);
        }
        let texts = read.texts;
        let mut results = Vec::with_capacity(texts.len());
        for text in &texts {
            let (held, value_trace) = self.value_holds(text, action, context);
            results.push(held);
            trace.values.push(value_trace);
        }
        let holds = if action == Action::Allow {
            results.iter().all(|held| *held)
        } else {
            results.iter().any(|held| *held)
        };
        (holds, trace)
    }

    fn holds(&self, arguments: Option<&Value>, action: Action, context: &PathContext) -> bool {
        self.evaluate(arguments, action, context).0
    }

    fn describe(&self) -> String {
        let (kind, what) = match &self.matcher {
            ArgMatcher::Prefix(prefix) => ("prefix", prefix.clone()),
            ArgMatcher::Glob(_, written) => ("glob", written.clone()),
            ArgMatcher::Regex(regex) => ("regex", regex.as_str().to_string()),
        };
        let negation = if self.negate { "not " } else { "" };
        format!("{} {negation}{kind} {what:?}", self.argument)
    }
}

/// How many times a string holding `arguments` as JSON is decoded in turn (a string holding a
/// string holding an object is two).
const MAX_DECODES: usize = 2;

/// Whether `text` (JSON) names no key twice in any object: a decoder that keeps the first of two
/// would read other arguments than serde, which keeps the last.
fn names_no_key_twice(text: &str) -> bool {
    crate::mcp::strict::parse_noting_duplicate_keys(value_texts::trimmed(text).as_bytes(), false)
        .is_ok_and(|parsed| !parsed.duplicate_keys)
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
    /// The pattern as the file wrote it and where: for `check`, `explain` and load errors.
    /// `None` for entries made in code.
    pub written: Option<WrittenPattern>,
    /// How the pattern was re-read against the known server names, when it was (the
    /// one-underscore spelling `mcp:fs_write_file` read as `mcp:fs__write_file`).
    pub reading: Option<String>,
    /// `[identities.NAME]`: the entry applies only to calls made by an identity matching this.
    pub who: Option<Glob>,
}

impl ToolEntry {
    /// Whether the entry is about `identity`'s calls (entries without `who` are about everyone's).
    fn concerns(&self, identity: Option<&str>) -> bool {
        match &self.who {
            None => true,
            Some(glob) => identity.is_some_and(|name| glob.matches(name)),
        }
    }
}

/// A tool pattern as written in a policy or config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenPattern {
    pub text: String,
    pub at: crate::diagnostic::LineCol,
    /// Written as `mcp:<server>...` (a global list), not as a tool glob inside one server's block.
    pub global: bool,
}

/// A summary of one entry for `airlock check`.
#[derive(Debug, Clone, Serialize)]
pub struct EntrySummary {
    pub action: Action,
    pub rule: String,
    pub origin: String,
    /// What the pattern covers, as read: `tool "write_file" of server "fs"`.
    pub reads_as: String,
    /// Why it reads differently from how it is written, if it does.
    pub reading: Option<String>,
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
    /// `patterns` by entry position: the entries' own, or lowercased in a slot that folds case.
    fn build(positions: Vec<u32>, patterns: &[ToolPattern]) -> WildcardServers {
        if positions.is_empty() {
            return WildcardServers::default();
        }
        let patterns = positions.iter().map(|&p| {
            let pattern = &patterns[p as usize];
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
    fn matching(&self, server: &str, tool: &str) -> Vec<u32> {
        match &self.set {
            Some(set) => {
                let haystack = format!("{server}\0{tool}");
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
    /// Each entry's pattern as it is matched: a deny's lowercased ([`folds_case`]).
    patterns: Vec<ToolPattern>,
    /// Indexed by [`slot`]: allow, ask, deny, and narrowing-only ask.
    index: [ActionIndex; 4],
    default: Sourced<Action>,
}

const ALLOW: usize = 0;
const ASK: usize = 1;
const DENY: usize = 2;
const NARROWING_ASK: usize = 3;

/// Whether the rules of `slot` match tool names regardless of case. A deny does: `*exec*` is
/// meant for `runExec` too, and a server picks its tools' names. Matching more can only refuse
/// more. An allow or ask matches exactly: an ask that matched more could turn a default deny
/// into a question. Server names are the config's own, compared as written.
fn folds_case(slot: usize) -> bool {
    slot == DENY
}

/// A call's tool name as the rules of `slot` compare it.
fn tool_for(slot: usize, tool: &str) -> Cow<'_, str> {
    // Most tool names are lowercase ASCII already: no copy on a call's way.
    if !folds_case(slot) || (tool.is_ascii() && !tool.bytes().any(|b| b.is_ascii_uppercase())) {
        return Cow::Borrowed(tool);
    }
    Cow::Owned(fold_case(tool))
}

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
        let patterns: Vec<ToolPattern> = entries
            .iter()
            .map(|entry| match folds_case(slot(entry)) {
                true => entry.pattern.lowercased(),
                false => entry.pattern.clone(),
            })
            .collect();
        for (position, (entry, pattern)) in entries.iter().zip(&patterns).enumerate() {
            let Ok(position) = u32::try_from(position) else {
                break;
            };
            let slot = &mut index[slot(entry)];
            match pattern.server.literal() {
                None => wildcard_positions[self::slot(entry)].push(position),
                Some(server) => {
                    let bucket = slot.by_server.entry(server.to_string()).or_default();
                    match pattern.tool.literal() {
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
            slot.any_server = WildcardServers::build(positions, &patterns);
        }
        ToolRules {
            entries,
            patterns,
            index,
            default,
        }
    }

    /// Whether the entry at `position` covers the call's tool, as its slot compares names.
    fn covers(&self, position: usize, server: &str, tool: &str) -> bool {
        let tool = tool_for(slot(&self.entries[position]), tool);
        self.patterns[position].matches(server, &tool)
    }

    pub fn default_action(&self) -> &Sourced<Action> {
        &self.default
    }

    pub fn entries(&self) -> &[ToolEntry] {
        &self.entries
    }

    /// The most authoritative entry in index `slot_index` that matches the call, if any.
    fn first_match(
        &self,
        slot_index: usize,
        call: &Call<'_>,
        context: &PathContext,
    ) -> Option<&ToolEntry> {
        let slot = &self.index[slot_index];
        let server = call.server;
        let tool = tool_for(slot_index, call.tool);
        let bucket = slot.by_server.get(server);
        let wildcard_matches = slot.any_server.matching(server, &tool);
        let candidate_lists = [
            bucket
                .and_then(|b| b.by_tool.get(tool.as_ref()))
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
                    self.patterns[position as usize].matches(server, &tool)
                        && entry.concerns(call.identity)
                        && entry.condition.as_ref().is_none_or(|condition| {
                            condition.holds(call.arguments, entry.action, context)
                        })
                })
            })
            .min()
            .map(|position| &self.entries[position as usize])
    }

    /// The decision for a call with no knowledge of the server's HOME or working directory
    /// (relative and `~` paths fail closed).
    pub fn decide(&self, call: &Call<'_>) -> Decision {
        self.decide_in(call, &PathContext::default())
    }

    /// The decision for a call, reading path arguments in `context` (the server's HOME and
    /// working directory).
    pub fn decide_in(&self, call: &Call<'_>, context: &PathContext) -> Decision {
        let from_entry = |entry: &ToolEntry| Decision {
            action: entry.action,
            rule: entry.rule.clone(),
            layer: entry.origin.layer,
            source: location(&entry.origin),
            argument: entry
                .condition
                .as_ref()
                .map(|condition| condition.evaluate(call.arguments, entry.action, context).1),
        };
        if let Some(entry) = self.first_match(DENY, call, context) {
            return from_entry(entry);
        }
        if let Some(entry) = self.first_match(ASK, call, context) {
            return from_entry(entry);
        }
        let decided = match self.first_match(ALLOW, call, context) {
            Some(entry) => from_entry(entry),
            None => Decision {
                action: self.default.value,
                rule: "tools.default".to_string(),
                layer: self.default.origin.layer,
                source: location(&self.default.origin),
                argument: None,
            },
        };
        match self.first_match(NARROWING_ASK, call, context) {
            Some(entry) if decided.action < Action::Ask => from_entry(entry),
            _ => decided,
        }
    }

    /// How each rule with an argument condition on this tool read the call's arguments, for
    /// `airlock explain`, in order of authority. Every such rule is listed, also several on one
    /// argument: each reads the value for its own action (`deny` fires on any reading, `allow`
    /// needs every one), so one rule's reading never stands in for another's.
    pub fn argument_traces(&self, call: &Call<'_>, context: &PathContext) -> Vec<RuleTrace> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(position, _)| self.covers(*position, call.server, call.tool))
            .map(|(_, entry)| entry)
            .filter(|entry| entry.concerns(call.identity))
            .filter_map(|entry| {
                let condition = entry.condition.as_ref()?;
                Some(RuleTrace {
                    rule: entry.rule.clone(),
                    trace: condition.evaluate(call.arguments, entry.action, context).1,
                })
            })
            .collect()
    }

    /// Whether a tool should appear in `tools/list`: everything not denied outright. Argument
    /// rules cannot be judged without arguments, so a tool hidden here is one no call could use.
    pub fn lists_tool(&self, server: &str, tool: &str) -> bool {
        let call = Call {
            server,
            tool,
            arguments: None,
            identity: None,
        };
        let folded_tool = tool_for(DENY, tool);
        let unconditional_deny = self.index[DENY]
            .by_server
            .get(server)
            .into_iter()
            .flat_map(|b| {
                let by_tool = b.by_tool.get(folded_tool.as_ref());
                by_tool.into_iter().flatten().chain(&b.any_tool)
            })
            .chain(&self.index[DENY].any_server.positions)
            .any(|&position| {
                let entry = &self.entries[position as usize];
                // A listing is shared by every client: an identity's deny is enforced when that
                // identity calls; it does not hide the tool from the others.
                entry.condition.is_none()
                    && entry.who.is_none()
                    && self.patterns[position as usize].matches(server, &folded_tool)
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
                reads_as: super::names::describe(&entry.pattern),
                reading: entry.reading.clone(),
            })
            .collect()
    }

    /// The entries and the default, to rebuild the rules after re-reading patterns.
    pub fn into_parts(self) -> (Vec<ToolEntry>, Sourced<Action>) {
        (self.entries, self.default)
    }
}

/// `file:line` of a rule or setting, as decisions name it.
pub fn location(origin: &Origin) -> String {
    // Built without the formatting machinery: a decision record names its rule on every call.
    let mut text = origin.file.to_string_lossy().into_owned();
    if let Some(line) = origin.line {
        text.push(':');
        text.push_str(itoa::Buffer::new().format(line));
    }
    text
}

impl Condition {
    pub fn summary(&self) -> String {
        self.describe()
    }
}
