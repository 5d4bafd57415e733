//! Network egress (`src/net`): a client inside the sandbox reaching a loopback server outside it
//! through airlock (allowed by address: `--network 127.0.0.1:PORT`; airlock makes the connect and
//! hands the socket to the client, `src/net/handover.rs`), against the same
//! client connecting directly, in the same run.
//!
//! - throughput: one connection, the server sends 256 MiB, the client reads it all (median of
//!   rounds alternating direct and through_airlock);
//! - connect latency: connect → first byte from the server (the server writes one byte at accept),
//!   so the figure through airlock includes the seccomp notification, airlock's decision, audit
//!   write and its own connect;
//! - memory: airlock's RSS (the `airlock __sandbox-exec` process, which holds the hand-over) with
//!   100 connections open at once, against the same process with none.
//!
//! The client is this bench binary itself (`egress-bench-client` mode), so both paths run the
//! same code. Run: `cargo bench --bench egress`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

#[path = "common/binaries.rs"]
#[allow(dead_code)] // this bench runs airlock only, not the echo fixture
mod binaries;
#[path = "common/stats.rs"]
mod stats;
#[path = "common/summary.rs"]
mod summary;
use stats::{median, percentile};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BULK_BYTES: usize = 256 * 1024 * 1024;
const ROUNDS: usize = 5;
const LATENCY_SAMPLES: usize = 300;
const HELD: usize = 100;
const CLIENT_MODE: &str = "egress-bench-client";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(CLIENT_MODE) {
        client(&args[2..]);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    summary::machine_state();
    let bins = binaries::build_release();
    let bulk = serve_bulk();
    let small = serve_first_byte();
    let network = format!("127.0.0.1:{bulk},127.0.0.1:{small}");
    let world = World::new();

    // Throughput.
    let mut direct = Vec::new();
    let mut through_airlock = Vec::new();
    for _ in 0..ROUNDS {
        direct.push(parse_secs(
            &world.direct(&["throughput", &bulk.to_string()]),
        ));
        through_airlock.push(parse_secs(&world.through_airlock(
            &bins.airlock,
            &network,
            &["throughput", &bulk.to_string()],
        )));
    }
    let mbps = |secs: f64| BULK_BYTES as f64 / secs / (1024.0 * 1024.0);
    let direct_rate = mbps(median(&mut direct));
    let airlock_rate = mbps(median(&mut through_airlock));
    let ratio = airlock_rate / direct_rate;
    println!("throughput, 256 MiB from a loopback server ({ROUNDS} rounds, median):");
    println!("  direct  {direct_rate:>8.0} MiB/s");
    println!("  airlock {airlock_rate:>8.0} MiB/s  ({ratio:.2}x)");
    summary::summary(
        "egress throughput, 256 MiB (`egress`)",
        &format!("{airlock_rate:.0} MiB/s"),
        &format!("{direct_rate:.0} MiB/s"),
        &format!("{ratio:.2}x"),
        ">= 0.9x",
        Some(ratio >= 0.9),
    );

    // Connect latency.
    let samples = LATENCY_SAMPLES.to_string();
    let direct = parse_latencies(&world.direct(&["latency", &small.to_string(), &samples]));
    let through_airlock = parse_latencies(&world.through_airlock(
        &bins.airlock,
        &network,
        &["latency", &small.to_string(), &samples],
    ));
    let (d50, d99) = (percentile(&direct, 0.5), percentile(&direct, 0.99));
    let (r50, r99) = (
        percentile(&through_airlock, 0.5),
        percentile(&through_airlock, 0.99),
    );
    let added = r50 - d50;
    println!("connect → first byte ({LATENCY_SAMPLES} sequential connections):");
    println!("  direct  p50 {d50:>7.1} µs  p99 {d99:>7.1} µs");
    println!("  airlock p50 {r50:>7.1} µs  p99 {r99:>7.1} µs  (+{added:.1} µs at p50)");
    summary::summary(
        "egress added connect latency p50 (`egress`)",
        &format!("{r50:.0} µs"),
        &format!("{d50:.0} µs"),
        &format!("+{:.2} ms", added / 1000.0),
        "<= +1 ms",
        Some(added <= 1000.0),
    );

    // Memory with 100 through_airlock connections held open.
    let (idle, held) = world.held_rss(&bins.airlock, &network, small);
    println!("airlock RSS (the process holding the hand-over):");
    println!("  no connection          {:>6.1} MiB", idle);
    println!("  {HELD} connections         {:>6.1} MiB", held);
    summary::summary(
        "egress airlock RSS, 100 connections (`egress`)",
        &format!("{held:.1} MiB"),
        &format!("{idle:.1} MiB idle"),
        "-",
        "<= 30 MiB",
        Some(held <= 30.0),
    );
}

