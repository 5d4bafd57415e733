//! `airlock test NAME`: start one configured server in its sandbox, run the real handshake
//! (`initialize`, `notifications/initialized`, every page of `tools/list`) and report tool count,
//! tool names, latency and sandbox status, like a host's "test connection" button.
//!
//! Exit status: 0 when the handshake completes; 1 when the server fails (the reason and the end
//! of its stderr are printed); 2 when the config or policy refuses it.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};

use super::CliError;
use crate::mcp::{Frame, LineReader};
use crate::process::launch::{LaunchContext, LaunchError, prepare};

/// Start one configured server confined and check it answers the MCP handshake.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  airlock test filesystem --config ~/.config/airlock/airlock.toml"
)]
pub struct TestArgs {
    /// The server's name in the config (or --url for a listening gateway).
    #[arg(required_unless_present = "url")]
    pub name: Option<String>,
    /// Test a listening gateway instead (`airlock serve --listen`): a client session over
    /// Streamable HTTP, e.g. http://127.0.0.1:8080/mcp, or unix:/run/airlock/mcp.sock (its
    /// `/mcp`), as `airlock status` shows it.
    #[arg(long, conflicts_with_all = ["config", "policy"])]
    pub url: Option<String>,
    /// Bearer token for --url (default: the AIRLOCK_TOKEN environment variable).
    #[arg(long, requires = "url")]
    pub token: Option<String>,
    /// Server config (default: ./airlock.toml, else $XDG_CONFIG_HOME/airlock/airlock.toml).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// User policy file or preset (default: $XDG_CONFIG_HOME/airlock/policy.toml).
    #[arg(long)]
    pub policy: Option<String>,
    /// Seconds the handshake may take (default: the server's startup_timeout).
    #[arg(long)]
    pub timeout: Option<u64>,
}

/// What a successful handshake found.
struct Found {
    server_info: Value,
    protocol: String,
    tools: Vec<String>,
    initialize_ms: f64,
    total_ms: f64,
}

const STDERR_TAIL: usize = 8 * 1024;

pub fn run(args: TestArgs) -> Result<ExitCode, CliError> {
    if let Some(url) = &args.url {
        let token = args
            .token
            .clone()
            .or_else(|| std::env::var("AIRLOCK_TOKEN").ok());
        let timeout = std::time::Duration::from_secs(args.timeout.unwrap_or(30));
        return super::test_url::run(url, token, timeout);
    }
    let name = args.name.clone().unwrap_or_default();
    let (config, policy) = super::serve::load(args.config.as_deref(), args.policy.clone())?;
    let server = find_server(&config, &name)?;
    if server.transport != crate::config::Transport::Stdio {
        return run_remote(&args, server, &policy, &config.separator);
    }
    // The test keeps the audit log a session would: its server's connections (its install
    // step's fetch among them) are on record, as the first start of the server would have them.
    let (audit, audit_path) = super::session::open_audit(None, &policy)?;
    let context = LaunchContext::detect_for(&policy, audit_path.as_deref(), &config);
    let prepared = match prepare(server, &policy, &context) {
        Ok(prepared) => prepared,
        Err(err @ LaunchError::Refused(_)) => return Err(CliError::Refused(err.to_string())),
        Err(err) => return Err(CliError::Failure(err.into())),
    };
    let timeout = args
        .timeout
        .map(Duration::from_secs)
        .unwrap_or(server.startup_timeout);
    println!("server:   {}", server.name);
    println!("command:  {}", prepared.plan.argv.join(" "));
    println!("sandbox:  {}", prepared.plan.short_summary());
    for weaker in &prepared.plan.weaker_than_asked {
        println!("warning:  sandbox weaker than the policy asks: {weaker}");
    }
    for skipped in &prepared.plan.not_granted {
        println!("note:     not granted: {skipped}");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // An uncached npx/uvx package is fetched first, as `run` and `serve` do (its install
    // step's connections go to the audit log); that may take a while.
    let fetching = prepared.needs_fetch();
    if fetching {
        println!("note:     its package is not cached yet: the install step fetches it first");
    }
    let timeout = if fetching {
        timeout + crate::fetch::step::FETCH_TIMEOUT
    } else {
        timeout
    };
    let mut records = NetRecords {
        log: Some(audit),
        path: audit_path,
        policy_event: super::session::policy_event(&server.name, &policy),
        written: None,
    };
    let outcome = runtime.block_on(start_and_handshake(prepared, timeout, &mut records));
    if let (Some(written), Some(path)) = (&records.written, &records.path) {
        let written = written.load(std::sync::atomic::Ordering::Relaxed);
        println!(
            "network:  {written} record(s) in {} (`airlock audit --server {}`)",
            path.display(),
            server.name
        );
    }
    report(outcome, server, &policy, &config.separator)
}

fn find_server<'a>(
    config: &'a crate::config::Config,
    name: &str,
) -> Result<&'a crate::config::ServerConfig, CliError> {
    config.server(name).ok_or_else(|| {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        CliError::Refused(format!(
            "no server named {:?} in {} (servers: {})",
            name,
            config.path.display(),
            names.join(", ")
        ))
    })
}

