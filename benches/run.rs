//! `airlock run` overhead against a direct connection to the same fast native server, measured
//! in the same run, next to a byte-copying proxy (the floor any stdio proxy pays on this
//! machine): echo round trip p50/p99, pipelined throughput with 64 calls in flight (median of
//! rotating rounds), and airlock's own peak RSS (VmHWM).
//!
//! Run: `cargo bench --bench run` (builds `airlock` and `examples/mcp_echo` with `--release`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const ROUND_TRIPS: usize = 3000;
const PIPELINED: usize = 30000;
const IN_FLIGHT: usize = 64;
/// Pipelined throughput on a 2-core VM swings by ±30 % from run to run (scheduling, vCPU wake-ups),
/// so both peers are measured this many times, alternately, and the medians are compared.
const ROUNDS: usize = 5;

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

fn call(id: usize) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hello {id}\"}}}}}}\n").into_bytes()
}

fn start(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Peer {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {}: {err}", program.display()));
    let stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut peer = Peer {
        child,
        stdin,
        stdout,
    };
    peer.stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}\n")
        .expect("write");
    let mut line = String::new();
    peer.stdout.read_line(&mut line).expect("initialize answer");
    assert!(line.contains("\"result\""), "initialize failed: {line}");
    peer
}

fn round_trips(peer: &mut Peer) -> Vec<Duration> {
    let mut line = String::new();
    let mut times = Vec::with_capacity(ROUND_TRIPS);
    for id in 0..ROUND_TRIPS + 200 {
        let message = call(id);
        let started = Instant::now();
        peer.stdin.write_all(&message).expect("write");
        line.clear();
        peer.stdout.read_line(&mut line).expect("read");
        if id >= 200 {
            times.push(started.elapsed());
        }
        assert!(line.contains("hello"), "bad answer: {line}");
    }
    times.sort();
    times
}

fn pipelined(peer: &mut Peer) -> f64 {
    let started = Instant::now();
    let mut line = String::new();
    let mut sent = 0;
    let mut received = 0;
    while received < PIPELINED {
        while sent < PIPELINED && sent - received < IN_FLIGHT {
            peer.stdin.write_all(&call(sent)).expect("write");
            sent += 1;
        }
        line.clear();
        peer.stdout.read_line(&mut line).expect("read");
        received += 1;
    }
    PIPELINED as f64 / started.elapsed().as_secs_f64()
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p) as usize]
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[path = "common/binaries.rs"]
mod binaries;

#[path = "common/floor.rs"]
mod floor;

#[path = "common/summary.rs"]
mod summary_line;
use summary_line::{machine_state, summary};

