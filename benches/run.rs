//! `airlock run` overhead against a direct connection to the same fast native server, measured
//! in the same run, next to a byte-copying proxy (the floor any stdio proxy pays on this
//! machine): echo round trip p50/p99, pipelined throughput with 64 calls in flight (median of
//! rotating rounds), and airlock's own peak RSS (VmHWM).
//!
//! Run: `cargo bench --bench run` (builds `airlock` and `examples/mcp_echo` with `--release`).
//!
//! To judge a change, set `AIRLOCK_BENCH_BASELINE` to another airlock binary (the build before
//! it): that binary is measured as a fourth side in the same rotating rounds, and each round's
//! p50 difference is printed. Separate runs of one build differ by more than most changes do.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Sequential calls timed per side, over all rounds: about a second a side. With 600 per round a
/// side's p50 moved by up to 1.5 µs from one run of the same build to the next.
const ROUND_TRIPS: usize = 50_000;
const PIPELINED: usize = 30000;
const IN_FLIGHT: usize = 64;
/// Pipelined throughput on a 2-core VM swings by ±30 % from run to run (scheduling, vCPU wake-ups),
/// so both peers are measured this many times, alternately, and the medians are compared.
const ROUNDS: usize = 5;

fn call(id: usize) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hello {id}\"}}}}}}\n").into_bytes()
}

/// Sequential calls before each round's timed ones.
const WARM_UP: usize = 1000;

/// One round of sequential calls (`ROUND_TRIPS / ROUNDS` timed), appended to `times`.
fn round_trips(peer: &mut Peer, times: &mut Vec<Duration>) {
    let mut line = String::new();
    for id in 0..ROUND_TRIPS / ROUNDS + WARM_UP {
        let message = call(id);
        let started = Instant::now();
        peer.stdin.write_all(&message).expect("write");
        line.clear();
        peer.stdout.read_line(&mut line).expect("read");
        if id >= WARM_UP {
            times.push(started.elapsed());
        }
        assert!(line.contains("hello"), "bad answer: {line}");
    }
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

/// How many times the process has gone to sleep waiting (its voluntary context switches). A proxy
/// that sleeps between the host's line and the server's answer pays a wake-up for it, which on
/// this VM costs more than most of its own work (docs/run.md, "Sleeps, not system calls").
/// Summed over its threads (a blocking proxy copies each direction on a thread of its own).
fn voluntary_switches(pid: u32) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let status = std::fs::read_to_string(task.ok()?.path().join("status")).ok()?;
        let line = status
            .lines()
            .find(|l| l.starts_with("voluntary_ctxt_switches:"))?;
        total += line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    }
    Some(total)
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[path = "common/binaries.rs"]
mod binaries;

#[path = "common/floor.rs"]
mod floor;

#[path = "common/summary.rs"]
mod summary_line;
use summary_line::{machine_state, summary};

#[path = "common/stats.rs"]
mod stats;
use stats::{median, percentile, us};

#[path = "common/stdio_peer.rs"]
mod stdio_peer;
use stdio_peer::{Peer, start};

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
    let (policy, audit) = write_policy(work.path(), &server);
    let baseline = std::env::var_os(BASELINE_ENV).map(PathBuf::from);
    let measured = measure(&airlock, baseline, &server, &policy, &audit);
    print_table(&measured);
    print_summaries(&measured);
}

/// Set to an airlock binary to measure it beside this build, in the same rounds.
const BASELINE_ENV: &str = "AIRLOCK_BENCH_BASELINE";

/// A policy that lets `server` launch and read its own directory; and where the audit goes.
fn write_policy(work: &Path, server: &Path) -> (PathBuf, PathBuf) {
    let policy = work.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[launch]\nallow_commands = [\"{}\"]\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
            server.display(),
            server.parent().expect("dir").display()
        ),
    )
    .expect("policy");
    (policy, work.join("audit.jsonl"))
}

/// What one side (direct, floor proxy, airlock run) measured.
struct Side {
    /// Sorted round-trip times, every round's.
    round_trips: Vec<Duration>,
    /// Each round's p50 of sequential calls (µs).
    round_p50s: Vec<f64>,
    /// Pipelined throughput of each round (calls/s).
    rounds: Vec<f64>,
    /// The median of `rounds`.
    throughput: f64,
    /// How often the process slept per sequential call (warm-up calls included), if readable.
    sleeps_per_call: Option<f64>,
}

struct Measured {
    direct: Side,
    floor: Side,
    gated: Side,
    /// `AIRLOCK_BENCH_BASELINE`'s binary, measured the same way, when set.
    baseline: Option<(PathBuf, Side)>,
    /// airlock's peak RSS (KiB).
    rss: Option<u64>,
    /// Decision events in the audit log.
    decisions: usize,
}

