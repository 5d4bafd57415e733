//! `airlock serve` against a direct connection to the same server, measured in the same run:
//! `tools/call` round trip p50/p99 as a ratio, and time to Ready (spawn of `airlock serve` → the
//! aggregated `tools/list` answer) for 10 servers started in parallel vs one.
//!
//! Two servers: the fast native `examples/mcp_echo` (answers in a few µs, so the row shows
//! airlock's fixed cost) and the Python fixture of the serve tests (a real interpreted server).
//!
//! The floor: any stdio proxy adds two pipe hops per round trip (host → proxy → server and back),
//! each a write plus the wakeup of another process. The bench measures that floor with two
//! trivial byte-forwarding proxies run from this same binary (re-executed with
//! `AIRLOCK_BENCH_PROXY`): blocking threads (the cheapest a proxy can be) and a single-threaded
//! tokio loop (the shape of airlock: one thread, epoll).
//!
//! Run: `cargo bench --bench serve` (builds `airlock` and `examples/mcp_echo` with `--release`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const ROUND_TRIPS: usize = 3000;
/// Fewer calls against the Python server: each takes tens of µs.
const REAL_ROUND_TRIPS: usize = 1000;
const WARMUP: usize = 200;
const READY_RUNS: usize = 5;

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    fn start(program: &Path, args: &[&str], env: &[(&str, &Path)]) -> Peer {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            cmd.env(key, value);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", program.display()));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Peer {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    fn read(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read");
        line
    }

    fn initialize(&mut self) {
        self.send(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#);
        let line = self.read();
        assert!(line.contains("\"result\""), "initialize failed: {line}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    fn finish(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// `tool` is called with `{argument: "hello <id>"}` and must echo it back.
fn round_trips(peer: &mut Peer, tool: &str, argument: &str, count: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(count);
    for id in 0..count + WARMUP {
        let message = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{{\"{argument}\":\"hello {id}\"}}}}}}"
        );
        let started = Instant::now();
        peer.send(&message);
        // Real servers send notifications of their own (server-everything: list_changed, log
        // messages) between answers: skip to the answer.
        let line = loop {
            let line = peer.read();
            assert!(!line.is_empty(), "the server closed its output");
            let is_answer = serde_json::from_str::<serde_json::Value>(&line)
                .is_ok_and(|message| message["id"] == id);
            if is_answer {
                break line;
            }
        };
        if id >= WARMUP {
            times.push(started.elapsed());
        }
        assert!(line.contains("hello"), "bad answer: {line}");
    }
    times.sort();
    times
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p) as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Setup {
    airlock: PathBuf,
    server: PathBuf,
    work: tempfile::TempDir,
}

impl Setup {
    fn config(&self, servers: usize) -> PathBuf {
        let mut text = String::new();
        for n in 0..servers {
            text.push_str(&format!(
                "[servers.echo{n}]\ncommand = \"{}\"\n\n",
                self.server.display()
            ));
        }
        let path = self.work.path().join(format!("airlock-{servers}.toml"));
        std::fs::write(&path, text).expect("config");
        path
    }

    fn serve(&self, servers: usize) -> Peer {
        self.serve_config(&self.config(servers))
    }

    fn serve_config(&self, config: &Path) -> Peer {
        let policy = self.work.path().join("policy.toml");
        let audit = self.work.path().join("audit.jsonl");
        let state = self.work.path().join("state");
        Peer::start(
            &self.airlock,
            &[
                "serve",
                "--config",
                config.to_str().expect("utf8"),
                "--policy",
                policy.to_str().expect("utf8"),
                "--audit",
                audit.to_str().expect("utf8"),
            ],
            &[("XDG_STATE_HOME", &state)],
        )
    }

    /// airlock serve started → initialize answered → tools/list answered with every server's tool.
    fn time_to_ready(&self, servers: usize) -> Duration {
        let started = Instant::now();
        let mut gateway = self.serve(servers);
        gateway.initialize();
        gateway.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        let line = gateway.read();
        let elapsed = started.elapsed();
        assert_eq!(
            line.matches("__echo").count(),
            servers,
            "not all ready: {line}"
        );
        gateway.finish();
        elapsed
    }
}

/// `program` found on PATH, with links resolved (the policy allowlist compares real paths).
fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .map(|found| std::fs::canonicalize(&found).unwrap_or(found))
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[path = "common/binaries.rs"]
mod binaries;

#[path = "common/floor.rs"]
mod floor;
use floor::PROXY_ENV;

#[path = "common/summary.rs"]
mod summary_line;
use summary_line::{machine_state, summary};

fn main() {
    if floor::run_as_proxy_if_asked() {
        return;
    }
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let built = binaries::build_release();
    let python = PathBuf::from("/usr/bin/python3");
    let fixture = root.join("tests/fixtures/serve/fixture_server.py");
    let setup = Setup {
        airlock: built.airlock,
        server: built.mcp_echo,
        work: tempfile::tempdir().expect("tempdir"),
    };
    // The official reference server from npm (installed by `.ci/install-peers`), when present: the
    // kind of server users actually run, interpreted and with the SDK's own cost per call.
    let everything =
        root.join(".peers/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = which("node");
    let everything = (everything.exists() && node.is_some()).then_some(everything);
    let mut commands = vec![setup.server.clone(), python.clone()];
    let mut readable = vec![
        setup.server.parent().expect("dir").to_path_buf(),
        fixture.parent().expect("dir").to_path_buf(),
    ];
    if let (Some(_), Some(node)) = (&everything, &node) {
        commands.push(node.clone());
        readable.push(root.join(".peers/npm"));
    }
    let quoted = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| format!("\"{}\"", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    std::fs::write(
        setup.work.path().join("policy.toml"),
        format!(
            "version = 1\n[launch]\nallow_commands = [{}]\n[sandbox]\nrun_as = \"root\"\nread = [{}]\n",
            quoted(&commands),
            quoted(&readable)
        ),
    )
    .expect("policy");
    let me = std::env::current_exe().expect("current exe");
    let server = setup.server.to_str().expect("utf8");

    let measure_with = |mut peer: Peer, tool: &str, argument: &str, count: usize| {
        peer.initialize();
        let times = round_trips(&mut peer, tool, argument, count);
        peer.finish();
        (percentile(&times, 0.5), percentile(&times, 0.99))
    };
    let measure = |peer: Peer, tool: &str, count: usize| measure_with(peer, tool, "text", count);
    let native_direct = measure(Peer::start(&setup.server, &[], &[]), "echo", ROUND_TRIPS);
    let proxy = |kind: &str| Peer::start(&me, &[server], &[(PROXY_ENV, Path::new(kind))]);
    let floor_threads = measure(proxy("threads"), "echo", ROUND_TRIPS);
    let floor_tokio = measure(proxy("tokio"), "echo", ROUND_TRIPS);
    let native_served = measure(
        setup.serve_config(&setup.config(1)),
        "echo0__echo",
        ROUND_TRIPS,
    );

    let fixture_arg = fixture.to_str().expect("utf8");
    let real_direct = measure(
        Peer::start(&python, &[fixture_arg], &[]),
        "echo",
        REAL_ROUND_TRIPS,
    );
    let real_config = setup.work.path().join("airlock-python.toml");
    std::fs::write(
        &real_config,
        format!(
            "[servers.py]\ncommand = \"{}\"\nargs = [\"{}\"]\n",
            python.display(),
            fixture.display()
        ),
    )
    .expect("config");
    let real_served = measure(
        setup.serve_config(&real_config),
        "py__echo",
        REAL_ROUND_TRIPS,
    );

    let official = everything
        .as_ref()
        .zip(node.as_ref())
        .map(|(script, node)| {
            let script = script.to_str().expect("utf8");
            let direct = measure_with(
                Peer::start(node, &[script, "stdio"], &[]),
                "echo",
                "message",
                REAL_ROUND_TRIPS,
            );
            let config = setup.work.path().join("airlock-everything.toml");
            std::fs::write(
                &config,
                format!(
                    "[servers.everything]\ncommand = \"{}\"\nargs = [\"{script}\", \"stdio\"]\n",
                    node.display()
                ),
            )
            .expect("config");
            let served = measure_with(
                setup.serve_config(&config),
                "everything__echo",
                "message",
                REAL_ROUND_TRIPS,
            );
            (direct, served)
        });

    let one: Vec<Duration> = (0..READY_RUNS).map(|_| setup.time_to_ready(1)).collect();
    let ten: Vec<Duration> = (0..READY_RUNS).map(|_| setup.time_to_ready(10)).collect();
    let (one, ten) = (median(one), median(ten));

    let row = |name: &str, (p50, p99): (Duration, Duration), base: (Duration, Duration)| {
        println!(
            "| {name:<34} | {:8.1} µs | {:8.1} µs | {:5.2}× / +{:6.1} µs |",
            us(p50),
            us(p99),
            us(p50) / us(base.0),
            us(p50) - us(base.0)
        );
    };
    println!(
        "tools/call round trips, sequential ({ROUND_TRIPS} to examples/mcp_echo, {REAL_ROUND_TRIPS} to the Python fixture)"
    );
    println!(
        "| path                               | p50         | p99         | p50 vs direct       |"
    );
    println!(
        "|------------------------------------|-------------|-------------|---------------------|"
    );
    row("mcp_echo direct", native_direct, native_direct);
    row(
        "mcp_echo via floor proxy (threads)",
        floor_threads,
        native_direct,
    );
    row(
        "mcp_echo via floor proxy (tokio)",
        floor_tokio,
        native_direct,
    );
    row("mcp_echo via airlock serve", native_served, native_direct);
    row("python fixture direct", real_direct, real_direct);
    row("python fixture via airlock serve", real_served, real_direct);
    match official {
        Some((direct, served)) => {
            row("server-everything (npm) direct", direct, direct);
            row("server-everything via airlock serve", served, direct);
        }
        None => println!("(server-everything rows skipped: run `bash .ci/install-peers` first)"),
    }
    println!(
        "airlock serve above the tokio floor: +{:.1} µs (p50)",
        us(native_served.0) - us(floor_tokio.0)
    );
    println!(
        "time to Ready (airlock serve start → aggregated tools/list), median of {READY_RUNS}:"
    );
    println!("| servers | time to Ready |");
    println!("|---------|---------------|");
    println!("| 1       | {:9.1} ms  |", ms(one));
    println!(
        "| 10      | {:9.1} ms  | ({:.2}× one server; started in parallel)",
        ms(ten),
        ms(ten) / ms(one)
    );

    machine_state();
    let (served, direct, floor) = (us(native_served.0), us(native_direct.0), us(floor_tokio.0));
    summary(
        "serve: tools/call p50, native echo server",
        &format!("{served:.1} µs"),
        &format!("{direct:.1} µs"),
        &format!(
            "{:.2}× (+{:.1} µs; pipe-hop floor +{:.1} µs)",
            served / direct,
            served - direct,
            floor - direct
        ),
        "≤ 1.10×",
        Some(served / direct <= 1.10),
    );
    let (real_served_us, real_direct_us) = (us(real_served.0), us(real_direct.0));
    summary(
        "serve: tools/call p50, Python fixture server",
        &format!("{real_served_us:.1} µs"),
        &format!("{real_direct_us:.1} µs"),
        &format!(
            "{:.2}× (+{:.1} µs)",
            real_served_us / real_direct_us,
            real_served_us - real_direct_us
        ),
        "≤ 1.10×",
        Some(real_served_us / real_direct_us <= 1.10),
    );
    if let Some((direct, served)) = official {
        let (served, direct) = (us(served.0), us(direct.0));
        summary(
            "serve: tools/call p50, server-everything (official, npm)",
            &format!("{served:.1} µs"),
            &format!("{direct:.1} µs"),
            &format!("{:.2}× (+{:.1} µs)", served / direct, served - direct),
            "≤ 1.10×",
            Some(served / direct <= 1.10),
        );
    }
    summary(
        "serve: time to Ready, 10 servers vs 1",
        &format!("{:.1} ms", ms(ten)),
        &format!("{:.1} ms (1 server)", ms(one)),
        &format!("{:.2}×", ms(ten) / ms(one)),
        "-",
        None,
    );
}
