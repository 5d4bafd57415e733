//! The session loops. See the module docs of [`crate::front`].

use std::cell::RefCell;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::{oneshot, watch};

use crate::audit::{AuditError, AuditLog, Event, EventKind};
use crate::gate::{Effects, Gate, Verdict};
use crate::mcp::message::{code, error_response};
use crate::mcp::{Frame, LineReader};

use super::outlet::Outlet;

#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub max_line_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// The server closed its stdout (exited or crashed) while the host was still there.
    Server,
    /// The host closed airlock's stdin; the server's stdin was closed and it then went away.
    Host,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOutcome {
    pub ended_by: EndedBy,
    pub dropped_server_lines: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A decision could not be recorded: airlock stops rather than forward an unrecorded call.
    #[error("{0}")]
    Audit(#[from] AuditError),
    #[error("writing to the host failed: {0}")]
    HostWrite(std::io::Error),
    #[error("writing to the server failed: {0}")]
    ServerWrite(std::io::Error),
}

struct Shared<'a, HW, SW> {
    gate: RefCell<Gate>,
    audit: &'a RefCell<AuditLog>,
    to_host: Outlet<HW>,
    to_server: Outlet<SW>,
    dropped: std::cell::Cell<u64>,
}

/// Bytes to send, in order: whole lines, concatenated, so a batch goes out in one write.
#[derive(Default)]
struct Outbox {
    to_host: Vec<u8>,
    to_server: Vec<u8>,
}

