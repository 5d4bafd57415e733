//! Correlation: a host request goes through its server's gate (in the host's id space), gets a
//! downstream id and is sent, or queued until the server is Ready; cancellations and the gate's
//! own messages cross the same hop with the ids translated.

use std::time::Instant;

use serde_json::Value;

use super::{Action, Core, Origin};
use crate::gate::{Effects, Verdict};
use crate::gateway::lifecycle::Demand;
use crate::mcp::Field;
use crate::mcp::message::{id_key, request};
use crate::mcp::{Class, classify};

impl Core {
    /// A host request for one server: decided by its gate (a `tools/call` is audited here,
    /// before anything is sent), then sent downstream.
    pub(super) fn forward_request(
        &mut self,
        index: usize,
        message: Value,
        id: Value,
        now: Instant,
    ) {
        let mut fx = Effects::default();
        let verdict = self.servers[index].gate.on_host(message, now, &mut fx);
        self.apply_gate(index, fx, now);
        if let Verdict::Forward(message) = verdict {
            self.send_downstream(index, message, id, now);
        }
    }

    /// A host notification, or the host's answer to a gate's own request, through the gate.
    pub(super) fn gate_to_server(&mut self, index: usize, message: Value, now: Instant) {
        let mut fx = Effects::default();
        let verdict = self.servers[index].gate.on_host(message, now, &mut fx);
        self.apply_gate(index, fx, now);
        if let Verdict::Forward(message) = verdict {
            self.gate_message_down(index, message, now);
        }
    }

    /// The gate's own output: audit first, then its answers to the host, then what it sends the
    /// server (approved calls, cancellations), with the ids translated.
    pub(super) fn apply_gate(&mut self, index: usize, fx: Effects, now: Instant) {
        for event in fx.audit {
            self.servers[index].count(&event);
            self.audit(event);
        }
        for message in fx.to_host {
            self.send_host(message);
        }
        for message in fx.to_server {
            self.gate_message_down(index, message, now);
        }
        if let Some(kind) = fx.relist {
            self.relist_after_approval(index, kind, now);
        }
        if fx.list_tools {
            self.list_for_gate(index, now);
        }
        let retried = !fx.retry.is_empty();
        for call in fx.retry {
            let id = call.field("id").cloned().unwrap_or_default();
            self.forward_request(index, call, id, now);
        }
        if retried && self.single() {
            // The host may have closed its input while these waited.
            self.close_server_input();
        }
    }

    fn gate_message_down(&mut self, index: usize, message: Value, now: Instant) {
        match classify(&message) {
            Ok(Class::Request { id, .. }) => {
                let id = id.clone();
                self.send_downstream(index, message, id, now);
            }
            Ok(Class::Notification {
                method: "notifications/cancelled",
            }) => self.cancel_downstream(index, message, now),
            _ => self.send_raw(index, message, now),
        }
    }

