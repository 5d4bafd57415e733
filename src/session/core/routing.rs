//! Naming and routing (gateway): which server a host request is for, and under which of its own
//! names. Tools and prompts are `<server><sep><name>`; resources keep their URIs and are routed
//! by owner. An unknown prompt is answered `-32602`; an unknown tool gets a tool result with
//! `isError: true` (`Unknown tool: NAME`): the shape the official SDKs' servers answer it in
//! (this text is the Python SDK's; the TypeScript SDK's, as in server-everything, is `MCP error
//! -32602: Tool NAME not found`), and how a server's gate answers a name its server did not list.

use std::time::Instant;

use serde_json::{Value, json};

use super::lists::ListKind;
use super::{Core, Origin, era};
use crate::audit::{Event, EventKind, Outcome};
use crate::gate::META_IDENTITY;
use crate::gate::UNLISTED_RULE;
use crate::gateway::names::{NameTable, split};
use crate::mcp::Field;
use crate::mcp::message::{code, failed_call_answer, task_augmented};
use crate::policy::Action;

impl Core {
    /// A request of a gateway's host: answered by airlock, or routed to one server.
    pub(super) fn gateway_request(
        &mut self,
        message: Value,
        id: Value,
        method: &str,
        now: Instant,
    ) {
        match method {
            "initialize" => self.host_initialize(id, now),
            "ping" => self.reply(id, json!({})),
            "server/discover" => self.answer_discover(id),
            "logging/setLevel" => self.set_log_level(&message, id, now),
            "tools/call" => self.host_call(message, id, now),
            "prompts/get" => self.host_prompt(message, id, now),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                let uri = message
                    .at(&["params", "uri"])
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                match self.resource_server(&uri) {
                    Ok(index) => self.forward_request(index, message, id, now),
                    Err(unrouted) => self.resource_not_found(id, &uri, &unrouted),
                }
            }
            "completion/complete" => self.host_complete(message, id, now),
            "subscriptions/listen" => self.host_listen(&message, id, now),
            "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/list"
                if !self.request_has_tasks(&message) =>
            {
                let text = format!("Method not found: {method} (tasks are of protocol 2025-11-25)");
                self.reply_error(id, code::METHOD_NOT_FOUND, &text);
            }
            "tasks/get" | "tasks/result" | "tasks/cancel" => self.host_task(message, id, now),
            other => match ListKind::from_method(other) {
                Some(kind) if !self.offers_list(kind) => self.reply_error(
                    id,
                    code::METHOD_NOT_FOUND,
                    &format!("no server of this gateway offers {}", kind.capability()),
                ),
                Some(kind) => self.host_list(kind, message, id, now),
                None => self.reply_error(
                    id,
                    code::METHOD_NOT_FOUND,
                    &format!("airlock serve cannot route method {other:?}"),
                ),
            },
        }
    }

    /// Whether a stateless host may list `kind`: 2026-07-28 answers a method behind a capability
    /// the discovery did not declare with Method not found, so a host can trust `server/discover`
    /// (a handshake-era host gets the empty list it always had).
    fn offers_list(&self, kind: ListKind) -> bool {
        !era::stateless(&self.host) || self.capabilities().get(kind.capability()).is_some()
    }

    /// Tasks (2025-11-25): a task's requests go to the server its host-facing id names, with
    /// that server's own id ([`tasks`](super::tasks)); `tasks/list` is aggregated like the
    /// other lists. Only the very process that made the task is asked: after a restart (or a
    /// reload's replacement) the new process may have a task of the same id, which is not this
    /// one, and the one that made it is gone with its tasks.
    fn host_task(&mut self, mut message: Value, id: Value, now: Instant) {
        let separator = self.separator().to_string();
        let owner =
            super::tasks::take_maker_of(&mut message, &separator).and_then(|(name, start)| {
                self.servers.iter().position(|server| {
                    server.name == name
                        && server.start == start
                        && server.alive
                        && server.life.is_ready()
                })
            });
        match owner {
            Some(index) => self.forward_request(index, message, id, now),
            None => self.reply_error(id, code::INVALID_PARAMS, "Unknown task"),
        }
    }

    fn resource_not_found(&mut self, id: Value, uri: &str, unrouted: &Unrouted) {
        // 2026-07-28 moved "resource not found" to Invalid Params.
        let code = if era::stateless(&self.host) {
            code::INVALID_PARAMS
        } else {
            code::RESOURCE_NOT_FOUND
        };
        let text = match unrouted {
            Unrouted::NotFound => {
                format!("Resource not found: no configured server owns {uri:?}")
            }
            Unrouted::Ambiguous(servers) => {
                let names: Vec<String> = servers
                    .iter()
                    .map(|index| format!("{:?}", self.servers[*index].name))
                    .collect();
                let text = format!(
                    "Resource not found: {uri:?} is named by more than one server ({}), so airlock routes it to none of them (no server may answer in another's name)",
                    names.join(", ")
                );
                tracing::warn!("{text}");
                text
            }
        };
        self.reply_error(id, code, &text);
    }

    fn set_log_level(&mut self, message: &Value, id: Value, now: Instant) {
        if let Some(level) = message.at(&["params", "level"]) {
            self.log_level(level.clone(), now);
        }
        self.reply(id, json!({}));
    }

    /// The host's log level (`logging/setLevel`, or in 2026-07-28 the `logLevel` of a request's
    /// `_meta`): remembered (replayed after restarts) and passed to every server that logs.
    /// A log message of airlock's own to the host (`notifications/message`, logger `airlock`),
    /// at `level` (RFC 5424 names), when the host is there to take it and its level lets it
    /// through: a 2026-07-28 host only once it opted in, any other once initialized.
    pub(super) fn log_to_host(&mut self, level: &str, text: &str) {
        let opted_in = self.host.log_level.as_ref().and_then(Value::as_str);
        let ready = if era::stateless(&self.host) {
            opted_in.is_some()
        } else {
            self.host.initialized || self.host.known
        };
        if !ready || opted_in.is_some_and(|floor| severity(level) < severity(floor)) {
            return;
        }
        self.send_host(json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": level, "logger": "airlock", "data": text},
        }));
    }

    pub(super) fn log_level(&mut self, level: Value, now: Instant) {
        if self.host.log_level.as_ref() == Some(&level) {
            return;
        }
        self.host.log_level = Some(level.clone());
        for index in 0..self.servers.len() {
            if self.servers[index].life.is_ready()
                && self.servers[index].has_capability("logging") == Some(true)
            {
                let params = json!({"level": level});
                self.internal_request(index, "logging/setLevel", params, Origin::Ignore, now);
            }
        }
    }

    fn host_call(&mut self, message: Value, id: Value, now: Instant) {
        let Some(name) = message.at(&["params", "name"]).and_then(Value::as_str) else {
            self.reply_error(id, code::INVALID_PARAMS, "tools/call needs params.name");
            return;
        };
        let Some((index, original)) = self.route_name(&self.tools, name) else {
            self.refuse_unrouted(&message, name, id);
            return;
        };
        let mut message = message;
        // Found by scanning (read just above), not by hashing the keys again.
        if let Some(slot) = message
            .field_mut("params")
            .and_then(|p| p.field_mut("name"))
        {
            *slot = Value::String(original);
        }
        self.forward_request(index, message, id, now);
    }

    /// A call no server of this gateway lists: audited as every call is (a decision, then a
    /// `denied` outcome, under the gateway's own name, as a server's gate audits a name its
    /// server did not list) and answered as an unknown tool.
    fn refuse_unrouted(&mut self, message: &Value, name: &str, id: Value) {
        let identity = message
            .at(&["params", "_meta", META_IDENTITY])
            .and_then(Value::as_str)
            .filter(|_| self.trust_identity)
            .map(String::from);
        let shown = self.redactor.loggable_name(name);
        let mut decision = Event::new(EventKind::Decision, "gateway");
        decision.identity = identity.clone();
        decision.request_id = Some(id.clone());
        decision.tool = Some(shown.clone());
        decision.args = message
            .at(&["params", "arguments"])
            .map(|arguments| self.redactor.redact(arguments));
        decision.decision = Some(Action::Deny.to_string());
        decision.rule = Some(UNLISTED_RULE.into());
        decision.reason = Some("no server of this gateway lists a tool of this name".into());
        self.audit(decision);
        let mut outcome = Event::new(EventKind::Outcome, "gateway");
        outcome.identity = identity;
        outcome.request_id = Some(id.clone());
        outcome.tool = Some(shown);
        outcome.outcome = Some(Outcome::Denied);
        outcome.duration_ms = Some(0.0);
        self.audit(outcome);
        let text = format!("Unknown tool: {name} (no server of this gateway lists it)");
        let task = task_augmented(message);
        let answer = failed_call_answer(id, &text, task, code::INVALID_PARAMS);
        self.send_host(answer);
    }

    /// A namespaced name → (server, original): listed names first, then `server<sep>rest` for a
    /// server whose list airlock has not seen (so a host that remembers names can call at once),
    /// then, with one server configured, the name as it is for that server (it answers for its
    /// own names, as it would without airlock).
    fn route_name(&self, table: &NameTable, name: &str) -> Option<(usize, String)> {
        if let Some((index, original)) = table.resolve(name)
            && !self.servers[index].retiring
        {
            return Some((index, original.to_string()));
        }
        if let Some((server, rest)) = split(name, self.separator())
            && let Some(index) = self.server_index(server)
            && !rest.is_empty()
        {
            return Some((index, rest.to_string()));
        }
        let mut current = (0..self.servers.len()).filter(|&i| !self.servers[i].retiring);
        match (current.next(), current.next()) {
            (Some(index), None) if !name.is_empty() => Some((index, name.to_string())),
            _ => None,
        }
    }

    fn host_prompt(&mut self, message: Value, id: Value, now: Instant) {
        let name = message
            .at(&["params", "name"])
            .and_then(Value::as_str)
            .unwrap_or_default();
        match self.route_name(&self.prompts, name) {
            Some((index, original)) => {
                let mut message = message;
                message["params"]["name"] = Value::String(original);
                self.forward_request(index, message, id, now);
            }
            None => {
                let text = format!("Unknown prompt: {name}");
                self.reply_error(id, code::INVALID_PARAMS, &text);
            }
        }
    }

    fn host_complete(&mut self, message: Value, id: Value, now: Instant) {
        let reference = message.at(&["params", "ref"]).cloned().unwrap_or_default();
        match reference.field("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference
                    .field("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match self.route_name(&self.prompts, name) {
                    Some((index, original)) => {
                        let mut message = message;
                        message["params"]["ref"]["name"] = Value::String(original);
                        self.forward_request(index, message, id, now);
                    }
                    None => {
                        let text = format!("Unknown prompt: {name}");
                        self.reply_error(id, code::INVALID_PARAMS, &text);
                    }
                }
            }
            Some("ref/resource") => {
                let uri = reference
                    .field("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match self.resource_server(uri) {
                    Ok(index) => self.forward_request(index, message, id, now),
                    Err(unrouted) => self.resource_not_found(id, uri, &unrouted),
                }
            }
            _ => self.reply_error(
                id,
                code::INVALID_PARAMS,
                "completion/complete needs params.ref of type ref/prompt or ref/resource",
            ),
        }
    }

    /// Notes the server a result's `resource_link` items point into (a tool that made or found a
    /// resource): the host may read one before any listing, and `resources/read` then goes to
    /// the server that named it, unless another server claims it too
    /// ([`resource_claims`](super::resource_claims)).
    pub(super) fn note_linked_resources(&mut self, index: usize, message: &Value) {
        if self.servers[index].has_capability("resources") != Some(true) {
            return;
        }
        let Some(content) = message.at(&["result", "content"]).and_then(Value::as_array) else {
            return;
        };
        for item in content {
            if item.field("type").and_then(Value::as_str) == Some("resource_link")
                && let Some(uri) = item.field("uri").and_then(Value::as_str)
            {
                self.resources.link(index, uri);
            }
        }
    }

    /// The server that owns `uri`: the one that claims it (lists it, linked it, or has a
    /// template that covers it or is it, for completions), else the only server that offers
    /// (or, not run yet, may offer) resources at all. Two servers claiming it make it ambiguous
    /// ([`resource_claims`](super::resource_claims)).
    pub(super) fn resource_server(&self, uri: &str) -> Result<usize, Unrouted> {
        let live = |index: usize| !self.servers[index].retiring;
        let claimants = self.resources.claimants(uri, &self.templates, live);
        match claimants.as_slice() {
            [one] => return Ok(*one),
            [] => {}
            _ => return Err(Unrouted::Ambiguous(claimants)),
        }
        let mut offering = self
            .servers
            .iter()
            .enumerate()
            // Servers not run yet may offer resources too.
            .filter(|(_, s)| !s.retiring && s.has_capability("resources") != Some(false))
            .filter(|(_, s)| s.life.phase() != crate::gateway::lifecycle::Phase::Failed)
            .map(|(i, _)| i);
        match (offering.next(), offering.next()) {
            (Some(index), None) => Ok(index),
            _ => Err(Unrouted::NotFound),
        }
    }
}

/// Why a resource URI goes to no server.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unrouted {
    NotFound,
    /// These servers claim it equally.
    Ambiguous(Vec<usize>),
}

/// An MCP log level's place in RFC 5424's order (debug lowest); an unknown name counts as debug.
fn severity(level: &str) -> usize {
    const ORDER: [&str; 8] = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    ORDER.iter().position(|name| *name == level).unwrap_or(0)
}
