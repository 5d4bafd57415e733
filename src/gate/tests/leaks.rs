//! What a refusal quotes of a call never carries an argument's value past redaction and the cap:
//! the refusal is the outcome's audited reason (and the decision's, for a schema check), so it
//! must be no more than `args` itself may log.

use super::*;

const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

fn refusal(fx: &Effects) -> String {
    fx.to_host[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no refusal text: {:?}", fx.to_host))
        .to_string()
}

fn decide(gate: &mut Gate, arguments: Value) -> Effects {
    let message = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":arguments}});
    let mut fx = Effects::default();
    assert_eq!(
        gate.on_host(message, Instant::now(), &mut fx),
        Verdict::Drop,
        "the call must be refused"
    );
    fx
}

/// Every text of the step that reaches the host or the log.
fn every_text(fx: &Effects) -> String {
    let reasons: Vec<String> = fx.audit.iter().filter_map(|e| e.reason.clone()).collect();
    format!("{} {}", refusal(fx), reasons.join(" "))
}

#[test]
fn a_path_denial_quotes_the_value_redacted_and_capped() {
    let text = r#"
version = 1
[tools]
default = "allow"
[[tools.rule]]
tool = "mcp:fs__read_file"
action = "deny"
argument = "path"
prefix = "/etc/"
[[tools.rule]]
tool = "mcp:fs__read_file"
action = "deny"
argument = "api_token"
prefix = "/"
"#;
    let mut gate = gate_with(text, None, false);
    let huge = format!("/etc/{}", "a".repeat(200 * 1024));
    let fx = decide(&mut gate, json!({ "path": huge }));
    let said = every_text(&fx);
    assert!(said.len() < 4096, "{} bytes", said.len());
    assert!(said.contains("[capped: 204805 bytes, sha256 "), "{said}");

    let fx = decide(&mut gate, json!({ "path": format!("/etc/{TOKEN}") }));
    let said = every_text(&fx);
    assert!(!said.contains(TOKEN), "{said}");
    assert!(said.contains("/etc/[REDACTED]"), "{said}");

    // A value under a secret-looking key is never quoted, as `args` never logs it.
    let fx = decide(
        &mut gate,
        json!({"path": "/tmp/a", "api_token": "/hunter2"}),
    );
    let said = every_text(&fx);
    assert!(!said.contains("hunter2"), "{said}");
    assert!(said.contains("api_token \"[REDACTED]\""), "{said}");
}

#[test]
fn a_schema_refusal_says_where_the_value_failed_never_the_value() {
    let text = "version = 1\n[tools]\ndefault = \"allow\"\ngate_schema = \"enforce\"\n";
    let mut gate = unlisted_gate(None);
    gate.set_policy(policy(text), Arc::new(Redactor::new([]).unwrap()));
    list(&mut gate, serde_json::from_str(SCHEMA_LISTING).unwrap());
    let huge = "b".repeat(200 * 1024);
    for (arguments, hidden) in [
        (json!({"path": {"password": "hunter2"}}), "hunter2"),
        (json!({"path": [TOKEN]}), TOKEN),
        (json!({"path": [huge.clone()]}), huge.as_str()),
        (json!({"path": "/a", TOKEN: 1}), TOKEN),
    ] {
        let fx = decide(&mut gate, arguments.clone());
        let said = every_text(&fx);
        assert!(!said.contains(hidden), "{arguments}: {said}");
        assert!(said.len() < 4096, "{} bytes", said.len());
        assert_eq!(fx.audit[0].decision.as_deref(), Some("deny"));
        assert!(said.contains("inputSchema"), "{said}");
    }
    let fx = decide(&mut gate, json!({"path": 7}));
    assert!(
        refusal(&fx).contains("/path: is not of type string"),
        "{}",
        refusal(&fx)
    );
    let fx = decide(&mut gate, json!({"path": "/a", "Path": "/etc/passwd"}));
    let said = refusal(&fx);
    assert!(said.contains("additionalProperties: /Path"), "{said}");
    assert!(!said.contains("/etc/passwd"), "{said}");
}
