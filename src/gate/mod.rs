//! Per-server interception, pure: the gate sees every message in both directions as a
//! `serde_json::Value` and says what to do with it. The async shell (`front`) does the I/O.
//!
//! - `tools/list` results: every page filtered to the tools the policy lists (`--show-denied`
//!   keeps them).
//! - `tools/call`: decided before anything is forwarded. allow → forwarded; deny → answered here
//!   with `isError: true` naming the rule and its layer; ask → `elicitation/create` to the host
//!   when it declared form elicitation, else a deny that says why.
//! - `notifications/cancelled` for a call airlock answered (or is still holding) is not forwarded.
//! - Every host request forwarded to the server is tracked, so a server that dies mid-call leaves
//!   no request unanswered, and a timed-out call gets exactly one answer.
//!
//! Ids: host request ids pass verbatim. airlock's own requests to the host use string ids with the
//! prefix `airlock-`; a server→client request whose id happens to start with that prefix is
//! renumbered on the way out and restored on the way back, so the two id spaces cannot collide.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::audit::event::millis;
use crate::audit::{Event, EventKind, Outcome, Redactor};
use crate::mcp::message::{
    code, error_response, id_key, notification, request, result_response, salvage_id,
};
use crate::mcp::{Class, Peek, classify, version};
use crate::policy::{Action, Call, Decision, Policy};

/// Prefix of every id airlock itself puts in the host-facing id space.
pub const OWN_ID_PREFIX: &str = "airlock-";
/// How many self-answered ids are remembered for dropping their cancellations.
const REMEMBERED_IDS: usize = 4096;

#[derive(Debug, Clone)]
pub struct GateConfig {
    pub server: String,
    pub show_denied: bool,
    pub tool_timeout: Option<Duration>,
}

/// What the shell does with the message it handed in.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Forward the original bytes unchanged.
    Pass,
    /// Forward this instead.
    Replace(Value),
    /// Do not forward.
    Drop,
}

/// Extra output of one step, in the order the shell must apply it: audit first (a decision is
/// written before the call it records is forwarded), then the messages.
#[derive(Debug, Default)]
pub struct Effects {
    pub audit: Vec<Event>,
    pub to_host: Vec<Value>,
    pub to_server: Vec<Value>,
}

impl Effects {
    pub fn is_empty(&self) -> bool {
        self.audit.is_empty() && self.to_host.is_empty() && self.to_server.is_empty()
    }
}

#[derive(Debug, Clone)]
enum Tracked {
    ToolsList,
    ToolsCall { tool: String },
    Other,
}

#[derive(Debug, Clone)]
struct Pending {
    id: Value,
    what: Tracked,
    started: Instant,
    deadline: Option<Instant>,
}

/// A call waiting for the host's answer to airlock's confirmation request.
#[derive(Debug, Clone)]
struct Held {
    call: Value,
    id: Value,
    tool: String,
    started: Instant,
    deadline: Option<Instant>,
}

