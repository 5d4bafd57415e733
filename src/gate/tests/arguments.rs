//! Arguments as the gate reads them: paths against the server's home and working directory,
//! and the listed schema (warn and enforce).

use super::*;

// ---------------------------------------------------------------- paths and schemas

#[test]
fn path_arguments_are_read_against_the_servers_home_and_working_directory() {
    let text = r#"
version = 1
[tools]
default = "allow"
[[tools.rule]]
tool = "mcp:fs__read_file"
action = "deny"
argument = "path"
prefix = "/etc/"
"#;
    let mut gate = gate_with(text, None, false);
    let now = Instant::now();
    let spellings = [
        "../../etc/passwd",
        "~/../../etc/passwd",
        "file://localhost/etc/passwd",
        "file:///etc%2Fpasswd",
        "%2Fetc%2Fpasswd",
    ];
    for (n, path) in spellings.iter().enumerate() {
        let message = json!({"jsonrpc":"2.0","id":n,"method":"tools/call","params":{"name":"read_file","arguments":{"path":path}}});
        let mut fx = Effects::default();
        assert_eq!(gate.on_host(message, now, &mut fx), Verdict::Drop, "{path}");
        assert_eq!(fx.audit[0].decision.as_deref(), Some("deny"), "{path}");
        let text = fx.to_host[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap();
        assert!(
            text.contains("/etc/passwd"),
            "the refusal names the reading: {text}"
        );
    }
    let inside = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","arguments":{"Path":"notes/a"}}});
    assert!(matches!(
        gate.on_host(inside, now, &mut Effects::default()),
        Verdict::Forward(_)
    ));
}

#[test]
fn arguments_are_checked_against_the_listed_schema_in_warn_and_enforce() {
    let now = Instant::now();
    let bad = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":7}}});
    for (mode, forwarded) in [("off", true), ("warn", true), ("enforce", false)] {
        let text = format!("version = 1\n[tools]\ndefault = \"allow\"\ngate_schema = \"{mode}\"\n");
        let mut gate = unlisted_gate(None);
        gate.set_policy(policy(&text), Arc::new(Redactor::new([]).unwrap()));
        list(&mut gate, serde_json::from_str(SCHEMA_LISTING).unwrap());
        let mut fx = Effects::default();
        let verdict = gate.on_host(bad.clone(), now, &mut fx);
        assert_eq!(matches!(verdict, Verdict::Forward(_)), forwarded, "{mode}");
        let reason = fx.audit[0].reason.clone().unwrap_or_default();
        match mode {
            "off" => assert!(reason.is_empty(), "{reason}"),
            "warn" => assert!(reason.contains("/path"), "{reason}"),
            _ => {
                assert_eq!(fx.audit[0].decision.as_deref(), Some("deny"));
                let text = fx.to_host[0]["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap();
                assert!(
                    text.contains("inputSchema") && text.contains("/path"),
                    "{text}"
                );
            }
        }
    }
}
