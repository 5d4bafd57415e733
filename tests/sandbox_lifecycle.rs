//! End to end: no descendant survives airlock. A grandchild that calls setsid and ignores
//! SIGTERM (and a server that ignores SIGTERM and EOF) dies on every exit path of airlock.
//!
//! The sandbox has its own /proc, so the fixture cannot learn its host pid: the test finds the
//! sandbox's processes in the host's /proc by the unique path on their command line.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use sandbox_support::*;

struct Running {
    airlock: Child,
    /// Host pids of the server and its setsid grandchild.
    sandbox: Vec<i32>,
}

/// Host pids whose command line contains `marker`.
fn host_pids_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) && pid_alive(pid) {
            out.push(pid);
        }
    }
    out
}

fn start(tag: &str, server_mode: &str) -> Running {
    let w = world();
    let pidfile = w
        .root
        .join(format!("grant/gc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_file(&pidfile);
    let grant = w.root.join("grant");
    let mut airlock = w
        .command(
            tag,
            &["--grant-write", grant.to_str().unwrap()],
            &["grandchild", pidfile.to_str().unwrap(), server_mode],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(airlock.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "READY");
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| !s.is_empty())
    }));
    let marker = pidfile.to_str().unwrap();
    let mut sandbox = Vec::new();
    assert!(
        wait_until(Duration::from_secs(5), || {
            sandbox = host_pids_with(marker);
            sandbox.len() >= 2
        }),
        "the server and its grandchild run before airlock exits: {sandbox:?}"
    );
    Running { airlock, sandbox }
}

fn assert_all_gone(mut run: Running, within: Duration) {
    let exited = wait_until(within, || run.airlock.try_wait().unwrap().is_some());
    assert!(exited, "airlock did not exit");
    assert!(
        wait_until(Duration::from_secs(2), || run
            .sandbox
            .iter()
            .all(|pid| !pid_alive(*pid))),
        "a process of the sandbox (server or grandchild, host pids {:?}) survived airlock",
        run.sandbox
    );
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: (test) signals our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

#[test]
fn host_eof_kills_the_setsid_grandchild() {
    let mut run = start("eof", "exit-on-eof");
    drop(run.airlock.stdin.take());
    assert_all_gone(run, Duration::from_secs(5));
}

#[test]
fn sigterm_to_airlock_kills_everything_even_when_sigterm_is_ignored() {
    let run = start("term", "stay");
    signal(&run.airlock, libc::SIGTERM);
    // close stdin (0.5 s) + kill_timeout (3 s) + SIGKILL
    assert_all_gone(run, Duration::from_secs(8));
}

#[test]
fn sigint_to_airlock_kills_everything() {
    let run = start("int", "stay");
    signal(&run.airlock, libc::SIGINT);
    assert_all_gone(run, Duration::from_secs(8));
}

#[test]
fn sigkill_to_airlock_kills_everything() {
    let run = start("kill", "stay");
    signal(&run.airlock, libc::SIGKILL);
    assert_all_gone(run, Duration::from_secs(5));
}