/// A server that sends BULK_BYTES to every connection, then closes.
fn serve_bulk() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let chunk = vec![0x5au8; 1 << 20];
        for stream in listener.incoming().flatten() {
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut left = BULK_BYTES;
                while left > 0 {
                    let n = left.min(chunk.len());
                    if stream.write_all(&chunk[..n]).is_err() {
                        return;
                    }
                    left -= n;
                }
            });
        }
    });
    port
}

/// A server that writes one byte at accept and keeps the connection until the client closes.
fn serve_first_byte() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let _ = stream.set_nodelay(true);
                if stream.write_all(b"!").is_err() {
                    return;
                }
                let mut sink = [0u8; 64];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    });
    port
}

/// A scratch home, state and config for the airlock runs.
struct World {
    root: std::path::PathBuf,
}

/// The bench's state dir goes when the bench ends (a run used to leave it in the temp dir).
impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl World {
    fn new() -> World {
        let root =
            std::env::temp_dir().join(format!("airlock-egress-bench-{}", std::process::id()));
        for dir in ["", "state", "config", "org", "home"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        World { root }
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.root.join("home"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"));
    }

    fn direct(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.arg(CLIENT_MODE).args(args);
        run_to_end(cmd)
    }

    fn airlock_command(&self, airlock: &std::path::Path, network: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(airlock);
        cmd.args([
            "__sandbox-exec",
            "--server",
            "egress-bench",
            "--network",
            network,
            "--audit",
        ])
        .arg(self.root.join("state/audit.jsonl"))
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .arg(CLIENT_MODE)
        .args(args);
        self.env(&mut cmd);
        cmd
    }

    fn through_airlock(&self, airlock: &std::path::Path, network: &str, args: &[&str]) -> String {
        run_to_end(self.airlock_command(airlock, network, args))
    }

    /// (RSS with the client connected to nothing, RSS with HELD through_airlock connections), MiB.
    fn held_rss(&self, airlock: &std::path::Path, network: &str, port: u16) -> (f64, f64) {
        let mut child = self
            .airlock_command(
                airlock,
                network,
                &["hold", &port.to_string(), &HELD.to_string()],
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        assert_eq!(first, "started", "client: {first}");
        std::thread::sleep(Duration::from_millis(300));
        let idle = rss_mib(&child);
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        child.stdin.as_mut().unwrap().flush().unwrap();
        let ready = lines.next().unwrap().unwrap();
        assert_eq!(ready, "ready", "client: {ready}");
        std::thread::sleep(Duration::from_millis(300));
        let held = rss_mib(&child);
        drop(child.stdin.take());
        let _ = child.wait();
        (idle, held)
    }
}

fn rss_mib(child: &Child) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let kib: f64 = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024.0
}

/// Runs a command with stdin held open until it exits (airlock's sandbox-exec stops its server
/// when its stdin ends); returns stdout.
fn run_to_end(mut cmd: Command) -> String {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "client failed: {status}\n{out}\n{err}");
    out
}

fn parse_secs(out: &str) -> f64 {
    out.lines()
        .find_map(|line| line.strip_prefix("secs "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no timing in {out:?}"))
}

fn parse_latencies(out: &str) -> Vec<f64> {
    let mut all: Vec<f64> = out
        .lines()
        .filter_map(|line| line.strip_prefix("us "))
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    assert!(!all.is_empty(), "no latencies in {out:?}");
    all.sort_by(f64::total_cmp);
    all
}

/// The client, inside or outside the sandbox.
fn client(args: &[String]) {
    let port: u16 = args[1].parse().unwrap();
    let address = ("127.0.0.1", port);
    match args[0].as_str() {
        "throughput" => {
            let start = Instant::now();
            let mut stream = TcpStream::connect(address).unwrap();
            let mut buffer = vec![0u8; 1 << 20];
            let mut total = 0usize;
            loop {
                let n = stream.read(&mut buffer).unwrap();
                if n == 0 {
                    break;
                }
                total += n;
            }
            assert_eq!(total, BULK_BYTES, "short transfer");
            println!("secs {}", start.elapsed().as_secs_f64());
        }
        "latency" => {
            let samples: usize = args[2].parse().unwrap();
            for _ in 0..samples {
                let start = Instant::now();
                let mut stream = TcpStream::connect(address).unwrap();
                let mut byte = [0u8; 1];
                stream.read_exact(&mut byte).unwrap();
                println!("us {}", start.elapsed().as_secs_f64() * 1e6);
            }
        }
        "hold" => {
            let count: usize = args[2].parse().unwrap();
            println!("started");
            std::io::stdout().flush().unwrap();
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            let mut held = Vec::with_capacity(count);
            for _ in 0..count {
                let mut stream = TcpStream::connect(address).unwrap();
                let mut byte = [0u8; 1];
                stream.read_exact(&mut byte).unwrap();
                held.push(stream);
            }
            println!("ready");
            std::io::stdout().flush().unwrap();
            let mut rest = String::new();
            let _ = std::io::stdin().read_to_string(&mut rest);
        }
        other => panic!("unknown client mode {other}"),
    }
}
