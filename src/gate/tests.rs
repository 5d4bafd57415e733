use std::path::PathBuf;

use serde_json::json;

use super::*;
use crate::policy::{Layer, LayerSource, load};

const POLICY: &str = r#"
version = 1
[tools]
default = "allow"
deny = ["mcp:fs__delete_*"]
ask = ["mcp:fs__write_file"]
"#;

fn policy(text: &str) -> Arc<Policy> {
    let source = LayerSource {
        layer: Layer::User,
        path: PathBuf::from("/p/policy.toml"),
        text: text.to_string(),
    };
    Arc::new(load(&[source], &[]).unwrap())
}

fn gate_with(text: &str, timeout: Option<Duration>, show_denied: bool) -> Gate {
    let config = GateConfig {
        server: "fs".into(),
        show_denied,
        tool_timeout: timeout,
        paths: PathContext {
            home: Some(PathBuf::from("/home/srv")),
            cwd: Some(PathBuf::from("/work/project")),
            bases: Vec::new(),
            fallback_cwd: None,
            user_homes: vec![PathBuf::from("/home/me")],
        },
    };
    let mut gate = Gate::new(config, policy(text), Arc::new(Redactor::new([]).unwrap()));
    // The server listed its tools (a call of any other name is refused as unknown).
    let mut listing = json!({"tools": LISTED.map(|name| json!({"name": name}))});
    let mut fx = Effects::default();
    gate.filter_listing(crate::pins::Kind::Tool, &mut listing, &mut fx);
    gate
}

const LISTED: [&str; 3] = ["read_file", "write_file", "delete_file"];

fn gate() -> Gate {
    gate_with(POLICY, None, false)
}

fn call(id: Value, tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"path":"/tmp/a","token":"s3cret"}}})
}

fn initialize(gate: &mut Gate, capabilities: Value, now: Instant) {
    let mut fx = Effects::default();
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":capabilities,"clientInfo":{"name":"t","version":"1"}}});
    assert!(matches!(
        gate.on_host(init, now, &mut fx),
        Verdict::Forward(_)
    ));
    let answer = json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}});
    assert!(matches!(
        gate.on_server(answer, now, &mut fx),
        Verdict::Forward(_)
    ));
    assert!(fx.is_empty());
}

fn kinds(fx: &Effects) -> Vec<(EventKind, Option<String>, Option<Outcome>)> {
    fx.audit
        .iter()
        .map(|e| (e.event, e.decision.clone(), e.outcome))
        .collect()
}

#[test]
fn allowed_call_is_forwarded_after_its_decision_and_records_the_outcome() {
    let mut gate = gate();
    let now = Instant::now();
    let mut fx = Effects::default();
    assert!(matches!(
        gate.on_host(call(json!(1), "read_file"), now, &mut fx),
        Verdict::Forward(_)
    ));
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Decision, Some("allow".into()), None)]
    );
    let decision = &fx.audit[0];
    assert_eq!(
        decision.args,
        Some(json!({"path":"/tmp/a","token":"[REDACTED]"}))
    );
    assert_eq!(decision.rule.as_deref(), Some("tools.default"));
    assert_eq!(decision.request_id, Some(json!(1)));
    let mut fx = Effects::default();
    let answer = json!({"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}});
    assert!(matches!(
        gate.on_server(answer, now + Duration::from_millis(5), &mut fx),
        Verdict::Forward(_)
    ));
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Outcome, None, Some(Outcome::Ok))]
    );
    assert_eq!(fx.audit[0].duration_ms, Some(5.0));
    assert_eq!(gate.in_flight(), 0);
}

