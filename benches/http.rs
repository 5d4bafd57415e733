//! `airlock serve --listen` against mcp-proxy (a stdio → Streamable HTTP bridge, pinned in
//! .ci/install-peers) in front of the same native echo server (`examples/mcp_echo`), measured in
//! the same run: 32 concurrent HTTP clients, each with its own session and keep-alive connection,
//! calling `tools/call` as fast as answers come. Throughput (calls/s) as a ratio, p50 and p99
//! beside it. Then airlock's resident memory with 1,000 open sessions.
//!
//! Run: `cargo bench --bench http` (builds `airlock` and `examples/mcp_echo` with `--release`;
//! needs `.ci/install-peers` for mcp-proxy and Node 22).
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a failed unwrap is a failed run

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "common/binaries.rs"]
mod binaries;
#[path = "common/summary.rs"]
mod summary;

const CLIENTS: usize = 32;
const WARMUP: Duration = Duration::from_secs(1);
const MEASURE: Duration = Duration::from_secs(5);
const ROUNDS: usize = 3;
const SESSIONS: usize = 1000;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: kill only sends a signal to a pid this bench started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(300));
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for(port: u16) {
    let up = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "nothing listens on {port}");
}

fn start_airlock(airlock: &Path, echo: &Path, work: &Path) -> (Killed, String) {
    let port = free_port();
    let config = work.join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.echo]\ncommand = \"{}\"\nstart = \"eager\"\n\n[http]\nrate_limit = 0\nmax_sessions = 5000\nsessions_per_client = 5000\n",
            echo.display()
        ),
    )
    .unwrap();
    std::fs::write(
        work.join("policy.toml"),
        format!(
            "version = 1\n[launch]\nallow_commands = [\"{}\"]\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
            echo.display(),
            echo.parent().unwrap().display()
        ),
    )
    .unwrap();
    let child = Command::new(airlock)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--policy")
        .arg(work.join("policy.toml"))
        .arg("--audit")
        .arg(work.join("audit.jsonl"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("XDG_STATE_HOME", work.join("state"))
        .env("XDG_CONFIG_HOME", work.join("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port);
    (Killed(child), format!("http://127.0.0.1:{port}/mcp"))
}

fn start_proxy(root: &Path, echo: &Path) -> (Killed, String) {
    let port = free_port();
    let peers = root.join(".peers");
    let node_dir = peers.join("node22/bin");
    let path = format!(
        "{}:{}",
        node_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = Command::new(peers.join("http-npm/node_modules/.bin/mcp-proxy"))
        .env("PATH", path)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--server",
            "stream",
            "--",
        ])
        .arg(echo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port);
    (Killed(child), format!("http://127.0.0.1:{port}/mcp"))
}

/// The JSON-RPC message of a response body: plain JSON, or the `data:` of an SSE event.
fn message_of(body: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return Some(value);
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|m| m.get("id").is_some())
}

struct HttpClient {
    client: reqwest::Client,
    url: String,
    session: String,
}

impl HttpClient {
    async fn open(url: &str) -> HttpClient {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}});
        let response = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(init.to_string())
            .send()
            .await
            .unwrap();
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let _ = response.text().await;
        let mut this = HttpClient {
            client,
            url: url.to_string(),
            session,
        };
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        this.send(&note).await;
        this
    }

    async fn send(&mut self, message: &Value) -> Option<Value> {
        let response = self
            .client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-06-18")
            .body(message.to_string())
            .send()
            .await
            .ok()?;
        message_of(&response.text().await.ok()?)
    }
}

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// 32 clients call `tool` for WARMUP + MEASURE; latencies of the MEASURE window count.
fn load(url: &str, tool: &str) -> Figures {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(HttpClient::open(url).await);
        }
        let start = Instant::now();
        let (from, until) = (start + WARMUP, start + WARMUP + MEASURE);
        let errors = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for mut client in clients {
            let errors = errors.clone();
            let tool = tool.to_string();
            tasks.push(tokio::spawn(async move {
                let mut samples = Vec::with_capacity(50_000);
                let mut id = 1u64;
                loop {
                    let sent = Instant::now();
                    if sent >= until {
                        break;
                    }
                    id += 1;
                    let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"text":"hello"}}});
                    match client.send(&call).await {
                        Some(answer) if answer.get("result").is_some() => {
                            if sent >= from {
                                samples.push(sent.elapsed());
                            }
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                samples
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        let failed = errors.load(Ordering::Relaxed);
        assert!(failed == 0 || all.len() as u64 > failed * 100, "{failed} calls failed");
        all.sort();
        Figures {
            per_second: all.len() as f64 / MEASURE.as_secs_f64(),
            p50: all[all.len() / 2],
            p99: all[all.len() * 99 / 100],
        }
    })
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn open_sessions(url: &str, count: usize) -> usize {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut opened = Vec::new();
        let mut pending = Vec::new();
        for _ in 0..count {
            let url = url.to_string();
            pending.push(tokio::spawn(async move { HttpClient::open(&url).await }));
            if pending.len() == CLIENTS {
                for task in pending.drain(..) {
                    opened.push(task.await.unwrap());
                }
            }
        }
        for task in pending {
            opened.push(task.await.unwrap());
        }
        opened.len()
    })
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let built = binaries::build_release();
    let work = tempfile::tempdir().unwrap();
    summary::machine_state();
    let mut airlock_rounds = Vec::new();
    let mut proxy_rounds = Vec::new();
    for _ in 0..ROUNDS {
        let (_gateway, url) = start_airlock(&built.airlock, &built.mcp_echo, work.path());
        // airlock namespaces tools `<server>__<tool>`; mcp-proxy passes the server's names.
        airlock_rounds.push(load(&url, "echo__echo"));
        drop(_gateway);
        let (_proxy, url) = start_proxy(&root, &built.mcp_echo);
        proxy_rounds.push(load(&url, "echo"));
    }
    let median = |rounds: &mut Vec<Figures>| {
        rounds.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
        rounds.remove(rounds.len() / 2)
    };
    let (ours, theirs) = (median(&mut airlock_rounds), median(&mut proxy_rounds));
    let ratio = ours.per_second / theirs.per_second;
    println!(
        "\n{CLIENTS} concurrent clients, tools/call to examples/mcp_echo, median of {ROUNDS} rounds of {}s",
        MEASURE.as_secs()
    );
    println!("| | calls/s | p50 | p99 |\n|---|---|---|---|");
    for (name, f) in [("airlock serve --listen", &ours), ("mcp-proxy", &theirs)] {
        println!(
            "| {name} | {:.0} | {:.0} µs | {:.0} µs |",
            f.per_second,
            f.p50.as_micros(),
            f.p99.as_micros()
        );
    }
    println!("throughput ratio: {ratio:.2}x");
    summary::summary(
        "http tools/call throughput, 32 clients (calls/s)",
        &format!(
            "{:.0} (p50 {} µs, p99 {} µs)",
            ours.per_second,
            ours.p50.as_micros(),
            ours.p99.as_micros()
        ),
        &format!(
            "mcp-proxy {:.0} (p50 {} µs, p99 {} µs)",
            theirs.per_second,
            theirs.p50.as_micros(),
            theirs.p99.as_micros()
        ),
        &format!("{ratio:.2}x"),
        ">= 5x mcp-proxy",
        Some(ratio >= 5.0),
    );

    let (gateway, url) = start_airlock(&built.airlock, &built.mcp_echo, work.path());
    let pid = gateway.0.id();
    let before = rss_kib(pid, "VmRSS:");
    let opened = open_sessions(&url, SESSIONS);
    std::thread::sleep(Duration::from_millis(500));
    let (rss, hwm) = (rss_kib(pid, "VmRSS:"), rss_kib(pid, "VmHWM:"));
    println!(
        "\nairlock RSS: {:.1} MiB idle, {:.1} MiB with {opened} open sessions (peak {:.1} MiB)",
        before as f64 / 1024.0,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    summary::summary(
        "http RSS with 1,000 open sessions",
        &format!("{:.1} MiB", rss as f64 / 1024.0),
        &format!("{:.1} MiB idle", before as f64 / 1024.0),
        &format!("peak {:.1} MiB", hwm as f64 / 1024.0),
        "<= 64 MiB",
        Some(opened == SESSIONS && rss <= 64 * 1024),
    );
}