/// `airlock run`'s arguments for the bench's server, audited to `log`.
fn run_args<'a>(policy: &'a str, log: &'a str, server: &'a str) -> [&'a str; 7] {
    ["run", "--policy", policy, "--audit", log, "--", server]
}

/// Starts the peers (three, or four with a baseline), measures them in a rotating order, stops
/// them.
fn measure(
    airlock: &Path,
    baseline: Option<PathBuf>,
    server: &Path,
    policy: &Path,
    audit: &Path,
) -> Measured {
    let server_arg = server.to_str().expect("utf8");
    let policy_arg = policy.to_str().expect("utf8");
    let args = run_args(policy_arg, audit.to_str().expect("utf8"), server_arg);
    // All peers stay up for the whole run and are measured in turn, in a rotating order, so a
    // slow phase of the machine does not land on one side only. The floor is a proxy that only
    // copies bytes (blocking threads): what any stdio proxy costs on this machine.
    let me = std::env::current_exe().expect("current exe");
    // Each airlock keeps its state (pins among it) beside the audit log, never in the user's
    // own: a baseline of another version must not read what this build wrote.
    let work = audit.parent().expect("work dir");
    let (state, baseline_state) = (work.join("state"), work.join("state-baseline"));
    let (state, baseline_state) = (
        state.to_str().expect("utf8"),
        baseline_state.to_str().expect("utf8"),
    );
    let mut peers = vec![
        start(server, &[], &[]),
        start(&me, &[server_arg], &[(floor::PROXY_ENV, "threads")]),
        start(airlock, &args, &[("XDG_STATE_HOME", state)]),
    ];
    if let Some(baseline) = &baseline {
        // Its own log, so the decisions counted below are this build's.
        let log = audit.with_extension("baseline.jsonl");
        let log_arg = log.to_str().expect("utf8");
        peers.push(start(
            baseline,
            &run_args(policy_arg, log_arg, server_arg),
            &[("XDG_STATE_HOME", baseline_state)],
        ));
    }
    let sides = peers.len();
    // Sequential calls in rounds too: where the scheduler places a proxy's threads and the
    // server on the two vCPUs changes its round-trip time by several µs (the floor proxy's p50
    // flips between about 12 and 19 µs from one placement to the next), and one placement
    // should not decide a whole side.
    let mut round_trip_times: Vec<Vec<Duration>> = (0..sides)
        .map(|_| Vec::with_capacity(ROUND_TRIPS))
        .collect();
    let mut round_p50s: Vec<Vec<f64>> = (0..sides).map(|_| Vec::with_capacity(ROUNDS)).collect();
    let mut tps: Vec<Vec<f64>> = (0..sides).map(|_| Vec::with_capacity(ROUNDS)).collect();
    let mut sleeps: Vec<Option<u64>> = vec![Some(0); sides];
    for round in 0..ROUNDS {
        for turn in 0..sides {
            let side = (round + turn) % sides;
            let before = round_trip_times[side].len();
            let pid = peers[side].child.id();
            let slept_before = voluntary_switches(pid);
            round_trips(&mut peers[side], &mut round_trip_times[side]);
            sleeps[side] = match (sleeps[side], slept_before, voluntary_switches(pid)) {
                (Some(sum), Some(before), Some(after)) => Some(sum + after.saturating_sub(before)),
                _ => None,
            };
            let mut this_round = round_trip_times[side][before..].to_vec();
            this_round.sort();
            round_p50s[side].push(us(percentile(&this_round, 0.5)));
        }
        for turn in 0..sides {
            let side = (round + turn) % sides;
            tps[side].push(pipelined(&mut peers[side]));
        }
    }
    for times in &mut round_trip_times {
        times.sort();
    }
    let rss = vm_hwm_kib(peers[2].child.id());
    for peer in peers {
        peer.finish();
    }
    let decisions = std::fs::read_to_string(audit)
        .map(|t| t.matches("\"event\":\"decision\"").count())
        .unwrap_or(0);
    let sequential_calls = (ROUNDS * (ROUND_TRIPS / ROUNDS + WARM_UP)) as f64;
    let mut sides = round_trip_times
        .into_iter()
        .zip(round_p50s)
        .zip(tps)
        .zip(sleeps)
        .map(|(((round_trips, round_p50s), mut rounds), slept)| Side {
            round_trips,
            round_p50s,
            throughput: median(&mut rounds),
            rounds,
            sleeps_per_call: slept.map(|n| n as f64 / sequential_calls),
        });
    let mut next = || sides.next().expect("three sides");
    Measured {
        direct: next(),
        floor: next(),
        gated: next(),
        baseline: baseline.map(|binary| (binary, next())),
        rss,
        decisions,
    }
}

