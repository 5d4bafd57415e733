//! `airlock serve` against a direct connection to the same fast native server (examples/mcp_echo),
//! measured in the same run: `tools/call` round trip p50/p99 as a ratio, and time to Ready
//! (spawn of `airlock serve` → the aggregated `tools/list` answer) for 10 servers started in
//! parallel vs one.
//!
//! Run: `cargo bench --bench serve` (builds `airlock` and `examples/mcp_echo` with `--release`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const ROUND_TRIPS: usize = 3000;
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

fn round_trips(peer: &mut Peer, tool: &str) -> Vec<Duration> {
    let mut times = Vec::with_capacity(ROUND_TRIPS);
    for id in 0..ROUND_TRIPS + WARMUP {
        let message = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{{\"text\":\"hello {id}\"}}}}}}"
        );
        let started = Instant::now();
        peer.send(&message);
        let line = peer.read();
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
        let config = self.config(servers);
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

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--bin",
            "airlock",
            "--example",
            "mcp_echo",
        ])
        .current_dir(&root)
        .status()
        .expect("cargo build");
    assert!(status.success(), "release build failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let setup = Setup {
        airlock: target.join("release/airlock"),
        server: target.join("release/examples/mcp_echo"),
        work: tempfile::tempdir().expect("tempdir"),
    };
    std::fs::write(
        setup.work.path().join("policy.toml"),
        format!(
            "version = 1\n[launch]\nallow_commands = [\"{}\"]\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
            setup.server.display(),
            setup.server.parent().expect("dir").display()
        ),
    )
    .expect("policy");

    let mut direct = Peer::start(&setup.server, &[], &[]);
    direct.initialize();
    let direct_rt = round_trips(&mut direct, "echo");
    direct.finish();

    let mut gateway = setup.serve(1);
    gateway.initialize();
    let served_rt = round_trips(&mut gateway, "echo0__echo");
    gateway.finish();

    let one: Vec<Duration> = (0..READY_RUNS).map(|_| setup.time_to_ready(1)).collect();
    let ten: Vec<Duration> = (0..READY_RUNS).map(|_| setup.time_to_ready(10)).collect();
    let (one, ten) = (median(one), median(ten));

    let (d50, d99, s50, s99) = (
        percentile(&direct_rt, 0.5),
        percentile(&direct_rt, 0.99),
        percentile(&served_rt, 0.5),
        percentile(&served_rt, 0.99),
    );
    println!("airlock serve vs direct ({ROUND_TRIPS} sequential tools/call to examples/mcp_echo)");
    println!("| metric          | direct      | airlock serve | ratio / added |");
    println!("|-----------------|-------------|---------------|---------------|");
    println!(
        "| round trip p50  | {:8.1} µs | {:10.1} µs | {:.2}× / +{:.1} µs |",
        us(d50),
        us(s50),
        us(s50) / us(d50),
        us(s50) - us(d50)
    );
    println!(
        "| round trip p99  | {:8.1} µs | {:10.1} µs | {:.2}× / +{:.1} µs |",
        us(d99),
        us(s99),
        us(s99) / us(d99),
        us(s99) - us(d99)
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
}