#[test]
fn denied_call_is_answered_here_naming_rule_and_layer_and_its_cancel_is_swallowed() {
    let mut gate = gate();
    let now = Instant::now();
    let mut fx = Effects::default();
    assert_eq!(
        gate.on_host(call(json!("x"), "delete_file"), now, &mut fx),
        Verdict::Drop
    );
    assert_eq!(
        kinds(&fx),
        vec![
            (EventKind::Decision, Some("deny".into()), None),
            (EventKind::Outcome, None, Some(Outcome::Denied))
        ]
    );
    assert!(fx.to_server.is_empty());
    let answer = &fx.to_host[0];
    assert_eq!(answer["id"], "x");
    assert_eq!(answer["result"]["isError"], true);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("mcp:fs__delete_*") && text.contains("layer user"),
        "{text}"
    );
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}});
    assert_eq!(
        gate.on_host(cancel.clone(), now, &mut Effects::default()),
        Verdict::Drop
    );
    // A cancel for a call that was forwarded goes on to the server.
    let mut fx = Effects::default();
    gate.on_host(call(json!(2), "read_file"), now, &mut fx);
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}});
    let mut fx = Effects::default();
    assert!(matches!(
        gate.on_host(cancel, now, &mut fx),
        Verdict::Forward(_)
    ));
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Outcome, None, Some(Outcome::Cancelled))]
    );
}

#[test]
fn ask_without_elicitation_is_a_deny_that_says_why() {
    let mut gate = gate();
    let now = Instant::now();
    initialize(&mut gate, json!({}), now);
    let mut fx = Effects::default();
    assert_eq!(
        gate.on_host(call(json!(3), "write_file"), now, &mut fx),
        Verdict::Drop
    );
    assert_eq!(fx.audit[0].decision.as_deref(), Some("deny"));
    let text = fx.to_host[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("elicitation"), "{text}");
}

#[test]
fn ask_with_elicitation_holds_the_call_until_the_host_approves() {
    let mut gate = gate();
    let now = Instant::now();
    initialize(&mut gate, json!({"elicitation": {}}), now);
    let mut fx = Effects::default();
    let original = call(json!(4), "write_file");
    assert_eq!(gate.on_host(original.clone(), now, &mut fx), Verdict::Drop);
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Decision, Some("ask".into()), None)]
    );
    let elicit = &fx.to_host[0];
    assert_eq!(elicit["method"], "elicitation/create");
    let own_id = elicit["id"].clone();
    assert!(own_id.as_str().unwrap().starts_with(OWN_ID_PREFIX));
    assert!(
        !elicit["params"]["message"]
            .as_str()
            .unwrap()
            .contains("s3cret")
    );
    let mut fx = Effects::default();
    let yes = json!({"jsonrpc":"2.0","id":own_id,"result":{"action":"accept","content":{"approve":true}}});
    assert_eq!(gate.on_host(yes, now, &mut fx), Verdict::Drop);
    assert_eq!(fx.to_server, vec![original]);
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Elicitation, Some("allow".into()), None)]
    );
    let mut fx = Effects::default();
    gate.on_server(
        json!({"jsonrpc":"2.0","id":4,"result":{"content":[]}}),
        now,
        &mut fx,
    );
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Outcome, None, Some(Outcome::Ok))]
    );
}