fn print_table(m: &Measured) {
    println!(
        "airlock run vs direct ({ROUND_TRIPS} sequential echo calls, {PIPELINED} pipelined with {IN_FLIGHT} in flight)"
    );
    println!(
        "| metric                 | direct      | floor proxy | airlock run | airlock vs direct |"
    );
    println!(
        "|------------------------|-------------|-------------|-------------|-------------------|"
    );
    for (name, p) in [("round trip p50", 0.5), ("round trip p99", 0.99)] {
        let (d, f, g) = (
            percentile(&m.direct.round_trips, p),
            percentile(&m.floor.round_trips, p),
            percentile(&m.gated.round_trips, p),
        );
        println!(
            "| {name:<22} | {:8.1} µs | {:8.1} µs | {:8.1} µs | {:.2}× / +{:.1} µs |",
            us(d),
            us(f),
            us(g),
            us(g) / us(d),
            us(g) - us(d)
        );
    }
    let (direct_tp, floor_tp, gated_tp) =
        (m.direct.throughput, m.floor.throughput, m.gated.throughput);
    println!(
        "| throughput, 64 in flight | {direct_tp:8.0} /s | {floor_tp:8.0} /s | {gated_tp:8.0} /s | {:.2}× (floor {:.2}×) |",
        gated_tp / direct_tp,
        floor_tp / direct_tp
    );
    match m.rss {
        Some(kib) => println!(
            "| airlock peak RSS (VmHWM) |           – |           – | {:8.1} MiB |                   |",
            kib as f64 / 1024.0
        ),
        None => println!("| airlock peak RSS (VmHWM) | unavailable |"),
    }
    let spread = |v: &[f64]| format!("{:.0}–{:.0}", v[0], v[v.len() - 1]);
    println!(
        "throughput range over {ROUNDS} rounds: direct {} /s, floor {} /s, airlock run {} /s",
        spread(&m.direct.rounds),
        spread(&m.floor.rounds),
        spread(&m.gated.rounds)
    );
    println!(
        "p50 of each round: direct {}, floor {}, airlock run {} µs; airlock above the floor {} µs",
        rounded(&m.direct.round_p50s),
        rounded(&m.floor.round_p50s),
        rounded(&m.gated.round_p50s),
        differences(&m.gated.round_p50s, &m.floor.round_p50s)
    );
    if let Some((binary, baseline)) = &m.baseline {
        println!(
            "baseline {}: p50 {:.1} µs, of each round {} µs; this build minus the baseline {} µs; throughput {:.0} /s",
            binary.display(),
            us(percentile(&baseline.round_trips, 0.5)),
            rounded(&baseline.round_p50s),
            differences(&m.gated.round_p50s, &baseline.round_p50s),
            baseline.throughput
        );
    }
    let slept = |side: &Side| {
        side.sleeps_per_call
            .map_or("unreadable".to_string(), |n| format!("{n:.2}"))
    };
    println!(
        "sleeps a sequential call (voluntary context switches): floor proxy {}, airlock run {}{}",
        slept(&m.floor),
        slept(&m.gated),
        m.baseline
            .as_ref()
            .map_or(String::new(), |(_, side)| format!(
                ", baseline {}",
                slept(side)
            ))
    );
    println!(
        "audit: {} decision events for {} calls",
        m.decisions,
        ROUND_TRIPS + WARM_UP * ROUNDS + PIPELINED * ROUNDS
    );
}

fn print_summaries(m: &Measured) {
    let p = |side: &Side, rank| us(percentile(&side.round_trips, rank));
    let (d50, f50, g50) = (p(&m.direct, 0.5), p(&m.floor, 0.5), p(&m.gated, 0.5));
    let (d99, g99) = (p(&m.direct, 0.99), p(&m.gated, 0.99));
    let (direct_tp, floor_tp, gated_tp) =
        (m.direct.throughput, m.floor.throughput, m.gated.throughput);
    let (p50_ratio, p50_added) = (g50 / d50, g50 - d50);
    machine_state();
    summary(
        "run: echo round trip p50",
        &format!("{g50:.1} µs"),
        &format!("{d50:.1} µs"),
        &format!(
            "{p50_ratio:.2}× (+{p50_added:.1} µs; byte-copy proxy +{:.1} µs)",
            f50 - d50
        ),
        "≤ 1.05× or ≤ +15 µs",
        Some(p50_ratio <= 1.05 || p50_added <= 15.0),
    );
    summary(
        "run: echo round trip p99",
        &format!("{g99:.1} µs"),
        &format!("{d99:.1} µs"),
        &format!("{:.2}×", g99 / d99),
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
    if let Some(kib) = m.rss {
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

/// Each round's `values` minus the same round's `reference`, signed, e.g. `+6.7 -0.1`.
fn differences(values: &[f64], reference: &[f64]) -> String {
    let shown: Vec<String> = values
        .iter()
        .zip(reference)
        .map(|(value, reference)| format!("{:+.1}", value - reference))
        .collect();
    shown.join(" ")
}

fn rounded(values: &[f64]) -> String {
    let shown: Vec<String> = values.iter().map(|v| format!("{v:.1}")).collect();
    shown.join(" ")
}
