//! Calls only to what the server listed.
//!
//! The policy decides on the spelling of a tool name the host sends, but a lenient server acts on
//! its own reading of it (lowercased, trimmed, Unicode-folded): `WRITE_FILE` would pass a rule on
//! `write_file` and still run it. So the gate forwards a `tools/call` only for a name the server
//! itself listed, byte for byte; any other name is answered here as an unknown tool. A host that
//! calls before any listing has passed (or after the server said its list changed) has its call
//! held while airlock lists the tools itself, then decided against the fresh listing.
//!
//! The names are the union of every listing read since the server started: a name listed once
//! is one the server itself spelled, so forwarding it never reaches a tool by another spelling
//! (a tool the server dropped since answers for itself). Up to 10,000 names: past that, names
//! only older listings held are let go first, and a listing's own names past it are refused,
//! saying so (a server listing new names after every `list_changed` cannot grow them without
//! end).

use crate::fast_map::FastMap;
use std::time::Instant;

use serde_json::{Value, json};

use super::schema::{SchemaCheck, ToolSchemas};
use super::track::{Held, Pending, Tracked};
use super::{Effects, Gate};
use crate::audit::{EventKind, Outcome};
use crate::mcp::Field;
use crate::mcp::message::{code, error_response, id_key, task_augmented};
use crate::policy::Action;

/// The rule named on the decision of a call to a name the server did not list.
pub const UNLISTED_RULE: &str = "airlock: not a listed tool";
/// The rule named on the decision of a call that waited for a listing that never came.
const WAITED_RULE: &str = "airlock: waiting for the server's tool listing";

/// How a called name stands against the server's listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// The server listed exactly this name.
    Yes,
    /// A current listing exists and does not hold this name.
    No,
    /// No complete listing since the start or the last `list_changed`: list first.
    NotYet,
    /// A current listing exists, holds more names than the gate remembers
    /// ([`MAX_REMEMBERED_NAMES`]), and this is not one it remembers.
    PastBound,
}

/// Tool names (with their schemas) the gate remembers at most.
const MAX_REMEMBERED_NAMES: usize = 10_000;

/// What the gate knows of one server's tool listings.
#[derive(Default)]
pub struct ListedTools {
    /// Each name with the listing (its number) that last listed it.
    names: FastMap<String, u64>,
    /// The number of the listing being read (or read last).
    listing: u64,
    schemas: ToolSchemas,
    /// Every page of a listing has been read since the start or the last `list_changed`.
    current: bool,
    /// The next page read starts a new listing.
    between_listings: bool,
    /// The listing read last (or being read) held names past [`MAX_REMEMBERED_NAMES`].
    past_bound: bool,
}

impl ListedTools {
    /// Learns one page of a `tools/list` result (as the server sent it, before any filter).
    /// Returns true when it was the last page: the listing is current.
    pub fn learn_page(&mut self, result: &Value) -> bool {
        let tools = result
            .field("tools")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // Names are remembered across listings (a name listed once stays callable), up to a
        // bound: a server listing new names after every `list_changed` would otherwise grow
        // them, and their compiled schemas, without end. At the bound, names only older
        // listings held are let go first; names of this listing past the bound are not
        // remembered (a call to one is refused saying so).
        if std::mem::take(&mut self.between_listings) {
            self.past_bound = false;
            self.listing += 1;
        }
        let listing = self.listing;
        let mut learned = Vec::new();
        for tool in tools {
            let Some(name) = tool.field("name").and_then(Value::as_str) else {
                continue;
            };
            if self.names.len() >= MAX_REMEMBERED_NAMES && !self.names.contains_key(name) {
                self.forget_older_listings();
            }
            let room = self.names.len() < MAX_REMEMBERED_NAMES;
            match self.names.get_mut(name) {
                Some(seen) => *seen = listing,
                None if room => {
                    self.names.insert(name.to_string(), listing);
                }
                None => {
                    self.past_bound = true;
                    continue;
                }
            }
            learned.push(tool.clone());
        }
        self.schemas.learn(&learned);
        let last = crate::mcp::next_cursor(result).is_none();
        if last {
            self.current = true;
            self.between_listings = true;
        }
        last
    }

