//! First run of the README's example from an EMPTY npm cache: `airlock run npx -y
//! @modelcontextprotocol/server-filesystem DIR` (install step confined with the registry as its
//! only network, then the server confined without network) against plain `npx -y` of the same
//! package, interleaved in one run, each round with its own fresh home (no npm cache) and fresh
//! airlock state. The figure is the time from start to the `initialize` answer. Then the warm start
//! (the package cached: airlock's private layer, the user's cache for plain npx), same comparison.
//!
//! Talks to the npm registry the user's npm configuration names (both sides alike).
//! Run: `cargo bench --bench first_run` (release build).
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a failed unwrap is a failed run

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/summary.rs"]
mod summary_line;
use summary_line::{machine_state, summary};

const PACKAGE: &str = "@modelcontextprotocol/server-filesystem";
const ROUNDS: usize = 3;
const WARM_ROUNDS: usize = 5;

fn initialize_answer(mut cmd: Command) -> Duration {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#
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

/// A new user's machine: an empty home, fresh state, the directory the server works on.
struct Fresh {
    root: PathBuf,
}

impl Fresh {
    fn new(tag: &str) -> Fresh {
        let root = std::env::temp_dir().join(format!(
            "airlock-first-run-bench-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["home/notes", "state", "config", "org"] {
            std::fs::create_dir_all(root.join(dir)).expect("mkdir");
        }
        Fresh { root }
    }

    fn command(&self, program: &str, airlock: bool) -> Command {
        let mut cmd = Command::new(program);
        if airlock {
            cmd.arg("run");
            cmd.arg("npx");
        }
        cmd.args(["-y", PACKAGE])
            .arg(self.root.join("home/notes"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.join("home"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"))
            .env("npm_config_update_notifier", "false")
            .current_dir(&self.root);
        cmd
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        let _ = Command::new("rm").arg("-rf").arg(&self.root).status();
    }
}

fn seconds(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let s = |d: Duration| d.as_secs_f64();
    (s(samples[0]), s(samples[samples.len() / 2]))
}

fn main() {
    let airlock = env!("CARGO_BIN_EXE_airlock");
    let mut plain = Vec::new();
    let mut confined = Vec::new();
    let mut plain_warm = Vec::new();
    let mut confined_warm = Vec::new();
    for round in 0..ROUNDS {
        // Interleaved, alternating which goes first, so registry and machine noise hit both.
        let plain_home = Fresh::new("npx");
        let airlock_home = Fresh::new("airlock");
        let mut measure_plain = || plain.push(initialize_answer(plain_home.command("npx", false)));
        let mut measure_airlock =
            || confined.push(initialize_answer(airlock_home.command(airlock, true)));
        if round % 2 == 0 {
            measure_plain();
            measure_airlock();
        } else {
            measure_airlock();
            measure_plain();
        }
        if round == 0 {
            for _ in 0..WARM_ROUNDS {
                plain_warm.push(initialize_answer(plain_home.command("npx", false)));
                confined_warm.push(initialize_answer(airlock_home.command(airlock, true)));
            }
            assert!(!airlock_home.root.join("home/.npm/_npx").exists());
        }
    }
    let (pmin, pmed) = seconds(&mut plain);
    let (amin, amed) = seconds(&mut confined);
    let (wpmin, wpmed) = seconds(&mut plain_warm);
    let (wamin, wamed) = seconds(&mut confined_warm);
    println!("start -> initialize answer, npx -y {PACKAGE} (s)");
    println!("  first run, empty cache, {ROUNDS} rounds interleaved");
    println!("    plain npx -y        min {pmin:7.2}  median {pmed:7.2}");
    println!(
        "    airlock run npx -y  min {amin:7.2}  median {amed:7.2}  ({:.2}x)",
        amed / pmed
    );
    println!("  warm start, {WARM_ROUNDS} rounds interleaved");
    println!("    plain npx -y        min {wpmin:7.2}  median {wpmed:7.2}");
    println!(
        "    airlock run npx -y  min {wamin:7.2}  median {wamed:7.2}  ({:+.2} s)",
        wamed - wpmed
    );
    machine_state();
    summary(
        "first run from an empty npm cache, airlock run npx -y vs plain npx -y",
        &format!("{amed:.2} s"),
        &format!("{pmed:.2} s"),
        &format!("{:.2}×", amed / pmed),
        "≤ 1.2×",
        Some(amed / pmed <= 1.2),
    );
    summary(
        "warm start (package cached), airlock run npx -y vs plain npx -y",
        &format!("{wamed:.2} s"),
        &format!("{wpmed:.2} s"),
        &format!("{:+.2} s", wamed - wpmed),
        "–",
        None,
    );
}
