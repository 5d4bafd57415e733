//! The async shell of a session: one event loop owns the [`Core`], every server's pipes and the
//! host's, and carries out the core's actions.
//!
//! Why one loop and no task per pipe: a `tools/call` round trip passes the loop twice (host →
//! server, server → host), and each extra hop between tasks (reader task → channel → loop →
//! channel → writer task) is a wakeup and a scheduler pass that cost more than the routing. So the
//! loop polls every reader itself, takes every message that has already arrived in one step, and
//! writes each peer's share in one write; the loop runs as a spawned task, because waking the
//! runtime's `block_on` future costs an eventfd write and an extra `epoll_wait` per wakeup.
//!
//! When nothing is ready the loop polls a moment before it sleeps, while its peer has lately
//! answered within that moment (`spin.rs`): on a VM the wake-up costs more than the wait.
//!
//! Nothing here blocks the loop (see [`backpressure`]); spawns, kill sequences and stderr relays
//! run in their own tasks and report through a channel.

pub mod backpressure;
mod carry;
pub mod io;
mod link;
pub mod net;
mod reload;
pub mod signals;
mod spin;
pub mod stderr;
mod step;

use std::future::{Future, poll_fn};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::core::{Core, Reloaded};
use crate::audit::{AuditError, AuditLog, Event, EventKind, Redactor};
use crate::gateway::control::{ControlSocket, Request as ControlRequest};
use crate::gateway::remote::Launch;
use crate::policy::Policy;
use crate::process::{ExitSummary, STDIN_GRACE};
use backpressure::Limits;
use io::{FrameReader, Outlet};
use link::{Input, Link};

/// How long the host's last answers may take to drain at exit.
const HOST_DRAIN: Duration = Duration::from_millis(200);
/// How long after a signal the calls in flight may still be answered by their servers; then
/// they get an error and their outcome record (a host that signals may SIGKILL soon after).
const SIGNAL_ANSWER_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// An event could not be recorded: airlock stops rather than forward an unrecorded call.
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error("the session loop ended abnormally: {0}")]
    Aborted(String),
}

/// A new config and policy, read for a reload.
pub struct ReloadPlan {
    pub servers: Vec<Reloaded>,
    /// The launch of each server of `servers`, by name.
    pub launches: Vec<(String, Option<Launch>)>,
    pub policy: Arc<Policy>,
    pub redactor: Arc<Redactor>,
    /// The `policy` event recording what is now in force.
    pub policy_event: Event,
    pub kill_timeout: Duration,
}

/// Why a reload could not be done (the running state is kept).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReloadError(pub String);

/// Re-reads the session's config and policies (`serve` only).
pub trait Reloader: Send {
    fn reload(&mut self, running: &[(String, Option<Launch>)]) -> Result<ReloadPlan, ReloadError>;
}

/// Everything a session needs, prepared by the CLI.
pub struct Session {
    pub core: Core,
    /// Per server slot (core order): how to launch or reach it (`None`: it never starts).
    pub launches: Vec<Option<Launch>>,
    pub audit: AuditLog,
    /// The session's first event: the policy in force (digest and sources).
    pub policy_event: Event,
    pub max_line_bytes: usize,
    pub control: Option<ControlSocket>,
    /// What `airlock status` shows as the session's config.
    pub config_path: PathBuf,
    /// The kill sequence's `kill_timeout` of the slowest server (shutdown deadline).
    pub kill_timeout: Duration,
    pub reloader: Option<Box<dyn Reloader>>,
    /// Resolves when the host closes airlock's stdout.
    pub host_output_closed: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// More for `airlock status`, under `listen` (the HTTP face: address, sessions).
    pub status_extra: Option<StatusExtra>,
    /// Events from outside the session for its audit log (the HTTP face's refused
    /// authentications).
    pub outside_audit: Option<mpsc::Receiver<crate::net::route::NetAudit>>,
}