    /// Lets go of the names (and schemas) that only listings before this one held.
    fn forget_older_listings(&mut self) {
        let listing = self.listing;
        self.names.retain(|_, seen| *seen == listing);
        let names = &self.names;
        self.schemas.retain(|name| names.contains_key(name));
    }

    /// The last listing held more names than the gate remembers.
    pub fn past_bound(&self) -> bool {
        self.past_bound
    }

    /// The server said its tool list changed: the next unknown name is listed for first.
    pub fn changed(&mut self) {
        self.current = false;
        self.between_listings = true;
    }

    pub fn check(&self, name: &str) -> Listed {
        if self.names.contains_key(name) {
            Listed::Yes
        } else if self.current && self.past_bound {
            Listed::PastBound
        } else if self.current {
            Listed::No
        } else {
            Listed::NotYet
        }
    }

    /// The call's arguments against the tool's listed `inputSchema`.
    pub fn check_arguments(&self, name: &str, arguments: Option<&Value>) -> SchemaCheck {
        self.schemas.check(name, arguments)
    }
}

/// Why a call waiting for a listing ends without reaching the server.
pub(super) enum GiveUp {
    Cancelled,
    TimedOut,
    /// The listing failed or the server is gone: the reason, told to the host.
    Failed(String),
    /// The call cannot be listed for in its session as it stands (no handshake yet, a version
    /// the server refused): this JSON-RPC error (`code`, `message`, `data`) is its answer, as
    /// the server would have answered the call itself.
    Refused(Value),
}

impl Gate {
    /// Learns one page of the server's tool listing (as it sent it). On the last page, the
    /// calls that waited for it go back to the core, to be decided against it.
    pub(super) fn learn_tools(&mut self, result: &Value, fx: &mut Effects) {
        let was_past = self.listed.past_bound();
        let last = self.listed.learn_page(result);
        if !was_past && self.listed.past_bound() {
            tracing::warn!(
                server = %self.config.server,
                "the server lists more than {MAX_REMEMBERED_NAMES} tools: calls are checked against the first {MAX_REMEMBERED_NAMES}, and calls to the others are refused"
            );
        }
        if last {
            fx.retry
                .extend(self.awaiting.take_all().into_iter().map(|held| held.call));
        }
    }

    /// Calls wait for a listing: a server in back-off is worth starting again for them.
    pub fn awaits_listing(&self) -> bool {
        !self.awaiting.is_empty()
    }

    /// The server said its tool list changed (`notifications/tools/list_changed`): a name it
    /// did not list before may be listed now, so the next such call waits for a listing.
    pub fn tools_changed(&mut self) {
        self.listed.changed();
    }

    /// airlock's own listing of the server's tools failed: the calls waiting for it are
    /// answered with the reason.
    pub fn tools_listing_failed(&mut self, why: &str, now: Instant, fx: &mut Effects) {
        let why = format!(
            "airlock could not list the tools of server \"{}\": {why}",
            self.config.server
        );
        for held in self.awaiting.take_all() {
            self.give_up_waiting(held, GiveUp::Failed(why.clone()), now, fx);
        }
    }

    /// airlock's own listing cannot be made or was refused for the session's protocol (see
    /// [`GiveUp::Refused`]): the calls waiting for it that `theirs` says the refusal is about
    /// (the call as the host sent it) get `error` as their answer; the others, that the listing
    /// failed (another request's error is not theirs to see).
    pub fn tools_listing_refused(
        &mut self,
        error: &Value,
        theirs: impl Fn(&Value) -> bool,
        now: Instant,
        fx: &mut Effects,
    ) {
        let text = error
            .field("message")
            .and_then(Value::as_str)
            .unwrap_or("refused");
        let failed = format!(
            "airlock could not list the tools of server \"{}\": tools/list failed: {text}",
            self.config.server
        );
        for held in self.awaiting.take_all() {
            let why = if theirs(&held.call) {
                GiveUp::Refused(error.clone())
            } else {
                GiveUp::Failed(failed.clone())
            };
            self.give_up_waiting(held, why, now, fx);
        }
    }

