//! Spawning servers through the confine helper, and the kill sequence.
//!
//! [`spawn_confined`] re-executes airlock's own binary as `airlock __confine` with a cleared
//! environment and hands it the plan as the first frame on its stdin (8-byte length + JSON).
//! Why stdin: it is the one channel the helper is guaranteed to have, it needs no `pre_exec`
//! (no unsafe code in the async runtime), and the helper reads exactly the frame, so everything
//! after it is the server's MCP input. The plan may carry secrets (the server's env), and a pipe
//! is private to the two processes, unlike argv or the environment (`/proc/<pid>/cmdline`).
//!
//! Threading note: the helper's parent-death signal fires when the *thread* that spawned it
//! exits. Call [`spawn_confined`] from an async task (a runtime worker thread lives as long as the
//! runtime), never from `spawn_blocking`, whose threads retire when idle.

pub mod huge_pages;
pub mod launch;
pub mod refusal;

use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use std::os::fd::{AsRawFd, OwnedFd};

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::net::route::{Egress, HostResolver, NetAudit};
use crate::net::sys::Channel;
use crate::sandbox::confine::{Step, encode_plan};
use crate::sandbox::{EgressPlan, MemoryLimit, NetMode, SandboxPlan, cgroup};

/// The hidden subcommand that runs the confine helper.
pub const CONFINE_SUBCOMMAND: &str = "__confine";
/// How long the kill sequence waits after closing stdin before sending SIGTERM.
pub const STDIN_GRACE: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot find airlock's own executable to start the confine helper: {0}")]
    CurrentExe(io::Error),
    #[error("cannot start the confine helper {path}: {source}")]
    Spawn { path: String, source: io::Error },
    #[error("cannot encode the sandbox plan: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("cannot hand the sandbox plan to the confine helper: {0}")]
    Handoff(io::Error),
    #[error("cannot set up the server's network egress: {0}")]
    Egress(io::Error),
    #[error("the server's network allow list needs an audit log for its connections")]
    NoNetworkAudit,
}

/// A server running inside the sandbox (through the helper).
#[derive(Debug)]
pub struct ConfinedChild {
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    child: Child,
    pid: Option<u32>,
    kill_timeout: Duration,
    /// The resolver and connect hand-over of a server with a network allow list (stopped when dropped).
    egress: Option<crate::net::service::EgressService>,
    /// The sandbox's memory cgroup, when it has one.
    memory_cgroup: Option<std::path::PathBuf>,
}

/// How a confined server ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitSummary {
    /// The helper's exit status (`None` if waiting failed).
    pub status: Option<ExitStatus>,
    /// The exit code (128 + n when the server died of signal n inside the sandbox).
    pub code: Option<i32>,
    /// The signal that killed the helper itself (the kill sequence's SIGKILL).
    pub signal: Option<i32>,
    /// Which stage of the kill sequence ended it.
    pub ended_by: EndedBy,
    /// When the code is a confine helper failure: which step failed.
    pub helper_step: Option<&'static str>,
    /// The helper's own words for that failure (its last `airlock-confine: ` stderr line), when
    /// the stderr relay caught it.
    pub helper_message: Option<String>,
    /// The server's last stderr line, for a server that ended by itself with a failure (its
    /// reason in its own words), when the stderr relay caught it.
    pub last_words: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// It exited once its stdin was closed (the kill sequence's first step; `shutdown` also
    /// reports this for a process already gone: the session tells that one apart as
    /// [`EndedBy::Exited`], see `session::exit::ended_by`).
    StdinClosed,
    /// It exited by itself while its stdin was still open (a crash, or a server that quit).
    Exited,
    Sigterm,
    Sigkill,
    /// Waiting failed; the process may not have been reaped.
    Unknown,
}

impl ExitSummary {
    fn from_status(status: ExitStatus, ended_by: EndedBy) -> Self {
        use std::os::unix::process::ExitStatusExt;
        let code = status.code();
        ExitSummary {
            status: Some(status),
            code,
            signal: status.signal(),
            ended_by,
            helper_step: code.and_then(Step::from_code).map(Step::name),
            helper_message: None,
            last_words: None,
        }
    }
}

