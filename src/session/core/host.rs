//! Host dispatch: every message from the host is classified here, its era learned, duplicates
//! and batches handled, then handed to the topology's routing.

use std::time::Instant;

use serde_json::{Value, json};

use super::{Core, Topology, era};
use crate::audit::{Event, EventKind};
use crate::fast_map::FastMap;
use crate::mcp::Field;
use crate::mcp::lenient::lookalike_method;
use crate::mcp::message::{code, has_id_key, id_key};
use crate::mcp::version;
use crate::mcp::{Class, classify, salvage_id};

impl Core {
    /// One message from the host (already parsed as JSON).
    pub fn on_host(&mut self, mut message: Value, now: Instant) {
        super::fast::keep_exact_spellings(&mut message);
        self.dispatch_host(message, now);
    }

    /// [`Core::on_host`] once the message holds only the spellings airlock reads.
    pub(super) fn dispatch_host(&mut self, mut message: Value, now: Instant) {
        if self.refuse_lookalike_method(&message) {
            return;
        }
        match classify(&message) {
            Err(invalid) => {
                let id = salvage_id(&message);
                let text = format!("invalid request: {invalid}");
                self.reply_error(id, code::INVALID_REQUEST, &text);
            }
            Ok(Class::Batch(_)) => self.host_batch(message, now),
            Ok(Class::Request { id, method }) => {
                let (id, method) = (id.clone(), method.to_string());
                if self.duplicate(&id) {
                    return;
                }
                // A session has one handshake: a second `initialize` would switch its era (and
                // with it batches, answer shapes, how input is asked for) under calls in flight,
                // also one sent before the first is answered (a gateway kept only the later
                // one's id). One that failed may be tried again.
                let handshake_begun = self.host.initialized
                    || self.host.initialize_forwarded
                    || self.pending_initialize.is_some();
                if method == "initialize" && handshake_begun {
                    let text = "initialize: this session's handshake is under way or done, and a session has one (to change the protocol version, start a new session)";
                    self.reply_error(id, code::INVALID_REQUEST, text);
                    return;
                }
                // Before the host's facts are learnt from it: a refused request says nothing
                // about the host.
                if let Some((code, text, data)) = self.era_refusal(&method, &message) {
                    let answer = crate::mcp::error_response(id, code, &text, data);
                    self.send_host(answer);
                    return;
                }
                self.learn_host(&method, &message, now);
                self.note_request_era(&id);
                if !self.single() && !self.request_has_tasks(&message) {
                    // Only 2025-11-25 has `task` augmentation (2026-07-28 made tasks an
                    // extension, with other methods): a server would answer with a task the
                    // host cannot read, so the request runs as the plain one its era defines.
                    if super::tasks::make_plain(&mut message) {
                        // The line as the host sent it still holds the `task`: what goes on is
                        // the request re-encoded.
                        let _ = self.take_host_line(&crate::mcp::id_key(&id));
                    }
                }
                match self.topology {
                    Topology::Single => self.forward_request(0, message, id, now),
                    Topology::Gateway { .. } => self.gateway_request(message, id, &method, now),
                }
            }
            Ok(Class::Notification { method }) => {
                let method = method.to_string();
                self.host_notification(message, &method, now);
            }
            Ok(Class::Response { id } | Class::Error { id }) => {
                let key = id_key(id);
                self.host_response(message, &key, now);
            }
        }
    }

    /// JSON-RPC batches exist in 2025-03-26 only. Each request of a batch is handled on its
    /// own (gated, routed); their answers leave together as one array.
    fn host_batch(&mut self, message: Value, now: Instant) {
        // The handshake's version decides, not the latest request's: a 2026-07-28 request that
        // `run` relayed since does not take batches away from a 2025-03-26 session.
        let opened = self.host.handshake_version.as_deref();
        let version = opened.or(self.host.version.as_deref());
        if !version::supports_batches(version) {
            let version = version.unwrap_or("(none negotiated yet)");
            let text = format!("JSON-RPC batches are not part of MCP protocol version {version}");
            self.reply_error(Value::Null, code::INVALID_REQUEST, &text);
            return;
        }
        let Value::Array(items) = message else {
            return;
        };
        let batch = self.batches.next;
        self.batches.next += 1;
        let mut requests = 0;
        // An element that is no valid message (a number, a nested array) is answered in the
        // batch's own array, as JSON-RPC 2.0 answers a batch: one array for one batch.
        let mut invalid = Vec::new();
        let mut valid = Vec::new();
        for item in items {
            match classify(&item) {
                Ok(Class::Batch(_)) | Err(_) => {
                    let text = "invalid request: a batch element must be one JSON-RPC message";
                    let answer = crate::mcp::error_response(
                        salvage_id(&item),
                        code::INVALID_REQUEST,
                        text,
                        None,
                    );
                    invalid.push(answer);
                    continue;
                }
                Ok(Class::Request { id, .. }) => {
                    let key = id_key(id);
                    if !self.batches.member.contains_key(&key) && !self.in_flight(&key) {
                        self.batches.member.insert(key, batch);
                        requests += 1;
                    }
                }
                Ok(_) => {}
            }
            valid.push(item);
        }
        if requests > 0 {
            self.batches.open.insert(batch, (requests, invalid));
        } else if !invalid.is_empty() {
            self.send_host(Value::Array(invalid));
        }
        for item in valid {
            self.on_host(item, now);
        }
    }

