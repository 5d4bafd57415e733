//! A 2026-07-28 host gets what its era has, whichever mode it goes through: in `run` the server
//! (the official Python SDK 2.x, which speaks that era) answers for itself; in `serve` the
//! gateway presents handshake-era servers and must answer as such a server would.

use super::*;

/// The official Python SDK 2.x server (which speaks 2026-07-28 itself), named `py`.
fn sdk2_server(python: &str) -> Setup {
    let server = support::root().join("tests/fixtures/sandbox/py_server.py");
    let mut setup = Setup::command(&[python, &server.display().to_string()]);
    setup.name = "py".into();
    setup.policy = format!("[launch]\nallow_commands = [{python:?}]\n");
    setup
}

/// `ping`, `logging/setLevel`, the resource subscription pair and the 2025-11-25 `tasks/*` are
/// not methods of 2026-07-28 (tasks are an extension there, with methods and shapes of their
/// own): each gets `-32601`. `server/discover` offers no `tasks` capability, and a `tools/call`
/// carrying a 2025-11-25 `task` runs as the plain call its era defines. A gateway used to answer
/// `ping`, offer `tasks` and route `tasks/*` to its servers (found by a review of the 2026 era).
pub(super) fn a_2026_host_gets_only_what_its_era_has(mode: Mode) {
    let Some(python) = support::sdk_python() else {
        return;
    };
    let (world, mut client) = start(mode, sdk2_server(&python.display().to_string()));
    let with_envelope = |params: serde_json::Value| {
        let mut params = params;
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}});
        params
    };

    let discovered = client.request(1, "server/discover", with_envelope(json!({})));
    let capabilities = &discovered["result"]["capabilities"];
    assert!(capabilities["tools"].is_object(), "{mode:?}: {discovered}");
    assert!(
        capabilities.get("tasks").is_none(),
        "{mode:?}: {discovered}"
    );

    let removed = [
        ("ping", json!({})),
        ("logging/setLevel", json!({"level": "info"})),
        ("resources/subscribe", json!({"uri": "file:///x"})),
        ("resources/unsubscribe", json!({"uri": "file:///x"})),
        ("tasks/list", json!({})),
        ("tasks/get", json!({"taskId": "t-1"})),
        ("tasks/result", json!({"taskId": "t-1"})),
        ("tasks/cancel", json!({"taskId": "t-1"})),
    ];
    for (n, (method, params)) in (2..).zip(removed) {
        let answer = client.request(n, method, with_envelope(params));
        assert_eq!(
            answer["error"]["code"], -32601,
            "{mode:?} {method}: {answer}"
        );
    }

    let params = json!({"name": world.tool("echo"), "arguments": {"text": "plain"},
        "task": {"ttl": 60000}});
    let answer = client.request(20, "tools/call", with_envelope(params));
    assert_eq!(
        answer["result"]["resultType"], "complete",
        "{mode:?}: {answer}"
    );
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("plain")),
        "{mode:?}: {answer}"
    );
    client.close_stdin();
    assert!(
        client.wait(SECS(10)).is_some(),
        "{mode:?}: airlock did not end"
    );
}