/// Starts the helper, hands it the plan, returns the child with its stdio pipes. Must be called
/// inside a tokio runtime (the pipes register with its reactor).
pub async fn spawn_confined(plan: &SandboxPlan) -> Result<ConfinedChild, SpawnError> {
    spawn_confined_with(plan, None).await
}

/// [`spawn_confined`] for any plan: a plan with a network allow list gets its resolver and connect hand-over
/// (`crate::net`), whose audit events go to `net_audit`.
pub async fn spawn_confined_with(
    plan: &SandboxPlan,
    net_audit: Option<&mpsc::Sender<NetAudit>>,
) -> Result<ConfinedChild, SpawnError> {
    let exe = std::env::current_exe().map_err(SpawnError::CurrentExe)?;
    let mut plan = plan.clone();
    plan.launcher_pid = Some(std::process::id());
    plan.launcher_thp_disabled = huge_pages::inherited_disabled();
    let channel = match &mut plan.network {
        NetMode::Egress(egress) => {
            if net_audit.is_none() {
                return Err(SpawnError::NoNetworkAudit);
            }
            let channel = Channel::bind().map_err(SpawnError::Egress)?;
            egress.channel = Some(channel.name.clone());
            Some(channel)
        }
        _ => None,
    };
    let frame = encode_plan(&plan)?;
    let mut command = Command::new(&exe);
    command
        .arg(CONFINE_SUBCOMMAND)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // If airlock drops the child without the kill sequence, tokio still kills the helper; the
        // helper's death takes the sandbox down (init's parent-death signal).
        .kill_on_drop(true);
    if let Some(log) = std::env::var_os("AIRLOCK_LOG") {
        command.env("AIRLOCK_LOG", log);
    }
    let mut child = command.spawn().map_err(|source| SpawnError::Spawn {
        path: exe.display().to_string(),
        source,
    })?;
    let stdin = match child.stdin.take() {
        Some(pipe) => Some(hand_over(pipe, &frame).map_err(SpawnError::Handoff)?),
        None => None,
    };
    let pid = child.id();
    let memory_cgroup = match (&plan.memory, pid) {
        (MemoryLimit::Cgroup { cgroup, .. }, Some(pid)) => {
            Some(cgroup::instance_dir(cgroup, &plan.server, pid))
        }
        _ => None,
    };
    let egress = match (channel, net_audit, &plan.network, pid) {
        (Some(channel), Some(audit), NetMode::Egress(egress), Some(pid)) => {
            Some(start_egress(&mut child, channel, pid, &plan.server, egress, audit).await?)
        }
        _ => None,
    };
    Ok(ConfinedChild {
        stdin,
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
        child,
        pid,
        kill_timeout: Duration::from_secs(plan.kill_timeout_secs),
        egress,
        memory_cgroup,
    })
}

/// How long the helper has to hand over the namespace's sockets (it does so before anything slow).
const EGRESS_HANDOVER: Duration = Duration::from_secs(30);

/// Waits for the sandbox's sockets and starts the resolver and the connect hand-over on them. If the helper dies
/// first, its own message (on its stderr) is the error.
async fn start_egress(
    child: &mut Child,
    channel: Channel,
    pid: u32,
    server: &str,
    egress: &EgressPlan,
    audit: &mpsc::Sender<NetAudit>,
) -> Result<crate::net::service::EgressService, SpawnError> {
    let sockets = tokio::select! {
        received = channel.receive(pid) => received.map_err(SpawnError::Egress)?,
        _ = child.wait() => {
            let mut message = String::new();
            if let Some(mut stderr) = child.stderr.take() {
                use tokio::io::AsyncReadExt;
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    stderr.read_to_string(&mut message),
                )
                .await;
            }
            return Err(SpawnError::Egress(io::Error::other(format!(
                "the confine helper ended before handing over the network sockets: {}",
                message.trim()
            ))));
        }
        _ = tokio::time::sleep(EGRESS_HANDOVER) => {
            return Err(SpawnError::Egress(io::Error::other(
                "the confine helper did not hand over the network sockets in time",
            )));
        }
    };
    let egress_state = Egress::new(
        server,
        egress.allow.clone(),
        audit.clone(),
        crate::net::lookup_cache::Cached::new(HostResolver),
    );
    crate::net::service::start(Arc::new(egress_state), sockets).map_err(SpawnError::Egress)
}