    /// Holds a call of a name no current listing holds, and asks the core for a listing.
    pub(super) fn await_listing(&mut self, held: Held, fx: &mut Effects) {
        let tool = self.redactor.loggable_name(&held.tool);
        tracing::debug!(server = %self.config.server, tool = %tool, "call waits for a tool listing");
        self.awaiting.push(held);
        fx.list_tools = true;
    }

    /// A call of a name the server did not list: answered here as an unknown tool, audited with
    /// the name as sent. The answer is a tool result with `isError: true`, as the official SDKs'
    /// servers answer an unknown name (and as airlock answers every refusal), so a model reads
    /// it and a host goes on.
    pub(super) fn refuse_unlisted(
        &mut self,
        tool: &str,
        id: Value,
        task: bool,
        arguments: Option<&Value>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let mut event = self.event(EventKind::Decision);
        event.identity = self.caller(&id).map(String::from);
        event.request_id = Some(id.clone());
        event.tool = Some(tool.to_string());
        event.args = arguments.map(|args| self.redactor.redact(args));
        event.decision = Some(Action::Deny.to_string());
        event.rule = Some(UNLISTED_RULE.into());
        let server = &self.config.server;
        let (reason, text) = if self.listed.past_bound() {
            (
                format!(
                    "the server lists more than {MAX_REMEMBERED_NAMES} tools, and this is not one of those airlock remembers"
                ),
                format!(
                    "Unknown tool: {tool} (server \"{server}\" lists more than {MAX_REMEMBERED_NAMES} tools; airlock checks calls against the first {MAX_REMEMBERED_NAMES} it listed, and this is not one of them)"
                ),
            )
        } else {
            (
                "the server listed no tool of this exact name".to_string(),
                format!(
                    "Unknown tool: {tool} (server \"{server}\" lists no tool of this exact name)"
                ),
            )
        };
        event.reason = Some(reason);
        fx.audit.push(event);
        self.refuse(tool, id, task, text, now, now, fx);
    }

    /// Takes a waiting call out by its host id key.
    pub(super) fn take_awaiting(&mut self, key: &str) -> Option<Held> {
        self.awaiting.take(key)
    }

    /// Waiting calls whose `tool_timeout` has passed.
    pub(super) fn expired_awaiting(&mut self, now: Instant) -> Vec<Held> {
        self.awaiting.take_expired(now)
    }

    pub(super) fn awaiting_deadline(&self) -> Option<Instant> {
        self.awaiting.deadline()
    }

