//! Per-server interception, pure: the gate sees every host request to its server, and every
//! answer to one, as a `serde_json::Value` in the **host's id space**, and says what to do with
//! it. The session core ([`crate::session`]) does the routing, the id translation and the I/O.
//!
//! The points where a server's definitions are decided:
//! - [`Gate::filter_listing`]: every `tools/list`, `prompts/list` and `resources/templates/list`
//!   result of this server, before the host (or the gateway's aggregation) sees it: pins
//!   ([`pinned`], [`crate::pins`]) hide what changed since it was pinned, the policy hides denied
//!   tools;
//! - [`Gate::decide_call`]: every `tools/call`, before anything is forwarded (after the pin
//!   check: a hidden tool is refused with rule `pins`). allow → forwarded;
//!   deny → answered here with `isError: true` naming the rule and its layer; ask →
//!   `elicitation/create` to the host when it declared form elicitation, else a deny that says
//!   why.
//!
//! Besides, the gate tracks every request forwarded to its server, so that each `tools/call` has
//! exactly one decision and one outcome event, a timed-out call gets exactly one answer, a
//! cancellation of a call airlock answered (or still holds) is not forwarded, and a server that
//! dies leaves no request unanswered.
//!
//! airlock's own requests to the host use string ids `airlock-ask-<server>-<n>`, so the gates of
//! several servers never mint the same id.

mod pinned;
pub mod schema;
mod track;

pub use pinned::list_changed_notification;

use crate::fast_map::FastMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::audit::event::millis;
use crate::audit::{Event, EventKind, Outcome, Redactor};
use crate::mcp::message::{
    code, error_response, failed_call_answer, id_key, notification, task_augmented,
};
use crate::mcp::{Class, classify, version};
use crate::policy::reading::PathContext;
use crate::policy::{Decision, Policy};

use track::{Held, Pending, RecentIds, Tracked};

mod call;
mod caller;
mod listed;
use crate::mcp::Field;
pub use caller::{META_IDENTITY, META_REQUEST};
pub use listed::UNLISTED_RULE;

/// Prefix of every id airlock itself puts in the host-facing id space.
pub const OWN_ID_PREFIX: &str = "airlock-";

#[derive(Debug, Clone)]
pub struct GateConfig {
    pub server: String,
    pub show_denied: bool,
    pub tool_timeout: Option<Duration>,
    /// The server's HOME and working directory, to read path arguments as it will.
    pub paths: PathContext,
}

/// What the core does with the message it handed in.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Forward this (the message handed in, possibly changed).
    Forward(Value),
    /// Do not forward.
    Drop,
}

/// Extra output of one step, in the order the core must apply it: audit first (a decision is
/// written before the call it records is forwarded), then the messages. Ids are the host's.
#[derive(Debug, Default)]
pub struct Effects {
    pub audit: Vec<Event>,
    pub to_host: Vec<Value>,
    pub to_server: Vec<Value>,
    /// A definition of this kind was approved since the server's last listing: the listing the
    /// host holds is stale and must be read again.
    pub relist: Option<crate::pins::Kind>,
    /// A call waits for a listing of the server's tools: the core lists them (the gate reads
    /// the result through [`Gate::filter_listing`] as with any listing).
    pub list_tools: bool,
    /// Calls that waited for a listing, to hand to [`Gate::on_host`] again (host ids).
    pub retry: Vec<Value>,
}

impl Effects {
    pub fn is_empty(&self) -> bool {
        self.audit.is_empty()
            && self.to_host.is_empty()
            && self.to_server.is_empty()
            && self.relist.is_none()
            && !self.list_tools
            && self.retry.is_empty()
    }
}

/// What the host told airlock about itself, as far as the gate cares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFacts {
    /// The negotiated (or last declared) protocol version.
    pub version: Option<String>,
    /// Form elicitation declared in the host's capabilities.
    pub elicitation: bool,
}

/// How a call the policy decided goes on.
#[derive(Debug, Clone, PartialEq)]
pub enum CallVerdict {
    Allow,
    /// Answered here: the refusal text.
    Deny(String),
    /// Needs the user's confirmation: the question to ask.
    Ask(String),
}

