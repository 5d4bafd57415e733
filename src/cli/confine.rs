//! Hidden subcommands of the sandbox:
//! - `airlock __confine`: the confine helper (reads a plan on stdin, never returns).
//! - `airlock __sandbox-exec [--policy P] [--grant-read P] [--grant-write P] -- CMD ARGS`: runs one
//!   command confined under the active policy with plain stdio relay. It exists for the
//!   end-to-end tests and the benchmark, and uses `sandbox::plan` + `process::spawn_confined`
//!   exactly as `airlock run` does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio::io::AsyncWriteExt;

use super::CliError;
use crate::net::route::NetAudit;
use crate::policy::{Layer, Network, Origin, Sourced};
use crate::process::{ConfinedChild, spawn_confined_with};
use crate::sandbox::{AirlockDirs, HostFacts, PlanRequest, ResolvedPaths, SandboxPlan};

#[derive(Debug, Args)]
pub struct ConfineArgs {}

pub fn confine(_args: ConfineArgs) -> ! {
    crate::sandbox::confine::main()
}

#[derive(Debug, Args)]
pub struct SandboxExecArgs {
    /// User policy file or preset.
    #[arg(long)]
    pub policy: Option<String>,
    /// Server name (names the private dirs).
    #[arg(long, default_value = "exec")]
    pub server: String,
    /// Extra read grant (repeatable).
    #[arg(long = "grant-read")]
    pub grant_read: Vec<String>,
    /// Extra write grant (repeatable).
    #[arg(long = "grant-write")]
    pub grant_write: Vec<String>,
    /// What paths on the server's own command line are granted: `none` (the default here: this
    /// harness grants what its flags say), `read` or `write` (as `grant_args` in a policy).
    #[arg(long = "grant-args", default_value = "none", value_parser = ["none", "read", "write"])]
    pub grant_args: String,
    /// Override the network: `none`, `host`, or comma-separated allow-list entries (`443` is any
    /// name on port 443; `api.github.com`, `127.0.0.1:8080`, ...).
    #[arg(long)]
    pub network: Option<String>,
    /// Where the connection events of a network allow list go: a file, or `-` for stderr
    /// (the default).
    #[arg(long)]
    pub audit: Option<PathBuf>,
    /// Print the plan on stderr before running.
    #[arg(long)]
    pub show_plan: bool,
    /// Working directory of the server (default: its private home).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<String>,
}

fn cli_origin(flag: &str) -> Origin {
    Origin {
        layer: Layer::User,
        file: PathBuf::from(flag),
        line: None,
    }
}

/// `443` (any name on that port) or an allow-list entry.
fn parse_net_entry(entry: &str) -> anyhow::Result<crate::net::NetRule> {
    if let Ok(port) = entry.parse::<u16>() {
        return Ok(crate::net::NetRule::any_name(port));
    }
    Ok(crate::net::NetRule::parse(entry)?)
}

fn build_plan(args: &SandboxExecArgs) -> Result<SandboxPlan, CliError> {
    let policy = super::active_policy::load_active(args.policy.clone(), None)?;
    let mut sandbox = policy.sandbox.clone();
    sandbox.read.extend(args.grant_read.iter().map(|g| Sourced {
        value: g.clone(),
        origin: cli_origin("--grant-read"),
    }));
    sandbox
        .write
        .extend(args.grant_write.iter().map(|g| Sourced {
            value: g.clone(),
            origin: cli_origin("--grant-write"),
        }));
    sandbox.grant_args = Sourced {
        value: match args.grant_args.as_str() {
            "write" => crate::policy::GrantArgs::Write,
            "read" => crate::policy::GrantArgs::Read,
            _ => crate::policy::GrantArgs::None,
        },
        origin: cli_origin("--grant-args"),
    };
    if let Some(network) = &args.network {
        let value = match network.as_str() {
            "none" => Network::None,
            "host" => Network::Host,
            entries => Network::Allow(
                entries
                    .split(',')
                    .map(|entry| parse_net_entry(entry.trim()))
                    .map(|rule| {
                        rule.map(|value| Sourced {
                            value,
                            origin: cli_origin("--network"),
                        })
                    })
                    .collect::<Result<_, _>>()
                    .context("--network")?,
            ),
        };
        sandbox.network = Sourced {
            value,
            origin: cli_origin("--network"),
        };
    }
    let parent_env: Vec<(String, String)> = crate::paths::EnvVars::from_process().into_pairs();
    let host = HostFacts::detect();
    let mut dirs = AirlockDirs::from_env(&parent_env, host.is_root);
    dirs.policy_files = policy
        .sources
        .iter()
        .map(|(_, path)| path.clone())
        .collect();
    let (name, rest) = args.command.split_first().context("no command given")?;
    let path_var = parent_env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    let cwd = std::env::current_dir().context("the current directory")?;
    let program = crate::paths::resolve_command(name, path_var.map(std::ffi::OsStr::new), &cwd)
        .with_context(|| format!("command `{name}`"))?;
    let resolved = ResolvedPaths::inspect(
        &program,
        rest,
        args.cwd.as_deref(),
        &parent_env,
        dirs.home.as_deref(),
    );
    let request = PlanRequest {
        server: args.server.clone(),
        program,
        args: rest.to_vec(),
        env: Vec::new(),
        cwd: args.cwd.clone(),
        sandbox,
        dirs,
        parent_env,
        resolved,

        fetches_packages: false,
    };
    crate::sandbox::plan(&request, &host).map_err(|err| CliError::Refused(err.to_string()))
}