/// Writes the plan frame synchronously (a plan is a few KiB; the pipe holds 64 KiB) and gives the
/// pipe back as the server's stdin.
fn hand_over(pipe: ChildStdin, frame: &[u8]) -> io::Result<ChildStdin> {
    let fd: OwnedFd = pipe.into_owned_fd()?;
    let mut written = 0;
    while written < frame.len() {
        let rest = &frame[written..];
        // SAFETY: writes from a live slice to an fd we own.
        let n = unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
        if n >= 0 {
            written += n as usize;
            continue;
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                let mut poll = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: polls one pollfd we own; 5 s is far beyond a helper that is alive.
                if unsafe { libc::poll(&mut poll, 1, 5000) } <= 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the confine helper does not read its plan",
                    ));
                }
            }
            _ => return Err(err),
        }
    }
    ChildStdin::from_std(std::process::ChildStdin::from(fd))
}

impl ConfinedChild {
    /// The helper's pid (the sandbox's processes live in their own pid namespace).
    pub fn id(&self) -> Option<u32> {
        self.pid
    }

    /// Whether airlock serves a network allow list for this server (resolver and connect hand-over).
    pub fn has_network_egress(&self) -> bool {
        self.egress.is_some()
    }

    /// The policy's `kill_timeout`.
    pub fn kill_timeout(&self) -> Duration {
        self.kill_timeout
    }

    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait().await;
        self.release_cgroup(&status).await;
        status
    }

    /// The helper removes the sandbox's memory cgroup when it ends; a helper killed by a signal
    /// (the kill sequence's SIGKILL) could not, so airlock does once it has reaped it. The
    /// sandbox's processes die with the helper, a little later: retry briefly, then leave it to
    /// the sweep at the next start.
    async fn release_cgroup(&self, status: &io::Result<ExitStatus>) {
        use std::os::unix::process::ExitStatusExt;
        let killed = status
            .as_ref()
            .is_ok_and(|status| status.signal().is_some());
        let Some(dir) = self.memory_cgroup.as_ref().filter(|_| killed) else {
            return;
        };
        for _ in 0..20 {
            if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(pid) = self.pid.and_then(|pid| libc::pid_t::try_from(pid).ok()) {
            // SAFETY: kill takes integers. The pid is our unreaped child, so it cannot have been
            // recycled for another process.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// The kill sequence: close stdin, wait [`STDIN_GRACE`], SIGTERM (the helper forwards it to
    /// every process of the sandbox), wait `kill_timeout`, SIGKILL (the helper's death kills the
    /// sandbox's init, and the kernel kills the rest of the pid namespace).
    pub async fn shutdown(&mut self, kill_timeout: Duration) -> ExitSummary {
        drop(self.stdin.take());
        if let Ok(Ok(status)) = tokio::time::timeout(STDIN_GRACE, self.child.wait()).await {
            return ExitSummary::from_status(status, EndedBy::StdinClosed);
        }
        self.signal(libc::SIGTERM);
        if let Ok(Ok(status)) = tokio::time::timeout(kill_timeout, self.child.wait()).await {
            return ExitSummary::from_status(status, EndedBy::Sigterm);
        }
        self.signal(libc::SIGKILL);
        match self.wait().await {
            Ok(status) => ExitSummary::from_status(status, EndedBy::Sigkill),
            Err(_) => ExitSummary {
                status: None,
                code: None,
                signal: None,
                ended_by: EndedBy::Unknown,
                helper_step: None,
                helper_message: None,
                last_words: None,
            },
        }
    }
}