    /// A host request the gate let through: a downstream id (the host's own in `Single`, a fresh
    /// one of the server in `Gateway`), the progress token rewritten in `Gateway`, then sent.
    fn send_downstream(&mut self, index: usize, message: Value, host_id: Value, now: Instant) {
        let Some(mut message) = self.before_sending(index, message, &host_id, now) else {
            return;
        };
        let single = self.single();
        let method = message
            .field("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let initialize = method == "initialize";
        if initialize {
            self.host.initialize_forwarded = true;
        }
        let tool_call = method == "tools/call";
        let cacheable = super::era::cacheable(method);
        // An answer to one may end a task, and with it the progress token it kept live.
        let about_task = matches!(method, "tasks/get" | "tasks/result" | "tasks/cancel");
        let input_carrier = !single && super::mrtr::carries_input(method);
        let declared = input_carrier
            .then(|| crate::mcp::version::request_capabilities(message.field("params")).cloned())
            .flatten();
        // The gateway speaks the handshake era to its servers: a 2026-07-28 host's envelope
        // (read above and by the host dispatch) is not theirs to see.
        // A gateway's request keeps its own era, not the latest request's: it may have waited
        // (one host, in `Single`, speaks one era).
        let stateless = if single {
            super::era::stateless(&self.host)
        } else {
            super::era::request_stateless(&message, &self.host)
        };
        let envelope_taken_out = !single && stateless;
        if envelope_taken_out {
            crate::mcp::version::strip_envelope(&mut message);
        }
        let host_key = id_key(&host_id);
        let server = &mut self.servers[index];
        let identity = single && !server.outbound.contains_key(&host_key);
        let down_id = if identity {
            host_id.clone()
        } else {
            server.next_id += 1;
            let fresh = Value::from(server.next_id);
            match message.field_mut("id") {
                Some(slot) => *slot = fresh.clone(),
                None => message["id"] = fresh.clone(),
            }
            fresh
        };
        // A request's progress token is live while it runs (and, for a task it creates, while
        // the task runs): only its notifications reach the host. A gateway names the token for
        // this server (its hosts' tokens may collide across servers); `Single` keeps the host's.
        let mut progress = None;
        if let Some(token) = message.at(&["params", "_meta", "progressToken"]).cloned() {
            let down_token = if single {
                token.clone()
            } else {
                Value::String(format!("airlock-p-{}", server.next_id))
            };
            let key = id_key(&down_token);
            server.progress.insert(key.clone(), token);
            if !single {
                message["params"]["_meta"]["progressToken"] = down_token;
            }
            progress = Some(key);
        }
        let token_renamed = !single && progress.is_some();
        let origin = Origin::Host {
            host_id,
            progress,
            initialize,
            cacheable,
            input_carrier,
            declared,
            about_task,
            stateless,
        };
        // The host's own id goes on unchanged in `Single`: its key is the host's key.
        let down_key = if identity {
            host_key.clone()
        } else {
            id_key(&down_id)
        };
        server.outbound.insert(down_key.clone(), origin);
        // The bytes the host sent go on (when the server can take them now): as they came in
        // `Single` with the host's own id, or with the gateway's id and the server's tool name
        // put in. A renamed progress token or a 2026-07-28 envelope taken out would be a third
        // change: such a call is encoded. (The host's first 2026-07-28 request may have been
        // kept as bytes before it made the host stateless: the check is here, where it counts.)
        let raw = self.take_host_line(&host_key).and_then(|line| {
            if identity {
                Some(line.bytes)
            } else if single || token_renamed || envelope_taken_out || !tool_call {
                None
            } else {
                let name = message.at(&["params", "name"]).and_then(Value::as_str)?;
                line.with_id_and_name(&down_id, name)
            }
        });
        self.host_requests.insert(host_key, (index, down_id));
        match raw {
            Some(bytes) if self.servers[index].life.is_ready() && self.servers[index].alive => {
                self.send_bytes(index, bytes, Some(down_key), now);
                self.keep_spent(message);
            }
            _ => self.deliver(index, message, now),
        }
    }

    fn send_bytes(&mut self, index: usize, bytes: Vec<u8>, request: Option<String>, now: Instant) {
        let server = &mut self.servers[index];
        server.life.last_activity = now;
        self.out.push(Action::ToServerBytes {
            server: index,
            generation: server.life.generation,
            bytes,
            request,
        });
    }

    /// Sends a request to a server now, or queues it until the server is Ready (starting it if
    /// needed); a server given up answers it at once.
    fn deliver(&mut self, index: usize, message: Value, now: Instant) {
        match self.servers[index].life.demand(now, true) {
            Demand::Ready => self.send_raw(index, message, now),
            Demand::Wait => self.servers[index].queue.push(message),
            Demand::Start => {
                self.servers[index].queue.push(message);
                self.start(index, now);
            }
            Demand::Unavailable(reason) => {
                let why = format!(
                    "server `{}` is unavailable: {reason}",
                    self.servers[index].name
                );
                if let Some(id) = message.field("id") {
                    let key = id_key(id);
                    self.undeliverable(index, &key, &why, now);
                }
            }
        }
    }

    /// A request that will never reach its server (`down_key`: its downstream id key): its
    /// gate answers it, and the core forgets it.
    pub(super) fn undeliverable(&mut self, index: usize, down_key: &str, why: &str, now: Instant) {
        let server = &mut self.servers[index];
        server
            .queue
            .retain(|m| m.field("id").map(id_key).as_deref() != Some(down_key));
        let Some(Origin::Host {
            host_id, progress, ..
        }) = server.outbound.remove(down_key)
        else {
            return;
        };
        if let Some(token) = progress {
            server.progress.remove(&token);
        }
        let host_key = id_key(&host_id);
        self.host_requests.remove(&host_key);
        let mut fx = Effects::default();
        self.servers[index]
            .gate
            .fail_request(&host_key, why, now, &mut fx);
        self.apply_gate(index, fx, now);
    }

    /// A cancellation (from the host, or the gate's at a timeout) in the host's id space: the
    /// downstream request is forgotten (its late answer is dropped) and the server told, unless
    /// the request never left the queue.
    fn cancel_downstream(&mut self, index: usize, mut message: Value, now: Instant) {
        let Some(key) = message.at(&["params", "requestId"]).map(id_key) else {
            return;
        };
        let Some((owner, down_id)) = self.host_requests.remove(&key) else {
            // Not one of ours (or already answered): a passthrough host may still mean it.
            if self.single() {
                self.send_raw(index, message, now);
            }
            return;
        };
        let down_key = id_key(&down_id);
        let server = &mut self.servers[owner];
        if let Some(Origin::Host {
            progress: Some(token),
            ..
        }) = server.outbound.remove(&down_key)
        {
            server.progress.remove(&token);
        }
        let before = server.queue.len();
        server
            .queue
            .retain(|m| m.field("id").map(id_key).as_deref() != Some(&down_key));
        if server.queue.len() != before {
            // Never reached the server: nothing to cancel there.
            return;
        }
        message["params"]["requestId"] = down_id;
        self.send_raw(owner, message, now);
    }

    /// A host `notifications/cancelled`: to the server that has (or holds) the request.
    pub(super) fn host_cancelled(&mut self, message: Value, now: Instant) {
        let Some(key) = message.at(&["params", "requestId"]).map(id_key) else {
            return;
        };
        if self.end_listen(&key) {
            return;
        }
        if let Some(answers) = self.batches.cancelled(&key) {
            self.out.push(Action::ToHost(Value::Array(answers)));
        }
        // A cancelled request is never answered.
        self.stateless_requests.remove(&key);
        self.aggregations.retain(|a| id_key(&a.host_id) != key);
        let owner = self
            .host_requests
            .get(&key)
            .map(|(index, _)| *index)
            .or_else(|| self.servers.iter().position(|s| s.gate.tracks(&key)));
        match owner {
            Some(index) => self.gate_to_server(index, message, now),
            // A call airlock answered itself is the first gate's to recognise; in a passthrough
            // session anything else goes on as the host sent it.
            None if self.single() => self.gate_to_server(0, message, now),
            None => {}
        }
    }

    pub(super) fn send_raw(&mut self, index: usize, message: Value, now: Instant) {
        let server = &mut self.servers[index];
        if server.alive {
            server.life.last_activity = now;
            self.out.push(Action::ToServer {
                server: index,
                generation: server.life.generation,
                message,
            });
        }
    }

    /// A request of airlock's own (gateway handshake, lists): not gated, answered to airlock,
    /// sent now (the server is running: a gateway's handshake goes out while it starts).
    pub(super) fn internal_request(
        &mut self,
        index: usize,
        method: &str,
        params: Value,
        origin: Origin,
        now: Instant,
    ) {
        let message = self.own_request(index, method, params, origin);
        self.send_raw(index, message, now);
    }

    /// A request of airlock's own that waits like a host's for a server still starting (or
    /// installing): `Single`'s listing for the gate.
    pub(super) fn internal_request_queued(
        &mut self,
        index: usize,
        method: &str,
        params: Value,
        origin: Origin,
        now: Instant,
    ) {
        let message = self.own_request(index, method, params, origin);
        self.deliver(index, message, now);
    }

    /// The message of a request of airlock's own, its answer expected as `origin`.
    fn own_request(&mut self, index: usize, method: &str, params: Value, origin: Origin) -> Value {
        let single = self.single();
        let mut params = params;
        // In `Single` a 2026-07-28 host and its server speak that era end to end, and the server
        // requires the envelope on every request: airlock's own carry the host's.
        if single && super::era::stateless(&self.host) {
            crate::mcp::version::add_envelope(
                &mut params,
                self.host.version.as_deref().unwrap_or_default(),
                &self.host.capabilities,
            );
        }
        let server = &mut self.servers[index];
        let id = loop {
            server.next_id += 1;
            // `Single` passes the host's own ids: airlock's are strings no host id can be in
            // flight as (a host id that later equals one gets a fresh id in send_downstream).
            let id = if single {
                Value::String(format!("{}{}", crate::gate::OWN_ID_PREFIX, server.next_id))
            } else {
                Value::from(server.next_id)
            };
            if !server.outbound.contains_key(&id_key(&id)) {
                break id;
            }
        };
        server.outbound.insert(id_key(&id), origin);
        request(id, method, params)
    }

    pub(super) fn start(&mut self, index: usize, now: Instant) {
        if self.shutting_down {
            return;
        }
        let server = &mut self.servers[index];
        let generation = server.life.begin_start(now);
        let starts = self.starts.entry(server.name.clone()).or_default();
        *starts += 1;
        server.start = *starts;
        server.alive = false;
        server.handshake_sent = false;
        self.out.push(Action::Start {
            server: index,
            generation,
        });
    }
}