/// A bounded set that forgets its oldest entries.
#[derive(Debug, Default)]
struct RecentIds {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl RecentIds {
    fn insert(&mut self, key: String) {
        if self.set.insert(key.clone()) {
            self.order.push_back(key);
            if self.order.len() > REMEMBERED_IDS
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    fn remove(&mut self, key: &str) -> bool {
        // The order queue keeps a stale entry; harmless, it only bounds memory.
        self.set.remove(key)
    }
}

pub struct Gate {
    config: GateConfig,
    policy: Arc<Policy>,
    redactor: Arc<Redactor>,
    /// Form elicitation declared in the host's `initialize`.
    host_elicitation: bool,
    /// The negotiated (or last declared) protocol version.
    version: Option<String>,
    pending: HashMap<String, Pending>,
    /// airlock's confirmation request id key → the held call.
    held: HashMap<String, Held>,
    /// Host call id key → airlock's confirmation request id key.
    held_by_call: HashMap<String, String>,
    answered_here: RecentIds,
    /// Calls answered with a timeout error: a late answer from the server must not reach the host.
    timed_out: RecentIds,
    /// Renumbered server→client request ids: host-facing id → the server's original id.
    renumbered: HashMap<String, Value>,
    next_own_id: u64,
    /// A host `initialize` waiting for its result (to learn the negotiated version).
    initialize_key: Option<String>,
}

/// A human-readable description of a decision, for deny texts and logs.
pub fn describe(decision: &Decision) -> String {
    format!(
        "rule {} (layer {}, {})",
        decision.rule, decision.layer, decision.source
    )
}

/// The tool result airlock answers a refused call with.
pub fn refusal_result(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// Filters a `tools/list` result in place; returns how many tools were removed.
pub fn filter_tools_result(result: &mut Value, server: &str, policy: &Policy) -> usize {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
        return 0;
    };
    let before = tools.len();
    tools.retain(|tool| match tool.get("name").and_then(Value::as_str) {
        Some(name) => policy.tools.lists_tool(server, name),
        // A tool without a name cannot be called; leave it for the host to reject.
        None => true,
    });
    before - tools.len()
}

/// Judges every message of a batch on its own and forwards what passes, as a smaller batch (or
/// nothing, when every item was answered or dropped).
fn each_in_batch(items: Vec<Value>, mut judge: impl FnMut(Value) -> Verdict) -> Verdict {
    let mut forward = Vec::with_capacity(items.len());
    for item in items {
        let original = item.clone();
        match judge(item) {
            Verdict::Pass => forward.push(original),
            Verdict::Replace(replaced) => forward.push(replaced),
            Verdict::Drop => {}
        }
    }
    if forward.is_empty() {
        Verdict::Drop
    } else {
        Verdict::Replace(Value::Array(forward))
    }
}

impl Gate {
    pub fn new(config: GateConfig, policy: Arc<Policy>, redactor: Arc<Redactor>) -> Gate {
        Gate {
            config,
            policy,
            redactor,
            host_elicitation: false,
            version: None,
            pending: HashMap::new(),
            held: HashMap::new(),
            held_by_call: HashMap::new(),
            answered_here: RecentIds::default(),
            timed_out: RecentIds::default(),
            renumbered: HashMap::new(),
            next_own_id: 0,
            initialize_key: None,
        }
    }

    pub fn server(&self) -> &str {
        &self.config.server
    }

    /// The protocol version in force, if known.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Requests forwarded to the server (or held) and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.pending.len() + self.held.len()
    }

    fn own_id(&mut self, kind: &str) -> Value {
        self.next_own_id += 1;
        Value::String(format!("{OWN_ID_PREFIX}{kind}-{}", self.next_own_id))
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
        event.tool = Some(tool.to_string());
        event.request_id = Some(id.clone());
        event.outcome = Some(outcome);
        event.duration_ms = Some(millis(elapsed));
        event.reason = reason;
        event
    }

    // ---------------------------------------------------------------- host → server

    /// One message from the host.
    pub fn on_host(&mut self, message: Value, now: Instant, fx: &mut Effects) -> Verdict {
        match classify(&message) {
            Err(invalid) => {
                let id = salvage_id(&message);
                fx.to_host.push(error_response(
                    id,
                    code::INVALID_REQUEST,
                    &format!("invalid request: {invalid}"),
                    None,
                ));
                Verdict::Drop
            }
            Ok(Class::Batch(_)) => self.host_batch(message, now, fx),
            Ok(Class::Request { id, method }) => {
                let (id, method) = (id.clone(), method.to_string());
                self.host_request(message, id, &method, now, fx)
            }
            Ok(Class::Notification { method }) => match method {
                "notifications/cancelled" => self.host_cancelled(&message, now, fx),
                // A `tools/call` without an id cannot be answered, so it is never a legitimate
                // call, but a lax server might still run it: it would bypass the gate. Dropped
                // and recorded, never forwarded.
                "tools/call" => {
                    let mut event = self.event(EventKind::Dropped);
                    event.tool = message
                        .pointer("/params/name")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    event.reason = Some("host sent tools/call as a notification (no id)".into());
                    fx.audit.push(event);
                    tracing::warn!("dropped a tools/call notification from the host (no id)");
                    Verdict::Drop
                }
                _ => Verdict::Pass,
            },
            Ok(Class::Response { id } | Class::Error { id }) => {
                let key = id_key(id);
                if let Some(held) = self.held.remove(&key) {
                    self.held_by_call.remove(&id_key(&held.id));
                    self.resolve_held(held, &message, now, fx);
                    return Verdict::Drop;
                }
                if let Some(original) = self.renumbered.remove(&key) {
                    let mut message = message;
                    message["id"] = original;
                    return Verdict::Replace(message);
                }
                if id.as_str().is_some_and(|s| s.starts_with(OWN_ID_PREFIX)) {
                    // An answer to a confirmation airlock already gave up on (timeout, cancel).
                    return Verdict::Drop;
                }
                Verdict::Pass
            }
        }
    }

    fn host_batch(&mut self, message: Value, now: Instant, fx: &mut Effects) -> Verdict {
        if !version::supports_batches(self.version.as_deref()) {
            let version = self.version.as_deref().unwrap_or("(none negotiated yet)");
            fx.to_host.push(error_response(
                Value::Null,
                code::INVALID_REQUEST,
                &format!("JSON-RPC batches are not part of MCP protocol version {version}"),
                None,
            ));
            return Verdict::Drop;
        }
        let Value::Array(items) = message else {
            return Verdict::Drop;
        };
        each_in_batch(items, |item| self.on_host(item, now, fx))
    }

    fn host_request(
        &mut self,
        message: Value,
        id: Value,
        method: &str,
        now: Instant,
        fx: &mut Effects,
    ) -> Verdict {
        let params = message.get("params");
        if let Some(declared) = version::request_version(params)
            && self.version.as_deref() != Some(declared)
        {
            self.version = Some(declared.to_string());
        }
        let key = id_key(&id);
        let what = match method {
            "initialize" => {
                if let Some(params) = params {
                    self.host_elicitation = params
                        .get("capabilities")
                        .is_some_and(version::elicitation_form_supported);
                    if let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) {
                        self.version = Some(requested.to_string());
                    }
                }
                self.initialize_key = Some(key.clone());
                Tracked::Other
            }
            "tools/call" => return self.host_call(message, id, now, fx),
            "tools/list" => Tracked::ToolsList,
            _ => Tracked::Other,
        };
        self.pending.insert(
            key,
            Pending {
                id,
                what,
                started: now,
                deadline: None,
            },
        );
        Verdict::Pass
    }