/// Where the test's connection records go: the policy's audit log (opened only when there are
/// connections to record, after the policy in force), or stderr when that is the policy's log.
struct NetRecords {
    log: Option<crate::audit::AuditLog>,
    path: Option<std::path::PathBuf>,
    policy_event: crate::audit::Event,
    /// How many were written, once writing started.
    written: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
}

impl NetRecords {
    fn sender(&mut self) -> Result<NetSender, (String, String)> {
        let log = self.log.take().filter(|_| self.path.is_some());
        let Some(mut log) = log else {
            return Ok(crate::net::route::audit_to_stderr());
        };
        let event = self.policy_event.clone();
        log.record(event)
            .map_err(|err| (format!("cannot write the audit log: {err}"), String::new()))?;
        let (sender, written) = crate::net::route::audit_to_log(log);
        self.written = Some(written);
        Ok(sender)
    }
}

type NetSender = tokio::sync::mpsc::Sender<crate::net::route::NetAudit>;

/// Starts the server confined, runs the handshake within `timeout` and stops it. A failure
/// carries its reason and the end of the server's stderr.
async fn start_and_handshake(
    mut prepared: crate::process::launch::Prepared,
    timeout: Duration,
    records: &mut NetRecords,
) -> Result<Found, (String, String)> {
    if matches!(prepared.plan.network, crate::sandbox::NetMode::Egress(_)) || prepared.needs_fetch()
    {
        prepared.net_audit = Some(records.sender()?);
    }
    let started = Instant::now();
    let mut child = prepared
        .spawn()
        .await
        .map_err(|err| (err.to_string(), String::new()))?;
    let tail = tokio::spawn(stderr_tail(child.stderr.take()));
    let result = tokio::time::timeout(timeout, handshake(&mut child, started)).await;
    let kill_timeout = child.kill_timeout();
    let summary = child.shutdown(kill_timeout).await;
    let stderr = tokio::time::timeout(Duration::from_millis(500), tail)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let start = stderr.len().saturating_sub(STDERR_TAIL);
    let stderr = String::from_utf8_lossy(&stderr[start..]).into_owned();
    match result {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(reason)) => {
            let exit = match (summary.helper_step, summary.code) {
                (Some(step), _) => format!("; the sandbox could not be set up (step {step})"),
                (None, Some(code)) => format!("; it exited with code {code}"),
                _ => String::new(),
            };
            Err((format!("{reason}{exit}"), stderr))
        }
        Err(_) => Err((
            format!(
                "no complete handshake within {}s (startup_timeout)",
                timeout.as_secs()
            ),
            stderr,
        )),
    }
}

/// Reads the server's stderr to its end, keeping about the last `STDERR_TAIL` bytes.
async fn stderr_tail(stderr: Option<tokio::process::ChildStderr>) -> Vec<u8> {
    let mut buffer = Vec::new();
    if let Some(mut stderr) = stderr {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            buffer.extend_from_slice(&chunk[..n]);
            if buffer.len() > STDERR_TAIL * 2 {
                buffer.drain(..buffer.len() - STDERR_TAIL);
            }
        }
    }
    buffer
}

