//! The async shell of `airlock serve`: one loop owns the [`Router`] and carries out its actions;
//! small tasks read and write the host and each server, spawn servers, and run kill sequences.
//!
//! Nothing here blocks the loop: writes to a server go through a bounded queue (a server that
//! stops reading loses messages, and its calls end at their `tool_timeout`, instead of stalling
//! every other server), spawns and kill sequences run in their own tasks.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, oneshot};

use super::control::ControlSocket;
use super::lifecycle::Phase;
use super::remote::{Launch, RemoteEvent, RemoteSession};
use super::router::{Action, Router};
use crate::audit::{AuditError, AuditLog, Event, EventKind};
use crate::mcp::message::{code, error_response};
use crate::mcp::{Frame, LineReader};
use crate::process::launch::LaunchError;
use crate::process::{ExitSummary, STDIN_GRACE};

/// Messages queued for one server before airlock drops them (the server stopped reading).
const SERVER_QUEUE: usize = 1024;
/// Junk lines from a server recorded one by one; after that only counted.
const DROPS_RECORDED: u64 = 10;

#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// A decision could not be recorded: airlock stops rather than forward an unrecorded call.
    #[error("{0}")]
    Audit(#[from] AuditError),
    #[error("writing to the host failed: {0}")]
    HostWrite(std::io::Error),
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

enum Input {
    Host(Value),
    /// An answer airlock gives the host itself (unparseable or oversized input).
    HostReply(Value),
    HostEof,
    Server {
        server: usize,
        generation: u64,
        message: Value,
    },
    Dropped {
        server: usize,
        reason: String,
        bytes: usize,
    },
    ServerClosed {
        server: usize,
        generation: u64,
        dropped: u64,
    },
    Spawned {
        server: usize,
        generation: u64,
        result: Result<Link, LaunchError>,
    },
    Exited {
        server: usize,
        generation: u64,
        summary: ExitSummary,
    },
    /// A remote server's link ended (its counterpart of `Exited`).
    RemoteEnded {
        server: usize,
        generation: u64,
        reason: String,
        stopped: bool,
    },
    Status(oneshot::Sender<Value>),
}

struct Link {
    generation: u64,
    writer: Option<mpsc::Sender<Vec<u8>>>,
    stop: Option<oneshot::Sender<()>>,
    pid: Option<u32>,
}

fn encode(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<Vec<u8>>,
    writer: W,
) -> std::io::Result<()> {
    let mut writer = BufWriter::with_capacity(64 * 1024, writer);
    while let Some(bytes) = rx.recv().await {
        writer.write_all(&bytes).await?;
        while let Ok(more) = rx.try_recv() {
            writer.write_all(&more).await?;
        }
        writer.flush().await?;
    }
    writer.flush().await?;
    writer.shutdown().await
}

fn host_frame(frame: Frame, max: usize) -> Input {
    match frame {
        Frame::Oversized { bytes } => Input::HostReply(error_response(
            Value::Null,
            code::INVALID_REQUEST,
            &format!("message of {bytes} bytes exceeds airlock's limit of {max} bytes"),
            None,
        )),
        Frame::Line(line) => match serde_json::from_slice(&line) {
            Ok(message) => Input::Host(message),
            Err(err) => Input::HostReply(error_response(
                Value::Null,
                code::PARSE_ERROR,
                &format!("parse error: {err}"),
                None,
            )),
        },
    }
}

struct Loop {
    router: Router,
    launches: Vec<Option<Launch>>,
    links: Vec<Option<Link>>,
    spawning: usize,
    audit: AuditLog,
    inputs: mpsc::UnboundedSender<Input>,
    host_tx: Option<mpsc::Sender<Vec<u8>>>,
    max_line_bytes: usize,
    shutting_down: bool,
    names: Vec<String>,
}

impl Loop {
    async fn carry_out(&mut self) -> Result<(), ShellError> {
        for action in self.router.take_actions() {
            match action {
                Action::Audit(event) => self.audit.record(*event)?,
                Action::ToHost(message) => {
                    if let Some(tx) = &self.host_tx
                        && tx.send(encode(&message)).await.is_err()
                    {
                        self.host_tx = None;
                    }
                }
                Action::ToServer {
                    server,
                    generation,
                    message,
                } => {
                    let Some(link) = self.links[server].as_ref() else {
                        continue;
                    };
                    if link.generation != generation {
                        continue;
                    }
                    if let Some(writer) = &link.writer
                        && writer.try_send(encode(&message)).is_err()
                    {
                        tracing::warn!(server = %self.names[server], "the server does not read its input: a message was dropped");
                    }
                }
                Action::Start { server, generation } => self.start(server, generation),
                Action::Stop {
                    server,
                    generation,
                    reason,
                } => {
                    tracing::info!(server = %self.names[server], "stopping: {reason}");
                    self.stop(server, generation);
                }
            }
        }
        Ok(())
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
        let max = self.max_line_bytes;
        let name = self.names[server].clone();
        tokio::spawn(async move {
            let result = match launch {
                Launch::Local(prepared) => match prepared.spawn().await {
                    Ok(child) => Ok(attach(child, server, generation, name, max, inputs.clone())),
                    Err(err) => Err(err),
                },
                Launch::Remote(target) => match super::remote::connect(&target).await {
                    Ok(session) => Ok(attach_remote(session, server, generation, inputs.clone())),
                    Err(err) => Err(LaunchError::Remote(err.to_string())),
                },
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
            link.writer = None;
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

    async fn handle(
        &mut self,
        input: Input,
        started: std::time::SystemTime,
        config: &std::path::Path,
    ) -> Result<(), ShellError> {
        let now = Instant::now();
        match input {
            Input::Host(message) => {
                if !self.shutting_down {
                    self.router.on_host(message, now);
                }
            }
            Input::HostReply(message) => {
                if let Some(tx) = &self.host_tx {
                    let _ = tx.send(encode(&message)).await;
                }
            }
            Input::HostEof => {}
            Input::Server {
                server,
                generation,
                message,
            } => self.router.on_server(server, generation, message, now),
            Input::Dropped {
                server,
                reason,
                bytes,
            } => {
                tracing::warn!(server = %self.names[server], "dropped a line from the server: {reason}");
                self.record(
                    EventKind::Dropped,
                    server,
                    json!({"bytes": bytes}),
                    Some(reason),
                )?;
            }
            Input::ServerClosed {
                server,
                generation,
                dropped,
            } => {
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
            Input::Spawned {
                server,
                generation,
                result,
            } => {
                self.spawning -= 1;
                match result {
                    Ok(link) => {
                        let detail = self.launches[server]
                            .as_ref()
                            .map(Launch::spawn_detail)
                            .unwrap_or_default();
                        self.record(EventKind::Spawn, server, detail, None)?;
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
            Input::Exited {
                server,
                generation,
                summary,
            } => {
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
            Input::RemoteEnded {
                server,
                generation,
                reason,
                stopped,
            } => {
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
            Input::Status(reply) => {
                let _ = reply.send(self.status(config, started));
            }
        }
        Ok(())
    }

    fn all_gone(&self) -> bool {
        self.spawning == 0 && self.links.iter().all(Option::is_none)
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

/// Wires a spawned server's pipes to the loop: a writer task, a reader task, the stderr relay
/// and the supervisor that runs the kill sequence when asked (or reaps the server when it exits).
fn attach(
    mut child: crate::process::ConfinedChild,
    server: usize,
    generation: u64,
    name: String,
    max_line_bytes: usize,
    inputs: mpsc::UnboundedSender<Input>,
) -> Link {
    let pid = child.id();
    let (writer_tx, writer_rx) = mpsc::channel::<Vec<u8>>(SERVER_QUEUE);
    if let Some(stdin) = child.stdin.take() {
        tokio::spawn(async move {
            let _ = write_loop(writer_rx, stdin).await;
        });
    }
    if let Some(stdout) = child.stdout.take() {
        let inputs = inputs.clone();
        tokio::spawn(async move {
            let mut lines =
                LineReader::new(BufReader::with_capacity(64 * 1024, stdout), max_line_bytes);
            let mut dropped = 0u64;
            let mut drop_line = |reason: String, bytes: usize| {
                dropped += 1;
                if dropped <= DROPS_RECORDED {
                    let _ = inputs.send(Input::Dropped {
                        server,
                        reason,
                        bytes,
                    });
                }
            };
            while let Ok(Some(frame)) = lines.next_frame().await {
                match frame {
                    Frame::Oversized { bytes } => drop_line(
                        format!(
                            "line of {bytes} bytes exceeds the limit of {max_line_bytes} bytes"
                        ),
                        bytes,
                    ),
                    Frame::Line(line) => match serde_json::from_slice::<Value>(&line) {
                        Ok(message) => {
                            if inputs
                                .send(Input::Server {
                                    server,
                                    generation,
                                    message,
                                })
                                .is_err()
                            {
                                return;
                            }
                        }
                        Err(err) => drop_line(format!("not JSON: {err}"), line.len()),
                    },
                }
            }
            let _ = inputs.send(Input::ServerClosed {
                server,
                generation,
                dropped,
            });
        });
    }
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
        writer: Some(writer_tx),
        stop: Some(stop_tx),
        pid,
    }
}

/// Wires a connected remote server to the loop like [`attach`] wires a child: the same bounded
/// writer queue and the same inputs; its link's end stands in for the process exit.
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
            RemoteEvent::Message(message) => Input::Server {
                server,
                generation,
                message,
            },
            RemoteEvent::Dropped { reason, bytes } => {
                let seen = dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if seen > DROPS_RECORDED {
                    return true;
                }
                Input::Dropped {
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
        writer: Some(writer_tx),
        stop: Some(stop_tx),
        pid: None,
    }
}

/// Runs the gateway until the host closes its end or a signal arrives, then stops every server
/// (concurrently) and returns once all are gone or the kill deadline has passed.
pub async fn run<HR, HW>(gateway: Gateway, host_in: HR, host_out: HW) -> Result<Ended, ShellError>
where
    HR: AsyncRead + Unpin + Send + 'static,
    HW: AsyncWrite + Unpin + Send + 'static,
{
    use tokio::signal::unix::{SignalKind, signal};
    let started = std::time::SystemTime::now();
    let (inputs_tx, mut inputs_rx) = mpsc::unbounded_channel::<Input>();
    let (host_tx, host_rx) = mpsc::channel::<Vec<u8>>(256);
    let host_writer = tokio::spawn(write_loop(host_rx, host_out));
    {
        let inputs = inputs_tx.clone();
        let max = gateway.max_line_bytes;
        tokio::spawn(async move {
            let mut lines = LineReader::new(BufReader::with_capacity(64 * 1024, host_in), max);
            loop {
                match lines.next_frame().await {
                    Ok(Some(frame)) => {
                        if inputs.send(host_frame(frame, max)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(err) => {
                        tracing::warn!(
                            "reading from the host failed: {err}; treating it as closed"
                        );
                        break;
                    }
                }
            }
            let _ = inputs.send(Input::HostEof);
        });
    }
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
        inputs: inputs_tx,
        host_tx: Some(host_tx),
        max_line_bytes: gateway.max_line_bytes,
        shutting_down: false,
        names,
    };
    let mut policy_event = Event::new(EventKind::Policy, "gateway");
    policy_event.detail =
        Some(json!({"config": gateway.config_path.display().to_string(), "servers": count}));
    state.audit.record(policy_event)?;

    let mut sigterm = signal(SignalKind::terminate()).ok();
    let mut sigint = signal(SignalKind::interrupt()).ok();
    state.router.start_eager(Instant::now());
    state.carry_out().await?;

    let ended = loop {
        let deadline = state.router.next_deadline();
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                None => std::future::pending().await,
            }
        };
        let input = tokio::select! {
            input = inputs_rx.recv() => input,
            _ = sleep => {
                state.router.on_tick(Instant::now());
                state.carry_out().await?;
                continue;
            }
            _ = recv_signal(&mut sigterm) => break Ended::Signal("SIGTERM"),
            _ = recv_signal(&mut sigint) => break Ended::Signal("SIGINT"),
        };
        match input {
            None | Some(Input::HostEof) => break Ended::HostClosed,
            Some(input) => {
                state.handle(input, started, &gateway.config_path).await?;
                state.carry_out().await?;
            }
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
    state.carry_out().await?;
    let deadline = Instant::now() + STDIN_GRACE + gateway.kill_timeout + Duration::from_millis(300);
    while !state.all_gone() {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            tracing::warn!(
                "servers still stopping at the shutdown deadline; leaving them to the parent-death signal"
            );
            break;
        }
        match tokio::time::timeout(remaining, inputs_rx.recv()).await {
            Ok(Some(input)) => {
                state.handle(input, started, &gateway.config_path).await?;
                state.carry_out().await?;
            }
            Ok(None) | Err(_) => break,
        }
    }
    state.host_tx = None;
    let _ = tokio::time::timeout(Duration::from_millis(200), host_writer).await;
    Ok(ended)
}

async fn recv_signal(signal: &mut Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
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
