//! The async shell of `airlock serve`: one event loop owns the [`Router`], every server's pipes
//! and the host's, and carries out the router's actions.
//!
//! Why one loop and no task per pipe: a `tools/call` round trip passes the loop twice (host →
//! server, server → host), and each extra hop between tasks (reader task → channel → loop →
//! channel → writer task) is a wakeup and a scheduler pass that cost more than the routing. So the
//! loop polls every reader itself and writes each message to its pipe in the same step that routed
//! it ([`Outlet`]); the loop runs as a spawned task, because waking the runtime's `block_on`
//! future costs an eventfd write and an extra `epoll_wait` per wakeup.
//!
//! Nothing here blocks the loop: a pipe that does not take a message at once keeps it in a
//! bounded backlog (a server that stops reading loses messages, and its calls end at their
//! `tool_timeout`, instead of stalling every other server); spawns, kill sequences and stderr
//! relays run in their own tasks and report through a channel.

use std::future::poll_fn;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use super::control::ControlSocket;
use super::io::{FrameReader, Outlet, Sent};
use super::lifecycle::Phase;
use super::remote::{Launch, RemoteEvent, RemoteSession};
use super::router::{Action, Router};
use crate::audit::{AuditError, AuditLog, Event, EventKind};
use crate::mcp::Frame;
use crate::mcp::message::{code, error_response};
use crate::process::launch::LaunchError;
use crate::process::{ConfinedChild, ExitSummary, STDIN_GRACE};

/// Messages queued for one server before airlock drops them (the server stopped reading).
const SERVER_QUEUE: usize = 1024;
/// Messages queued for the host before airlock stops reading anyone (backpressure: a host that
/// does not read its answers is not sent more work).
const HOST_QUEUE: usize = 256;
/// Junk lines from a server recorded one by one; after that only counted.
const DROPS_RECORDED: u64 = 10;
/// How long the host's last answers may take to drain at exit.
const HOST_DRAIN: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// A decision could not be recorded: airlock stops rather than forward an unrecorded call.
    #[error("{0}")]
    Audit(#[from] AuditError),
    #[error("writing to the host failed: {0}")]
    HostWrite(std::io::Error),
    #[error("the gateway loop ended abnormally: {0}")]
    Aborted(String),
}

/// Everything the gateway needs, prepared by the CLI.
pub struct Gateway {
    pub router: Router,
    /// Per server (router order): how to launch or reach it (`None`: it never starts).
    pub launches: Vec<Option<Launch>>,
    pub audit: AuditLog,
    pub max_line_bytes: usize,
    pub control: Option<ControlSocket>,
    pub config_path: PathBuf,
    /// The kill sequence's `kill_timeout` of the slowest server (shutdown deadline).
    pub kill_timeout: Duration,
}

/// Why the gateway ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    HostClosed,
    Signal(&'static str),
}

/// Reports from the helper tasks (spawns, kill sequences, remote sessions, the status socket).
enum Input {
    Spawned {
        server: usize,
        generation: u64,
        result: Result<Connected, LaunchError>,
    },
    /// A message from a remote server (local servers' lines are read by the loop itself).
    Remote {
        server: usize,
        generation: u64,
        message: Value,
    },
    /// A remote server sent something that is not an MCP message.
    RemoteDropped {
        server: usize,
        reason: String,
        bytes: usize,
    },
    /// A remote server's link ended (its counterpart of `Exited`).
    RemoteEnded {
        server: usize,
        generation: u64,
        reason: String,
        stopped: bool,
    },
    Exited {
        server: usize,
        generation: u64,
        summary: ExitSummary,
    },
    Status(oneshot::Sender<Value>),
}