    /// A waiting call ends without reaching the server: one decision and one outcome, as every
    /// call has, and the host's answer (none for a cancelled call).
    pub(super) fn give_up_waiting(
        &mut self,
        held: Held,
        why: GiveUp,
        now: Instant,
        fx: &mut Effects,
    ) {
        let mut event = self.event(EventKind::Decision);
        event.identity = self.caller(&held.id).map(String::from);
        event.request_id = Some(held.id.clone());
        event.tool = Some(held.tool.clone());
        event.decision = Some(Action::Deny.to_string());
        event.rule = Some(WAITED_RULE.into());
        fx.audit.push(event);
        let elapsed = now.saturating_duration_since(held.started);
        match why {
            GiveUp::Cancelled => {
                let outcome =
                    self.outcome_event(&held.tool, &held.id, Outcome::Cancelled, elapsed, None);
                fx.audit.push(outcome);
            }
            GiveUp::TimedOut => {
                let reason = "airlock: the server's tools were not listed in time".to_string();
                let outcome = self.outcome_event(
                    &held.tool,
                    &held.id,
                    Outcome::Timeout,
                    elapsed,
                    Some(reason.clone()),
                );
                fx.audit.push(outcome);
                self.answered_here.insert(id_key(&held.id));
                let answer = error_response(held.id, code::REQUEST_TIMEOUT, &reason, None);
                fx.to_host.push(answer);
            }
            GiveUp::Refused(error) => {
                let reason = error
                    .field("message")
                    .and_then(Value::as_str)
                    .unwrap_or("refused")
                    .to_string();
                let outcome =
                    self.outcome_event(&held.tool, &held.id, Outcome::Error, elapsed, Some(reason));
                fx.audit.push(outcome);
                self.answered_here.insert(id_key(&held.id));
                fx.to_host
                    .push(json!({"jsonrpc": "2.0", "id": held.id, "error": error}));
            }
            GiveUp::Failed(reason) => {
                self.answered_here.insert(id_key(&held.id));
                let what = Tracked::ToolsCall {
                    task: task_augmented(&held.call),
                    tool: held.tool,
                };
                let pending = Pending::new(held.id, what, held.started, None);
                self.unanswered(pending, &reason, now, fx);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_name_listed_byte_for_byte_is_known() {
        let mut listed = ListedTools::default();
        assert_eq!(listed.check("write_file"), Listed::NotYet);
        assert!(listed.learn_page(&json!({"tools": [{"name": "write_file"}, {"name": "read"}]})));
        assert_eq!(listed.check("write_file"), Listed::Yes);
        for spelling in [
            "WRITE_FILE",
            "write_file ",
            " write_file",
            "Write_File",
            "write\u{200b}_file",
            "ԝrite_file",
            "",
        ] {
            assert_eq!(listed.check(spelling), Listed::No, "{spelling:?}");
        }
    }

    #[test]
    fn a_listing_is_current_only_after_its_last_page_and_until_list_changed() {
        let mut listed = ListedTools::default();
        assert!(!listed.learn_page(&json!({"tools": [{"name": "a"}], "nextCursor": "2"})));
        assert_eq!(listed.check("a"), Listed::Yes);
        assert_eq!(listed.check("b"), Listed::NotYet);
        assert!(listed.learn_page(&json!({"tools": [{"name": "b"}], "nextCursor": ""})));
        assert_eq!(listed.check("c"), Listed::No);
        listed.changed();
        assert_eq!(listed.check("c"), Listed::NotYet);
        assert_eq!(listed.check("a"), Listed::Yes);
        listed.learn_page(&json!({"tools": [{"name": "c"}]}));
        assert_eq!(listed.check("c"), Listed::Yes);
    }

    #[test]
    fn names_are_remembered_up_to_a_bound_then_learned_afresh() {
        let page = |names: std::ops::Range<usize>, next: Option<&str>| {
            let tools: Vec<Value> = names.map(|n| json!({"name": format!("t{n}")})).collect();
            match next {
                Some(next) => json!({"tools": tools, "nextCursor": next}),
                None => json!({ "tools": tools }),
            }
        };
        // An honest server with 12,000 tools in pages of 1,000: the first 10,000 are known;
        // the others are refused as past the bound, not as never listed.
        let mut listed = ListedTools::default();
        for start in (0..12_000).step_by(1_000) {
            let next = (start + 1_000 < 12_000).then_some("more");
            listed.learn_page(&page(start..start + 1_000, next));
        }
        assert_eq!(listed.check("t0"), Listed::Yes);
        assert_eq!(listed.check("t9999"), Listed::Yes);
        assert_eq!(listed.check("t10000"), Listed::PastBound);
        // Listed again: the same first 10,000, not whichever came last.
        listed.changed();
        for start in (0..12_000).step_by(1_000) {
            let next = (start + 1_000 < 12_000).then_some("more");
            listed.learn_page(&page(start..start + 1_000, next));
            assert_eq!(listed.check("t0"), Listed::Yes, "page {start}");
        }
        assert_eq!(listed.check("t5000"), Listed::Yes);
        // New names at every listing: bounded, and a listing within the bound is all known.
        for round in 0..4 {
            listed.changed();
            let tools: Vec<Value> = (0..4_000)
                .map(|n| json!({"name": format!("r{round}-{n}")}))
                .collect();
            listed.learn_page(&json!({ "tools": tools }));
            assert!(listed.names.len() <= MAX_REMEMBERED_NAMES);
            assert_eq!(listed.check(&format!("r{round}-3999")), Listed::Yes);
        }
        assert_eq!(listed.check("nothing"), Listed::No);
    }

    #[test]
    fn schemas_are_learned_with_the_names() {
        let mut listed = ListedTools::default();
        listed.learn_page(&json!({"tools": [{"name": "t", "inputSchema": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]}));
        assert_eq!(
            listed.check_arguments("t", Some(&json!({"n": 1}))),
            SchemaCheck::Valid
        );
        assert!(matches!(
            listed.check_arguments("t", Some(&json!({"n": "x"}))),
            SchemaCheck::Invalid(_)
        ));
    }
}