/// Builds the `listen` part of the status document when asked.
pub type StatusExtra = Arc<dyn Fn() -> Value + Send + Sync>;

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    HostClosed,
    HostOutputClosed,
    Signal(&'static str),
    /// `Single`: the server ended by itself.
    ServerEnded,
}

impl EndReason {
    pub fn text(&self) -> String {
        match self {
            EndReason::HostClosed => "the host closed the connection".into(),
            EndReason::HostOutputClosed => "the host stopped reading airlock's output".into(),
            EndReason::Signal(name) => format!("airlock received {name}"),
            EndReason::ServerEnded => "the server ended".into(),
        }
    }
}

#[derive(Debug)]
pub struct Ended {
    pub reason: EndReason,
    /// How each server slot's last process ended (none: never ran).
    pub exits: Vec<Option<ExitSummary>>,
}

struct Loop<HR, HW> {
    core: Core,
    single: bool,
    launches: Vec<Option<Launch>>,
    links: Vec<Option<Link>>,
    exits: Vec<Option<ExitSummary>>,
    names: Vec<String>,
    spawning: usize,
    audit: AuditLog,
    actions: Vec<super::core::Action>,
    /// Bytes for the host and for each server, gathered during one step (see `carry`).
    host_bytes: Vec<u8>,
    server_bytes: Vec<carry::Chunk>,
    inputs: mpsc::UnboundedSender<Input>,
    inputs_rx: mpsc::UnboundedReceiver<Input>,
    host_in: Option<FrameReader<HR>>,
    host_out: Outlet<HW>,
    max_line_bytes: usize,
    limits: Limits,
    shutting_down: bool,
    kill_timeout: Duration,
    reloader: Option<Box<dyn Reloader>>,
    /// The timer for the core's deadlines, and the instant it is armed for. It is re-armed
    /// only when a deadline comes earlier than the armed one; firing early costs one idle tick,
    /// re-arming on every message would cost a timer-wheel update per call.
    timer: Pin<Box<tokio::time::Sleep>>,
    armed: Option<Instant>,
    /// Where the next poll of the readers starts, so that no reader starves the others.
    next_reader: usize,
    config_path: PathBuf,
    started: std::time::SystemTime,
    /// Where servers with a network allow list send their connection events.
    net_events: mpsc::Sender<crate::net::route::NetAudit>,
    /// A server with a network allow list was started (its events are awaited at shutdown).
    egress: bool,
    status_extra: Option<StatusExtra>,
    /// The host is airlock's own stdio (not the HTTP face's mux): after its EOF, stdout is
    /// watched for the host going away altogether.
    host_is_stdout: bool,
}

/// Runs a session until it ends (host gone, a signal, or in `Single` the server gone), then
/// stops every server (concurrently) and returns once all are gone or the kill deadline passed.
pub async fn run<HR, HW>(session: Session, host_in: HR, host_out: HW) -> Result<Ended, ShellError>
where
    HR: AsyncRead + Unpin + Send + 'static,
    HW: AsyncWrite + Unpin + Send + 'static,
{
    // A spawned task, not this future: see the module docs. (Release builds abort on panic.)
    tokio::spawn(run_loop(session, host_in, host_out))
        .await
        .map_err(|err| ShellError::Aborted(err.to_string()))?
}