pub struct Gate {
    config: GateConfig,
    policy: Arc<Policy>,
    redactor: Arc<Redactor>,
    host: HostFacts,
    pending: FastMap<String, Pending>,
    /// airlock's confirmation request id key → the held call.
    held: FastMap<String, Held>,
    /// The server's pinned definitions (none when the session keeps no pins).
    pins: Option<crate::pins::PinGuard>,
    /// Host call id key → airlock's confirmation request id key.
    held_by_call: FastMap<String, String>,
    answered_here: RecentIds,
    /// Calls answered with a timeout error: a late answer from the server must not reach the host.
    timed_out: RecentIds,
    next_own_id: u64,
    /// A host `initialize` waiting for its result (to learn the negotiated version).
    initialize_key: Option<String>,
    /// Take the caller's identity from `_meta["airlock/identity"]` (the HTTP face's mux sets it;
    /// a stdio host's value is removed and ignored).
    trust_identity: bool,
    /// Host call id key → the identity making it, until the call's outcome is recorded.
    callers: FastMap<String, String>,
    /// The names (and schemas) of the tools the server listed.
    listed: listed::ListedTools,
    /// Calls of a name not listed yet, waiting for a listing (in arrival order).
    awaiting: track::Awaiting,
    /// The host closed its input: it can no longer answer a confirmation.
    host_gone: bool,
}

/// A human-readable description of a decision, for deny texts and logs.
pub fn describe(decision: &Decision) -> String {
    format!(
        "rule {} (layer {}, {})",
        decision.rule, decision.layer, decision.source
    )
}

/// Filters a `tools/list` result in place; returns how many tools were removed.
pub fn filter_tools_result(result: &mut Value, server: &str, policy: &Policy) -> usize {
    let Some(tools) = result.field_mut("tools").and_then(Value::as_array_mut) else {
        return 0;
    };
    let before = tools.len();
    tools.retain(|tool| match tool.field("name").and_then(Value::as_str) {
        Some(name) => policy.tools.lists_tool(server, name),
        // A tool without a name cannot be called; leave it for the host to reject.
        None => true,
    });
    before - tools.len()
}

impl Gate {
    pub fn new(config: GateConfig, policy: Arc<Policy>, redactor: Arc<Redactor>) -> Gate {
        Gate {
            config,
            policy,
            redactor,
            host: HostFacts::default(),
            pending: FastMap::default(),
            held: FastMap::default(),
            pins: None,
            held_by_call: FastMap::default(),
            answered_here: RecentIds::default(),
            timed_out: RecentIds::default(),
            next_own_id: 0,
            initialize_key: None,
            trust_identity: false,
            callers: FastMap::default(),
            listed: listed::ListedTools::default(),
            awaiting: track::Awaiting::default(),
            host_gone: false,
        }
    }

    pub fn server(&self) -> &str {
        &self.config.server
    }

    /// The protocol version in force, if known.
    pub fn version(&self) -> Option<&str> {
        self.host.version.as_deref()
    }

    /// What the session core learned about the host (a gateway answers the host's handshake
    /// itself, so its gates never see it).
    pub fn set_host(&mut self, facts: HostFacts) {
        self.host = facts;
    }

    /// A reloaded policy: calls decided from now on use it.
    pub fn set_policy(&mut self, policy: Arc<Policy>, redactor: Arc<Redactor>) {
        self.policy = policy;
        self.redactor = redactor;
        self.refresh_pin_settings();
    }