    /// Whether a host request id is still in flight (forwarded, queued, held, or being
    /// answered by airlock).
    fn in_flight(&self, key: &str) -> bool {
        self.host_requests.contains_key(key)
            || self.is_listen(key)
            || self.servers.iter().any(|s| s.gate.tracks(key))
            || self
                .aggregations
                .iter()
                .any(|a| has_id_key(&a.host_id, key))
            || self
                .pending_initialize
                .as_ref()
                .is_some_and(|(id, _, _)| has_id_key(id, key))
    }

    /// A method spelled otherwise than one airlock handles ([`lookalike_method`]) is refused
    /// (a request gets an Invalid Request error, a notification is dropped) and recorded: airlock
    /// would pass it on as a method it does not know, and a lenient server would run it as the
    /// method it looks like, ungated.
    fn refuse_lookalike_method(&mut self, message: &Value) -> bool {
        let Some(method) = message.field("method").and_then(Value::as_str) else {
            return false;
        };
        let Some(meant) = lookalike_method(method) else {
            return false;
        };
        let shown = self.redactor.loggable_name(method);
        let text = format!(
            "invalid request: method {shown:?} is not {meant:?} as spelled; airlock refuses other spellings of the methods it decides on"
        );
        tracing::warn!("refused a message from the host: {text}");
        let mut event = Event::new(EventKind::Dropped, "host");
        event.request_id = message.field("id").cloned();
        event.reason = Some(text.clone());
        self.audit(event);
        if let Some(id) = message.field("id") {
            self.reply_error(id.clone(), code::INVALID_REQUEST, &text);
        }
        true
    }

    /// A request whose id is already in flight is a host bug; it is handled once: the second is
    /// dropped (recorded), so the first keeps its one decision, its one outcome and its answer.
    fn duplicate(&mut self, id: &Value) -> bool {
        if !self.in_flight(&id_key(id)) {
            return false;
        }
        // The id is the host's to choose, of any size: capped as a name is in the log.
        let shown = self.redactor.loggable_name(&id.to_string());
        tracing::warn!("dropped a host request whose id {shown} is already in flight");
        let mut event = Event::new(EventKind::Dropped, "host");
        event.request_id = Some(id.clone());
        event.reason = Some("a request with this id is already in flight".into());
        self.audit(event);
        true
    }