impl Outbox {
    fn len(&self) -> usize {
        self.to_host.len() + self.to_server.len()
    }
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

fn push_line(out: &mut Vec<u8>, line: &[u8]) {
    out.extend_from_slice(line);
    out.push(b'\n');
}

/// A batch stops gathering more already-arrived lines once its output reaches this size...
const BATCH_BYTES: usize = 64 * 1024;
/// ...or this many lines, so one busy direction cannot starve the other.
const BATCH_LINES: usize = 512;

impl<HW: AsyncWrite + Unpin, SW: AsyncWrite + Unpin> Shared<'_, HW, SW> {
    /// Stages the audit events (written by `commit_audit`, before anything is forwarded) and
    /// encodes the messages. `first` is the message the step was about (forwarded ahead of the
    /// step's own extra messages, in that direction).
    fn settle(
        &self,
        fx: &mut Effects,
        out: &mut Outbox,
        first: Option<(Direction, FirstBytes<'_>)>,
    ) -> Result<(), AuditError> {
        if !fx.audit.is_empty() {
            let mut audit = self.audit.borrow_mut();
            for event in fx.audit.drain(..) {
                audit.stage(event)?;
            }
        }
        if let Some((direction, bytes)) = first {
            let target = match direction {
                Direction::ToHost => &mut out.to_host,
                Direction::ToServer => &mut out.to_server,
            };
            match bytes {
                FirstBytes::Original(line) => push_line(target, line),
                FirstBytes::Replaced(value) => encode_into(target, &value),
            }
        }
        for message in fx.to_host.drain(..) {
            encode_into(&mut out.to_host, &message);
        }
        for message in fx.to_server.drain(..) {
            encode_into(&mut out.to_server, &message);
        }
        Ok(())
    }

    /// Writes the batch's audit events (one write), then sends its messages (one write per
    /// direction when the peer has room), then waits while a peer is not keeping up.
    /// Nothing is forwarded unless the events recording it are in the kernel's hands.
    async fn flush(&self, out: &mut Outbox) -> Result<(), AuditError> {
        self.audit.borrow_mut().commit()?;
        self.to_host.push(&out.to_host);
        self.to_server.push(&out.to_server);
        out.to_host.clear();
        out.to_server.clear();
        self.to_host.room().await;
        self.to_server.room().await;
        Ok(())
    }

    /// Reads batches from one peer and forwards each (audit first) until its end of stream. A
    /// read error counts as the end; an audit failure stops the session.
    async fn pump<R, F>(
        &self,
        mut lines: LineReader<R>,
        peer: &str,
        mut step: F,
    ) -> Result<(), SessionError>
    where
        R: tokio::io::AsyncBufRead + Unpin,
        F: FnMut(Frame, &mut Outbox) -> Result<(), AuditError>,
    {
        let mut out = Outbox::default();
        loop {
            match read_batch(&mut lines, &mut out, &mut step).await {
                Ok(more) => {
                    self.flush(&mut out).await?;
                    if !more {
                        return Ok(());
                    }
                }
                Err(BatchError::Audit(err)) => return Err(SessionError::from(err)),
                Err(BatchError::Read(err)) => {
                    tracing::warn!("reading from the {peer} failed: {err}; treating it as closed");
                    return Ok(());
                }
            }
        }
    }

    fn host_frame(
        &self,
        frame: Frame,
        max_line_bytes: usize,
        out: &mut Outbox,
    ) -> Result<(), AuditError> {
        let line = match frame {
            Frame::Oversized { bytes } => {
                tracing::warn!(
                    bytes,
                    limit = max_line_bytes,
                    "host message exceeds the maximum line size"
                );
                let text = format!(
                    "message of {bytes} bytes exceeds airlock's limit of {max_line_bytes} bytes"
                );
                encode_into(
                    &mut out.to_host,
                    &error_response(Value::Null, code::INVALID_REQUEST, &text, None),
                );
                return Ok(());
            }
            Frame::Line(line) => line,
        };
        let message: Value = match serde_json::from_slice(&line) {
            Ok(message) => message,
            Err(err) => {
                let text = format!("parse error: {err}");
                encode_into(
                    &mut out.to_host,
                    &error_response(Value::Null, code::PARSE_ERROR, &text, None),
                );
                return Ok(());
            }
        };
        let mut fx = Effects::default();
        let verdict = self
            .gate
            .borrow_mut()
            .on_host(message, Instant::now(), &mut fx);
        let first = match verdict {
            Verdict::Pass => Some(FirstBytes::Original(&line)),
            Verdict::Replace(value) => Some(FirstBytes::Replaced(value)),
            Verdict::Drop => None,
        };
        self.settle(&mut fx, out, first.map(|f| (Direction::ToServer, f)))
    }

    fn server_frame(
        &self,
        frame: Frame,
        max_line_bytes: usize,
        out: &mut Outbox,
    ) -> Result<(), AuditError> {
        let drop_line = |reason: &str, detail: Value| -> Result<(), AuditError> {
            self.dropped.set(self.dropped.get() + 1);
            let gate = self.gate.borrow();
            let server = gate.server();
            tracing::warn!(server = %server, "dropped a line from the server: {reason}");
            let mut event = Event::new(EventKind::Dropped, server);
            event.reason = Some(reason.to_string());
            event.detail = Some(detail);
            self.audit.borrow_mut().stage(event)
        };
        let line = match frame {
            Frame::Oversized { bytes } => {
                let reason =
                    format!("line of {bytes} bytes exceeds the limit of {max_line_bytes} bytes");
                return drop_line(
                    &reason,
                    serde_json::json!({"bytes": bytes, "limit": max_line_bytes}),
                );
            }
            Frame::Line(line) => line,
        };
        let mut fx = Effects::default();
        // Most server lines are answers the gate passes unchanged: read only what it needs.
        if let Some(peek) = crate::mcp::peek(&line) {
            let verdict = self
                .gate
                .borrow_mut()
                .on_server_peek(peek, Instant::now(), &mut fx);
            if let Some(verdict) = verdict {
                let first = match verdict {
                    Verdict::Pass => Some(FirstBytes::Original(&line)),
                    Verdict::Replace(value) => Some(FirstBytes::Replaced(value)),
                    Verdict::Drop => None,
                };
                return self.settle(&mut fx, out, first.map(|f| (Direction::ToHost, f)));
            }
        }
        let message: Value = match serde_json::from_slice(&line) {
            Ok(message) => message,
            Err(err) => {
                return drop_line(
                    &format!("not JSON: {err}"),
                    serde_json::json!({"bytes": line.len()}),
                );
            }
        };
        let verdict = self
            .gate
            .borrow_mut()
            .on_server(message, Instant::now(), &mut fx);
        let first = match verdict {
            Verdict::Pass => Some(FirstBytes::Original(&line)),
            Verdict::Replace(value) => Some(FirstBytes::Replaced(value)),
            Verdict::Drop => None,
        };
        self.settle(&mut fx, out, first.map(|f| (Direction::ToHost, f)))
    }
}

#[derive(Clone, Copy)]
enum Direction {
    ToHost,
    ToServer,
}

/// The message a step was about, as it will be forwarded.
enum FirstBytes<'a> {
    /// Unchanged: the bytes as they arrived.
    Original(&'a [u8]),
    Replaced(Value),
}

/// Reads one batch: waits for the first frame, then takes every frame that has already arrived
/// (up to the batch limits), handing each to `step`. `Ok(false)` at end of stream (after the
/// frames before it were handed over).
async fn read_batch<R, F>(
    lines: &mut LineReader<R>,
    out: &mut Outbox,
    mut step: F,
) -> Result<bool, BatchError>
where
    R: tokio::io::AsyncBufRead + Unpin,
    F: FnMut(Frame, &mut Outbox) -> Result<(), AuditError>,
{
    let first = lines.next_frame().await.map_err(BatchError::Read)?;
    let Some(frame) = first else {
        return Ok(false);
    };
    step(frame, out).map_err(BatchError::Audit)?;
    let mut taken = 1;
    while taken < BATCH_LINES && out.len() < BATCH_BYTES {
        match lines.try_next_frame() {
            None => break,
            Some(Ok(Some(frame))) => step(frame, out).map_err(BatchError::Audit)?,
            // End of stream or a read error: the next `next_frame` reports it again.
            Some(Ok(None) | Err(_)) => break,
        }
        taken += 1;
    }
    Ok(true)
}

enum BatchError {
    Read(std::io::Error),
    Audit(AuditError),
}

/// How often pending calls are checked against `tool_timeout`.
fn tick_period(timeout: Duration) -> Duration {
    (timeout / 10).clamp(Duration::from_millis(10), Duration::from_millis(250))
}

/// Runs one session until the server's stdout closes.
///
/// `host_eof` fires when the host closes airlock's stdin (the server's stdin is closed at the same
/// moment); the caller then runs the kill sequence, which ends the session by closing the
/// server's stdout. Audit events go to `audit`, which the caller keeps for lifecycle events.
#[allow(clippy::too_many_arguments)]
pub async fn run_session<HR, HW, SR, SW>(
    gate: Gate,
    audit: &RefCell<AuditLog>,
    limits: SessionLimits,
    tool_timeout: Option<Duration>,
    host_in: HR,
    host_out: HW,
    server_out: SR,
    server_in: SW,
    host_eof: Option<oneshot::Sender<()>>,
) -> Result<SessionOutcome, SessionError>
where
    HR: AsyncRead + Unpin,
    HW: AsyncWrite + Unpin,
    SR: AsyncRead + Unpin,
    SW: AsyncWrite + Unpin,
{
    let shared = Shared {
        gate: RefCell::new(gate),
        audit,
        to_host: Outlet::new(host_out),
        to_server: Outlet::new(server_in),
        dropped: std::cell::Cell::new(0),
    };
    let (done_tx, done_rx) = watch::channel(false);
    let max = limits.max_line_bytes;
    let host_closed = std::cell::Cell::new(false);

    let host_loop = async {
        let lines = LineReader::new(BufReader::with_capacity(64 * 1024, host_in), max);
        let result = shared
            .pump(lines, "host", |frame, out| {
                shared.host_frame(frame, max, out)
            })
            .await;
        // Also on an audit failure: stop forwarding and let the caller shut the server down.
        host_closed.set(true);
        // Closing the server's stdin is the first step of the kill sequence.
        shared.to_server.close();
        if let Some(signal) = host_eof {
            let _ = signal.send(());
        }
        result
    };
    let host_loop = async {
        let mut done = done_rx.clone();
        tokio::select! {
            result = host_loop => result,
            _ = done.wait_for(|d| *d) => Ok(()),
        }
    };

    let server_loop = async {
        let lines = LineReader::new(BufReader::with_capacity(64 * 1024, server_out), max);
        let result = shared
            .pump(lines, "server", |frame, out| {
                shared.server_frame(frame, max, out)
            })
            .await;
        if result.is_ok() {
            let mut fx = Effects::default();
            let mut out = Outbox::default();
            shared
                .gate
                .borrow_mut()
                .on_server_gone("its output closed", Instant::now(), &mut fx);
            shared.settle(&mut fx, &mut out, None)?;
            out.to_server.clear();
            shared.flush(&mut out).await?;
        }
        shared.to_host.close();
        shared.to_server.close();
        let _ = done_tx.send(true);
        result
    };

    let timer_loop = async {
        let Some(timeout) = tool_timeout else {
            return Ok::<(), SessionError>(());
        };
        let mut done = done_rx.clone();
        let mut interval = tokio::time::interval(tick_period(timeout));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = done.wait_for(|d| *d) => return Ok(()),
                _ = interval.tick() => {}
            }
            let now = Instant::now();
            let due = shared
                .gate
                .borrow()
                .next_deadline()
                .is_some_and(|deadline| deadline <= now);
            if due {
                let mut fx = Effects::default();
                let mut out = Outbox::default();
                shared.gate.borrow_mut().on_tick(now, &mut fx);
                shared.settle(&mut fx, &mut out, None)?;
                shared.flush(&mut out).await?;
            }
        }
    };

    let host_writer = async {
        shared
            .to_host
            .drain()
            .await
            .map_err(SessionError::HostWrite)
    };
    let server_writer = async {
        let result = shared.to_server.drain().await;
        // A server that stopped reading (it exited) is reported by its closed stdout instead.
        if let Err(err) = &result {
            tracing::debug!("writing to the server failed: {err}");
        }
        Ok::<(), SessionError>(())
    };

    let (host_result, server_result, timer_result, host_write_result, server_write_result) = tokio::join!(
        host_loop,
        server_loop,
        timer_loop,
        host_writer,
        server_writer
    );
    host_result?;
    server_result?;
    timer_result?;
    server_write_result?;
    if let Err(err) = host_write_result {
        // The host went away first: nothing left to tell it.
        if !host_closed.get() {
            return Err(err);
        }
    }
    Ok(SessionOutcome {
        ended_by: if host_closed.get() {
            EndedBy::Host
        } else {
            EndedBy::Server
        },
        dropped_server_lines: shared.dropped.get(),
    })
}