    fn elicitation_available(&self, params: Option<&Value>) -> Result<(), &'static str> {
        let stateless = self
            .version
            .as_deref()
            .is_some_and(|v| version::era_of(v) == version::Era::Stateless);
        if stateless || version::request_version(params).is_some() {
            // 2026-07-28 has no server→client requests; confirmation would need the in-band
            // (multi-round-trip) flow, which airlock does not speak yet.
            return Err(
                "the host speaks protocol 2026-07-28, where airlock cannot ask for confirmation yet",
            );
        }
        if self.host_elicitation {
            Ok(())
        } else {
            Err(
                "the host did not declare the elicitation capability, so airlock cannot ask for confirmation",
            )
        }
    }

    fn host_call(&mut self, message: Value, id: Value, now: Instant, fx: &mut Effects) -> Verdict {
        let params = message.get("params");
        let tool = params.and_then(|p| p.get("name")).and_then(Value::as_str);
        let arguments = params.and_then(|p| p.get("arguments"));
        let mut decision_event = self.event(EventKind::Decision);
        decision_event.request_id = Some(id.clone());
        decision_event.args = arguments.map(|args| self.redactor.redact(args));
        let Some(tool) = tool else {
            decision_event.decision = Some(Action::Deny.to_string());
            decision_event.rule = Some("airlock: tools/call without a tool name".into());
            fx.audit.push(decision_event);
            fx.audit
                .push(self.outcome_event("", &id, Outcome::Denied, Duration::ZERO, None));
            fx.to_host.push(error_response(
                id.clone(),
                code::INVALID_PARAMS,
                "tools/call needs params.name",
                None,
            ));
            self.answered_here.insert(id_key(&id));
            return Verdict::Drop;
        };
        let tool = tool.to_string();
        let decision = self.policy.decide(&Call {
            server: &self.config.server,
            tool: &tool,
            arguments,
        });
        decision_event.tool = Some(tool.clone());
        decision_event.rule = Some(decision.rule.clone());
        decision_event.layer = Some(decision.layer.to_string());
        decision_event.source = Some(decision.source.clone());
        let deadline = self.config.tool_timeout.map(|timeout| now + timeout);
        match decision.action {
            Action::Allow => {
                decision_event.decision = Some(Action::Allow.to_string());
                fx.audit.push(decision_event);
                self.pending.insert(
                    id_key(&id),
                    Pending {
                        id,
                        what: Tracked::ToolsCall { tool },
                        started: now,
                        deadline,
                    },
                );
                Verdict::Pass
            }
            Action::Deny => {
                decision_event.decision = Some(Action::Deny.to_string());
                fx.audit.push(decision_event);
                let text = format!(
                    "airlock denied the call to tool \"{tool}\" of server \"{}\": {}.",
                    self.config.server,
                    describe(&decision)
                );
                self.refuse(&tool, id, text, now, now, fx);
                Verdict::Drop
            }
            Action::Ask => match self.elicitation_available(params) {
                Err(why) => {
                    decision_event.decision = Some(Action::Deny.to_string());
                    decision_event.reason = Some(format!("ask: {why}"));
                    fx.audit.push(decision_event);
                    let text = format!(
                        "airlock denied the call to tool \"{tool}\" of server \"{}\": {} asks for confirmation, but {why}.",
                        self.config.server,
                        describe(&decision)
                    );
                    self.refuse(&tool, id, text, now, now, fx);
                    Verdict::Drop
                }
                Ok(()) => {
                    decision_event.decision = Some(Action::Ask.to_string());
                    fx.audit.push(decision_event);
                    let own_id = self.own_id("ask");
                    let shown_args = arguments
                        .map(|args| self.redactor.redact(args))
                        .unwrap_or(Value::Null);
                    let text = format!(
                        "Allow server \"{}\" to run tool \"{tool}\" with arguments {}? ({})",
                        self.config.server,
                        shown_args,
                        describe(&decision)
                    );
                    fx.to_host.push(request(
                        own_id.clone(),
                        "elicitation/create",
                        json!({
                            "message": text,
                            "requestedSchema": {
                                "type": "object",
                                "properties": {"approve": {"type": "boolean", "title": "Allow this tool call", "default": true}},
                                "required": ["approve"]
                            }
                        }),
                    ));
                    let own_key = id_key(&own_id);
                    self.held_by_call.insert(id_key(&id), own_key.clone());
                    self.held.insert(
                        own_key,
                        Held {
                            call: message,
                            id,
                            tool,
                            started: now,
                            deadline,
                        },
                    );
                    Verdict::Drop
                }
            },
        }
    }