/// One stdio connection speaks one era, and a 2026-07-28 request carries its envelope whole. After
/// 2026-07-28 requests: one without the envelope, with a version that is no string, or without
/// its client capabilities gets `-32602`, an `initialize` `-32022`; after `initialize`, a request
/// carrying the 2026-07-28 envelope gets `-32600`; the session goes on either way. In `run` the
/// server (the official SDK 2.x) answers so itself; a gateway answered each, stamped as
/// 2026-07-28 results (found by a review: an envelope-less `logging/setLevel` turned on log
/// messages the host never opted in to, and a `task` made tasks the host cannot read).
pub(super) fn a_session_speaks_one_era_and_each_request_carries_it(mode: Mode) {
    let Some(python) = support::sdk_python() else {
        return;
    };
    let python = python.display().to_string();
    let envelope = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let initialize = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}});

    let (world, mut client) = start(mode, sdk2_server(&python));
    let echo = world.tool("echo");
    let discovered = client.request(1, "server/discover", json!({"_meta": envelope}));
    assert!(discovered["result"].is_object(), "{mode:?}: {discovered}");
    let refused = [
        (2, "logging/setLevel", json!({"level": "debug"}), -32602),
        (
            3,
            "tools/call",
            json!({"name": echo, "arguments": {"text": "x"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": null,
                "io.modelcontextprotocol/clientCapabilities": {}}}),
            -32602,
        ),
        (
            4,
            "tools/call",
            json!({"name": echo, "arguments": {"text": "x"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
            -32602,
        ),
        (5, "initialize", initialize.clone(), -32022),
    ];
    for (id, method, params, code) in refused {
        let answer = client.request(id, method, params);
        assert_eq!(answer["error"]["code"], code, "{mode:?} {id}: {answer}");
    }
    let params = json!({"name": echo, "arguments": {"text": "still"}, "_meta": envelope});
    let answer = client.request(6, "tools/call", params);
    assert_eq!(
        answer["result"]["resultType"], "complete",
        "{mode:?}: {answer}"
    );
    client.close_stdin();
    assert!(client.wait(SECS(10)).is_some());

    let (world, mut client) = start(mode, sdk2_server(&python));
    let echo = world.tool("echo");
    client.initialize("2025-06-18");
    client.request(1, "tools/list", json!({}));
    let params = json!({"name": echo, "arguments": {"text": "x"}, "_meta": envelope});
    let answer = client.request(2, "tools/call", params);
    assert_eq!(answer["error"]["code"], -32600, "{mode:?}: {answer}");
    let answer = client.call(3, &echo, json!({"text": "still"}));
    assert!(
        Client::text(&answer).starts_with("still"),
        "{mode:?}: {answer}"
    );
}

/// A first call whose `_meta` names a version no request speaks in (a handshake-era one, before
/// any `initialize`; a future one) gets an error, and the session can still open in 2026-07-28.
/// In `run` airlock lists the server's tools for the gate before the first call: that listing
/// opened the SDK's dual-era server in the handshake era, and every later 2026-07-28 request
/// was refused (found by a review); a future version's refusal reached the host as a tool
/// result saying the tools could not be listed, not as the server's `-32022`.
pub(super) fn a_call_in_no_era_gets_an_error_and_the_session_still_opens_in_2026(mode: Mode) {
    let Some(python) = support::sdk_python() else {
        return;
    };
    let python = python.display().to_string();
    let envelope = |version: &str| {
        json!({"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {}})
    };
    for (first, codes) in [
        ("2025-11-25", [-32600, -32022]),
        ("2027-01-01", [-32022, -32022]),
    ] {
        let (world, mut client) = start(mode, sdk2_server(&python));
        let echo = world.tool("echo");
        let params = json!({"name": echo, "arguments": {"text": "x"}, "_meta": envelope(first)});
        let answer = client.request(1, "tools/call", params);
        let code = answer["error"]["code"].as_i64();
        assert!(
            code.is_some_and(|c| codes.contains(&c)),
            "{mode:?} {first}: {answer}"
        );
        let params = json!({"name": echo, "arguments": {"text": "then"},
            "_meta": envelope("2026-07-28")});
        let answer = client.request(2, "tools/call", params);
        assert_eq!(
            answer["result"]["resultType"], "complete",
            "{mode:?} {first}: {answer}"
        );
        assert!(
            Client::text(&answer).starts_with("then"),
            "{mode:?}: {answer}"
        );
    }
    // Sent together: a refusal of one call's version is that call's answer, never another's (a
    // review found the second call given the first's -32022, its version named in it).
    let (world, mut client) = start(mode, sdk2_server(&python));
    let echo = world.tool("echo");
    for (id, version) in [(1, "2099-01-01"), (2, "2026-07-28")] {
        client.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": echo, "arguments": {"text": "x"}, "_meta": envelope(version)}}),
        );
    }
    let refused = client.answer(json!(1), SECS(10));
    assert_eq!(refused["error"]["code"], -32022, "{mode:?}: {refused}");
    let other = client.answer(json!(2), SECS(10));
    assert!(!other.to_string().contains("2099"), "{mode:?}: {other}");
}

/// A 2025-03-26 batch gets one array, whatever its elements: one that is no message (a number, a
/// nested array) is answered `-32600` inside it, beside the other answers; a nested batch is not
/// run (a review found `[1]` answered with a bare object, `[1, request]` with two messages, and
/// `[[request]]` run as a batch).
pub(super) fn a_batch_is_answered_with_one_array_whatever_its_elements(mode: Mode) {
    let (_world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-03-26");
    let list = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
    let cases = [
        (json!([1]), vec![Value::Null]),
        (json!([1, list(2)]), vec![Value::Null, json!(2)]),
        (json!([[list(3)]]), vec![Value::Null]),
    ];
    for (batch, ids) in cases {
        client.send(batch.clone());
        let answer = client.next(SECS(10)).expect("an answer");
        let items = answer
            .as_array()
            .unwrap_or_else(|| panic!("{mode:?} {batch}: one array: {answer}"));
        let mut got: Vec<Value> = items.iter().map(|m| m["id"].clone()).collect();
        got.sort_by_key(|id| id.to_string());
        let mut ids = ids;
        ids.sort_by_key(|id| id.to_string());
        assert_eq!(got, ids, "{mode:?} {batch}: {answer}");
        for item in items.iter().filter(|m| m["id"].is_null()) {
            assert_eq!(item["error"]["code"], -32600, "{mode:?} {batch}: {answer}");
        }
    }
    let after = client.request(9, "tools/list", json!({}));
    assert!(after["result"]["tools"].is_array(), "{mode:?}: {after}");
    // A request stamped 2026-07-28 (which `run` relays, and a gateway refuses) does not take
    // batches away from the session's own era (`run` refused the next batch: found by a review).
    let stamped = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}});
    let _ = client.request(10, "tools/list", stamped);
    client.send(json!([list(11)]));
    let answer = client.next(SECS(10)).expect("an answer");
    assert!(answer.is_array(), "{mode:?}: {answer}");
}