/// Prints the result of a handshake and picks the exit status.
fn report(
    outcome: Result<Found, (String, String)>,
    server: &crate::config::ServerConfig,
    policy: &crate::policy::Policy,
    separator: &str,
) -> Result<ExitCode, CliError> {
    match outcome {
        Ok(found) => {
            let hidden = found
                .tools
                .iter()
                .filter(|tool| !policy.tools.lists_tool(&server.name, tool))
                .count();
            println!(
                "server:   {} {} (protocol {})",
                found.server_info["name"].as_str().unwrap_or("?"),
                found.server_info["version"].as_str().unwrap_or(""),
                found.protocol
            );
            println!(
                "latency:  {:.0} ms to ready (initialize answered after {:.0} ms)",
                found.total_ms, found.initialize_ms
            );
            println!(
                "tools:    {}{}",
                found.tools.len(),
                if hidden > 0 {
                    format!(" ({hidden} hidden from hosts by the policy)")
                } else {
                    String::new()
                }
            );
            for tool in &found.tools {
                let shown = if policy.tools.lists_tool(&server.name, tool) {
                    ""
                } else {
                    "  (denied)"
                };
                println!("  {}{}{tool}{shown}", server.name, separator);
            }
            println!("OK");
            Ok(ExitCode::SUCCESS)
        }
        Err((reason, stderr)) => {
            println!("FAILED: server `{}`: {reason}", server.name);
            if !stderr.trim().is_empty() {
                println!("its stderr (last lines):");
                for line in stderr
                    .lines()
                    .rev()
                    .take(20)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                {
                    println!("  | {line}");
                }
            }
            Ok(ExitCode::from(super::EXIT_FAILURE))
        }
    }
}

/// Why the test client's handshake with a server did not complete.
#[derive(Debug, thiserror::Error)]
enum HandshakeError {
    #[error("the server's {0} is missing")]
    StdioMissing(&'static str),
    #[error("the server stopped reading its input: {0}")]
    Write(std::io::Error),
    #[error("reading from the server failed: {0}")]
    Read(std::io::Error),
    #[error("the server closed its output before answering")]
    Closed,
    #[error("the server writes something other than MCP on stdout")]
    NotMcp,
    #[error("{method} failed: {error}")]
    Refused { method: &'static str, error: Value },
}

async fn handshake(
    child: &mut crate::process::ConfinedChild,
    started: Instant,
) -> Result<Found, HandshakeError> {
    let stdin = child
        .stdin
        .take()
        .ok_or(HandshakeError::StdioMissing("stdin"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or(HandshakeError::StdioMissing("stdout"))?;
    handshake_over(stdin, stdout, started).await
}

/// The handshake over any pair of byte streams carrying newline-delimited JSON.
async fn handshake_over<W, R>(
    mut stdin: W,
    stdout: R,
    started: Instant,
) -> Result<Found, HandshakeError>
where
    W: tokio::io::AsyncWrite + Unpin,
    R: tokio::io::AsyncRead + Unpin,
{
    let mut lines = LineReader::new(BufReader::new(stdout), crate::mcp::DEFAULT_MAX_LINE_BYTES);
    let mut send = async |message: Value| -> Result<(), HandshakeError> {
        let mut bytes = message.to_string().into_bytes();
        bytes.push(b'\n');
        stdin.write_all(&bytes).await.map_err(HandshakeError::Write)
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": crate::session::core::LATEST_HANDSHAKE,
        "capabilities": {},
        "clientInfo": {"name": "airlock-test", "version": env!("CARGO_PKG_VERSION")}
    }});
    send(initialize).await?;
    let mut answers = Vec::new();
    let init = read_answer(&mut lines, 1, &mut answers).await?;
    let initialize_ms = started.elapsed().as_secs_f64() * 1000.0;
    let result = init.get("result").ok_or_else(|| HandshakeError::Refused {
        method: "initialize",
        error: init["error"].clone(),
    })?;
    let server_info = result.get("serverInfo").cloned().unwrap_or_default();
    let protocol = result["protocolVersion"]
        .as_str()
        .unwrap_or("?")
        .to_string();
    let has_tools = result.pointer("/capabilities/tools").is_some();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
    for answer in answers.drain(..) {
        send(answer).await?;
    }
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut id = 1;
    if !has_tools {
        return Ok(Found {
            server_info,
            protocol,
            tools,
            initialize_ms,
            total_ms: started.elapsed().as_secs_f64() * 1000.0,
        });
    }
    loop {
        id += 1;
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params})).await?;
        let page = read_answer(&mut lines, id, &mut answers).await?;
        for answer in answers.drain(..) {
            send(answer).await?;
        }
        let result = page.get("result").ok_or_else(|| HandshakeError::Refused {
            method: "tools/list",
            error: page["error"].clone(),
        })?;
        for tool in result["tools"].as_array().into_iter().flatten() {
            tools.push(tool["name"].as_str().unwrap_or("?").to_string());
        }
        match result
            .get("nextCursor")
            .filter(|c| c.as_str().is_some_and(|s| !s.is_empty()))
        {
            Some(next) if id < 1000 => cursor = Some(next.clone()),
            _ => break,
        }
    }
    Ok(Found {
        server_info,
        protocol,
        tools,
        initialize_ms,
        total_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// Reads until the answer to `id`; requests from the server meanwhile get an answer queued in
/// `answers` (`ping` → `{}`, anything else: not offered by this test client).
async fn read_answer<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut LineReader<R>,
    id: i64,
    answers: &mut Vec<Value>,
) -> Result<Value, HandshakeError> {
    let mut junk = 0;
    loop {
        let frame = lines.next_frame().await.map_err(HandshakeError::Read)?;
        let line = match frame {
            None => return Err(HandshakeError::Closed),
            Some(Frame::Oversized { bytes }) => {
                junk += 1;
                tracing::warn!("the server wrote a {bytes}-byte line");
                continue;
            }
            Some(Frame::Line(line)) => line,
        };
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            junk += 1;
            if junk > 1000 {
                return Err(HandshakeError::NotMcp);
            }
            continue;
        };
        if message.get("method").is_some() {
            if let Some(request_id) = message.get("id") {
                let answer = if message["method"] == "ping" {
                    json!({"jsonrpc": "2.0", "id": request_id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "airlock test does not offer this"}})
                };
                answers.push(answer);
            }
            continue;
        }
        if message.get("id") == Some(&json!(id)) {
            return Ok(message);
        }
    }
}