#[test]
fn a_confirmation_the_host_can_no_longer_give_refuses_the_call_at_once() {
    let mut gate = gate();
    let now = Instant::now();
    initialize(&mut gate, json!({"elicitation": {"form": {}}}), now);
    let mut fx = Effects::default();
    gate.on_host(call(json!(6), "write_file"), now, &mut fx);
    assert_eq!(gate.in_flight(), 1, "held for the user's answer");
    let mut fx = Effects::default();
    gate.host_closed(now, &mut fx);
    assert!(fx.to_server.is_empty());
    assert_eq!(fx.to_host[0]["id"], 6);
    assert_eq!(fx.to_host[0]["result"]["isError"], true);
    assert_eq!(
        kinds(&fx),
        vec![
            (EventKind::Elicitation, Some("deny".into()), None),
            (EventKind::Outcome, None, Some(Outcome::Denied)),
        ]
    );
    assert!(
        fx.audit[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("closed the connection"),
        "{:?}",
        fx.audit[0]
    );
    assert_eq!(gate.in_flight(), 0);
    // A call decided after the EOF (it waited for the spawn or a listing) is not asked either.
    let mut fx = Effects::default();
    gate.on_host(call(json!(7), "write_file"), now, &mut fx);
    assert_eq!(fx.to_host.len(), 1, "{:?}", fx.to_host);
    assert_eq!(fx.to_host[0]["id"], 7);
    assert_eq!(fx.to_host[0]["result"]["isError"], true);
    assert_eq!(gate.in_flight(), 0);
}

#[test]
fn ask_declined_or_cancelled_never_reaches_the_server() {
    let mut gate = gate();
    let now = Instant::now();
    initialize(&mut gate, json!({"elicitation": {"form": {}}}), now);
    let mut fx = Effects::default();
    gate.on_host(call(json!(5), "write_file"), now, &mut fx);
    let own_id = fx.to_host[0]["id"].clone();
    let mut fx = Effects::default();
    gate.on_host(
        json!({"jsonrpc":"2.0","id":own_id,"result":{"action":"decline"}}),
        now,
        &mut fx,
    );
    assert!(fx.to_server.is_empty());
    assert_eq!(fx.to_host[0]["result"]["isError"], true);
    assert!(
        fx.to_host[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .ends_with("the user declined."),
        "{}",
        fx.to_host[0]
    );

    // "accept" with `approve: false` is a no, and says so without the word "accept" alone.
    let mut fx = Effects::default();
    gate.on_host(call(json!(7), "write_file"), now, &mut fx);
    let own_id = fx.to_host[0]["id"].clone();
    let mut fx = Effects::default();
    gate.on_host(
        json!({"jsonrpc":"2.0","id":own_id,"result":{"action":"accept","content":{"approve":false}}}),
        now,
        &mut fx,
    );
    assert!(fx.to_server.is_empty());
    let text = fx.to_host[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.ends_with("the user declined (approve: false)."),
        "{text}"
    );

    let mut fx = Effects::default();
    gate.on_host(call(json!(6), "write_file"), now, &mut fx);
    let own_id = fx.to_host[0]["id"].clone();
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}});
    let mut fx = Effects::default();
    assert_eq!(gate.on_host(cancel, now, &mut fx), Verdict::Drop);
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Outcome, None, Some(Outcome::Cancelled))]
    );
    // The host's late answer to the abandoned confirmation goes nowhere.
    let late = json!({"jsonrpc":"2.0","id":own_id,"result":{"action":"accept"}});
    let mut fx = Effects::default();
    assert_eq!(gate.on_host(late, now, &mut fx), Verdict::Drop);
    assert!(fx.is_empty());
}

#[test]
fn stateless_era_ask_is_denied_with_a_reason() {
    let mut gate = gate();
    let now = Instant::now();
    let meta = json!({version::META_PROTOCOL_VERSION: "2026-07-28", version::META_CLIENT_CAPABILITIES: {"elicitation": {}}});
    let msg = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","_meta":meta}});
    let mut fx = Effects::default();
    assert_eq!(gate.on_host(msg, now, &mut fx), Verdict::Drop);
    assert!(
        fx.audit[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("2026-07-28")
    );
    assert_eq!(gate.version(), Some("2026-07-28"));
}

#[test]
fn tools_list_pages_are_filtered_unless_show_denied() {
    for (show, expected) in [
        (false, vec!["read_file", "write_file"]),
        (true, vec!["read_file", "delete_file", "write_file"]),
    ] {
        let mut gate = gate_with(POLICY, None, show);
        let now = Instant::now();
        for (id, cursor) in [(json!(1), None), (json!(2), Some("p2"))] {
            let mut params = json!({});
            if let Some(cursor) = cursor {
                params["cursor"] = json!(cursor);
            }
            let list = json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params});
            assert!(matches!(
                gate.on_host(list, now, &mut Effects::default()),
                Verdict::Forward(_)
            ));
            let answer = json!({"jsonrpc":"2.0","id":id,"result":{"tools":[
                {"name":"read_file","x-extra":1},{"name":"delete_file"},{"name":"write_file"}],"nextCursor":"p2"}});
            let got = match gate.on_server(answer.clone(), now, &mut Effects::default()) {
                Verdict::Forward(value) => value,
                Verdict::Drop => panic!("dropped"),
            };
            let names: Vec<&str> = got["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, expected);
            assert_eq!(got["result"]["nextCursor"], "p2");
            assert_eq!(got["result"]["tools"][0]["x-extra"], 1);
        }
    }
}

