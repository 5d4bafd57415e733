//! `airlock serve` lifecycle end to end: idle stop and transparent restart, eager start, and no
//! child surviving shutdown (host EOF, SIGTERM, SIGINT), even one that ignores SIGTERM and EOF.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod serve_support;

use std::time::{Duration, Instant};

use serde_json::json;
use serve_support::*;

#[test]
fn idle_servers_stop_and_restart_on_the_next_call() {
    let world = World::new();
    let marker = format!("idle-marker-{}", std::process::id());
    let config = world.config(&[("idle", &format!("--name {marker}"), "idle_timeout = 1")]);
    let mut client = world.serve(&config);
    client.initialize();
    assert_eq!(
        Client::text(&client.call(1, "idle__echo", json!({"text": "one"}))),
        format!("{marker}: one")
    );
    assert!(!processes_with(&marker).is_empty());
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&marker)
            .is_empty()),
        "the idle server was not stopped"
    );
    // The process is gone from /proc a moment before the gateway has reaped it (under load).
    assert!(
        wait_until(
            Duration::from_secs(5),
            || world.status()[0]["servers"][0]["state"] == "stopped"
        ),
        "{}",
        world.status()
    );
    // Still listed while stopped, without waking it.
    assert!(client.tools(2).contains(&"idle__echo".to_string()));
    assert!(processes_with(&marker).is_empty());
    assert_eq!(
        Client::text(&client.call(3, "idle__echo", json!({"text": "two"}))),
        format!("{marker}: two")
    );
    let spawns = world
        .audit()
        .iter()
        .filter(|e| e["event"] == "spawn")
        .count();
    assert_eq!(spawns, 2);
}

fn shutdown_leaves_nothing(how: &str) {
    let world = World::new();
    let marker = format!("shutdown-{how}-{}", std::process::id());
    let config = world.config(&[
        (
            "eager",
            &format!("--name {marker} --stubborn"),
            "start = \"eager\"",
        ),
        ("lazy", &format!("--name {marker}"), ""),
    ]);
    let mut client = world.serve(&config);
    client.initialize();
    assert_eq!(
        Client::text(&client.call(1, "lazy__echo", json!({"text": "x"}))),
        format!("{marker}: x")
    );
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&marker).len()
            >= 2),
        "both servers run"
    );
    let started = Instant::now();
    match how {
        "eof" => drop(client.stdin.take()),
        // SAFETY: (test) signals our own child.
        // SAFETY: (test) signals our own child.
        "sigterm" => unsafe {
            libc::kill(client.child.id() as i32, libc::SIGTERM);
        },
        // SAFETY: (test) signals our own child.
        "sigint" => unsafe {
            libc::kill(client.child.id() as i32, libc::SIGINT);
        },
        _ => unreachable!(),
    }
    // kill_timeout is 1 s in the test policy: airlock must be gone within kill_timeout + 1 s.
    let exited = wait_until(Duration::from_secs(2), || {
        client.child.try_wait().unwrap().is_some()
    });
    let stderr = client.stderr();
    assert!(
        exited,
        "airlock still running {:?} after {how}; stderr:\n{stderr}",
        started.elapsed()
    );
    assert!(
        client
            .child
            .try_wait()
            .unwrap()
            .is_some_and(|s| s.success()),
        "{stderr}"
    );
    assert!(
        wait_until(Duration::from_millis(500), || processes_with(&marker)
            .is_empty()),
        "survivors after {how}: {:?}",
        processes_with(&marker)
    );
}

#[test]
fn host_eof_stops_every_server() {
    shutdown_leaves_nothing("eof");
}

#[test]
fn sigterm_stops_every_server() {
    shutdown_leaves_nothing("sigterm");
}

#[test]
fn sigint_stops_every_server() {
    shutdown_leaves_nothing("sigint");
}

#[test]
fn airlock_test_reports_tools_latency_and_sandbox_or_the_reason() {
    let world = World::new();
    let config = world.config(&[
        ("good", "--name good --tools 2", ""),
        ("bad", "--fail-at-start", ""),
    ]);
    let policy = world.path("policy.toml");
    let out = world
        .command(&[
            "test",
            "good",
            "--config",
            config.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ])
        .output()
        .expect("airlock test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("tools:    9 (1 hidden from hosts by the policy)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("good__echo") && stdout.contains("good__t1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("latency:") && stdout.contains("sandbox:  landlock"),
        "{stdout}"
    );

    let out = world
        .command(&[
            "test",
            "bad",
            "--config",
            config.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ])
        .output()
        .expect("airlock test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAILED") && stdout.contains("exit"),
        "{stdout}"
    );
    assert!(
        stdout.contains("failing at start as asked"),
        "its stderr is shown: {stdout}"
    );

    let out = world
        .command(&["test", "nosuch", "--config", config.to_str().unwrap()])
        .output()
        .expect("airlock test");
    assert_eq!(out.status.code(), Some(2));
}
