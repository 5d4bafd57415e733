//! Carrying out the core's actions. The messages of one step are gathered per peer and written
//! with one write each; the audit events of the step go out in one write **before** anything
//! reaches a server (a decision is on record before the call it records is forwarded), and after
//! the host's answers (so an answer does not wait for the log, nor for the encoding of its
//! outcome: the step's events are encoded once the host's bytes are out).
//!
//! An outcome waits longer still: it is encoded once its answer is out and written in the same
//! `write` as the next call's decision, or at the latest [`crate::audit::sink::HOLD_AT_MOST`]
//! after the answer (see [`may_hold`]).

use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use super::io::Sent;
use super::link::Connected;
use super::{Loop, ShellError};
use crate::audit::{Event, EventKind};
use crate::gateway::remote::Launch;
use crate::mcp::Field;
use crate::mcp::message::id_key;
use crate::process::launch::LaunchError;
use crate::session::core::Action;

/// The messages of one step for one server.
pub(super) struct Chunk {
    server: usize,
    generation: u64,
    bytes: Vec<u8>,
    /// Downstream id keys of the requests in it (answered if the server cannot take them).
    requests: Vec<String>,
}

/// Whether `event` is an outcome the log may hold: every outcome (while shutting down, the
/// caller writes them at once). Writing an outcome on its own costs a lock, a seek, a write and
/// a checkpoint (about 3 µs of system calls here); held, it is encoded once the answer is out
/// and goes into the `write` of the next call's decision, or is written
/// [`crate::audit::sink::HOLD_AT_MOST`] after the answer at the latest (docs/run.md, "One commit
/// a call, and polling before sleeping").
fn may_hold(event: &Event) -> bool {
    event.event == EventKind::Outcome
}

/// Appends `value` as one line.
fn encode_into(out: &mut Vec<u8>, value: &Value) {
    let start = out.len();
    // Serialising a `Value` cannot fail (string keys only); never leave half a line behind.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.truncate(start);
        return;
    }
    out.push(b'\n');
}

/// From this size a line that is the first of its step's bytes becomes those bytes itself
/// instead of being copied into them. Below it, copying into the buffer kept from the last step
/// costs less than the allocation a line of its own would need.
const TAKE_LINES_FROM_BYTES: usize = 64 * 1024;

/// Appends `line` and its newline to `out`. A large line that `out` would hold alone becomes
/// `out`: a tool result of megabytes is not copied once more on its way.
fn append_line(out: &mut Vec<u8>, mut line: Vec<u8>) {
    if out.is_empty() && line.len() >= TAKE_LINES_FROM_BYTES {
        line.push(b'\n');
        *out = line;
        return;
    }
    out.extend_from_slice(&line);
    out.push(b'\n');
}

/// How much of a dropped line the warning shows.
const JUNK_SHOWN_BYTES: usize = 80;

