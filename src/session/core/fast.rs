//! The common case, fast: an answer from a server to a host request is passed on without
//! building a `Value` tree of it (a tool result can be megabytes, and parsing and encoding it
//! again costs more than everything else on the round trip), and in `Single` a host request
//! airlock forwards unchanged goes on as the bytes the host sent. A gateway's `tools/call` goes
//! on as the host's bytes with two values put in: the gateway's own id and the tool's name as
//! its server knows it, where the parse found the host's. Whatever needs a look inside (a list
//! to filter or aggregate, an era to shape, a batch, a translation) takes the full path
//! ([`Core::on_server`], [`Core::on_host`]); both paths apply the same rules.

use std::time::Instant;

use serde_json::Value;

use super::{Action, Core, Origin, era};
use crate::gate::Effects;
use crate::mcp::Field;
use crate::mcp::lenient::keep_exact_request_keys;
use crate::mcp::message::{has_id_key, id_key};
use crate::mcp::strict::{Parsed, Spans, parse_noting_duplicate_keys};
use crate::mcp::{Peek, peek, splice_id};

impl Core {
    /// One line from the server of `generation` (UTF-8, within the size limit). Err when it is
    /// not JSON; the line is then still in `line`. An answer passed on as it came takes the
    /// line's bytes with it (`line` is left empty): a tool result of megabytes is not copied.
    pub fn on_server_line(
        &mut self,
        index: usize,
        generation: u64,
        line: &mut Vec<u8>,
        now: Instant,
    ) -> Result<(), serde_json::Error> {
        if let Some(Peek::Answer {
            id,
            is_error,
            tool_error,
            task,
            multi_round_trip,
            error_message,
            id_at,
        }) = peek(line)
        {
            let answer = Peeked {
                id: &id,
                is_error,
                tool_error,
                task,
                multi_round_trip,
                error_message: error_message.as_deref(),
                id_at,
            };
            if self.answer_fast(index, generation, &answer, line, now) {
                return Ok(());
            }
        }
        let message = crate::mcp::from_line(line.as_slice())?;
        self.on_server(index, generation, message, now);
        Ok(())
    }

    /// One line from the host (within the size limit). Err when it is not JSON.
    ///
    /// In `Single` a request the gate lets through unchanged goes on as these bytes, unless
    /// another reader could read them otherwise than the gate did (a key twice in one object, a
    /// key a lenient server reads as one the gate read: [`keep_exact_spellings`]),
    /// or the gate takes something out of it (a caller identity in `_meta`): then the server
    /// gets what the gate read, re-encoded.
    pub fn on_host_line(&mut self, line: Vec<u8>, now: Instant) -> Result<(), serde_json::Error> {
        let Parsed {
            value: mut message,
            duplicate_keys,
            spans,
        } = parse_noting_duplicate_keys(&line, !self.single())?;
        let lookalike_keys = keep_exact_spellings(&mut message);
        // Requests only: an answer of the host's goes to the server by another path.
        let method = message.field("method").and_then(Value::as_str);
        // A gateway changes more of other requests (ids inside, the envelope of an era), and a
        // 2026-07-28 host's envelope is not its servers' to see.
        let kept_as_bytes = if self.single() {
            method.is_some()
        } else {
            method == Some("tools/call") && !era::stateless(&self.host)
        };
        if kept_as_bytes && !duplicate_keys && !lookalike_keys && !carries_identity(&message) {
            self.host_line = message.field("id").map(|id| HostLine {
                id: id.clone(),
                // The line itself moves on: no copy of it on the call's path.
                bytes: line,
                spans,
            });
        }
        self.dispatch_host(message, now);
        self.host_line = None;
        Ok(())
    }

    /// Frees what [`Core::keep_spent`] kept. The shell calls it once a step's bytes are written.
    pub fn free_spent(&mut self) {
        self.spent.clear();
    }

    /// Keeps a request whose bytes went on as the host sent them, to be freed later.
    pub(super) fn keep_spent(&mut self, message: Value) {
        self.spent.push(message);
    }

    /// The bytes the host sent for request `host_key`, as they came; never another message's.
    pub(super) fn take_host_line(&mut self, host_key: &str) -> Option<HostLine> {
        match self.host_line.take() {
            Some(line) if has_id_key(&line.id, host_key) => Some(line),
            _ => None,
        }
    }