async fn run_loop<HR, HW>(session: Session, host_in: HR, host_out: HW) -> Result<Ended, ShellError>
where
    HR: AsyncRead + Unpin,
    HW: AsyncWrite + Unpin,
{
    let (inputs_tx, inputs_rx) = mpsc::unbounded_channel::<Input>();
    let host_is_stdout = session.host_output_closed.is_some();
    signals::watch(session.host_output_closed, inputs_tx.clone());
    if let Some(control) = &session.control {
        serve_control(control, inputs_tx.clone());
    }
    let names = session.core.server_names();
    let count = names.len();
    let single = session.core.is_single();
    let limits = Limits::for_max_line(session.max_line_bytes);
    let net_events = net::forward_to(&inputs_tx);
    if let Some(outside) = session.outside_audit {
        net::forward_from(outside, &inputs_tx);
    }
    let mut state = Loop {
        core: session.core,
        single,
        launches: session.launches,
        links: (0..count).map(|_| None).collect(),
        exits: vec![None; count],
        names,
        spawning: 0,
        audit: session.audit,
        actions: Vec::new(),
        host_bytes: Vec::new(),
        server_bytes: Vec::new(),
        inputs: inputs_tx,
        inputs_rx,
        host_in: Some(FrameReader::new(host_in, session.max_line_bytes)),
        host_out: Outlet::new(host_out, usize::MAX),
        max_line_bytes: session.max_line_bytes,
        limits,
        shutting_down: false,
        kill_timeout: session.kill_timeout,
        reloader: session.reloader,
        timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        armed: None,
        next_reader: 0,
        config_path: session.config_path,
        started: std::time::SystemTime::now(),
        net_events,
        egress: false,
        status_extra: session.status_extra,
        host_is_stdout,
    };
    state.audit.record(session.policy_event)?;
    state.core.start_eager(Instant::now());
    state.carry_out()?;

    // The CPUs this process may use (its affinity and its cgroup's quota counted).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let current_thread = tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::CurrentThread;
    let mut spin = spin::Spin::new(cpus, current_thread);
    let reason = loop {
        let wake = match poll_fn(|cx| Poll::Ready(state.poll_wake(cx))).await {
            Poll::Ready(wake) => wake,
            Poll::Pending => state.idle(&mut spin).await,
        };
        if let Some(reason) = state.handle(wake)? {
            break reason;
        }
    };
    tracing::info!("{}; stopping", reason.text());
    state.shut_down(&reason).await?;
    Ok(Ended {
        reason,
        exits: state.exits,
    })
}