    /// Requests forwarded to the server (or held) and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.pending.len() + self.held.len() + self.awaiting.len()
    }

    /// Whether `key` (an id key of the host's id space) is a request this gate tracks.
    pub fn tracks(&self, key: &str) -> bool {
        self.pending.contains_key(key)
            || self.held_by_call.contains_key(key)
            || self.awaiting.contains(key)
    }

    /// Whether `key` is one of this gate's own requests to the host.
    pub fn owns(&self, key: &str) -> bool {
        self.held.contains_key(key)
    }

    fn own_id(&mut self, kind: &str) -> Value {
        self.next_own_id += 1;
        Value::String(format!(
            "{OWN_ID_PREFIX}{kind}-{}-{}",
            self.config.server, self.next_own_id
        ))
    }

    fn event(&self, kind: EventKind) -> Event {
        Event::new(kind, &self.config.server)
    }

    fn outcome_event(
        &self,
        tool: &str,
        id: &Value,
        outcome: Outcome,
        elapsed: Duration,
        reason: Option<String>,
    ) -> Event {
        let mut event = self.event(EventKind::Outcome);
        event.identity = self.caller(id).map(String::from);
        event.tool = Some(tool.to_string());
        event.request_id = Some(id.clone());
        event.outcome = Some(outcome);
        event.duration_ms = Some(millis(elapsed));
        event.reason = reason;
        event
    }

    // ---------------------------------------------------------------- the decision points

    /// Filters one page of this server's `tools/list` result (unless `--show-denied`).
    /// Returns how many tools were removed.
    pub fn filter_tools(&self, result: &mut Value) -> usize {
        if self.config.show_denied {
            return 0;
        }
        filter_tools_result(result, &self.config.server, &self.policy)
    }

    // ---------------------------------------------------------------- host → server

    /// One request, notification or answer from the host (never a batch: the core splits them).
    pub fn on_host(&mut self, mut message: Value, now: Instant, fx: &mut Effects) -> Verdict {
        let identity = self.take_identity(&mut message);
        // Only a caller identity needs the id here (to stamp the events); most messages have none.
        let request_id = match identity {
            Some(_) => match classify(&message) {
                Ok(Class::Request { id, .. }) => Some(id.clone()),
                _ => None,
            },
            None => None,
        };
        let first_event = fx.audit.len();
        let verdict = self.host_message(message, identity.clone(), now, fx);
        if let (Some(identity), Some(id)) = (identity, request_id) {
            stamp_identity(&mut fx.audit[first_event..], &id, &identity);
        }
        self.forget_finished(fx);
        verdict
    }

    fn host_message(
        &mut self,
        message: Value,
        identity: Option<String>,
        now: Instant,
        fx: &mut Effects,
    ) -> Verdict {
        let (id, method) = match classify(&message) {
            Ok(Class::Request { id, method }) => {
                if let (Some(identity), "tools/call") = (identity, method) {
                    self.callers.insert(id_key(id), identity);
                }
                (id.clone(), method.to_string())
            }
            Ok(Class::Notification { method }) => {
                return match method {
                    "notifications/cancelled" => self.host_cancelled(message, now, fx),
                    "tools/call" => self.call_without_id(&message, fx),
                    _ => Verdict::Forward(message),
                };
            }
            Ok(Class::Response { id } | Class::Error { id }) => {
                let key = id_key(id);
                if let Some(held) = self.held.remove(&key) {
                    self.held_by_call.remove(&id_key(&held.id));
                    self.resolve_held(held, &message, now, fx);
                }
                // Answers to anything else are the core's to route.
                return Verdict::Drop;
            }
            // Batches and invalid messages are the core's to answer.
            Ok(Class::Batch(_)) | Err(_) => return Verdict::Drop,
        };
        self.host_request(message, id, &method, now, fx)
    }

    /// A `tools/call` without an id cannot be answered, so it is never a legitimate call, but a
    /// lax server might still run it: it would bypass the gate. Dropped and recorded.
    fn call_without_id(&self, message: &Value, fx: &mut Effects) -> Verdict {
        let mut event = self.event(EventKind::Dropped);
        event.tool = message
            .at(&["params", "name"])
            .and_then(Value::as_str)
            .map(str::to_string);
        event.reason = Some("host sent tools/call as a notification (no id)".into());
        fx.audit.push(event);
        tracing::warn!("dropped a tools/call notification from the host (no id)");
        Verdict::Drop
    }

    fn host_request(
        &mut self,
        message: Value,
        id: Value,
        method: &str,
        now: Instant,
        fx: &mut Effects,
    ) -> Verdict {
        let params = message.field("params");
        if let Some(declared) = version::request_version(params)
            && self.host.version.as_deref() != Some(declared)
        {
            self.host.version = Some(declared.to_string());
        }
        if method == "tools/call" {
            return self.host_call(message, id, now, fx);
        }
        let key = id_key(&id);
        let what = match method {
            "initialize" => {
                if let Some(params) = params {
                    self.host.elicitation = params
                        .field("capabilities")
                        .is_some_and(version::elicitation_form_supported);
                    if let Some(requested) = params.field("protocolVersion").and_then(Value::as_str)
                    {
                        self.host.version = Some(requested.to_string());
                    }
                }
                self.initialize_key = Some(key.clone());
                // Its answer's `instructions` go through the pins, as a listing does.
                Tracked::Listing(crate::pins::Kind::Instructions)
            }
            // The 2026-07-28 era's discovery answer carries the instructions too.
            "server/discover" => Tracked::Listing(crate::pins::Kind::Instructions),
            "tools/list" => Tracked::Listing(crate::pins::Kind::Tool),
            "prompts/list" => Tracked::Listing(crate::pins::Kind::Prompt),
            "resources/templates/list" => Tracked::Listing(crate::pins::Kind::ResourceTemplate),
            "prompts/get" | "resources/read" => {
                if self.check_pinned_request(method, params, &id, fx).is_some() {
                    return Verdict::Drop;
                }
                Tracked::Other
            }
            _ => Tracked::Other,
        };
        self.pending.insert(key, Pending::new(id, what, now, None));
        Verdict::Forward(message)
    }

    fn host_cancelled(&mut self, message: Value, now: Instant, fx: &mut Effects) -> Verdict {
        let Some(request_id) = message.at(&["params", "requestId"]) else {
            return Verdict::Forward(message);
        };
        let key = id_key(request_id);
        if self.answered_here.remove(&key) {
            return Verdict::Drop;
        }
        if let Some(waiting) = self.take_awaiting(&key) {
            self.give_up_waiting(waiting, listed::GiveUp::Cancelled, now, fx);
            return Verdict::Drop;
        }
        if let Some(own_key) = self.held_by_call.remove(&key) {
            if let Some(held) = self.held.remove(&own_key) {
                let elapsed = now.saturating_duration_since(held.started);
                fx.audit.push(self.outcome_event(
                    &held.tool,
                    &held.id,
                    Outcome::Cancelled,
                    elapsed,
                    None,
                ));
            }
            return Verdict::Drop;
        }
        if let Some(pending) = self.pending.remove(&key)
            && let Tracked::ToolsCall { tool, .. } = &pending.what
        {
            let elapsed = now.saturating_duration_since(pending.started);
            fx.audit
                .push(self.outcome_event(tool, &pending.id, Outcome::Cancelled, elapsed, None));
        }
        Verdict::Forward(message)
    }

    // ---------------------------------------------------------------- server → host

    /// One answer from the server, its id already the host's. Requests and notifications from
    /// the server are the core's to route; they pass.
    pub fn on_server(&mut self, message: Value, now: Instant, fx: &mut Effects) -> Verdict {
        let verdict = self.server_message(message, now, fx);
        self.forget_finished(fx);
        verdict
    }

    fn server_message(&mut self, message: Value, now: Instant, fx: &mut Effects) -> Verdict {
        let key = match classify(&message) {
            Ok(Class::Response { id } | Class::Error { id }) => id_key(id),
            _ => return Verdict::Forward(message),
        };
        let is_error = message.field("error").is_some();
        if self.initialize_key.as_deref() == Some(key.as_str()) {
            self.initialize_key = None;
            if let Some(negotiated) = message
                .at(&["result", "protocolVersion"])
                .and_then(Value::as_str)
            {
                self.host.version = Some(negotiated.to_string());
            }
        }
        let Some(pending) = self.pending.remove(&key) else {
            return if self.timed_out.remove(&key) {
                Verdict::Drop
            } else {
                Verdict::Forward(message)
            };
        };
        let mut message = message;
        if let Tracked::Listing(kind) = pending.what
            && !is_error
            && let Some(result) = message.field_mut("result")
        {
            self.filter_listing(kind, result, fx);
        }
        let tool_error = message.at(&["result", "isError"]).and_then(Value::as_bool) == Some(true);
        let input_required = message
            .at(&["result", "resultType"])
            .and_then(Value::as_str)
            == Some("input_required");
        let error_message = message.at(&["error", "message"]).and_then(Value::as_str);
        self.answered(
            pending,
            is_error,
            input_required,
            tool_error,
            error_message,
            now,
            fx,
        );
        Verdict::Forward(message)
    }

    /// The same as [`Gate::on_server`] for an answer read with [`crate::mcp::peek`], when that
    /// is all the gate needs (it passes unchanged: not a `tools/list` page to filter, not the
    /// `initialize` answer, not a result asking for input). False when the whole message is
    /// needed; nothing has changed then. Saves building a `Value` tree of every tool result.
    pub fn on_answer_peeked(
        &mut self,
        key: &str,
        is_error: bool,
        tool_error: bool,
        error_message: Option<&str>,
        now: Instant,
        fx: &mut Effects,
    ) -> bool {
        if self.initialize_key.as_deref() == Some(key) {
            return false;
        }
        // A listing is filtered (policy, pins): it needs the whole message.
        let filters = |p: &Pending| matches!(p.what, Tracked::Listing(_));
        match self.pending.get(key) {
            Some(pending) if !is_error && filters(pending) => return false,
            Some(_) => {}
            None => return false,
        }
        let Some(pending) = self.pending.remove(key) else {
            return false;
        };
        self.answered(pending, is_error, false, tool_error, error_message, now, fx);
        true
    }

    /// Records the outcome of an answered tool call (other requests need nothing).
    #[allow(clippy::too_many_arguments)]
    fn answered(
        &self,
        pending: Pending,
        is_error: bool,
        input_required: bool,
        tool_error: bool,
        error_message: Option<&str>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let Tracked::ToolsCall { tool, .. } = pending.what else {
            return;
        };
        let (outcome, reason) = if is_error {
            (Outcome::Error, error_message.map(str::to_string))
        } else if input_required {
            let why = "input required: the host answers and retries as a new request";
            (Outcome::Ok, Some(why.to_string()))
        } else if tool_error {
            (Outcome::Error, Some("tool result isError".to_string()))
        } else {
            (Outcome::Ok, None)
        };
        let elapsed = now.saturating_duration_since(pending.started);
        fx.audit
            .push(self.outcome_event(&tool, &pending.id, outcome, elapsed, reason));
    }

    // ---------------------------------------------------------------- time and death

    /// The earliest deadline among calls in flight.
    pub fn next_deadline(&self) -> Option<Instant> {
        let pending = self.pending.values().filter_map(|p| p.deadline);
        let held = self.held.values().filter_map(|h| h.deadline);
        pending.chain(held).chain(self.awaiting_deadline()).min()
    }

    /// Answers every call whose `tool_timeout` has passed and cancels it at the server.
    pub fn on_tick(&mut self, now: Instant, fx: &mut Effects) {
        self.expire(now, fx);
        self.forget_finished(fx);
    }

    fn expire(&mut self, now: Instant, fx: &mut Effects) {
        for waiting in self.expired_awaiting(now) {
            self.give_up_waiting(waiting, listed::GiveUp::TimedOut, now, fx);
        }
        let seconds = self
            .config
            .tool_timeout
            .map(|t| t.as_secs_f64())
            .unwrap_or_default();
        let expired: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            let Some(pending) = self.pending.remove(&key) else {
                continue;
            };
            let Tracked::ToolsCall { tool, .. } = &pending.what else {
                continue;
            };
            let reason = format!("airlock: tool call timed out after {seconds}s");
            let elapsed = now.saturating_duration_since(pending.started);
            fx.audit.push(self.outcome_event(
                tool,
                &pending.id,
                Outcome::Timeout,
                elapsed,
                Some(reason.clone()),
            ));
            let answer = error_response(pending.id.clone(), code::REQUEST_TIMEOUT, &reason, None);
            fx.to_host.push(answer);
            fx.to_server.push(notification(
                "notifications/cancelled",
                json!({"requestId": pending.id, "reason": reason}),
            ));
            self.timed_out.insert(key);
        }
        let expired: Vec<String> = self
            .held
            .iter()
            .filter(|(_, h)| h.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for own_key in expired {
            let Some(held) = self.held.remove(&own_key) else {
                continue;
            };
            self.held_by_call.remove(&id_key(&held.id));
            let reason =
                format!("airlock: no answer to the confirmation request within {seconds}s");
            let elapsed = now.saturating_duration_since(held.started);
            fx.audit.push(self.outcome_event(
                &held.tool,
                &held.id,
                Outcome::Timeout,
                elapsed,
                Some(reason.clone()),
            ));
            let answer = error_response(held.id.clone(), code::REQUEST_TIMEOUT, &reason, None);
            fx.to_host.push(answer);
            self.answered_here.insert(id_key(&held.id));
        }
    }

    /// The answer to a request its server will never answer: a `tools/call` gets a tool result
    /// with `isError: true` naming the reason (a model can read it; hosts keep going), any other
    /// request a JSON-RPC `-32000` error. One shape for run and serve.
    fn unanswered(&self, pending: Pending, message: &str, now: Instant, fx: &mut Effects) {
        match &pending.what {
            Tracked::ToolsCall { tool, task } => {
                let elapsed = now.saturating_duration_since(pending.started);
                let reason = Some(message.to_string());
                fx.audit.push(self.outcome_event(
                    tool,
                    &pending.id,
                    Outcome::Error,
                    elapsed,
                    reason,
                ));
                fx.to_host.push(failed_call_answer(
                    pending.id,
                    message,
                    *task,
                    code::SERVER_EXITED,
                ));
            }
            _ => {
                let answer = error_response(pending.id, code::SERVER_EXITED, message, None);
                fx.to_host.push(answer);
            }
        }
    }

    /// One request (host id key `key`) will not be answered by the server (it could not be
    /// delivered): it gets its answer here.
    pub fn fail_request(&mut self, key: &str, why: &str, now: Instant, fx: &mut Effects) {
        if let Some(pending) = self.pending.remove(key) {
            self.unanswered(pending, &format!("airlock: {why}"), now, fx);
        }
        self.forget_finished(fx);
    }

    /// The server is gone: every request still in flight gets an answer, every call an outcome.
    /// Requests for which `keep` is true (queued for the next start, never sent) stay.
    pub fn on_server_gone(
        &mut self,
        why: &str,
        now: Instant,
        fx: &mut Effects,
        keep: &dyn Fn(&str) -> bool,
    ) {
        let message = format!("airlock: {why}");
        let gone: Vec<String> = self
            .pending
            .keys()
            .filter(|key| !keep(key))
            .cloned()
            .collect();
        let mut pending: Vec<Pending> = gone
            .iter()
            .filter_map(|key| self.pending.remove(key))
            .collect();
        pending.sort_by_key(|p| p.started);
        for request in pending {
            self.unanswered(request, &message, now, fx);
        }
        let held: Vec<Held> = self.held.drain().map(|(_, h)| h).collect();
        self.held_by_call.clear();
        for call in held {
            let what = Tracked::ToolsCall {
                task: task_augmented(&call.call),
                tool: call.tool,
            };
            let pending = Pending::new(call.id, what, call.started, None);
            self.unanswered(pending, &message, now, fx);
        }
        for waiting in self.awaiting.take_all() {
            let why = listed::GiveUp::Failed(message.clone());
            self.give_up_waiting(waiting, why, now, fx);
        }
        self.forget_finished(fx);
    }
}

/// Every event recorded for the identified host request `id` names its caller: the gate's own
/// records of a call carry it already; this covers the rest (a pin refusal of `prompts/get` or
/// `resources/read`, a refusal before any decision).
fn stamp_identity(events: &mut [Event], id: &Value, identity: &str) {
    for event in events {
        if event.identity.is_none() && event.request_id.as_ref() == Some(id) {
            event.identity = Some(identity.to_string());
        }
    }
}

#[cfg(test)]
mod tests;