fn main() {
    if floor::run_as_proxy_if_asked() {
        return;
    }
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` / nextest listing: nothing to run.
    }
    let binaries::Binaries {
        airlock,
        mcp_echo: server,
    } = binaries::build_release();
    let work = tempfile::tempdir().expect("tempdir");
    let policy = work.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[launch]\nallow_commands = [\"{}\"]\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
            server.display(),
            server.parent().expect("dir").display()
        ),
    )
    .expect("policy");
    let audit = work.path().join("audit.jsonl");

    let args = [
        "run",
        "--policy",
        policy.to_str().expect("utf8"),
        "--audit",
        audit.to_str().expect("utf8"),
        "--",
    ];
    let mut args: Vec<&str> = args.to_vec();
    args.push(server.to_str().expect("utf8"));
    // All peers stay up for the whole run and are measured in turn, in a rotating order, so a
    // slow phase of the machine does not land on one side only. The floor is a proxy that only
    // copies bytes (blocking threads): what any stdio proxy costs on this machine.
    let me = std::env::current_exe().expect("current exe");
    let server_arg = server.to_str().expect("utf8");
    let mut direct = start(&server, &[], &[]);
    let mut floor_proxy = start(&me, &[server_arg], &[(floor::PROXY_ENV, "threads")]);
    let mut gated = start(&airlock, &args, &[]);
    let direct_rt = round_trips(&mut direct);
    let floor_rt = round_trips(&mut floor_proxy);
    let gated_rt = round_trips(&mut gated);
    let mut direct_tps = Vec::with_capacity(ROUNDS);
    let mut floor_tps = Vec::with_capacity(ROUNDS);
    let mut gated_tps = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        for turn in 0..3 {
            match (round + turn) % 3 {
                0 => direct_tps.push(pipelined(&mut direct)),
                1 => floor_tps.push(pipelined(&mut floor_proxy)),
                _ => gated_tps.push(pipelined(&mut gated)),
            }
        }
    }
    let (direct_tp, floor_tp, gated_tp) = (
        median(&mut direct_tps),
        median(&mut floor_tps),
        median(&mut gated_tps),
    );
    let rss = vm_hwm_kib(gated.child.id());
    drop(direct.stdin);
    let _ = direct.child.wait();
    drop(floor_proxy.stdin);
    let _ = floor_proxy.child.wait();
    drop(gated.stdin);
    let _ = gated.child.wait();
    let decisions = std::fs::read_to_string(&audit)
        .map(|t| t.matches("\"event\":\"decision\"").count())
        .unwrap_or(0);

    let (f50, f99) = (percentile(&floor_rt, 0.5), percentile(&floor_rt, 0.99));
    let (d50, d99, g50, g99) = (
        percentile(&direct_rt, 0.5),
        percentile(&direct_rt, 0.99),
        percentile(&gated_rt, 0.5),
        percentile(&gated_rt, 0.99),
    );
    println!(
        "airlock run vs direct ({ROUND_TRIPS} sequential echo calls, {PIPELINED} pipelined with {IN_FLIGHT} in flight)"
    );
    println!(
        "| metric                 | direct      | floor proxy | airlock run | airlock vs direct |"
    );
    println!(
        "|------------------------|-------------|-------------|-------------|-------------------|"
    );
    for (name, d, f, g) in [
        ("round trip p50", d50, f50, g50),
        ("round trip p99", d99, f99, g99),
    ] {
        println!(
            "| {name:<22} | {:8.1} µs | {:8.1} µs | {:8.1} µs | {:.2}× / +{:.1} µs |",
            us(d),
            us(f),
            us(g),
            us(g) / us(d),
            us(g) - us(d)
        );
    }
    println!(
        "| throughput, 64 in flight | {direct_tp:8.0} /s | {floor_tp:8.0} /s | {gated_tp:8.0} /s | {:.2}× (floor {:.2}×) |",
        gated_tp / direct_tp,
        floor_tp / direct_tp
    );
    match rss {
        Some(kib) => println!(
            "| airlock peak RSS (VmHWM) |           – |           – | {:8.1} MiB |                   |",
            kib as f64 / 1024.0
        ),
        None => println!("| airlock peak RSS (VmHWM) | unavailable |"),
    }
    let spread = |v: &[f64]| format!("{:.0}–{:.0}", v[0], v[v.len() - 1]);
    println!(
        "throughput range over {ROUNDS} rounds: direct {} /s, floor {} /s, airlock run {} /s",
        spread(&direct_tps),
        spread(&floor_tps),
        spread(&gated_tps)
    );
    println!(
        "audit: {decisions} decision events for {} calls",
        ROUND_TRIPS + 200 + PIPELINED * ROUNDS
    );

    let (p50_ratio, p50_added) = (us(g50) / us(d50), us(g50) - us(d50));
    machine_state();
    summary(
        "run: echo round trip p50",
        &format!("{:.1} µs", us(g50)),
        &format!("{:.1} µs", us(d50)),
        &format!(
            "{p50_ratio:.2}× (+{p50_added:.1} µs; byte-copy proxy +{:.1} µs)",
            us(f50) - us(d50)
        ),
        "≤ 1.05× or ≤ +15 µs",
        Some(p50_ratio <= 1.05 || p50_added <= 15.0),
    );
    summary(
        "run: echo round trip p99",
        &format!("{:.1} µs", us(g99)),
        &format!("{:.1} µs", us(d99)),
        &format!("{:.2}×", us(g99) / us(d99)),
        "-",
        None,
    );
    summary(
        "run: throughput, 64 in flight",
        &format!("{gated_tp:.0}/s"),
        &format!("{direct_tp:.0}/s"),
        &format!(
            "{:.2}× (byte-copy proxy {:.2}×)",
            gated_tp / direct_tp,
            floor_tp / direct_tp
        ),
        "≥ 0.9×",
        Some(gated_tp / direct_tp >= 0.9),
    );
    summary(
        "run: throughput, 64 in flight, vs byte-copy proxy",
        &format!("{gated_tp:.0}/s"),
        &format!("{floor_tp:.0}/s (byte-copy proxy)"),
        &format!("{:.2}×", gated_tp / floor_tp),
        "≥ byte-copy proxy",
        Some(gated_tp >= floor_tp),
    );
    if let Some(kib) = rss {
        let mib = kib as f64 / 1024.0;
        summary(
            "run: airlock peak RSS",
            &format!("{mib:.1} MiB"),
            "-",
            "-",
            "≤ 15 MiB",
            Some(mib <= 15.0),
        );
    }
}