    /// Answers a call here with an `isError` tool result and records the outcome.
    fn refuse(
        &mut self,
        tool: &str,
        id: Value,
        text: String,
        started: Instant,
        now: Instant,
        fx: &mut Effects,
    ) {
        fx.audit.push(self.outcome_event(
            tool,
            &id,
            Outcome::Denied,
            now.saturating_duration_since(started),
            Some(text.clone()),
        ));
        self.answered_here.insert(id_key(&id));
        fx.to_host.push(result_response(id, refusal_result(text)));
    }

    fn resolve_held(&mut self, held: Held, answer: &Value, now: Instant, fx: &mut Effects) {
        let result = answer.get("result");
        let action = result
            .and_then(|r| r.get("action"))
            .and_then(Value::as_str)
            .unwrap_or("error");
        let approved = action == "accept"
            && result
                .and_then(|r| r.get("content"))
                .and_then(|c| c.get("approve"))
                .and_then(Value::as_bool)
                != Some(false);
        let mut event = self.event(EventKind::Elicitation);
        event.tool = Some(held.tool.clone());
        event.request_id = Some(held.id.clone());
        event.decision = Some(
            if approved {
                Action::Allow
            } else {
                Action::Deny
            }
            .to_string(),
        );
        event.reason = Some(format!("host answered: {action}"));
        fx.audit.push(event);
        if approved {
            self.pending.insert(
                id_key(&held.id),
                Pending {
                    id: held.id,
                    what: Tracked::ToolsCall { tool: held.tool },
                    started: held.started,
                    deadline: held.deadline,
                },
            );
            fx.to_server.push(held.call);
        } else {
            let text = format!(
                "airlock denied the call to tool \"{}\" of server \"{}\": the user did not approve it ({action}).",
                held.tool, self.config.server
            );
            self.refuse(&held.tool, held.id, text, held.started, now, fx);
        }
    }