impl<HR, HW> Loop<HR, HW>
where
    HR: AsyncRead + Unpin,
    HW: AsyncWrite + Unpin,
{
    /// Every server through the kill sequence at once, bounded by the slowest kill_timeout (the
    /// sequence itself is stdin grace + kill_timeout + SIGKILL); answers still in flight are
    /// relayed until each server's output closes. Ends with the session's own exit event.
    async fn shut_down(&mut self, reason: &EndReason) -> Result<(), ShellError> {
        self.shutting_down = true;
        // A host that stopped reading waits for no answer: the calls in flight get theirs, and
        // their outcome records, at once. One that signals airlock may SIGKILL it within the
        // kill sequence (the TypeScript SDK does 2 s after its SIGTERM): answers that come in
        // the first second still go out as they come, and what is still in flight then gets
        // its answer and outcome record. After the host's EOF alone, what it asked is answered
        // as it comes.
        // Behind the HTTP face the clients did not send the signal (an administrator, a
        // service manager did) and are still reading: their calls are answered as they come
        // until the servers end, as after a host's EOF.
        let behind_http = self.status_extra.is_some();
        let mut abandon_at = match reason {
            EndReason::HostOutputClosed => Some(Instant::now()),
            EndReason::Signal(_) if !behind_http => Some(Instant::now() + SIGNAL_ANSWER_WAIT),
            EndReason::Signal(_) | EndReason::HostClosed | EndReason::ServerEnded => None,
        };
        self.core.shutdown(&reason.text());
        self.carry_out()?;
        let deadline =
            Instant::now() + STDIN_GRACE + self.kill_timeout + Duration::from_millis(300);
        while !self.all_gone() {
            if abandon_at.is_some_and(|at| at <= Instant::now()) {
                abandon_at = None;
                let why = format!(
                    "airlock is stopping ({}): the call was in flight",
                    reason.text()
                );
                self.core.abandon_in_flight(&why, Instant::now());
                self.carry_out()?;
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                tracing::warn!(
                    "servers still stopping at the shutdown deadline; leaving them to the parent-death signal"
                );
                break;
            }
            let wait = abandon_at.map_or(remaining, |at| {
                remaining.min(at.saturating_duration_since(Instant::now()))
            });
            match tokio::time::timeout(wait, poll_fn(|cx| self.poll_wake(cx))).await {
                Ok(wake) => {
                    self.handle(wake)?;
                }
                // The abandonment's moment: looked at again at the loop's top.
                Err(_) if abandon_at.is_some() => {}
                Err(_) => break,
            }
        }
        if self.egress {
            // Connection events are written until none came for QUIET (a server's connections
            // end with it and report their bytes, and the counts over the budget, just after)
            // and no byte accounting still waits for a connection's end (one that outlives its
            // server is recorded when its grace is over), for at most DRAIN_AT_MOST in all. Only a connection event counts as one: a wake
            // that comes back at once (a timer already due, the host's end seen again) once
            // kept this loop going for ever, at full CPU, deaf to signals.
            let until = Instant::now() + net::DRAIN_AT_MOST;
            let mut last_event = Instant::now();
            loop {
                let quiet = last_event + net::QUIET;
                let until_next = if crate::net::handover::accounting_finishing() {
                    // Looked at again every QUIET: the accounting's records arrive as events.
                    Instant::now().max(quiet) + net::QUIET
                } else {
                    quiet
                };
                let wait = until_next
                    .min(until)
                    .saturating_duration_since(Instant::now());
                if wait.is_zero() {
                    break;
                }
                // A wait that ends without a wake is looked at again from the top: quiet
                // enough then, or an accounting still finishing.
                let Ok(wake) = tokio::time::timeout(wait, poll_fn(|cx| self.poll_wake(cx))).await
                else {
                    continue;
                };
                if matches!(wake, step::Wake::Input(Input::Net(_))) {
                    last_event = Instant::now();
                }
                self.handle(wake)?;
            }
        }
        if !self.single {
            let mut event = Event::new(EventKind::Exit, "gateway");
            event.reason = Some(reason.text());
            event.detail = Some(json!({"ended_by": format!("{reason:?}").to_lowercase()}));
            self.audit.record(event)?;
        }
        self.host_out.close();
        let drain = poll_fn(|cx| self.host_out.poll_drain(cx));
        let _ = tokio::time::timeout(HOST_DRAIN, drain).await;
        Ok(())
    }

    fn all_gone(&self) -> bool {
        self.spawning == 0 && self.links.iter().all(Option::is_none)
    }

    fn status(&self) -> Value {
        let mut servers = serde_json::to_value(self.core.status()).unwrap_or_default();
        if let Some(list) = servers.as_array_mut() {
            for entry in list.iter_mut() {
                let pid = entry["name"]
                    .as_str()
                    .and_then(|name| self.core.server_index(name))
                    .and_then(|index| self.links.get(index))
                    .and_then(|l| l.as_ref())
                    .and_then(|l| l.pid);
                entry["pid"] = json!(pid);
            }
        }
        let uptime = std::time::SystemTime::now()
            .duration_since(self.started)
            .unwrap_or_default();
        let mut status = json!({
            "pid": std::process::id(),
            "mode": if self.single { "run" } else { "serve" },
            "config": self.config_path.display().to_string(),
            "started": crate::audit::event::rfc3339(self.started),
            "uptime_s": uptime.as_secs(),
            "servers": servers,
        });
        if let Some(extra) = &self.status_extra {
            status["listen"] = extra();
        }
        status
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
            tracing::warn!("the control socket is unavailable: {err}");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let inputs = inputs.clone();
            tokio::spawn(async move {
                let (request, mut stream) = crate::gateway::control::read_request(stream).await;
                let (tx, rx) = oneshot::channel();
                let input = match request {
                    ControlRequest::Status => Input::Status(tx),
                    ControlRequest::Reload => Input::Reload(tx),
                };
                if inputs.send(input).is_err() {
                    return;
                }
                if let Ok(answer) = rx.await {
                    let mut bytes = serde_json::to_vec(&answer).unwrap_or_default();
                    bytes.push(b'\n');
                    let _ = stream.write_all(&bytes).await;
                    let _ = stream.shutdown().await;
                }
            });
        }
    });
}