    /// The first request tells airlock who the host is: `initialize` in the handshake era, the
    /// request's `_meta` in the stateless era (every request carries it there).
    fn learn_host(&mut self, method: &str, message: &Value, now: Instant) {
        let params = message.field("params");
        let opted_in = params.and_then(|p| p.at(&["_meta", "io.modelcontextprotocol/logLevel"]));
        if let Some(level) = opted_in.filter(|_| !self.single()) {
            self.log_level(level.clone(), now);
        }
        // Only a stateless-era version is declared in `_meta`: a handshake-era one there (a
        // `2025-03-26` that would turn batches on) is no declaration.
        let declared = version::request_version(params)
            .filter(|declared| version::era_of(declared) == version::Era::Stateless);
        // The common case, every call after the handshake: nothing new about the host. A
        // request that names no version speaks the era the host opened with, even right after
        // a 2026-07-28 request of another HTTP session.
        if method != "initialize" && declared.is_none() && self.host.known {
            if self.host.handshake_version.is_some()
                && self.host.version != self.host.handshake_version
            {
                self.host.version = self.host.handshake_version.clone();
                self.host.capabilities = self.host.handshake_capabilities.clone();
                self.share_host_facts();
            }
            return;
        }
        let before = self.host_facts();
        if method == "initialize" {
            let params = params.cloned().unwrap_or(Value::Null);
            self.host.capabilities = params.field("capabilities").cloned().unwrap_or(json!({}));
            self.host.client_info = params.field("clientInfo").cloned();
            self.host.version = params
                .field("protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            self.host.handshake_version = self.host.version.clone();
            self.host.handshake_capabilities = self.host.capabilities.clone();
        } else if let Some(declared) = declared {
            if let Some(caps) = version::request_capabilities(params) {
                self.host.capabilities = caps.clone();
            }
            if self.host.client_info.is_none() {
                self.host.client_info = params
                    .and_then(|p| p.at(&["_meta", "io.modelcontextprotocol/clientInfo"]))
                    .cloned();
            }
            self.host.version = Some(declared.to_string());
        }
        if self.host_facts() != before {
            self.share_host_facts();
        }
        if !self.host.known {
            self.host.known = true;
            if self.single() {
                return;
            }
            // Eager servers spawned before the host spoke waited for its capabilities.
            for index in 0..self.servers.len() {
                if self.servers[index].alive && !self.servers[index].handshake_sent {
                    self.send_initialize(index, now);
                }
            }
        }
    }

    /// A gateway refuses a request for its era as a server of that era would
    /// ([`era::request_refusal`]); `run` leaves that to the server.
    fn era_refusal(&self, method: &str, message: &Value) -> Option<era::Refusal> {
        if self.single() {
            return None;
        }
        era::request_refusal(method, message.field("params"), self.session_era())
    }

    /// Whether the host chose its era: it began a handshake, or spoke 2026-07-28.
    pub(super) fn host_has_an_era(&self) -> bool {
        self.session_era() != era::SessionEra::Fresh
    }

    /// What this session's host did so far, for [`era::request_refusal`].
    fn session_era(&self) -> era::SessionEra {
        if self.trust_identity {
            era::SessionEra::Shared
        } else if self.host.handshake_version.is_some()
            || self.host.initialized
            || self.host.initialize_forwarded
            || self.pending_initialize.is_some()
        {
            era::SessionEra::Handshake
        } else if era::stateless(&self.host) {
            era::SessionEra::Stateless
        } else {
            era::SessionEra::Fresh
        }
    }

    /// Whether the era `message` (a host request) speaks has the 2025-11-25 tasks: its own
    /// version for a 2026-07-28 request, else the one the host's handshake opened with. Behind
    /// the HTTP face sessions of several versions share the core: there only a 2026-07-28
    /// request is told apart.
    pub(super) fn request_has_tasks(&self, message: &Value) -> bool {
        if version::request_version(message.field("params"))
            .is_some_and(|v| version::era_of(v) == version::Era::Stateless)
        {
            return false;
        }
        self.trust_identity || self.host_has_tasks()
    }

    /// Whether the host's handshake opened a version with the 2025-11-25 tasks.
    pub(super) fn host_has_tasks(&self) -> bool {
        let opened = self.host.handshake_version.as_deref();
        opened
            .or(self.host.version.as_deref())
            .is_some_and(version::has_tasks)
    }

    fn host_notification(&mut self, message: Value, method: &str, now: Instant) {
        match method {
            "notifications/cancelled" => self.host_cancelled(message, now),
            // In a gateway airlock did the handshake with each server itself.
            "notifications/initialized" if !self.single() => {}
            "notifications/roots/list_changed" if !self.single() => {
                for index in 0..self.servers.len() {
                    if self.servers[index].life.is_ready() {
                        self.gate_to_server(index, message.clone(), now);
                    }
                }
            }
            _ if self.single() => self.gate_to_server(0, message, now),
            other => tracing::debug!("not routing host notification {other}"),
        }
    }

    /// An answer from the host: to a server's request (mapped back to the server and its own
    /// id), or to a gate's confirmation request.
    fn host_response(&mut self, message: Value, key: &str, now: Instant) {
        if let Some((index, generation, original)) = self.inbound.remove(key) {
            let server = &self.servers[index];
            if !server.alive || server.life.generation != generation {
                return;
            }
            let mut message = message;
            message["id"] = original;
            if !self.single() {
                super::tasks::unname_in_host_answer(&mut message, self.task_maker(index));
            }
            self.note_offered_roots(index, &message);
            self.send_raw(index, message, now);
            return;
        }
        if let Some(index) = self.servers.iter().position(|s| s.gate.owns(key)) {
            self.gate_to_server(index, message, now);
            return;
        }
        tracing::debug!("dropping a host answer to an unknown request {key}");
    }
}

/// Answers of a host batch (2025-03-26), sent as one array once every request is answered.
#[derive(Debug, Default)]
pub(super) struct Batches {
    pub(super) next: u64,
    /// Host request id key → its batch.
    pub(super) member: FastMap<String, u64>,
    /// Batch → (requests still unanswered, answers so far).
    pub(super) open: FastMap<u64, (usize, Vec<Value>)>,
}

impl Batches {
    /// The host cancelled request `key`: it gets no answer (a cancelled request is never
    /// answered), so its batch waits for it no longer. The batch's answers when that was the
    /// last one it waited for (none when every member was cancelled).
    pub(super) fn cancelled(&mut self, key: &str) -> Option<Vec<Value>> {
        let batch = self.member.remove(key)?;
        let (remaining, _) = self.open.get_mut(&batch)?;
        *remaining -= 1;
        if *remaining > 0 {
            return None;
        }
        let (_, answers) = self.open.remove(&batch)?;
        (!answers.is_empty()).then_some(answers)
    }
}
