//! A 2026-07-28 host gets what its era has, whichever mode it goes through: in `run` the server
//! (the official Python SDK 2.x, which speaks that era) answers for itself; in `serve` the
//! gateway presents handshake-era servers and must answer as such a server would.

use super::*;

/// `ping`, `logging/setLevel`, the resource subscription pair and the 2025-11-25 `tasks/*` are
/// not methods of 2026-07-28 (tasks are an extension there, with methods and shapes of their
/// own): each gets `-32601`. `server/discover` offers no `tasks` capability, and a `tools/call`
/// carrying a 2025-11-25 `task` runs as the plain call its era defines. A gateway used to answer
/// `ping`, offer `tasks` and route `tasks/*` to its servers (found by a review of the 2026 era).
pub(super) fn a_2026_host_gets_only_what_its_era_has(mode: Mode) {
    let Some(python) = support::sdk_python() else {
        return;
    };
    let python = python.display().to_string();
    let server = support::root().join("tests/fixtures/sandbox/py_server.py");
    let mut setup = Setup::command(&[&python, &server.display().to_string()]);
    setup.name = "py".into();
    setup.policy = format!("[launch]\nallow_commands = [{python:?}]\n");
    let (world, mut client) = start(mode, setup);
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