pub fn sandbox_exec(args: SandboxExecArgs) -> Result<ExitCode, CliError> {
    let mut plan = build_plan(&args)?;
    if args.show_plan {
        crate::sandbox::host::observe_host(&mut plan);
        eprint!("{plan:#}");
    }
    // A current-thread runtime: the helper's parent-death signal is tied to the spawning thread,
    // which here is the main thread and lives as long as airlock.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let audit = match args.audit.as_deref() {
        Some(path) if path != std::path::Path::new("-") => {
            crate::audit::AuditLog::open_file(path).context("opening the audit log")?
        }
        _ => crate::audit::AuditLog::stderr(),
    };
    let code = runtime.block_on(relay(plan, audit))?;
    // Exit now: the stdin reader may still be blocked in a read that will never finish.
    std::process::exit(code)
}

async fn relay(plan: SandboxPlan, mut audit: crate::audit::AuditLog) -> Result<i32, CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let (net_tx, mut net_rx) = tokio::sync::mpsc::channel::<NetAudit>(1024);
    audit.attribute_connections();
    let writer = tokio::spawn(async move {
        while let Some(NetAudit { event, written }) = net_rx.recv().await {
            if audit.record(event).is_ok()
                && let Some(written) = written
            {
                let _ = written.send(());
            }
        }
    });
    let mut child: ConfinedChild = spawn_confined_with(&plan, Some(&net_tx))
        .await
        .context("spawning the sandbox")?;
    drop(net_tx);
    let kill_timeout = Duration::from_secs(plan.kill_timeout_secs);
    let mut child_stdin = child.stdin.take();
    let (eof_tx, mut eof_rx) = tokio::sync::oneshot::channel::<()>();
    let stdin_task = tokio::spawn(async move {
        if let Some(pipe) = child_stdin.as_mut() {
            let _ = tokio::io::copy(&mut tokio::io::stdin(), pipe).await;
        }
        drop(child_stdin);
        let _ = eof_tx.send(());
    });
    let stdout_task = child.stdout.take().map(|mut out| {
        tokio::spawn(async move {
            let mut stdout = tokio::io::stdout();
            let _ = tokio::io::copy(&mut out, &mut stdout).await;
            let _ = stdout.flush().await;
        })
    });
    let stderr_task = child.stderr.take().map(|mut err| {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut err, &mut tokio::io::stderr()).await;
        })
    });
    let mut sigterm = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let summary = tokio::select! {
        status = child.wait() => {
            let status = status.context("waiting for the sandbox")?;
            use std::os::unix::process::ExitStatusExt;
            crate::process::ExitSummary { status: Some(status), code: status.code(), signal: status.signal(), ended_by: crate::process::EndedBy::StdinClosed, helper_step: None, helper_message: None, last_words: None }
        }
        _ = &mut eof_rx => child.shutdown(kill_timeout).await,
        _ = sigterm.recv() => { stdin_task.abort(); child.shutdown(kill_timeout).await }
        _ = sigint.recv() => { stdin_task.abort(); child.shutdown(kill_timeout).await }
    };
    for task in [stdout_task, stderr_task].into_iter().flatten() {
        let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
    }
    // The hand-over's last events (connections that ended with the sandbox) are written before exit.
    drop(child);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    tracing::debug!(?summary, "sandbox ended");
    Ok(summary
        .code
        .unwrap_or_else(|| 128 + summary.signal.unwrap_or(0)))
}