/// `airlock test` for a remote server: the same handshake over HTTP, through the same transport
/// code `airlock serve` uses. No process, so no sandbox to report.
fn run_remote(
    args: &TestArgs,
    server: &crate::config::ServerConfig,
    policy: &crate::policy::Policy,
    separator: &str,
) -> Result<ExitCode, CliError> {
    use crate::gateway::remote::{Emit, RemoteEvent, RemoteTarget, connect};
    use std::sync::{Arc, Mutex};
    use tokio::sync::{mpsc, oneshot};

    let max = crate::mcp::DEFAULT_MAX_LINE_BYTES;
    let target =
        RemoteTarget::new(server, max).map_err(|err| CliError::Refused(err.to_string()))?;
    let timeout = args
        .timeout
        .map(Duration::from_secs)
        .unwrap_or(server.startup_timeout);
    println!("server:   {}", server.name);
    println!("url:      {}", target.summary());
    println!("sandbox:  remote: no sandbox (no process; calls are still gated and audited)");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = runtime.block_on(async {
        let started = Instant::now();
        let session = connect(&target)
            .await
            .map_err(|err| (err.to_string(), String::new()))?;
        // Bridge the link's message queues to byte streams, so the stdio handshake runs as is.
        let (to_server, from_client) = mpsc::channel::<Vec<u8>>(64);
        let (events_tx, mut events) = mpsc::unbounded_channel::<RemoteEvent>();
        let emit: Emit = Arc::new(move |event| events_tx.send(event).is_ok());
        let (stop, stopped) = oneshot::channel();
        let link = tokio::spawn(session.run(from_client, stopped, emit));
        let ended: Arc<Mutex<Option<String>>> = Arc::default();
        let (mut server_out, handshake_in) = tokio::io::duplex(64 * 1024);
        let ended_by = ended.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                match event {
                    RemoteEvent::Message(message) => {
                        let mut line = serde_json::to_vec(&message).unwrap_or_default();
                        line.push(b'\n');
                        if server_out.write_all(&line).await.is_err() {
                            return;
                        }
                    }
                    RemoteEvent::Dropped { reason, .. } => {
                        tracing::warn!("dropped a message from the server: {reason}")
                    }
                    RemoteEvent::Ended { reason, .. } => {
                        if let Ok(mut slot) = ended_by.lock() {
                            *slot = Some(reason);
                        }
                        return;
                    }
                }
            }
        });
        let (handshake_out, client_in) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let mut lines = LineReader::new(BufReader::new(client_in), max);
            while let Ok(Some(Frame::Line(line))) = lines.next_frame().await {
                if to_server.send(line).await.is_err() {
                    return;
                }
            }
        });
        let result = tokio::time::timeout(
            timeout,
            handshake_over(handshake_out, handshake_in, started),
        )
        .await;
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(3), link).await;
        let why = ended.lock().ok().and_then(|slot| slot.clone());
        match result {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(reason)) => Err((
                // The link's own reason (refused, HTTP 401, ...) says more than the handshake's.
                why.unwrap_or_else(|| reason.to_string()),
                String::new(),
            )),
            Err(_) => Err((
                format!(
                    "no complete handshake within {}s (startup_timeout)",
                    timeout.as_secs()
                ),
                String::new(),
            )),
        }
    });
    report(outcome, server, policy, separator)
}
