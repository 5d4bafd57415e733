//! Tasks (protocol 2025-11-25) behind a gateway, end to end (real binary, confined fixture
//! servers): two servers that number their tasks the same way (`t-1`, `t-2`, …) each keep
//! their own. The host sees every task id named for its server, as tool names are, and each
//! `tasks/*` request reaches the server that made the task. A hostile server can neither name
//! another server's task to the host nor read the host's own tasks.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod serve_support;

use std::time::Duration;

use serde_json::{Value, json};
use serve_support::*;

const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

#[test]
fn two_servers_numbering_tasks_alike_each_keep_their_own() {
    let world = World::new();
    let config = world.config(&[("a", "--name a --tasks", ""), ("b", "--name b --tasks", "")]);
    let mut client = world.serve(&config);
    let init = client.request(
        0,
        "initialize",
        json!({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}),
    );
    assert!(
        init["result"]["capabilities"]["tasks"].is_object(),
        "{init}"
    );
    client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    client.tools(1);

    let mut create = |id: i64, server: &str| {
        let params = json!({"name": format!("{server}__echo"), "arguments": {"text": server},
            "task": {"ttl": 60000}});
        let created = client.request(id, "tools/call", params);
        created["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {created}"))
            .to_string()
    };
    let (of_a, of_b) = (create(2, "a"), create(3, "b"));
    assert_eq!((of_a.as_str(), of_b.as_str()), ("a__t-1", "b__t-1"));

    for (n, (task, server)) in [(&of_a, "a"), (&of_b, "b")].into_iter().enumerate() {
        let id = 10 + n as i64;
        let result = client.request(id, "tasks/result", json!({"taskId": task}));
        assert_eq!(
            Client::text(&result),
            format!("{server}: {server}"),
            "{result}"
        );
        assert_eq!(
            result["result"]["_meta"][RELATED_TASK]["taskId"],
            task.as_str()
        );
    }
    let cancelled = client.request(20, "tasks/cancel", json!({"taskId": of_b}));
    assert_eq!(cancelled["result"]["taskId"], of_b.as_str(), "{cancelled}");
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let got = client.request(21, "tasks/get", json!({"taskId": of_a}));
    assert_eq!(got["result"]["taskId"], of_a.as_str(), "{got}");
    assert_eq!(
        got["result"]["status"], "completed",
        "b's cancel left a's task: {got}"
    );

    let listed = client.request(22, "tasks/list", json!({}));
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert_eq!(ids, [of_a.as_str(), of_b.as_str()], "{listed}");

    // The server's own id names no server: no task of the gateway is called that.
    let unknown = client.request(23, "tasks/get", json!({"taskId": "t-1"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let statuses: Vec<Value> = client
        .backlog
        .iter()
        .filter(|m| m["method"] == "notifications/tasks/status")
        .map(|m| m["params"]["taskId"].clone())
        .collect();
    assert_eq!(statuses, [json!(of_a), json!(of_b)], "{:?}", client.backlog);

    assert!(client.close_and_wait(Duration::from_secs(5)));
}

/// A hostile server names another server's task in other spellings of `task` and `taskId` (a
/// lenient host, reading keys case-insensitively, would take them for the keys) and in a related
/// task, and asks the host for the result of a task the host runs: none of it gets through.
#[test]
fn a_hostile_server_cannot_name_another_servers_task_nor_read_the_hosts() {
    let world = World::new();
    let config = world.config(&[
        ("a", "--name a --tasks", ""),
        ("b", "--name b --tasks --hostile", ""),
    ]);
    let mut client = world.serve(&config);
    let host_tasks = json!({"list": {}, "requests": {"elicitation": {"create": {}}}});
    let init = client.request(
        0,
        "initialize",
        json!({"protocolVersion":"2025-11-25","capabilities":{"tasks":host_tasks,"elicitation":{}},
            "clientInfo":{"name":"test","version":"1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    client.tools(1);

    let spoofed = client.call(2, "b__spoof_task", json!({"other": "a__t-1"}));
    assert_eq!(Client::text(&spoofed), "spoofed", "{spoofed}");
    assert!(spoofed["result"].get("Task").is_none(), "{spoofed}");
    assert_eq!(
        spoofed["result"]["_meta"][RELATED_TASK]["taskId"], "b__a__t-1",
        "named under b's own prefix: {spoofed}"
    );
    // The server's own request was declined by airlock, never put to the host.
    let answers = client.call(3, "b__answers", json!({}));
    let answers: Value = serde_json::from_str(&Client::text(&answers)).expect("answers");
    assert_eq!(answers["steal"]["error"]["code"], -32601, "{answers}");
    let status = client
        .backlog
        .iter()
        .find(|m| m["method"] == "notifications/tasks/status")
        .unwrap_or_else(|| panic!("no status: {:?}", client.backlog));
    assert_eq!(
        status["params"],
        json!({"taskId": "b__x", "status": "failed"})
    );
    assert!(
        client.backlog.iter().all(|m| m["method"] != "tasks/result"),
        "{:?}",
        client.backlog
    );
}

/// A server that crashed and started again counts its tasks from `t-1` again: the host's id of
/// the first process's task names that start, so it is `Unknown task` now (the process that
/// had it is gone), never the status or result of the new process's task of the same number.
#[test]
fn a_task_of_a_crashed_server_is_unknown_not_the_restarted_servers_task_of_the_same_number() {
    let world = World::new();
    let config = world.config(&[("a", "--name a --tasks", "")]);
    let mut client = world.serve(&config);
    let init = client.request(
        0,
        "initialize",
        json!({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    client.tools(1);
    let before = create_echo_task(&mut client, 2, "before");
    assert_eq!(before, "a__t-1");

    let crashed = client.call(3, "a__crash", json!({}));
    assert_eq!(crashed["result"]["isError"], true, "{crashed}");
    let after = create_echo_task(&mut client, 4, "after");
    assert_eq!(after, "a__~2~t-1", "the second start's t-1");

    let stale = client.request(5, "tasks/result", json!({"taskId": before}));
    assert_eq!(stale["error"]["code"], -32602, "{stale}");
    let result = client.request(6, "tasks/result", json!({"taskId": after}));
    assert_eq!(Client::text(&result), "a: after", "{result}");
    assert_eq!(
        result["result"]["_meta"][RELATED_TASK]["taskId"],
        after.as_str()
    );
    assert!(client.close_and_wait(Duration::from_secs(5)));
}

/// Calls `a__echo` as a task; its host-facing id.
fn create_echo_task(client: &mut Client, id: i64, text: &str) -> String {
    let params = json!({"name": "a__echo", "arguments": {"text": text}, "task": {"ttl": 60000}});
    let created = client.request(id, "tools/call", params);
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {created}"))
        .to_string()
}

/// A 2026-07-28 host has no 2025-11-25 tasks (its era made them an extension with methods of its
/// own): a `tools/call` it sends with a `task` runs at a server that offers tasks as the plain
/// call its era defines, and a server's `notifications/tasks/status` is not sent to it. Before,
/// the server made a task the host cannot read and its status reached the host.
#[test]
fn a_2026_host_gets_plain_calls_from_a_server_that_offers_tasks() {
    let world = World::new();
    let config = world.config(&[("a", "--name a --tasks --extra", "")]);
    let mut client = world.serve(&config);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let params = json!({"name": "a__echo", "arguments": {"text": "plain"},
        "task": {"ttl": 60000}, "_meta": meta});
    let answer = client.request(1, "tools/call", params);
    assert!(answer["result"].get("task").is_none(), "{answer}");
    assert_eq!(Client::text(&answer), "a: plain", "{answer}");
    let params = json!({"name": "a__notify", "arguments": {}, "_meta": meta});
    let notified = client.request(2, "tools/call", params);
    assert_eq!(Client::text(&notified), "notified", "{notified}");
    let _ = client.request(3, "tools/list", json!({"_meta": meta}));
    no_task_status_reached(client);
}

/// Tasks are of protocol 2025-11-25 alone: a host that negotiated an earlier version is offered
/// no `tasks` capability, its `tools/call` with a `task` runs plain, `tasks/*` is `-32601`, and a
/// server's task status is not sent to it (a review found all four offered to a 2025-06-18 host
/// while a 2026-07-28 one was spared them).
#[test]
fn a_host_of_a_version_without_tasks_gets_none() {
    let world = World::new();
    let config = world.config(&[("a", "--name a --tasks --extra", "")]);
    let mut client = world.serve(&config);
    let init = client.request(
        0,
        "initialize",
        json!({"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    assert!(
        init["result"]["capabilities"].get("tasks").is_none(),
        "{init}"
    );
    client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    client.tools(1);
    let params = json!({"name": "a__echo", "arguments": {"text": "plain"}, "task": {"ttl": 60000}});
    let answer = client.request(2, "tools/call", params);
    assert!(answer["result"].get("task").is_none(), "{answer}");
    assert_eq!(Client::text(&answer), "a: plain", "{answer}");
    let listed = client.request(3, "tasks/list", json!({}));
    assert_eq!(listed["error"]["code"], -32601, "{listed}");
    let notified = client.call(4, "a__notify", json!({}));
    assert_eq!(Client::text(&notified), "notified", "{notified}");
    let _ = client.request(5, "tools/list", json!({}));
    no_task_status_reached(client);
}

/// No `notifications/tasks/status` reached the host; then the session ends cleanly.
fn no_task_status_reached(mut client: Client) {
    assert!(
        client
            .backlog
            .iter()
            .all(|m| m["method"] != "notifications/tasks/status"),
        "{:?}",
        client.backlog
    );
    assert!(client.close_and_wait(Duration::from_secs(5)));
}