    /// Passes a peeked answer on. False when it needs the full path (nothing changed then).
    fn answer_fast(
        &mut self,
        index: usize,
        generation: u64,
        answer: &Peeked<'_>,
        line: &mut Vec<u8>,
        now: Instant,
    ) -> bool {
        let Some(server) = self.servers.get(index) else {
            return true;
        };
        if server.life.generation != generation || !server.alive {
            return true;
        }
        // A gateway names the task an answer creates (`result.task`) for the host; answers to
        // the host's `tasks/*` requests and to 2026-07-28 requests are told apart below.
        // A gateway also takes a multi round-trip answer's keys out of its servers' answers:
        // only airlock asks the host for input through a result (`take_out_multi_round_trip_keys`).
        let gateway_shapes = !self.single() && (answer.task || answer.multi_round_trip);
        // A gateway notes which server a `resource_link` in a tool result points into, so the
        // host can read it before listing resources ([`Core::note_linked_resources`]).
        let links_resources = !self.single()
            && server.has_capability("resources") == Some(true)
            && memchr::memmem::find(line, b"resource_link").is_some();
        if gateway_shapes
            || links_resources
            || !self.batches.member.is_empty()
            || !self.parked.is_empty()
        {
            return false;
        }
        // An envelope another reader could read otherwise than airlock did (a key twice, or
        // both result and error) takes the full path, which sends on what airlock read.
        let Some(id_at) = answer.id_at else {
            return false;
        };
        let key = id_key(answer.id);
        // A gateway shapes every answer to a 2026-07-28 request (`resultType`, cache hints).
        let Some(Origin::Host {
            host_id,
            initialize: false,
            about_task: false,
            stateless,
            progress,
            ..
        }) = server.outbound.get(&key)
        else {
            return false;
        };
        // A task it creates keeps the request's progress token live: the full path notes it.
        if answer.task && progress.is_some() {
            return false;
        }
        if *stateless && !self.single() {
            return false;
        }
        let same_id = host_id == answer.id;
        // The same id has the same key: built again only for another id (a gateway's).
        let other_key = (!same_id).then(|| id_key(host_id));
        let bytes = if same_id {
            None
        } else {
            // The host's id in place of the server's, where `peek` found it.
            match splice_id(line, id_at, host_id) {
                Some(bytes) => Some(bytes),
                None => return false,
            }
        };
        let host_key = other_key.as_deref().unwrap_or(&key);
        let mut fx = Effects::default();
        let gate = &mut self.servers[index].gate;
        let (is_error, tool_error) = (answer.is_error, answer.tool_error);
        if !gate.on_answer_peeked(
            host_key,
            is_error,
            tool_error,
            answer.error_message,
            now,
            &mut fx,
        ) {
            return false;
        }
        let server = &mut self.servers[index];
        server.life.last_activity = now;
        if let Some(Origin::Host {
            progress: Some(token),
            ..
        }) = server.outbound.remove(&key)
        {
            server.progress.remove(&token);
        }
        self.host_requests.remove(host_key);
        if !self.stateless_requests.is_empty() {
            self.stateless_requests.remove(host_key);
        }
        self.apply_gate(index, fx, now);
        // The same id: the line itself goes on, no copy of it.
        let bytes = bytes.unwrap_or_else(|| std::mem::take(line));
        self.out.push(Action::ToHostBytes(bytes));
        true
    }
}

/// A host request as it came, read with no key twice, no other spelling of a key airlock reads
/// and no caller identity (so every reader reads these bytes as the gate did).
pub(super) struct HostLine {
    pub id: Value,
    pub bytes: Vec<u8>,
    pub spans: Spans,
}

impl HostLine {
    /// The line with `id` in place of the host's id and `name` in place of `params.name`,
    /// everything else as the host wrote it. `None` when the parse did not find both.
    pub fn with_id_and_name(&self, id: &Value, name: &str) -> Option<Vec<u8>> {
        let (id_at, name_at) = (self.spans.id?, self.spans.name?);
        let name = Value::from(name);
        let (first, second) = if id_at.0 < name_at.0 {
            ((id_at, id), (name_at, &name))
        } else {
            ((name_at, &name), (id_at, id))
        };
        let line = &self.bytes;
        let mut out = Vec::with_capacity(line.len() + 32);
        out.extend_from_slice(line.get(..first.0.0)?);
        serde_json::to_writer(&mut out, first.1).ok()?;
        out.extend_from_slice(line.get(first.0.1..second.0.0)?);
        serde_json::to_writer(&mut out, second.1).ok()?;
        out.extend_from_slice(line.get(second.0.1..)?);
        Some(out)
    }
}

/// Takes other spellings of the keys airlock reads out of a host message
/// ([`keep_exact_request_keys`]); true when there were any (the message is then re-encoded from
/// what is left, never forwarded as the bytes that came).
pub(super) fn keep_exact_spellings(message: &mut Value) -> bool {
    let removed = keep_exact_request_keys(message);
    if let Some(first) = removed.first() {
        tracing::warn!(
            "took {} key(s) out of a message from the host that a lenient server would read as keys airlock decided on, e.g. {first:?}",
            removed.len()
        );
    }
    !removed.is_empty()
}

/// Whether a host message names a caller identity, which the gate takes out before forwarding.
fn carries_identity(message: &Value) -> bool {
    message
        .at(&["params", "_meta", crate::gate::META_IDENTITY])
        .is_some()
}

/// What [`peek`] read of an answer.
struct Peeked<'a> {
    id: &'a Value,
    is_error: bool,
    tool_error: bool,
    /// `result` has a `task` key.
    task: bool,
    /// `result` has a key of a multi round-trip answer ([`Peek::Answer`]).
    multi_round_trip: bool,
    error_message: Option<&'a str>,
    /// Where the answer's id is in its line; `None` when the line's envelope could be read
    /// otherwise by another reader (see [`Peek::Answer`]).
    id_at: Option<(usize, usize)>,
}
