//! End to end: one listening gateway serves clients of both protocol eras at once. A 2026-07-28
//! request between a handshake-era session's requests changes nothing of what that session gets:
//! its answers keep their era's shape, its server's questions reach it as requests it can answer,
//! and a list the gateway has none of is empty, not "method not found". The real binary on
//! loopback with the fixture server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod http_support;

use http_support::*;
use serde_json::{Value, json};

/// A 2026-07-28 request of its own client: the era's headers and `_meta`, no session.
fn stateless(url: &str, id: i64, method: &str, params: Value) -> Reply {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "1"},
    });
    let body = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
    post(
        url,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ],
        &body,
    )
}

#[test]
fn a_2026_request_between_a_sessions_requests_leaves_that_session_its_own_era() {
    let world = World::new();
    let gateway = world.listen(&fixture_server(), &[]);
    let mut init = initialize("2025-06-18");
    init["params"]["capabilities"] = json!({"elicitation": {}});
    let reply = post(&gateway.url, &[], &init);
    let session = reply.header("mcp-session-id").expect("a session id");
    let headers = [("mcp-session-id", session.as_str())];
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    assert_eq!(post(&gateway.url, &headers, &note).status, 202);

    let listed = stateless(&gateway.url, 1, "tools/list", json!({}));
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(listed.body.contains("\"resultType\""), "{}", listed.body);

    // The server asks during the session's call: a request the session answers.
    let accept = json!({"action": "accept", "content": {}});
    let call = call(2, "fixture__confirm", json!({}));
    let (answer, asked) = call_answering_questions(&gateway.url, &headers, &call, &accept);
    assert_eq!(asked.len(), 1, "{answer}");
    assert!(text_of(&answer).contains("\"accept\""), "{answer}");
    assert!(answer["result"].get("resultType").is_none(), "{answer}");

    stateless(&gateway.url, 3, "tools/list", json!({}));
    let prompts = json!({"jsonrpc":"2.0","id":4,"method":"prompts/list"});
    let listed = post(&gateway.url, &headers, &prompts);
    let listed: Value = serde_json::from_str(
        listed
            .body
            .lines()
            .find_map(|line| line.strip_prefix("data:"))
            .unwrap_or(&listed.body)
            .trim(),
    )
    .unwrap();
    assert_eq!(listed["result"]["prompts"], json!([]), "{listed}");
    assert!(listed["result"].get("resultType").is_none(), "{listed}");
}

/// A gateway stopped by a signal (an administrator, a service manager) while an HTTP client's
/// call runs: the clients did not send it and are still reading, so the call's answer, coming
/// 2 s later, still reaches its client and is audited `ok` (a stdio host that signals airlock
/// gets its answers for 1 s only: `session_modes a_call_in_flight_at_sigterm_*`).
#[test]
fn a_signal_to_a_listening_gateway_still_answers_its_clients_calls() {
    let world = World::new();
    let fixture = root().join("tests/fixtures/serve/fixture_server.py");
    let config = format!(
        "[servers.fixture]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}, \"--stubborn\"]\nstart = \"eager\"\n",
        fixture.display().to_string()
    );
    let mut gateway = world.listen(&config, &[]);
    let session = session(&gateway.url, &[]);
    let url = gateway.url.clone();
    let waiting = std::thread::spawn(move || {
        let slow = call(1, "fixture__slow", json!({"seconds": 2}));
        post(&url, &[("mcp-session-id", session.as_str())], &slow)
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    gateway.stop();
    let reply = waiting.join().unwrap();
    assert!(reply.body.contains("slow done"), "{}", reply.body);
    let outcomes: Vec<Value> = world
        .audit()
        .into_iter()
        .filter(|e| e["event"] == "outcome")
        .collect();
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert_eq!(outcomes[0]["outcome"], "ok", "{outcomes:?}");
}

/// Over HTTP each session is offered the 2025-11-25 tasks by its own version, whichever session
/// opened first: a 2025-11-25 session gets the capability and its task-augmented call makes a
/// task; a 2025-06-18 session gets no capability, its call with a `task` runs plain and
/// `tasks/list` is `-32601`. (A review found the first session's version deciding for all: a
/// 2025-11-25 session offered nothing, or a 2025-06-18 one offered tasks and given them.)
#[test]
fn each_session_is_offered_tasks_by_its_own_version() {
    let server = fixture_server().replace(".py\"]", ".py\", \"--tasks\"]");
    for order in [["2025-06-18", "2025-11-25"], ["2025-11-25", "2025-06-18"]] {
        let world = World::new();
        let gateway = world.listen(&server, &[]);
        for version in order {
            let reply = post(&gateway.url, &[], &initialize(version));
            let answer = reply.json();
            let session = reply.header("mcp-session-id").expect("a session id");
            let headers = [("mcp-session-id", session.as_str())];
            let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
            post(&gateway.url, &headers, &note);
            let offered = answer["result"]["capabilities"].get("tasks").is_some();
            let mut task_call = call(1, "fixture__echo", json!({"text": "t"}));
            task_call["params"]["task"] = json!({"ttl": 60000});
            let called = post(&gateway.url, &headers, &task_call).json();
            let made_task = called["result"].get("task").is_some();
            let list = json!({"jsonrpc":"2.0","id":2,"method":"tasks/list"});
            let listed = post(&gateway.url, &headers, &list).json();
            if version == "2025-11-25" {
                assert!(
                    offered && made_task,
                    "{order:?} {version}: {answer} {called}"
                );
                assert!(listed["result"]["tasks"].is_array(), "{order:?}: {listed}");
            } else {
                assert!(
                    !offered && !made_task,
                    "{order:?} {version}: {answer} {called}"
                );
                assert_eq!(text_of(&called), "fixture: t", "{order:?}: {called}");
                assert_eq!(listed["error"]["code"], -32601, "{order:?}: {listed}");
            }
        }
    }
}
