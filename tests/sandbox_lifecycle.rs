//! End to end: no descendant survives airlock. A grandchild that calls setsid and ignores
//! SIGTERM (and a server that ignores SIGTERM and EOF) dies on every exit path of airlock.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use sandbox_support::*;

struct Running {
    airlock: Child,
    grandchild: i32,
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
    let grandchild: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        pid_alive(grandchild),
        "the grandchild runs before airlock exits"
    );
    Running {
        airlock,
        grandchild,
    }
}

fn assert_all_gone(mut run: Running, within: Duration) {
    let exited = wait_until(within, || run.airlock.try_wait().unwrap().is_some());
    assert!(exited, "airlock did not exit");
    assert!(
        wait_until(Duration::from_secs(2), || !pid_alive(run.grandchild)),
        "grandchild {} survived airlock",
        run.grandchild
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