#[test]
fn timeout_answers_the_host_cancels_at_the_server_and_drops_the_late_answer() {
    let mut gate = gate_with(POLICY, Some(Duration::from_secs(2)), false);
    let now = Instant::now();
    gate.on_host(call(json!(9), "read_file"), now, &mut Effects::default());
    assert_eq!(gate.next_deadline(), Some(now + Duration::from_secs(2)));
    let mut fx = Effects::default();
    gate.on_tick(now + Duration::from_secs(1), &mut fx);
    assert!(fx.is_empty());
    gate.on_tick(now + Duration::from_secs(2), &mut fx);
    assert_eq!(fx.to_host[0]["error"]["code"], code::REQUEST_TIMEOUT);
    assert_eq!(fx.to_server[0]["method"], "notifications/cancelled");
    assert_eq!(fx.to_server[0]["params"]["requestId"], 9);
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Outcome, None, Some(Outcome::Timeout))]
    );
    let late = json!({"jsonrpc":"2.0","id":9,"result":{"content":[]}});
    assert_eq!(
        gate.on_server(late, now, &mut Effects::default()),
        Verdict::Drop
    );
}

#[test]
fn server_death_answers_every_pending_request() {
    let mut gate = gate();
    let now = Instant::now();
    gate.on_host(call(json!(1), "read_file"), now, &mut Effects::default());
    gate.on_host(
        json!({"jsonrpc":"2.0","id":2,"method":"resources/list"}),
        now,
        &mut Effects::default(),
    );
    let mut fx = Effects::default();
    gate.on_server_gone("exit code 1", now, &mut fx, &|_| false);
    let mut ids: Vec<Value> = fx.to_host.iter().map(|m| m["id"].clone()).collect();
    ids.sort_by_key(|v| v.to_string());
    assert_eq!(ids, vec![json!(1), json!(2)]);
    // One shape in run and serve: a call gets a tool error, other requests a JSON-RPC error.
    let call = fx.to_host.iter().find(|m| m["id"] == 1).unwrap();
    assert_eq!(call["result"]["isError"], true);
    assert!(
        call["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("exit code 1")
    );
    let other = fx.to_host.iter().find(|m| m["id"] == 2).unwrap();
    assert_eq!(other["error"]["code"], code::SERVER_EXITED);
    assert_eq!(
        kinds(&fx),
        vec![(EventKind::Outcome, None, Some(Outcome::Error))]
    );
    assert_eq!(gate.in_flight(), 0);
}

/// A task-augmented call's requestor takes a `CreateTaskResult` or an error: airlock's refusal,
/// or the news that the server died, reaches it as a JSON-RPC error with the same text.
#[test]
fn a_task_augmented_call_fails_with_an_error_not_a_tool_result() {
    let mut gate = gate();
    let now = Instant::now();
    let task_call = |id: i64, tool: &str| {
        let mut message = call(json!(id), tool);
        message["params"]["task"] = json!({"ttl": 60000});
        message
    };
    let mut fx = Effects::default();
    assert_eq!(
        gate.on_host(task_call(1, "delete_file"), now, &mut fx),
        Verdict::Drop
    );
    let refused = &fx.to_host[0];
    assert_eq!(refused["error"]["code"], code::INVALID_PARAMS, "{refused}");
    let text = refused["error"]["message"].as_str().unwrap();
    assert!(text.contains("mcp:fs__delete_*"), "{text}");
    assert_eq!(
        kinds(&fx),
        vec![
            (EventKind::Decision, Some("deny".into()), None),
            (EventKind::Outcome, None, Some(Outcome::Denied))
        ]
    );

    let mut fx = Effects::default();
    assert!(matches!(
        gate.on_host(task_call(2, "read_file"), now, &mut fx),
        Verdict::Forward(_)
    ));
    let mut fx = Effects::default();
    gate.on_server_gone("exit code 1", now, &mut fx, &|_| false);
    let gone = &fx.to_host[0];
    assert_eq!(gone["error"]["code"], code::SERVER_EXITED, "{gone}");
    assert!(gone.get("result").is_none());
}

fn identified_call(id: Value, tool: &str, identity: &str) -> Value {
    let mut message = call(id, tool);
    message["params"]["_meta"] = json!({META_IDENTITY: identity});
    message
}

#[test]
fn a_trusted_identity_is_decided_on_recorded_and_never_forwarded() {
    let mut gate = gate_with(
        "version = 1\n[tools]\ndefault = \"allow\"\n[identities.bob]\ndeny = [\"mcp:fs__read_file\"]\n",
        None,
        false,
    );
    gate.trust_identity_meta();
    let now = Instant::now();
    let mut fx = Effects::default();
    let Verdict::Forward(sent) = gate.on_host(
        identified_call(json!(1), "read_file", "alice"),
        now,
        &mut fx,
    ) else {
        panic!("alice may read");
    };
    assert!(
        sent["params"].get("_meta").is_none(),
        "the server never sees the identity"
    );
    assert_eq!(fx.audit[0].identity.as_deref(), Some("alice"));
    let answer = json!({"jsonrpc":"2.0","id":1,"result":{"content":[]}});
    let mut fx = Effects::default();
    gate.on_server(answer, now, &mut fx);
    assert_eq!(fx.audit[0].event, EventKind::Outcome);
    assert_eq!(fx.audit[0].identity.as_deref(), Some("alice"));
    let mut fx = Effects::default();
    let verdict = gate.on_host(identified_call(json!(2), "read_file", "bob"), now, &mut fx);
    assert_eq!(verdict, Verdict::Drop);
    assert_eq!(
        kinds(&fx)[0],
        (EventKind::Decision, Some("deny".into()), None)
    );
    assert!(
        fx.audit
            .iter()
            .all(|e| e.identity.as_deref() == Some("bob"))
    );
    assert!(
        gate.callers.is_empty(),
        "forgotten once the outcome is recorded"
    );
}

#[test]
fn an_untrusted_identity_is_removed_and_ignored() {
    let mut gate = gate_with(
        "version = 1\n[tools]\ndefault = \"allow\"\n[identities.bob]\ndeny = [\"mcp:fs__read_file\"]\n[identities.admin]\nallow = [\"mcp:fs\"]\n",
        None,
        false,
    );
    let mut fx = Effects::default();
    let Verdict::Forward(sent) = gate.on_host(
        identified_call(json!(1), "read_file", "bob"),
        Instant::now(),
        &mut fx,
    ) else {
        panic!("a stdio host cannot make itself bob");
    };
    assert!(sent["params"].get("_meta").is_none());
    assert_eq!(fx.audit[0].identity, None);
}

#[test]
fn the_confirmation_request_names_its_call() {
    let mut gate = gate();
    let now = Instant::now();
    initialize(&mut gate, json!({"elicitation": {}}), now);
    let mut fx = Effects::default();
    gate.on_host(call(json!("c1"), "write_file"), now, &mut fx);
    assert_eq!(fx.to_host[0]["params"]["_meta"][META_REQUEST], "c1");
}

// ---------------------------------------------------------------- calls only to what was listed

fn unknown_tool_answer(fx: &Effects) -> bool {
    fx.to_host.last().is_some_and(|m| {
        m.pointer("/result/isError") == Some(&json!(true))
            && m.pointer("/result/content/0/text")
                .and_then(Value::as_str)
                .is_some_and(|t| t.starts_with("Unknown tool: "))
    })
}

fn answer_error_code(fx: &Effects) -> Option<i64> {
    fx.to_host
        .last()
        .and_then(|m| m.pointer("/error/code"))
        .and_then(Value::as_i64)
}

#[test]
fn a_name_the_server_did_not_list_byte_for_byte_is_refused_as_an_unknown_tool() {
    let mut gate = gate();
    let now = Instant::now();
    for (n, spelling) in [
        "READ_FILE",
        "read_file ",
        "Read_File",
        "read\u{200b}_file",
        "nope",
    ]
    .iter()
    .enumerate()
    {
        let mut fx = Effects::default();
        let verdict = gate.on_host(call(json!(n), spelling), now, &mut fx);
        assert_eq!(verdict, Verdict::Drop, "{spelling:?}");
        assert!(unknown_tool_answer(&fx), "{:?}", fx.to_host);
        assert_eq!(
            kinds(&fx),
            vec![
                (EventKind::Decision, Some("deny".into()), None),
                (EventKind::Outcome, None, Some(Outcome::Denied)),
            ]
        );
        assert_eq!(fx.audit[0].tool.as_deref(), Some(*spelling));
        assert_eq!(fx.audit[0].rule.as_deref(), Some(listed::UNLISTED_RULE));
    }
}

fn unlisted_gate(timeout: Option<Duration>) -> Gate {
    let config = GateConfig {
        server: "fs".into(),
        show_denied: false,
        tool_timeout: timeout,
        paths: PathContext::default(),
    };
    Gate::new(config, policy(POLICY), Arc::new(Redactor::new([]).unwrap()))
}

fn list(gate: &mut Gate, listing: Value) -> Effects {
    let mut fx = Effects::default();
    let mut listing = listing;
    gate.filter_listing(crate::pins::Kind::Tool, &mut listing, &mut fx);
    fx
}

#[test]
fn a_call_before_any_listing_waits_for_one_and_is_then_decided_against_it() {
    let mut gate = unlisted_gate(None);
    let now = Instant::now();
    let mut fx = Effects::default();
    assert_eq!(
        gate.on_host(call(json!(1), "read_file"), now, &mut fx),
        Verdict::Drop
    );
    assert_eq!(
        gate.on_host(call(json!(2), "READ_FILE"), now, &mut fx),
        Verdict::Drop
    );
    assert!(fx.list_tools && fx.audit.is_empty() && fx.to_host.is_empty());
    assert!(gate.tracks(&id_key(&json!(1))));
    assert_eq!(gate.in_flight(), 2);
    // A first page leaves them waiting; the last one hands them back, in order.
    let fx = list(
        &mut gate,
        json!({"tools": [{"name": "write_file"}], "nextCursor": "p2"}),
    );
    assert!(fx.retry.is_empty());
    let fx = list(&mut gate, json!({"tools": [{"name": "read_file"}]}));
    assert_eq!(fx.retry.len(), 2);
    assert_eq!(fx.retry[0]["id"], 1);
    assert!(!gate.tracks(&id_key(&json!(1))) && !gate.tracks(&id_key(&json!(2))));
    let mut again = Effects::default();
    let first = gate.on_host(fx.retry[0].clone(), now, &mut again);
    assert!(matches!(first, Verdict::Forward(_)));
    let second = gate.on_host(fx.retry[1].clone(), now, &mut again);
    assert_eq!(second, Verdict::Drop);
    assert!(unknown_tool_answer(&again), "{:?}", again.to_host);
}

#[test]
fn after_list_changed_a_new_name_waits_for_a_listing_and_a_listed_one_passes() {
    let mut gate = gate();
    let now = Instant::now();
    gate.tools_changed();
    let mut fx = Effects::default();
    assert!(matches!(
        gate.on_host(call(json!(1), "read_file"), now, &mut fx),
        Verdict::Forward(_)
    ));
    assert_eq!(
        gate.on_host(call(json!(2), "late"), now, &mut fx),
        Verdict::Drop
    );
    assert!(fx.list_tools);
    let fx = list(&mut gate, json!({"tools": [{"name": "late"}]}));
    let mut again = Effects::default();
    let late = gate.on_host(fx.retry[0].clone(), now, &mut again);
    assert!(matches!(late, Verdict::Forward(_)), "{again:?}");
}

#[test]
fn a_waiting_call_ends_with_one_decision_and_one_outcome_however_it_ends() {
    let now = Instant::now();
    // Cancelled by the host: no answer, not forwarded.
    let mut gate = unlisted_gate(Some(Duration::from_secs(5)));
    let mut fx = Effects::default();
    gate.on_host(call(json!(1), "read_file"), now, &mut fx);
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}});
    let mut fx = Effects::default();
    assert_eq!(gate.on_host(cancel, now, &mut fx), Verdict::Drop);
    assert!(fx.to_host.is_empty());
    assert!(!gate.tracks(&id_key(&json!(1))));
    assert_eq!(
        kinds(&fx),
        vec![
            (EventKind::Decision, Some("deny".into()), None),
            (EventKind::Outcome, None, Some(Outcome::Cancelled)),
        ]
    );
    // Timed out: the tool timeout answers it.
    gate.on_host(call(json!(2), "read_file"), now, &mut Effects::default());
    let late = now + Duration::from_secs(6);
    assert_eq!(gate.next_deadline(), Some(now + Duration::from_secs(5)));
    let mut fx = Effects::default();
    gate.on_tick(late, &mut fx);
    assert_eq!(answer_error_code(&fx), Some(code::REQUEST_TIMEOUT));
    assert_eq!(fx.audit[1].outcome, Some(Outcome::Timeout));
    assert!(!gate.tracks(&id_key(&json!(2))));
    // The listing failed, or the server is gone: answered with the reason.
    gate.on_host(call(json!(3), "read_file"), now, &mut Effects::default());
    let mut fx = Effects::default();
    gate.tools_listing_failed("tools/list failed: boom", now, &mut fx);
    assert_eq!(fx.to_host[0]["result"]["isError"], true, "{:?}", fx.to_host);
    assert_eq!(fx.audit[1].outcome, Some(Outcome::Error));
    assert!(!gate.tracks(&id_key(&json!(3))));
    gate.on_host(call(json!(4), "read_file"), now, &mut Effects::default());
    assert!(gate.tracks(&id_key(&json!(4))));
    let mut fx = Effects::default();
    gate.on_server_gone("server exited", now, &mut fx, &|_| false);
    assert_eq!(fx.to_host.len(), 1);
    assert_eq!(gate.in_flight(), 0);
    assert!(!gate.tracks(&id_key(&json!(4))));
}