    fn host_cancelled(&mut self, message: &Value, now: Instant, fx: &mut Effects) -> Verdict {
        let Some(request_id) = message.get("params").and_then(|p| p.get("requestId")) else {
            return Verdict::Pass;
        };
        let key = id_key(request_id);
        if self.answered_here.remove(&key) {
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
        if let Some(pending) = self.pending.get(&key)
            && let Tracked::ToolsCall { tool } = &pending.what
        {
            let elapsed = now.saturating_duration_since(pending.started);
            fx.audit
                .push(self.outcome_event(tool, &pending.id, Outcome::Cancelled, elapsed, None));
            self.pending.remove(&key);
        }
        Verdict::Pass
    }

    // ---------------------------------------------------------------- server → host

    /// One message from the server (already known to be JSON).
    pub fn on_server(&mut self, message: Value, now: Instant, fx: &mut Effects) -> Verdict {
        match classify(&message) {
            // Not ours to police: the host judges the server's protocol errors.
            Err(_) => Verdict::Pass,
            Ok(Class::Batch(_)) => {
                let Value::Array(items) = message else {
                    return Verdict::Pass;
                };
                each_in_batch(items, |item| self.on_server(item, now, fx))
            }
            Ok(Class::Request { id, .. }) => {
                if id.as_str().is_some_and(|s| s.starts_with(OWN_ID_PREFIX)) {
                    let original = id.clone();
                    let own = self.own_id("srv");
                    self.renumbered.insert(id_key(&own), original);
                    let mut message = message;
                    message["id"] = own;
                    return Verdict::Replace(message);
                }
                Verdict::Pass
            }
            Ok(Class::Notification { .. }) => Verdict::Pass,
            Ok(Class::Response { id } | Class::Error { id }) => {
                let key = id_key(id);
                let is_error = message.get("error").is_some();
                if self.initialize_key.as_deref() == Some(key.as_str()) {
                    self.initialize_key = None;
                    if let Some(negotiated) = message
                        .pointer("/result/protocolVersion")
                        .and_then(Value::as_str)
                    {
                        self.version = Some(negotiated.to_string());
                    }
                }
                let Some(pending) = self.pending.remove(&key) else {
                    return if self.timed_out.remove(&key) {
                        Verdict::Drop
                    } else {
                        Verdict::Pass
                    };
                };
                match pending.what {
                    Tracked::ToolsList if !is_error && !self.config.show_denied => {
                        let mut message = message;
                        let removed = match message.get_mut("result") {
                            Some(result) => {
                                filter_tools_result(result, &self.config.server, &self.policy)
                            }
                            None => 0,
                        };
                        if removed > 0 {
                            Verdict::Replace(message)
                        } else {
                            Verdict::Pass
                        }
                    }
                    what => {
                        let tool_error =
                            message.pointer("/result/isError").and_then(Value::as_bool)
                                == Some(true);
                        let error_message =
                            message.pointer("/error/message").and_then(Value::as_str);
                        self.answered(
                            pending.id,
                            what,
                            pending.started,
                            is_error,
                            tool_error,
                            error_message,
                            now,
                            fx,
                        );
                        Verdict::Pass
                    }
                }
            }
        }
    }

    /// The same as [`Gate::on_server`] for a message read with [`peek`](crate::mcp::peek), when
    /// that is all the gate needs: an answer it passes unchanged (everything but the
    /// `initialize` result and a `tools/list` result to filter), a notification, a request
    /// outside airlock's id space, an invalid message. `None` means "parse the whole message
    /// and call `on_server`"; nothing has changed then.
    ///
    /// Saves building a `Value` tree of every tool result, which can be megabytes.
    pub fn on_server_peek(
        &mut self,
        peek: Peek,
        now: Instant,
        fx: &mut Effects,
    ) -> Option<Verdict> {
        match peek {
            Peek::Other => Some(Verdict::Pass),
            Peek::Request { id } => {
                if id.as_str().is_some_and(|s| s.starts_with(OWN_ID_PREFIX)) {
                    None
                } else {
                    Some(Verdict::Pass)
                }
            }
            Peek::Answer {
                id,
                is_error,
                tool_error,
                error_message,
            } => {
                let key = id_key(&id);
                if self.initialize_key.as_deref() == Some(key.as_str()) {
                    return None;
                }
                let needs_filtering = |p: &Pending| {
                    matches!(p.what, Tracked::ToolsList) && !is_error && !self.config.show_denied
                };
                match self.pending.get(&key) {
                    None => Some(if self.timed_out.remove(&key) {
                        Verdict::Drop
                    } else {
                        Verdict::Pass
                    }),
                    Some(pending) if needs_filtering(pending) => None,
                    Some(_) => {
                        let pending = self.pending.remove(&key)?;
                        self.answered(
                            pending.id,
                            pending.what,
                            pending.started,
                            is_error,
                            tool_error,
                            error_message.as_deref(),
                            now,
                            fx,
                        );
                        Some(Verdict::Pass)
                    }
                }
            }
        }
    }

    /// Records the outcome of an answered tool call (other requests need nothing).
    #[allow(clippy::too_many_arguments)]
    fn answered(
        &self,
        id: Value,
        what: Tracked,
        started: Instant,
        is_error: bool,
        tool_error: bool,
        error_message: Option<&str>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let Tracked::ToolsCall { tool } = what else {
            return;
        };
        let (outcome, reason) = if is_error {
            (Outcome::Error, error_message.map(str::to_string))
        } else if tool_error {
            (Outcome::Error, Some("tool result isError".to_string()))
        } else {
            (Outcome::Ok, None)
        };
        let elapsed = now.saturating_duration_since(started);
        fx.audit
            .push(self.outcome_event(&tool, &id, outcome, elapsed, reason));
    }

    // ---------------------------------------------------------------- time and death

    /// The earliest deadline among calls in flight.
    pub fn next_deadline(&self) -> Option<Instant> {
        let pending = self.pending.values().filter_map(|p| p.deadline);
        let held = self.held.values().filter_map(|h| h.deadline);
        pending.chain(held).min()
    }

    /// Answers every call whose `tool_timeout` has passed and cancels it at the server.
    pub fn on_tick(&mut self, now: Instant, fx: &mut Effects) {
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
            let Tracked::ToolsCall { tool } = &pending.what else {
                continue;
            };
            let reason = format!("airlock: tool call timed out after {seconds}s");
            fx.audit.push(self.outcome_event(
                tool,
                &pending.id,
                Outcome::Timeout,
                now.saturating_duration_since(pending.started),
                Some(reason.clone()),
            ));
            fx.to_host.push(error_response(
                pending.id.clone(),
                code::REQUEST_TIMEOUT,
                &reason,
                None,
            ));
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
            fx.to_host.push(error_response(
                held.id.clone(),
                code::REQUEST_TIMEOUT,
                &reason,
                None,
            ));
            self.answered_here.insert(id_key(&held.id));
        }
    }

    /// The server is gone: every request still in flight gets an error, every call an outcome.
    pub fn on_server_gone(&mut self, why: &str, now: Instant, fx: &mut Effects) {
        let message = format!("airlock: the MCP server exited before answering ({why})");
        let mut pending: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        pending.sort_by_key(|p| p.started);
        for request in pending {
            if let Tracked::ToolsCall { tool } = &request.what {
                let elapsed = now.saturating_duration_since(request.started);
                fx.audit.push(self.outcome_event(
                    tool,
                    &request.id,
                    Outcome::Error,
                    elapsed,
                    Some(message.clone()),
                ));
            }
            fx.to_host.push(error_response(
                request.id,
                code::SERVER_EXITED,
                &message,
                None,
            ));
        }
        let held: Vec<Held> = self.held.drain().map(|(_, h)| h).collect();
        self.held_by_call.clear();
        for call in held {
            let elapsed = now.saturating_duration_since(call.started);
            fx.audit.push(self.outcome_event(
                &call.tool,
                &call.id,
                Outcome::Error,
                elapsed,
                Some(message.clone()),
            ));
            fx.to_host
                .push(error_response(call.id, code::SERVER_EXITED, &message, None));
        }
    }
}

#[cfg(test)]
mod tests;

pub mod schema;
