//! `airlock serve` failure behaviour, end to end (real binary, confined fixture servers): a
//! server that fails to start, one that never finishes its handshake, one that crashes mid-call,
//! one that hangs, one that floods stdout with junk: each fails alone while the others keep
//! working.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod serve_support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use serve_support::*;

#[test]
fn every_failure_stays_with_its_server() {
    let world = World::new();
    let config = world.config(&[
        ("good", "--name good", ""),
        ("crashy", "--name crashy", ""),
        ("hangy", "--name hangy", "tool_timeout = 1"),
        ("flood", "--name flood --flood", ""),
        ("nostart", "--fail-at-start", ""),
        ("slowstart", "--hang-at-start", "startup_timeout = 1"),
    ]);
    let mut client = world.serve(&config);
    client.initialize();

    assert_lists_only_servers_that_started(&mut client);
    assert_the_host_log_names_the_servers_that_did_not_start(&client);
    assert_start_failures_and_crashes_stay_with_their_server(&mut client);
    assert_hangs_and_junk_stay_with_their_server(&mut client);

    // A denied tool is refused without reaching the server.
    let denied = client.call(12, "good__pid", json!({}));
    assert_eq!(denied["result"]["isError"], true);
    assert!(Client::text(&denied).contains("mcp:good__pid"), "{denied}");

    assert_status_names_each_failure(&world);

    assert!(client.close_and_wait(Duration::from_secs(5)));
    let events = world.audit();
    let dropped = events
        .iter()
        .filter(|e| e["event"] == "dropped" && e["server"] == "flood")
        .count();
    assert!(
        (1..=12).contains(&dropped),
        "junk is recorded, boundedly: {dropped}"
    );
    let outcomes: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "outcome" && e["server"] == "hangy")
        .collect();
    assert!(
        outcomes.iter().any(|e| e["outcome"] == "timeout"),
        "{outcomes:?}"
    );
}

/// Lists the tools of the servers that started, within the startup timeout.
fn assert_lists_only_servers_that_started(client: &mut Client) {
    let started = Instant::now();
    let tools = client.tools(1);
    for server in ["good", "crashy", "hangy", "flood"] {
        assert!(
            tools.contains(&format!("{server}__echo")),
            "{server}: {tools:?}"
        );
    }
    assert!(
        !tools
            .iter()
            .any(|t| t.starts_with("nostart__") || t.starts_with("slowstart__")),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"good__pid".to_string()),
        "denied tools are not listed"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "bounded by startup_timeout: {:?}",
        started.elapsed()
    );
}

/// The host's log (`notifications/message` from logger `airlock`) says why a server's tools
/// are missing from the list.
fn assert_the_host_log_names_the_servers_that_did_not_start(client: &Client) {
    for server in ["nostart", "slowstart"] {
        assert!(
            client.backlog.iter().any(|m| {
                m["method"] == "notifications/message"
                    && m["params"]["logger"] == "airlock"
                    && m["params"]["level"] == "error"
                    && m["params"]["data"]
                        .as_str()
                        .is_some_and(|text| text.starts_with(&format!("server `{server}` failed")))
            }),
            "{server}: {:?}",
            client.backlog
        );
    }
}

fn assert_start_failures_and_crashes_stay_with_their_server(client: &mut Client) {
    // Fails to start / never completes the handshake: an error naming the server, at once.
    let answer = client.call(2, "nostart__echo", json!({"text": "x"}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(Client::text(&answer).contains("nostart"), "{answer}");
    let answer = client.call(3, "slowstart__echo", json!({}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");

    // Crash mid-call: that call fails, the others work, the next call restarts it.
    let answer = client.call(4, "crashy__crash", json!({}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(Client::text(&answer).contains("exited"), "{answer}");
    assert_eq!(
        Client::text(&client.call(5, "good__echo", json!({"text": "a"}))),
        "good: a"
    );
    assert_eq!(
        Client::text(&client.call(6, "crashy__echo", json!({"text": "b"}))),
        "crashy: b"
    );
}

fn assert_hangs_and_junk_stay_with_their_server(client: &mut Client) {
    // Hang: the host gets an error at tool_timeout; meanwhile another server answers.
    client.send(json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"hangy__hang","arguments":{}}}));
    let answer = client.call(8, "good__echo", json!({"text": "while hanging"}));
    assert_eq!(Client::text(&answer), "good: while hanging");
    assert!(
        client.backlog.iter().all(|m| m["id"] != 7),
        "the good answer came first"
    );
    let hung = client.answer(json!(7), Duration::from_secs(5));
    assert_eq!(hung["error"]["code"], -32001, "{hung}");
    assert_eq!(
        Client::text(&client.call(9, "hangy__echo", json!({"text": "c"}))),
        "hangy: c"
    );

    // Flood: junk on stdout is dropped, MCP still flows.
    assert_eq!(
        Client::text(&client.call(10, "flood__echo", json!({"text": "d"}))),
        "flood: d"
    );
    assert_eq!(
        Client::text(&client.call(11, "flood__junk", json!({}))),
        "after junk"
    );
}

fn assert_status_names_each_failure(world: &World) {
    let status = world.status();
    let servers = status[0]["servers"].as_array().expect("servers").clone();
    let of = |name: &str| {
        servers
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(of("good")["state"], "ready");
    assert_eq!(of("crashy")["restarts"], 1);
    assert!(
        of("nostart")["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("exited"),
        "{status}"
    );
    assert!(
        of("slowstart")["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("startup_timeout"),
        "{status}"
    );
}
