//! `airlock serve` against a direct connection to the same server, measured in the same run:
//! `tools/call` round trip p50/p99 as a ratio, pipelined throughput with 64 calls in flight
//! (median of rotating rounds, against the byte-copy floor proxy), and time to Ready (spawn of
//! `airlock serve` → the aggregated `tools/list` answer) for 10 servers started in parallel vs
//! one.
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
/// Calls to server-everything on every path before any is timed (Node's JIT).
const JIT_WARM_UP: usize = 3000;
/// Sequential calls to server-everything timed per path, over all rounds (about 2 s a path).
/// With 200 per round a path's p50 moved by several µs from one run to the next.
const OFFICIAL_ROUND_TRIPS: usize = 50_000;
const READY_RUNS: usize = 5;
/// Calls per pipelined round.
const PIPELINED: usize = 30000;

/// Round trip p50 and p99.
type Percentiles = (Duration, Duration);

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

    /// One `write` per message, line and newline together, as hosts send them (the SDKs write
    /// `JSON + "\n"` as one string). Two writes would wake every reader on the path twice, once
    /// for a line without its end: that cost a proxy path several µs a call and direct nothing.
    fn send(&mut self, line: &str) {
        let mut message = Vec::with_capacity(line.len() + 1);
        message.extend_from_slice(line.as_bytes());
        message.push(b'\n');
        self.stdin.write_all(&message).expect("write");
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

fn median_duration(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[path = "common/binaries.rs"]
mod binaries;

#[path = "common/floor.rs"]
mod floor;
use floor::PROXY_ENV;

#[path = "common/pipelined.rs"]
mod pipelined;
use pipelined::{IN_FLIGHT, ROUNDS, median, spread};

#[path = "common/summary.rs"]
mod summary_line;
use summary_line::{machine_state, summary};

/// The servers besides the native one: the Python fixture, and the official reference server
/// from npm (installed by `.ci/install-peers`) when present, the kind of server users actually
/// run, interpreted and with the SDK's own cost per call.
struct Others {
    python: PathBuf,
    fixture: PathBuf,
    everything: Option<(PathBuf, PathBuf)>,
}

/// The rows of the native server: direct, through both floor proxies, through airlock serve.
struct Native {
    direct: Percentiles,
    floor_threads: Percentiles,
    floor_tokio: Percentiles,
    served: Percentiles,
}

/// Pipelined throughput samples (sorted) of the native server.
struct Pipelined {
    direct: Vec<f64>,
    floor: Vec<f64>,
    served: Vec<f64>,
}

fn main() {
    if floor::run_as_proxy_if_asked() {
        return;
    }
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let (setup, others) = prepare();
    let me = std::env::current_exe().expect("current exe");
    let native = measure_native(&setup, &me);
    let python = measure_python(&setup, &others);
    let official = measure_official(&setup, &others, &me);
    let pipelined = measure_pipelined(&setup, &me);
    let one = median_duration((0..READY_RUNS).map(|_| setup.time_to_ready(1)).collect());
    let ten = median_duration((0..READY_RUNS).map(|_| setup.time_to_ready(10)).collect());
    report_round_trips(&native, python, official.as_ref());
    report_pipelined(&pipelined);
    report_ready(one, ten);
    machine_state();
    summarise_round_trips(&native, python, official.as_ref());
    summarise_pipelined(&pipelined);
    summary(
        "serve: time to Ready, 10 servers vs 1",
        &format!("{:.1} ms", ms(ten)),
        &format!("{:.1} ms (1 server)", ms(one)),
        &format!("{:.2}×", ms(ten) / ms(one)),
        "-",
        None,
    );
}

/// Builds the binaries and writes the policy every server runs under.
fn prepare() -> (Setup, Others) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let built = binaries::build_release();
    let setup = Setup {
        airlock: built.airlock,
        server: built.mcp_echo,
        work: tempfile::tempdir().expect("tempdir"),
    };
    let everything =
        root.join(".peers/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let others = Others {
        python: PathBuf::from("/usr/bin/python3"),
        fixture: root.join("tests/fixtures/serve/fixture_server.py"),
        everything: which("node")
            .filter(|_| everything.exists())
            .map(|node| (node, everything)),
    };
    let mut commands = vec![setup.server.clone(), others.python.clone()];
    let mut readable = vec![
        setup.server.parent().expect("dir").to_path_buf(),
        others.fixture.parent().expect("dir").to_path_buf(),
    ];
    if let Some((node, _)) = &others.everything {
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
    (setup, others)
}

/// Initializes `peer`, makes `count` sequential calls of `tool`, and stops it.
fn measure(mut peer: Peer, tool: &str, argument: &str, count: usize) -> Percentiles {
    peer.initialize();
    let times = round_trips(&mut peer, tool, argument, count);
    peer.finish();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn floor_proxy(me: &Path, server: &Path, kind: &str) -> Peer {
    let server = server.to_str().expect("utf8");
    Peer::start(me, &[server], &[(PROXY_ENV, Path::new(kind))])
}

fn measure_native(setup: &Setup, me: &Path) -> Native {
    let server = &setup.server;
    Native {
        direct: measure(Peer::start(server, &[], &[]), "echo", "text", ROUND_TRIPS),
        floor_threads: measure(
            floor_proxy(me, server, "threads"),
            "echo",
            "text",
            ROUND_TRIPS,
        ),
        floor_tokio: measure(
            floor_proxy(me, server, "tokio"),
            "echo",
            "text",
            ROUND_TRIPS,
        ),
        served: measure(setup.serve(1), "echo0__echo", "text", ROUND_TRIPS),
    }
}

/// The Python fixture, direct and through airlock serve: (direct, served).
fn measure_python(setup: &Setup, others: &Others) -> (Percentiles, Percentiles) {
    let fixture = others.fixture.to_str().expect("utf8");
    let direct = measure(
        Peer::start(&others.python, &[fixture], &[]),
        "echo",
        "text",
        REAL_ROUND_TRIPS,
    );
    let config = setup.work.path().join("airlock-python.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.py]\ncommand = \"{}\"\nargs = [\"{fixture}\"]\n",
            others.python.display()
        ),
    )
    .expect("config");
    let served = measure(
        setup.serve_config(&config),
        "py__echo",
        "text",
        REAL_ROUND_TRIPS,
    );
    (direct, served)
}

/// server-everything: direct, through the tokio byte-copy floor proxy (what any process hop
/// costs next to a Node server), and through airlock serve, when its peer is installed.
struct Official {
    direct: Percentiles,
    floor: Percentiles,
    served: Percentiles,
}

fn measure_official(setup: &Setup, others: &Others, me: &Path) -> Option<Official> {
    let (node, script) = others.everything.as_ref()?;
    let script = script.to_str().expect("utf8");
    let node_path = node.to_str().expect("utf8");
    let config = setup.work.path().join("airlock-everything.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.everything]\ncommand = \"{}\"\nargs = [\"{script}\", \"stdio\"]\n",
            node.display()
        ),
    )
    .expect("config");
    // The three paths stay up and are measured in rotating rounds, as the run bench does: where
    // the scheduler places Node, the proxy and the client on the two vCPUs moves a p50 by
    // several µs, and one placement should not decide a whole path.
    let mut peers = [
        (Peer::start(node, &[script, "stdio"], &[]), "echo"),
        (
            Peer::start(
                me,
                &[node_path, script, "stdio"],
                &[(PROXY_ENV, Path::new("tokio"))],
            ),
            "echo",
        ),
        (setup.serve_config(&config), "everything__echo"),
    ];
    // Node's JIT keeps speeding the server up for thousands of calls (a round's p50 fell from
    // about 63 to 34 µs over five rounds without this): every path is warmed up first.
    for (peer, tool) in &mut peers {
        peer.initialize();
        round_trips(peer, tool, "message", JIT_WARM_UP);
    }
    let mut times: [Vec<Duration>; 3] = std::array::from_fn(|_| Vec::new());
    let mut round_p50s: [Vec<f64>; 3] = std::array::from_fn(|_| Vec::new());
    for round in 0..ROUNDS {
        for turn in 0..3 {
            let side = (round + turn) % 3;
            let (peer, tool) = &mut peers[side];
            let this_round = round_trips(peer, tool, "message", OFFICIAL_ROUND_TRIPS / ROUNDS);
            round_p50s[side].push(us(percentile(&this_round, 0.5)));
            times[side].extend(this_round);
        }
    }
    for (peer, _) in peers {
        peer.finish();
    }
    let shown = |p50s: &[f64]| {
        let rounded: Vec<String> = p50s.iter().map(|v| format!("{v:.1}")).collect();
        rounded.join(" ")
    };
    println!(
        "server-everything, p50 of each round: direct {}, floor (tokio) {}, airlock serve {} µs",
        shown(&round_p50s[0]),
        shown(&round_p50s[1]),
        shown(&round_p50s[2])
    );
    let mut percentiles = times.into_iter().map(|mut side| {
        side.sort();
        (percentile(&side, 0.5), percentile(&side, 0.99))
    });
    let mut next = || percentiles.next().expect("three paths");
    Some(Official {
        direct: next(),
        floor: next(),
        served: next(),
    })
}

fn echo_call(tool: &str, id: usize) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{{\"text\":\"hello {id}\"}}}}}}\n").into_bytes()
}

/// The native server pipelined: direct, through the byte-copy floor proxy (threads), through
/// airlock serve; all three stay up and are measured in rotating rounds.
fn measure_pipelined(setup: &Setup, me: &Path) -> Pipelined {
    let mut direct = Peer::start(&setup.server, &[], &[]);
    let mut floor = floor_proxy(me, &setup.server, "threads");
    let mut served = setup.serve(1);
    for peer in [&mut direct, &mut floor, &mut served] {
        peer.initialize();
    }
    let run = |peer: &mut Peer, tool: &str| {
        pipelined::throughput(&mut peer.stdin, &mut peer.stdout, PIPELINED, |id| {
            echo_call(tool, id)
        })
    };
    let mut on_direct = || run(&mut direct, "echo");
    let mut on_floor = || run(&mut floor, "echo");
    let mut on_served = || run(&mut served, "echo0__echo");
    let mut measures: [&mut dyn FnMut() -> f64; 3] =
        [&mut on_direct, &mut on_floor, &mut on_served];
    let samples = pipelined::rotating(&mut measures);
    for peer in [direct, floor, served] {
        peer.finish();
    }
    let [direct, floor, served] = <[Vec<f64>; 3]>::try_from(samples).expect("three peers");
    Pipelined {
        direct,
        floor,
        served,
    }
}

fn row(name: &str, (p50, p99): Percentiles, base: Percentiles) {
    println!(
        "| {name:<34} | {:8.1} µs | {:8.1} µs | {:5.2}× / +{:6.1} µs |",
        us(p50),
        us(p99),
        us(p50) / us(base.0),
        us(p50) - us(base.0)
    );
}

fn report_round_trips(
    native: &Native,
    python: (Percentiles, Percentiles),
    official: Option<&Official>,
) {
    println!(
        "tools/call round trips, sequential ({ROUND_TRIPS} to examples/mcp_echo, {REAL_ROUND_TRIPS} to the Python fixture)"
    );
    println!(
        "| path                               | p50         | p99         | p50 vs direct       |"
    );
    println!(
        "|------------------------------------|-------------|-------------|---------------------|"
    );
    let direct = native.direct;
    row("mcp_echo direct", direct, direct);
    row(
        "mcp_echo via floor proxy (threads)",
        native.floor_threads,
        direct,
    );
    row(
        "mcp_echo via floor proxy (tokio)",
        native.floor_tokio,
        direct,
    );
    row("mcp_echo via airlock serve", native.served, direct);
    row("python fixture direct", python.0, python.0);
    row("python fixture via airlock serve", python.1, python.0);
    match official {
        Some(official) => {
            let direct = official.direct;
            row("server-everything (npm) direct", direct, direct);
            row(
                "server-everything via floor (tokio)",
                official.floor,
                direct,
            );
            row(
                "server-everything via airlock serve",
                official.served,
                direct,
            );
        }
        None => println!("(server-everything rows skipped: run `bash .ci/install-peers` first)"),
    }
    println!(
        "airlock serve above the tokio floor: +{:.1} µs (p50)",
        us(native.served.0) - us(native.floor_tokio.0)
    );
}

fn report_pipelined(pipelined: &Pipelined) {
    let (direct, floor, served) = (
        median(&pipelined.direct),
        median(&pipelined.floor),
        median(&pipelined.served),
    );
    println!(
        "pipelined tools/call to examples/mcp_echo ({PIPELINED} calls, {IN_FLIGHT} in flight), median of {ROUNDS} rotating rounds:"
    );
    println!("| path                      | throughput   | vs direct |");
    println!("|---------------------------|--------------|-----------|");
    for (name, value) in [
        ("direct", direct),
        ("floor proxy (threads)", floor),
        ("airlock serve", served),
    ] {
        println!("| {name:<25} | {value:9.0} /s | {:8.2}× |", value / direct);
    }
    println!(
        "throughput range: direct {} /s, floor {} /s, airlock serve {} /s",
        spread(&pipelined.direct),
        spread(&pipelined.floor),
        spread(&pipelined.served)
    );
}

fn report_ready(one: Duration, ten: Duration) {
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

fn summarise_round_trips(
    native: &Native,
    python: (Percentiles, Percentiles),
    official: Option<&Official>,
) {
    let (served, direct, floor) = (
        us(native.served.0),
        us(native.direct.0),
        us(native.floor_tokio.0),
    );
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
    let (real_served, real_direct) = (us(python.1.0), us(python.0.0));
    summary(
        "serve: tools/call p50, Python fixture server",
        &format!("{real_served:.1} µs"),
        &format!("{real_direct:.1} µs"),
        &format!(
            "{:.2}× (+{:.1} µs)",
            real_served / real_direct,
            real_served - real_direct
        ),
        "≤ 1.10×",
        Some(real_served / real_direct <= 1.10),
    );
    if let Some(official) = official {
        let (served, direct, floor) = (
            us(official.served.0),
            us(official.direct.0),
            us(official.floor.0),
        );
        summary(
            "serve: tools/call p50, server-everything (official, npm)",
            &format!("{served:.1} µs"),
            &format!("{direct:.1} µs"),
            &format!(
                "+{:.1} µs ({:.2}×); byte-copy floor proxy +{:.1} µs",
                served - direct,
                served / direct,
                floor - direct
            ),
            "≤ direct + 10 µs",
            Some(served - direct <= 10.0),
        );
    }
}

fn summarise_pipelined(pipelined: &Pipelined) {
    let (direct, floor, served) = (
        median(&pipelined.direct),
        median(&pipelined.floor),
        median(&pipelined.served),
    );
    summary(
        "serve: throughput, 64 in flight",
        &format!("{served:.0}/s"),
        &format!("{direct:.0}/s"),
        &format!(
            "{:.2}× (byte-copy proxy {:.2}×)",
            served / direct,
            floor / direct
        ),
        "≥ byte-copy proxy",
        Some(served >= floor),
    );
}