impl<HR, HW> Loop<HR, HW>
where
    HR: AsyncRead + Unpin,
    HW: AsyncWrite + Unpin,
{
    /// Carries out the core's actions, in order, until it has none left.
    pub(super) fn carry_out(&mut self) -> Result<(), ShellError> {
        loop {
            self.core.drain_actions(&mut self.actions);
            if self.actions.is_empty() {
                break;
            }
            let mut actions = std::mem::take(&mut self.actions);
            for action in actions.drain(..) {
                self.carry(action)?;
            }
            self.actions = actions;
            self.flush()?;
            self.core.free_spent();
        }
        // Bytes queued outside the core (an unreadable line's error answer) go out now, not with
        // whatever the core says next: the host may be waiting for that answer alone.
        if !self.host_bytes.is_empty() {
            self.flush()?;
        }
        // Events staged outside the core's actions (a junk line's record, which also releases a
        // held outcome) are written now, not whenever the next step flushes.
        if self.audit.has_staged() {
            self.audit.commit()?;
        }
        if self
            .audit
            .held_until()
            .is_some_and(|due| due <= Instant::now())
        {
            self.audit.commit_held()?;
        }
        self.arm_timer();
        Ok(())
    }

    fn carry(&mut self, action: Action) -> Result<(), ShellError> {
        match action {
            Action::Audit(event) if may_hold(&event) && !self.shutting_down => {
                self.audit.hold(*event)
            }
            Action::Audit(event) => self.audit.defer(*event),
            Action::ToHost(message) => encode_into(&mut self.host_bytes, &message),
            Action::ToHostBytes(bytes) => append_line(&mut self.host_bytes, bytes),
            Action::ToServerBytes {
                server,
                generation,
                bytes,
                request,
            } => {
                let chunk = self.chunk(server, generation);
                append_line(&mut chunk.bytes, bytes);
                chunk.requests.extend(request);
            }
            Action::ToServer {
                server,
                generation,
                message,
            } => self.gather(server, generation, &message),
            Action::Dropped { server, reason } => self.junk(server, reason, json!({}), None)?,
            Action::Start { server, generation } => {
                self.flush()?;
                self.start(server, generation);
            }
            Action::CloseInput { server, generation } => {
                self.flush()?;
                self.close_input(server, generation);
            }
            Action::Stop {
                server,
                generation,
                reason,
            } => {
                self.flush()?;
                tracing::info!(server = %self.names[server], "stopping: {reason}");
                self.stop(server, generation, reason);
            }
        }
        Ok(())
    }

    fn gather(&mut self, server: usize, generation: u64, message: &Value) {
        let request = message
            .field("method")
            .is_some()
            .then(|| message.field("id"))
            .flatten();
        let request = request.map(id_key);
        let chunk = self.chunk(server, generation);
        encode_into(&mut chunk.bytes, message);
        chunk.requests.extend(request);
    }

    /// The bytes gathered for that server in this step (in order with the other servers').
    fn chunk(&mut self, server: usize, generation: u64) -> &mut Chunk {
        let same = self
            .server_bytes
            .last()
            .is_some_and(|c| c.server == server && c.generation == generation);
        if !same {
            self.server_bytes.push(Chunk {
                server,
                generation,
                bytes: Vec::new(),
                requests: Vec::new(),
            });
        }
        let last = self.server_bytes.len() - 1;
        &mut self.server_bytes[last]
    }

    /// The host's bytes, then the audit events (with the held outcomes encoded before), then
    /// each server's bytes; then the outcomes held in this step are encoded for the next write.
    fn flush(&mut self) -> Result<(), ShellError> {
        if !self.host_bytes.is_empty() {
            // A host that closed its input is gone; the loop ends on its EOF.
            let _ = self.host_out.send(&self.host_bytes);
            self.host_bytes.clear();
        }
        // The records are written before any server gets a byte of this step; the checkpoint
        // is rewritten after (see `AuditLog::write_unsealed`).
        self.audit.write_unsealed()?;
        let chunks = std::mem::take(&mut self.server_bytes);
        for chunk in chunks {
            let Some(link) = self.links[chunk.server].as_mut() else {
                continue;
            };
            if link.generation != chunk.generation {
                continue;
            }
            let sent = if let Some(writer) = link.writer.as_mut() {
                writer.send(&chunk.bytes)
            } else if let Some(remote) = &link.remote {
                remote_send(remote, &chunk.bytes)
            } else {
                Sent::Closed
            };
            if sent == Sent::Full {
                let name = &self.names[chunk.server];
                let host_queued = self.host_out.queued();
                // Servers are not read while the host does not take its answers: a server may
                // then block writing them and stop reading its input through no fault of its
                // own. Both facts are told; which one is the cause airlock cannot see.
                let why = if super::backpressure::read_servers(host_queued, &self.limits) {
                    format!("server `{name}` is not reading its input")
                } else {
                    format!(
                        "server `{name}` is not reading its input, while the host is not reading its answers ({} KiB wait for it) and airlock has stopped reading the servers' output for it: the host may be the cause",
                        host_queued / 1024
                    )
                };
                tracing::warn!(server = %name, "refusing requests for the server: {why}");
                let now = Instant::now();
                for key in &chunk.requests {
                    self.core.on_undeliverable(chunk.server, key, &why, now);
                }
            }
        }
        self.audit.seal()?;
        // Held outcomes are encoded now that this step's bytes are out, ready for the next
        // decision's write.
        self.audit.encode_held()?;
        Ok(())
    }

    /// A message for the host outside the core (an unreadable line's error answer).
    pub(super) fn queue_host(&mut self, message: &Value) {
        encode_into(&mut self.host_bytes, message);
    }

    /// Junk from a server: recorded one by one up to a bound, then only counted.
    /// `line`: the dropped line, when there is one to show: its start goes into the warning
    /// (control characters shown, not acted), so a user tells a stray banner from corruption;
    /// the audit record keeps only the reason and the size.
    pub(super) fn junk(
        &mut self,
        server: usize,
        reason: String,
        detail: Value,
        line: Option<&[u8]>,
    ) -> Result<(), ShellError> {
        let Some(link) = self.links.get_mut(server).and_then(|l| l.as_mut()) else {
            return Ok(());
        };
        if !link.junk.note() {
            return Ok(());
        }
        let start = line.map(|line| {
            let text = String::from_utf8_lossy(&line[..line.len().min(JUNK_SHOWN_BYTES)]);
            let more = if line.len() > JUNK_SHOWN_BYTES {
                "…"
            } else {
                ""
            };
            format!(" (the line: \"{}{more}\")", super::stderr::shown(&text))
        });
        let start = start.unwrap_or_default();
        tracing::warn!(server = %self.names[server], "dropped a line from the server: {reason}{start}");
        let mut event = Event::new(EventKind::Dropped, &self.names[server]);
        event.reason = Some(reason);
        event.detail = Some(detail);
        self.audit.stage(event)?;
        Ok(())
    }

    pub(super) fn record(
        &mut self,
        kind: EventKind,
        server: usize,
        detail: Value,
        reason: Option<String>,
    ) -> Result<(), ShellError> {
        let mut event = Event::new(kind, &self.names[server]);
        event.detail = Some(detail);
        event.reason = reason;
        self.audit.record(event)?;
        Ok(())
    }

    fn arm_timer(&mut self) {
        let deadlines = [self.core.next_deadline(), self.audit.held_until()];
        let Some(next) = deadlines.into_iter().flatten().min() else {
            return;
        };
        if self.armed.is_some_and(|armed| armed <= next) {
            return;
        }
        self.armed = Some(next);
        self.timer
            .as_mut()
            .reset(tokio::time::Instant::from_std(next));
    }

    fn start(&mut self, server: usize, generation: u64) {
        let Some(mut launch) = self.launches.get(server).cloned().flatten() else {
            let reason = "it cannot be launched".to_string();
            let now = Instant::now();
            self.core
                .on_spawn_failed(server, generation, reason, true, now);
            return;
        };
        if super::net::attach(&mut launch, &self.net_events) && !self.egress {
            self.egress = true;
            self.audit.attribute_connections();
        }
        self.spawning += 1;
        let inputs = self.inputs.clone();
        tokio::spawn(async move {
            let result = match launch {
                Launch::Local(prepared) => prepared
                    .spawn()
                    .await
                    .map(|child| Connected::Local(Box::new(child))),
                Launch::Remote(target) => crate::gateway::remote::connect(&target)
                    .await
                    .map(Connected::Remote)
                    .map_err(|err| LaunchError::Remote(err.to_string())),
            };
            let _ = inputs.send(super::link::Input::Spawned {
                server,
                generation,
                result,
            });
        });
    }

    /// Closes the server's stdin after what is queued for it; the process is left to end by
    /// itself (the kill sequence comes only with a `Stop`).
    fn close_input(&mut self, server: usize, generation: u64) {
        if let Some(link) = self.links[server].as_mut()
            && link.generation == generation
            && let Some(writer) = link.writer.as_mut()
        {
            writer.close();
        }
    }

    pub(super) fn stop(&mut self, server: usize, generation: u64, reason: String) {
        if let Some(link) = self.links[server].as_mut()
            && link.generation == generation
        {
            link.stopped_because.get_or_insert(reason);
            // Closing stdin (after what is queued) is the kill sequence's first step: a server
            // that exits on EOF ends with its own status.
            if let Some(writer) = link.writer.as_mut() {
                writer.close();
            }
            link.remote = None;
            if let Some(stop) = link.stop.take() {
                link.stopped_while_output_open = link.reader.is_some();
                let _ = stop.send(());
            }
        }
    }
}

fn remote_send(remote: &mpsc::Sender<Vec<u8>>, bytes: &[u8]) -> Sent {
    // The remote session takes one message per item.
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let mut message = line.to_vec();
        message.push(b'\n');
        match remote.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return Sent::Full,
            Err(mpsc::error::TrySendError::Closed(_)) => return Sent::Closed,
        }
    }
    Sent::Accepted
}
