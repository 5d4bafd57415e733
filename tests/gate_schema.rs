//! `tools.gate_schema` end to end, in both modes: the lenient fixture
//! (`tests/fixtures/mcp/lenient_server.py`, whose tools list `{"text": {"type": "string"}}`) under
//! the real binary. In `enforce` a call whose arguments do not validate is refused before the
//! server sees it, with the validation error, and audited; in `warn` it goes through and the
//! mismatch is said on stderr and in the audit log. Neither the refusal, the audit log nor stderr
//! ever carries what the host sent past redaction and the cap: not a value the schema or a path
//! rule refused, not a value under a secret-looking key, not a tool name of any size.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Client, Mode, Setup, World, start};

both_modes!(
    enforce_refuses_a_call_that_does_not_validate_before_the_server_sees_it,
    warn_lets_it_through_and_says_where_it_failed_without_the_value,
);

const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
const PASSWORD: &str = "correct-horse-battery-staple";
/// An audit record is a few KiB at most, however large what the host sent.
const MAX_RECORD_BYTES: usize = 8 * 1024;

/// The fixture under `gate_schema = MODE`, a path rule on `text` and one on `api_token`.
fn lenient(mode: Mode, schema_mode: &str) -> (World, Client, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap().keep();
    let log = dir.join("calls.log");
    std::fs::write(&log, "").unwrap();
    let script = support::root().join("tests/fixtures/mcp/lenient_server.py");
    let (script, log_arg) = (script.display().to_string(), log.display().to_string());
    let rule = |argument: &str, prefix: &str| {
        format!(
            "[[tools.rule]]\ntool = \"mcp:fixture__echo\"\naction = \"deny\"\nargument = \"{argument}\"\nprefix = \"{prefix}\""
        )
    };
    let setup = Setup::command(&["/usr/bin/python3", &script, &log_arg])
        .policy(&format!("write = [{:?}]", dir.display().to_string()))
        .policy(&format!("[tools]\ngate_schema = \"{schema_mode}\""))
        .policy(&rule("text", "/etc/"))
        .policy(&rule("api_token", "/"))
        .policy("[pins]\npinning = \"off\"");
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    (world, client, log)
}

fn reached(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The audit log as written, once it holds `decisions` decisions of the server.
fn audit_text(world: &World, decisions: usize) -> String {
    support::wait_until(Duration::from_secs(5), || {
        world.events("outcome").len() >= decisions
    });
    assert_eq!(world.events("decision").len(), decisions);
    std::fs::read_to_string(world.path("audit.jsonl")).unwrap()
}

fn assert_nothing_leaked(where_: &str, text: &str) {
    for secret in [TOKEN, PASSWORD] {
        assert!(!text.contains(secret), "{where_} carries {secret}: {text}");
    }
    for line in text.lines() {
        assert!(
            line.len() <= MAX_RECORD_BYTES,
            "{where_}: a line of {} bytes: {}…",
            line.len(),
            &line[..200]
        );
    }
}

fn enforce_refuses_a_call_that_does_not_validate_before_the_server_sees_it(mode: Mode) {
    let (world, mut client, log) = lenient(mode, "enforce");
    let echo = world.tool("echo");
    let works = client.call(1, &echo, json!({"text": "hi"}));
    assert_eq!(Client::text(&works), "echo ran: hi", "{works}");

    let huge = "b".repeat(200 * 1024);
    let invalid = [
        json!({"text": {"password": PASSWORD}}),
        json!({"text": [format!("{TOKEN} {huge}")]}),
    ];
    for (n, arguments) in invalid.iter().enumerate() {
        let answer = client.call(2 + n as i64, &echo, arguments.clone());
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let text = Client::text(&answer);
        assert!(
            text.contains("/text: is not of type string")
                && text.contains("tools.gate_schema = \"enforce\""),
            "{text}"
        );
        assert_nothing_leaked("the refusal", &text);
    }
    // A path rule's refusal, a value under a secret-looking key, a tool name of 200 KiB.
    let denied = client.call(4, &echo, json!({"text": format!("/etc/{TOKEN}/{huge}")}));
    assert!(
        Client::text(&denied).starts_with("airlock denied"),
        "{denied}"
    );
    let denied = client.call(
        5,
        &echo,
        json!({"text": "ok", "api_token": format!("/{PASSWORD}")}),
    );
    assert!(
        Client::text(&denied).contains("api_token \"[REDACTED]\""),
        "{denied}"
    );
    let long_name = world.tool(&"n".repeat(200 * 1024));
    let unknown = client.call(6, &long_name, json!({}));
    assert!(
        Client::text(&unknown).starts_with("Unknown tool: "),
        "{unknown}"
    );

    assert_eq!(reached(&log), vec!["\"echo\"\techo".to_string()]);
    let log_text = audit_text(&world, 6);
    assert_nothing_leaked("the audit log", &log_text);
    let decisions = world.events("decision");
    let schema = decisions
        .iter()
        .find(|d| d["request_id"] == 2)
        .expect("the refused call's decision");
    assert_eq!(schema["decision"], "deny", "{schema}");
    assert_eq!(
        schema["rule"], "tools.gate_schema = \"enforce\"",
        "{schema}"
    );
    let reason = schema["reason"].as_str().unwrap();
    assert!(reason.contains("/text: is not of type string"), "{reason}");
    let named = decisions.iter().find(|d| d["request_id"] == 6).unwrap();
    let tool = named["tool"].as_str().unwrap();
    assert!(tool.contains("[capped: "), "{tool}");

    client.close_stdin();
    client.wait(Duration::from_secs(10));
    assert_nothing_leaked("stderr", &client.stderr());
}

fn warn_lets_it_through_and_says_where_it_failed_without_the_value(mode: Mode) {
    let (world, mut client, log) = lenient(mode, "warn");
    let echo = world.tool("echo");
    let answer = client.call(1, &echo, json!({"text": {"password": PASSWORD}}));
    assert!(Client::text(&answer).starts_with("echo ran: "), "{answer}");
    assert_eq!(reached(&log).len(), 1);

    let log_text = audit_text(&world, 1);
    assert_nothing_leaked("the audit log", &log_text);
    let decision = &world.events("decision")[0];
    assert_eq!(decision["decision"], "allow", "{decision}");
    let reason = decision["reason"].as_str().unwrap();
    assert!(
        reason.contains("tools.gate_schema = \"warn\": "),
        "{reason}"
    );
    assert!(reason.contains("/text: is not of type string"), "{reason}");

    client.close_stdin();
    client.wait(Duration::from_secs(10));
    let stderr = client.stderr();
    assert!(
        stderr.contains("/text: is not of type string"),
        "the warning is on stderr: {stderr}"
    );
    assert_nothing_leaked("stderr", &stderr);
}
