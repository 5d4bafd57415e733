//! Spawn -> first response (`initialize`), full sandbox vs a bare spawn of the same server, side by
//! side in one run. The server is a tiny native MCP fixture (tests/fixtures/sandbox/echo_mcp.c) so
//! the figure is the sandbox's cost, not a runtime's start-up.
//!
//! The sandboxed path is the whole `airlock __sandbox-exec` (airlock's own start-up, policy load,
//! host probe, plan, confine helper, namespaces, landlock, seccomp): an upper bound on what
//! `spawn_confined` adds inside a running airlock.
//!
//! Run: `cargo bench --bench spawn` (release build).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: usize = 30;

fn first_response(mut cmd: Command) -> Duration {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{}}}}"#
    )
    .expect("write");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    let elapsed = start.elapsed();
    assert!(line.contains("serverInfo"), "unexpected answer: {line}");
    drop(stdin);
    let _ = child.wait();
    elapsed
}

fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = ms(samples[samples.len() / 2]);
    let p90 = ms(samples[samples.len() * 9 / 10]);
    let min = ms(samples[0]);
    (min, median, p90)
}

#[path = "common/summary.rs"]
mod summary_line;
use summary_line::{machine_state, summary};

fn main() {
    let root = std::env::temp_dir().join(format!("airlock-spawn-bench-{}", std::process::id()));
    std::fs::create_dir_all(root.join("tools")).expect("mkdir");
    std::fs::create_dir_all(root.join("state")).expect("mkdir");
    use std::os::unix::fs::PermissionsExt;
    for dir in [&root, &root.join("tools"), &root.join("state")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let server: PathBuf = root.join("tools/echo_mcp");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sandbox/echo_mcp.c");
    let ok = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&server)
        .arg(&src)
        .status()
        .expect("cc")
        .success();
    assert!(ok, "compiling the echo fixture");

    let bare = || Command::new(&server);
    let sandboxed = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
        cmd.args(["__sandbox-exec", "--server", "bench", "--"])
            .arg(&server);
        cmd.env("XDG_STATE_HOME", root.join("state"))
            .env("AIRLOCK_ORG_POLICY_DIR", root.join("org"));
        cmd
    };
    // Warm up caches (page cache, private dirs) so both sides start equal.
    for _ in 0..3 {
        first_response(bare());
        first_response(sandboxed());
    }
    let mut bare_samples = Vec::new();
    let mut sandbox_samples = Vec::new();
    // Interleaved, so machine noise hits both sides alike.
    for _ in 0..ROUNDS {
        bare_samples.push(first_response(bare()));
        sandbox_samples.push(first_response(sandboxed()));
    }
    let (bmin, bmed, bp90) = stats(bare_samples);
    let (smin, smed, sp90) = stats(sandbox_samples);
    println!("spawn -> initialize response, {ROUNDS} rounds interleaved (ms)");
    println!("  bare spawn        min {bmin:7.2}  median {bmed:7.2}  p90 {bp90:7.2}");
    println!("  full sandbox      min {smin:7.2}  median {smed:7.2}  p90 {sp90:7.2}");
    println!("  sandbox overhead  median {:7.2} ms", smed - bmed);
    machine_state();
    summary(
        "spawn → initialize, full sandbox vs bare",
        &format!("{smed:.2} ms"),
        &format!("{bmed:.2} ms"),
        &format!("+{:.2} ms", smed - bmed),
        "≤ +10 ms",
        Some(smed - bmed <= 10.0),
    );
    let _ = std::fs::remove_dir_all(&root);
}