const SCHEMA_LISTING: &str = r#"{"tools": [{"name": "read_file", "inputSchema": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
    "additionalProperties": false}}]}"#;

mod arguments;

/// `c` as a look-alike: 0 itself, 1 upper case, 2 its fullwidth form, 3 a Cyrillic or Greek
/// homoglyph where one exists (else upper case).
fn look_alike(c: char, how: u8) -> char {
    let homoglyph = match c {
        'a' => 'а',
        'e' => 'е',
        'o' => 'ο',
        'i' => 'і',
        'l' => 'ӏ',
        'd' => 'ԁ',
        'c' => 'с',
        'p' => 'р',
        _ => c.to_ascii_uppercase(),
    };
    match how % 4 {
        0 => c,
        1 => c.to_ascii_uppercase(),
        2 => char::from_u32(c as u32 + 0xFEE0).unwrap_or(c),
        _ => homoglyph,
    }
}

proptest::proptest! {
    /// Any case, whitespace, look-alike or invisible-character variant of a denied tool's name
    /// is refused, never forwarded: the exact name by the policy, every other spelling as a name
    /// the server did not list.
    #[test]
    fn no_look_alike_of_a_denied_name_is_forwarded(
        how in proptest::collection::vec(0u8..4, 11),
        hidden in proptest::collection::vec(proptest::option::of("[\u{200b}\u{2066}\u{00ad}\u{feff}\u{034f}]"), 11),
        before in "[ \t\u{a0}\u{200b}]{0,2}",
        after in "[ \t\u{a0}\u{200b}]{0,2}",
    ) {
        let mut gate = gate();
        let name: String = "delete_file"
            .chars()
            .zip(&how)
            .zip(&hidden)
            .flat_map(|((c, how), invisible)| {
                std::iter::once(look_alike(c, *how)).chain(invisible.iter().flat_map(|i| i.chars()))
            })
            .collect();
        let spelling = format!("{before}{name}{after}");
        let mut fx = Effects::default();
        let verdict = gate.on_host(call(json!(1), &spelling), Instant::now(), &mut fx);
        proptest::prop_assert_eq!(verdict, Verdict::Drop);
        proptest::prop_assert_eq!(fx.audit[0].decision.as_deref(), Some("deny"));
        proptest::prop_assert!(fx.to_server.is_empty());
        // Audited with the name as sent.
        proptest::prop_assert_eq!(fx.audit[0].tool.as_deref(), Some(spelling.as_str()));
    }
}

mod leaks;

mod question;