/// What one turn of the loop found.
enum Wake {
    Host(Frame),
    HostEof,
    Server { server: usize, frame: Frame },
    ServerEof { server: usize },
    Input(Input),
    Tick,
    Signal(&'static str),
}

/// A started server, as its spawn task hands it to the loop.
enum Connected {
    Local(Box<ConfinedChild>),
    Remote(RemoteSession),
}

/// A running server's pipes (or a remote session's queue) and its supervisor.
struct Link {
    generation: u64,
    reader: Option<FrameReader<ChildStdout>>,
    writer: Option<Outlet<ChildStdin>>,
    /// A remote server's outgoing queue (its session task does the HTTP).
    remote: Option<mpsc::Sender<Vec<u8>>>,
    stop: Option<oneshot::Sender<()>>,
    pid: Option<u32>,
    /// Lines dropped from its stdout (not JSON, or oversized).
    dropped: u64,
}

fn encode(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn host_message(frame: Frame, max: usize) -> Result<Value, Value> {
    match frame {
        Frame::Oversized { bytes } => Err(error_response(
            Value::Null,
            code::INVALID_REQUEST,
            &format!("message of {bytes} bytes exceeds airlock's limit of {max} bytes"),
            None,
        )),
        Frame::Line(line) => serde_json::from_slice(&line).map_err(|err| {
            error_response(
                Value::Null,
                code::PARSE_ERROR,
                &format!("parse error: {err}"),
                None,
            )
        }),
    }
}

struct Loop<HR, HW> {
    router: Router,
    launches: Vec<Option<Launch>>,
    links: Vec<Option<Link>>,
    spawning: usize,
    audit: AuditLog,
    /// Audit events of the current step not written yet (see [`Loop::carry_out`]).
    unwritten: Vec<Event>,
    actions: Vec<Action>,
    inputs: mpsc::UnboundedSender<Input>,
    inputs_rx: mpsc::UnboundedReceiver<Input>,
    host_in: Option<FrameReader<HR>>,
    host_out: Outlet<HW>,
    max_line_bytes: usize,
    shutting_down: bool,
    names: Vec<String>,
    /// The timer for the router's deadlines, and the instant it is armed for. It is re-armed
    /// only when a deadline comes earlier than the armed one; firing early costs one idle tick,
    /// re-arming on every message would cost a timer-wheel update per call.
    timer: Pin<Box<tokio::time::Sleep>>,
    armed: Option<Instant>,
    sigterm: Option<tokio::signal::unix::Signal>,
    sigint: Option<tokio::signal::unix::Signal>,
    /// Where the next poll of the readers starts, so that no reader starves the others.
    next_reader: usize,
}

impl<HR, HW> Loop<HR, HW>
where
    HR: AsyncRead + Unpin,
    HW: AsyncWrite + Unpin,
{
    /// Carries out the router's actions, in order, with one exception: audit events are written
    /// just before the next action that reaches a server or a process (so a decision is on disk
    /// before the call it records is forwarded), or at the end of the step. An outcome is thus
    /// written right after the answer goes to the host, which does not wait for it.
    fn carry_out(&mut self) -> Result<(), ShellError> {
        self.router.drain_actions(&mut self.actions);
        let mut actions = std::mem::take(&mut self.actions);
        for action in actions.drain(..) {
            match action {
                Action::Audit(event) => self.unwritten.push(*event),
                Action::ToHost(message) => self.send_host(&message),
                Action::ToServer {
                    server,
                    generation,
                    message,
                } => {
                    self.write_audit()?;
                    let Some(link) = self.links[server].as_mut() else {
                        continue;
                    };
                    if link.generation != generation {
                        continue;
                    }
                    let full = if let Some(writer) = link.writer.as_mut() {
                        writer.send(encode(&message)) == Sent::Full
                    } else if let Some(remote) = &link.remote {
                        matches!(
                            remote.try_send(encode(&message)),
                            Err(mpsc::error::TrySendError::Full(_))
                        )
                    } else {
                        false
                    };
                    if full {
                        tracing::warn!(server = %self.names[server], "the server does not read its input: a message was dropped");
                    }
                }
                Action::Start { server, generation } => {
                    self.write_audit()?;
                    self.start(server, generation);
                }
                Action::Stop {
                    server,
                    generation,
                    reason,
                } => {
                    self.write_audit()?;
                    tracing::info!(server = %self.names[server], "stopping: {reason}");
                    self.stop(server, generation);
                }
            }
        }
        self.actions = actions;
        self.write_audit()?;
        self.arm_timer();
        Ok(())
    }

    /// The events of one step in one `write` (a denied call's decision and outcome, say).
    fn write_audit(&mut self) -> Result<(), ShellError> {
        if self.unwritten.is_empty() {
            return Ok(());
        }
        for event in self.unwritten.drain(..) {
            self.audit.stage(event)?;
        }
        self.audit.commit()?;
        Ok(())
    }

    fn send_host(&mut self, message: &Value) {
        // A host that closed its input is gone; the loop ends on its EOF.
        let _ = self.host_out.send(encode(message));
    }

    fn arm_timer(&mut self) {
        let Some(next) = self.router.next_deadline() else {
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
        let Some(launch) = self.launches[server].clone() else {
            self.router.on_spawn_failed(
                server,
                generation,
                "it cannot be launched".into(),
                true,
                Instant::now(),
            );
            return;
        };
        self.spawning += 1;
        let inputs = self.inputs.clone();
        tokio::spawn(async move {
            let result = match launch {
                Launch::Local(prepared) => prepared
                    .spawn()
                    .await
                    .map(|child| Connected::Local(Box::new(child))),
                Launch::Remote(target) => super::remote::connect(&target)
                    .await
                    .map(Connected::Remote)
                    .map_err(|err| LaunchError::Remote(err.to_string())),
            };
            let _ = inputs.send(Input::Spawned {
                server,
                generation,
                result,
            });
        });
    }

    fn stop(&mut self, server: usize, generation: u64) {
        if let Some(link) = self.links[server].as_mut()
            && link.generation == generation
        {
            // Closing stdin is the kill sequence's first step.
            if let Some(writer) = link.writer.as_mut() {
                writer.close();
            }
            link.remote = None;
            if let Some(stop) = link.stop.take() {
                let _ = stop.send(());
            }
        }
    }

    fn record(
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

    /// Lines dropped from a server's stdout: the first few recorded one by one.
    fn dropped(&mut self, server: usize, reason: String, bytes: usize) -> Result<(), ShellError> {
        let Some(link) = self.links[server].as_mut() else {
            return Ok(());
        };
        link.dropped += 1;
        if link.dropped > DROPS_RECORDED {
            return Ok(());
        }
        tracing::warn!(server = %self.names[server], "dropped a line from the server: {reason}");
        self.record(
            EventKind::Dropped,
            server,
            json!({"bytes": bytes}),
            Some(reason),
        )
    }

    /// Waits for the next thing to do: a signal, a helper's report, a line from the host or a
    /// server, the timer. Pipes with a backlog are drained on the way.
    fn poll_wake(&mut self, cx: &mut Context<'_>) -> Poll<Wake> {
        for (signal, name) in [(&mut self.sigterm, "SIGTERM"), (&mut self.sigint, "SIGINT")] {
            if let Some(stream) = signal.as_mut()
                && let Poll::Ready(received) = stream.poll_recv(cx)
            {
                if received.is_none() {
                    *signal = None;
                }
                return Poll::Ready(Wake::Signal(name));
            }
        }
        if let Poll::Ready(Some(input)) = self.inputs_rx.poll_recv(cx) {
            return Poll::Ready(Wake::Input(input));
        }
        if self.host_out.busy()
            && let Poll::Ready(Err(err)) = self.host_out.poll_drain(cx)
        {
            tracing::debug!("writing to the host failed: {err}");
        }
        for (server, link) in self.links.iter_mut().enumerate() {
            let Some(link) = link.as_mut() else {
                continue;
            };
            let Some(writer) = link.writer.as_mut().filter(|w| w.busy()) else {
                continue;
            };
            match writer.poll_drain(cx) {
                Poll::Ready(Ok(true)) => link.writer = None,
                Poll::Ready(Err(err)) => {
                    tracing::debug!(server = %self.names[server], "writing to the server failed: {err}");
                }
                _ => {}
            }
        }
        // A host that does not read its answers is not sent more: stop reading until it does.
        if self.host_out.queued() < HOST_QUEUE {
            let readers = 1 + self.links.len();
            for step in 0..readers {
                let index = (self.next_reader + step) % readers;
                let wake = if index == 0 {
                    let Some(host) = self.host_in.as_mut() else {
                        continue;
                    };
                    match host.poll_frame(cx) {
                        Poll::Pending => continue,
                        Poll::Ready(Ok(Some(frame))) => Wake::Host(frame),
                        Poll::Ready(Ok(None)) => {
                            self.host_in = None;
                            Wake::HostEof
                        }
                        Poll::Ready(Err(err)) => {
                            tracing::warn!(
                                "reading from the host failed: {err}; treating it as closed"
                            );
                            self.host_in = None;
                            Wake::HostEof
                        }
                    }
                } else {
                    let server = index - 1;
                    let Some(link) = self.links[server].as_mut() else {
                        continue;
                    };
                    let Some(reader) = link.reader.as_mut() else {
                        continue;
                    };
                    match reader.poll_frame(cx) {
                        Poll::Pending => continue,
                        Poll::Ready(Ok(Some(frame))) => Wake::Server { server, frame },
                        Poll::Ready(Ok(None) | Err(_)) => {
                            link.reader = None;
                            Wake::ServerEof { server }
                        }
                    }
                };
                self.next_reader = index + 1;
                return Poll::Ready(wake);
            }
        }
        if self.armed.is_some() && self.timer.as_mut().poll(cx).is_ready() {
            self.armed = None;
            return Poll::Ready(Wake::Tick);
        }
        Poll::Pending
    }

    /// One step; `Some` when the gateway must shut down.
    fn handle(
        &mut self,
        wake: Wake,
        started: std::time::SystemTime,
        config: &std::path::Path,
    ) -> Result<Option<Ended>, ShellError> {
        let now = Instant::now();
        match wake {
            Wake::Signal(name) if !self.shutting_down => return Ok(Some(Ended::Signal(name))),
            Wake::HostEof if !self.shutting_down => return Ok(Some(Ended::HostClosed)),
            Wake::Signal(_) | Wake::HostEof => {}
            Wake::Host(frame) => {
                if !self.shutting_down {
                    match host_message(frame, self.max_line_bytes) {
                        Ok(message) => self.router.on_host(message, now),
                        Err(reply) => self.send_host(&reply),
                    }
                }
            }
            Wake::Server { server, frame } => {
                let Some(generation) = self.links[server].as_ref().map(|l| l.generation) else {
                    return Ok(None);
                };
                match frame {
                    Frame::Oversized { bytes } => {
                        let max = self.max_line_bytes;
                        self.dropped(
                            server,
                            format!("line of {bytes} bytes exceeds the limit of {max} bytes"),
                            bytes,
                        )?;
                    }
                    Frame::Line(line) => match serde_json::from_slice::<Value>(&line) {
                        Ok(message) => self.router.on_server(server, generation, message, now),
                        Err(err) => self.dropped(server, format!("not JSON: {err}"), line.len())?,
                    },
                }
            }
            Wake::ServerEof { server } => {
                let Some((generation, dropped)) = self.links[server]
                    .as_ref()
                    .map(|l| (l.generation, l.dropped))
                else {
                    return Ok(None);
                };
                if dropped > DROPS_RECORDED {
                    self.record(
                        EventKind::Dropped,
                        server,
                        json!({"lines": dropped}),
                        Some(format!("{dropped} lines on stdout were not MCP messages")),
                    )?;
                }
                self.router.on_server_closed(server, generation, now);
            }
            Wake::Tick => self.router.on_tick(now),
            Wake::Input(Input::Spawned {
                server,
                generation,
                result,
            }) => {
                self.spawning -= 1;
                match result {
                    Ok(child) => {
                        let detail = self.launches[server]
                            .as_ref()
                            .map(Launch::spawn_detail)
                            .unwrap_or_default();
                        self.record(EventKind::Spawn, server, detail, None)?;
                        let link = match child {
                            Connected::Local(child) => attach(
                                *child,
                                server,
                                generation,
                                self.names[server].clone(),
                                self.max_line_bytes,
                                self.inputs.clone(),
                            ),
                            Connected::Remote(session) => {
                                attach_remote(session, server, generation, self.inputs.clone())
                            }
                        };
                        self.links[server] = Some(link);
                        if !self.shutting_down {
                            self.router.on_spawned(server, generation, now);
                        }
                        if !self.router.wants(server, generation) {
                            self.stop(server, generation);
                        }
                    }
                    Err(err) => {
                        let permanent = err.is_permanent();
                        self.record(
                            EventKind::Spawn,
                            server,
                            json!({"failed": true}),
                            Some(err.to_string()),
                        )?;
                        self.router.on_spawn_failed(
                            server,
                            generation,
                            err.to_string(),
                            permanent,
                            now,
                        );
                    }
                }
            }
            Wake::Input(Input::Exited {
                server,
                generation,
                summary,
            }) => {
                let (detail, text) = exit_detail(&summary);
                self.record(EventKind::Exit, server, detail, None)?;
                if self.links[server]
                    .as_ref()
                    .is_some_and(|l| l.generation == generation)
                {
                    self.links[server] = None;
                }
                self.router.on_exited(server, generation, &text, now);
            }
            Wake::Input(Input::Remote {
                server,
                generation,
                message,
            }) => self.router.on_server(server, generation, message, now),
            Wake::Input(Input::RemoteDropped {
                server,
                reason,
                bytes,
            }) => {
                tracing::warn!(server = %self.names[server], "dropped a message from the server: {reason}");
                self.record(
                    EventKind::Dropped,
                    server,
                    json!({"bytes": bytes}),
                    Some(reason),
                )?;
            }
            Wake::Input(Input::RemoteEnded {
                server,
                generation,
                reason,
                stopped,
            }) => {
                let detail = json!({"ended_by": if stopped { "stop" } else { "remote" }});
                self.record(EventKind::Exit, server, detail, Some(reason.clone()))?;
                if self.links[server]
                    .as_ref()
                    .is_some_and(|l| l.generation == generation)
                {
                    self.links[server] = None;
                }
                // A link that breaks before the handshake completes never started: report it as
                // a failed start with the remote's reason (refused, 401, ...), not as an exit.
                if !stopped && self.router.phase(server) == Some(Phase::Starting) {
                    self.router
                        .on_spawn_failed(server, generation, reason, false, now);
                } else {
                    let detail = format!("the connection ended: {reason}");
                    self.router.on_exited(server, generation, &detail, now);
                }
            }
            Wake::Input(Input::Status(reply)) => {
                let _ = reply.send(self.status(config, started));
            }
        }
        self.carry_out()?;
        Ok(None)
    }

    fn all_gone(&self) -> bool {
        self.spawning == 0 && self.links.iter().all(Option::is_none)
    }

    fn status(&self, config: &std::path::Path, started: std::time::SystemTime) -> Value {
        let mut servers = serde_json::to_value(self.router.status()).unwrap_or_default();
        if let Some(list) = servers.as_array_mut() {
            for (index, entry) in list.iter_mut().enumerate() {
                let pid = self
                    .links
                    .get(index)
                    .and_then(|l| l.as_ref())
                    .and_then(|l| l.pid);
                entry["pid"] = json!(pid);
            }
        }
        json!({
            "pid": std::process::id(),
            "config": config.display().to_string(),
            "started": crate::audit::event::rfc3339(started),
            "servers": servers,
        })
    }
}

fn exit_detail(summary: &ExitSummary) -> (Value, String) {
    let mut detail = json!({"ended_by": format!("{:?}", summary.ended_by).to_lowercase()});
    if let Some(step) = summary.helper_step {
        detail["confine_failed_at"] = json!(step);
    }
    let text = match (summary.code, summary.signal) {
        (Some(code), _) => {
            detail["code"] = json!(code);
            match summary.helper_step {
                Some(step) => format!("the sandbox could not be set up: step {step} failed"),
                None => format!("exit code {code}"),
            }
        }
        (None, Some(signal)) => {
            detail["signal"] = json!(signal);
            format!("killed by signal {signal}")
        }
        _ => "unknown status".into(),
    };
    (detail, text)
}

/// Wires a spawned server to the loop: its pipes become the loop's reader and outlet; the stderr
/// relay and the supervisor (runs the kill sequence when asked, or reaps the server when it
/// exits) are tasks of their own.
fn attach(
    mut child: ConfinedChild,
    server: usize,
    generation: u64,
    name: String,
    max_line_bytes: usize,
    inputs: mpsc::UnboundedSender<Input>,
) -> Link {
    let pid = child.id();
    let writer = child
        .stdin
        .take()
        .map(|stdin| Outlet::new(stdin, SERVER_QUEUE));
    let reader = child
        .stdout
        .take()
        .map(|stdout| FrameReader::new(stdout, max_line_bytes));
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(async move {
            let mut sink = std::io::stderr();
            crate::front::relay_stderr(stderr, &name, &mut sink).await;
        });
    }
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let kill_timeout = child.kill_timeout();
    tokio::spawn(async move {
        tokio::select! {
            _ = child.wait() => {}
            _ = stop_rx => {}
        }
        let summary = child.shutdown(kill_timeout).await;
        let _ = inputs.send(Input::Exited {
            server,
            generation,
            summary,
        });
    });
    Link {
        generation,
        reader,
        writer,
        remote: None,
        stop: Some(stop_tx),
        pid,
        dropped: 0,
    }
}

/// Wires a connected remote server to the loop: its session task does the HTTP and reports
/// through the inputs; the link's end stands in for the process exit.
fn attach_remote(
    session: RemoteSession,
    server: usize,
    generation: u64,
    inputs: mpsc::UnboundedSender<Input>,
) -> Link {
    let (writer_tx, writer_rx) = mpsc::channel::<Vec<u8>>(SERVER_QUEUE);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let dropped = std::sync::atomic::AtomicU64::new(0);
    let emit: super::remote::Emit = std::sync::Arc::new(move |event| {
        let input = match event {
            RemoteEvent::Message(message) => Input::Remote {
                server,
                generation,
                message,
            },
            RemoteEvent::Dropped { reason, bytes } => {
                let seen = dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if seen > DROPS_RECORDED {
                    return true;
                }
                Input::RemoteDropped {
                    server,
                    reason,
                    bytes,
                }
            }
            RemoteEvent::Ended { reason, stopped } => Input::RemoteEnded {
                server,
                generation,
                reason,
                stopped,
            },
        };
        inputs.send(input).is_ok()
    });
    tokio::spawn(session.run(writer_rx, stop_rx, emit));
    Link {
        generation,
        reader: None,
        writer: None,
        remote: Some(writer_tx),
        stop: Some(stop_tx),
        pid: None,
        dropped: 0,
    }
}

/// Runs the gateway until the host closes its end or a signal arrives, then stops every server
/// (concurrently) and returns once all are gone or the kill deadline has passed.
pub async fn run<HR, HW>(gateway: Gateway, host_in: HR, host_out: HW) -> Result<Ended, ShellError>
where
    HR: AsyncRead + Unpin + Send + 'static,
    HW: AsyncWrite + Unpin + Send + 'static,
{
    // A spawned task, not this future: see the module docs.
    match tokio::spawn(run_loop(gateway, host_in, host_out)).await {
        Ok(ended) => ended,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => Err(ShellError::Aborted(err.to_string())),
    }
}

async fn run_loop<HR, HW>(gateway: Gateway, host_in: HR, host_out: HW) -> Result<Ended, ShellError>
where
    HR: AsyncRead + Unpin,
    HW: AsyncWrite + Unpin,
{
    use tokio::signal::unix::{SignalKind, signal};
    let started = std::time::SystemTime::now();
    let (inputs_tx, inputs_rx) = mpsc::unbounded_channel::<Input>();
    if let Some(control) = &gateway.control {
        serve_control(control, inputs_tx.clone());
    }
    let names = gateway.router.server_names();
    let count = names.len();
    let mut state = Loop {
        router: gateway.router,
        launches: gateway.launches,
        links: (0..count).map(|_| None).collect(),
        spawning: 0,
        audit: gateway.audit,
        unwritten: Vec::new(),
        actions: Vec::new(),
        inputs: inputs_tx,
        inputs_rx,
        host_in: Some(FrameReader::new(host_in, gateway.max_line_bytes)),
        host_out: Outlet::new(host_out, usize::MAX),
        max_line_bytes: gateway.max_line_bytes,
        shutting_down: false,
        names,
        timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        armed: None,
        sigterm: signal(SignalKind::terminate()).ok(),
        sigint: signal(SignalKind::interrupt()).ok(),
        next_reader: 0,
    };
    let config = gateway.config_path;
    let mut policy_event = Event::new(EventKind::Policy, "gateway");
    policy_event.detail = Some(json!({"config": config.display().to_string(), "servers": count}));
    state.audit.record(policy_event)?;

    state.router.start_eager(Instant::now());
    state.carry_out()?;

    let ended = loop {
        let wake = poll_fn(|cx| state.poll_wake(cx)).await;
        if let Some(ended) = state.handle(wake, started, &config)? {
            break ended;
        }
    };
    match &ended {
        Ended::HostClosed => {
            tracing::info!("the host closed the connection; stopping every server")
        }
        Ended::Signal(name) => tracing::info!("airlock received {name}; stopping every server"),
    }

    // Shutdown: every server through the kill sequence at once, bounded by the slowest
    // kill_timeout (the sequence itself is stdin grace + kill_timeout + SIGKILL).
    state.shutting_down = true;
    state.router.shutdown();
    state.carry_out()?;
    let deadline = Instant::now() + STDIN_GRACE + gateway.kill_timeout + Duration::from_millis(300);
    while !state.all_gone() {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            tracing::warn!(
                "servers still stopping at the shutdown deadline; leaving them to the parent-death signal"
            );
            break;
        }
        match tokio::time::timeout(remaining, poll_fn(|cx| state.poll_wake(cx))).await {
            Ok(wake) => {
                state.handle(wake, started, &config)?;
            }
            Err(_) => break,
        }
    }
    state.host_out.close();
    let _ = tokio::time::timeout(HOST_DRAIN, poll_fn(|cx| state.host_out.poll_drain(cx))).await;
    Ok(ended)
}

fn serve_control(control: &ControlSocket, inputs: mpsc::UnboundedSender<Input>) {
    let listener = match control
        .listener
        .try_clone()
        .and_then(tokio::net::UnixListener::from_std)
    {
        Ok(listener) => listener,
        Err(err) => {
            tracing::warn!("the status socket is unavailable: {err}");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let (tx, rx) = oneshot::channel();
            if inputs.send(Input::Status(tx)).is_err() {
                return;
            }
            tokio::spawn(async move {
                if let Ok(status) = rx.await {
                    let _ = stream.write_all(&encode(&status)).await;
                    let _ = stream.shutdown().await;
                }
            });
        }
    });
}
