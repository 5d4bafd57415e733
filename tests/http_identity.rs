//! End to end: every audit record of an identified caller's request names the caller, also the
//! ones that are not the call's decision or outcome: the record of a policy `ask` answered by the
//! caller (elicitation), and pin refusals (a quarantined server's tool call, prompt and resource
//! read). The real binary on loopback, a bearer token per caller.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod http_support;

use std::time::Duration;

use http_support::*;
use serde_json::{Value, json};

fn tokens_config(server: &str) -> String {
    format!("{server}\n[http.auth]\ntokens = true\n")
}

/// Opens a session that declares `capabilities`, as `token`'s owner; returns the headers to use.
fn open_session(url: &str, bearer: &str, capabilities: Value) -> String {
    let mut init = initialize("2025-06-18");
    init["params"]["capabilities"] = capabilities;
    let reply = post(url, &[("authorization", bearer)], &init);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let id = reply.header("mcp-session-id").expect("a session id");
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    let headers = [("authorization", bearer), ("mcp-session-id", id.as_str())];
    assert_eq!(post(url, &headers, &note).status, 202);
    id
}

/// The records of `kind` for `request_id`, waiting for the audit write that follows the answer.
fn records(world: &World, kind: &str, request_id: &Value) -> Vec<Value> {
    let find = || {
        world
            .audit()
            .into_iter()
            .filter(|e| e["event"] == kind && &e["request_id"] == request_id)
            .collect::<Vec<_>>()
    };
    for _ in 0..50 {
        let found = find();
        if !found.is_empty() {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    find()
}

/// The HTTP face rewrites request ids (`airlock-h<session>-<n>`); the audit's is that one.
fn request_id_of(world: &World, kind: &str, tool: &str) -> Value {
    for _ in 0..50 {
        if let Some(event) = world
            .audit()
            .into_iter()
            .find(|e| e["event"] == kind && e["tool"] == tool)
        {
            return event["request_id"].clone();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no {kind} record for {tool}: {:#?}", world.audit());
}

#[test]
fn the_record_of_an_asked_call_names_the_caller_who_answered() {
    let world = World::new();
    world.policy("[tools]\ndefault = \"allow\"\nask = [\"mcp:fixture__echo\"]\n");
    let token = world.token("dave");
    let gateway = world.listen(&tokens_config(&fixture_server()), &[]);
    let bearer = format!("Bearer {token}");
    let session = open_session(&gateway.url, &bearer, json!({"elicitation": {}}));
    let headers = [
        ("authorization", bearer.as_str()),
        ("mcp-session-id", session.as_str()),
    ];
    let accept = json!({"action": "accept", "content": {"approve": true}});
    let call = call(7, "fixture__echo", json!({"text": "asked"}));
    let (answer, asked) = call_answering_questions(&gateway.url, &headers, &call, &accept);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(text_of(&answer), "fixture: asked", "{answer}");
    let id = request_id_of(&world, "elicitation", "echo");
    let elicitation = records(&world, "elicitation", &id);
    assert_eq!(elicitation.len(), 1, "{elicitation:#?}");
    assert_eq!(elicitation[0]["decision"], "allow");
    assert_eq!(elicitation[0]["identity"], "dave", "{elicitation:#?}");
    for kind in ["decision", "outcome"] {
        let found = records(&world, kind, &id);
        assert_eq!(found.len(), 1, "{kind}: {found:#?}");
        assert_eq!(found[0]["identity"], "dave", "{kind}: {found:#?}");
    }
}

#[test]
fn pin_refusals_name_the_caller() {
    let world = World::new();
    std::fs::create_dir_all(world.path("defs")).unwrap();
    let definitions = world.path("defs/definitions.json");
    std::fs::write(
        &definitions,
        json!({
            "tools": [{"name": "echo", "description": "Echo the text back.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}],
            "prompts": [{"name": "summary", "description": "Summarise {topic}.", "arguments": [{"name": "topic"}]}],
            "resourceTemplates": [{"name": "notes", "uriTemplate": "notes://{id}", "mimeType": "text/plain"}],
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        world.path("org/policy.toml"),
        "version = 1\n[pins]\nnew_servers = \"quarantine\"\n",
    )
    .unwrap();
    world.policy(&format!(
        "[tools]\ndefault = \"allow\"\n[sandbox]\nread = [{:?}]\n",
        world.path("defs").display().to_string()
    ));
    let server = format!(
        "[servers.fixture]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}, {:?}]\nstart = \"eager\"\n",
        root()
            .join("tests/fixtures/mcp/pinned_server.py")
            .display()
            .to_string(),
        definitions.display().to_string()
    );
    let token = world.token("erin");
    let gateway = world.listen(&tokens_config(&server), &[]);
    let bearer = format!("Bearer {token}");
    let session = open_session(&gateway.url, &bearer, json!({}));
    let headers = [
        ("authorization", bearer.as_str()),
        ("mcp-session-id", session.as_str()),
    ];
    let refused = post(
        &gateway.url,
        &headers,
        &call(1, "fixture__echo", json!({"text": "x"})),
    );
    assert!(
        text_of(&refused.json()).contains("never been approved"),
        "{}",
        refused.body
    );
    let prompt = json!({"jsonrpc":"2.0","id":2,"method":"prompts/get",
        "params":{"name":"fixture__summary","arguments":{"topic":"t"}}});
    let refused_prompt = post(&gateway.url, &headers, &prompt).json();
    assert!(
        text_of(&refused_prompt).contains("never been approved"),
        "{refused_prompt}"
    );
    // A read is judged by the templates the server listed, so they are listed first.
    let templates = json!({"jsonrpc":"2.0","id":3,"method":"resources/templates/list"});
    let listed = post(&gateway.url, &headers, &templates);
    assert_eq!(
        listed.json()["result"]["resourceTemplates"],
        json!([]),
        "{}",
        listed.body
    );
    let read =
        json!({"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"notes://1"}});
    let refused_read = post(&gateway.url, &headers, &read).json();
    assert!(
        text_of(&refused_read).contains("never been approved"),
        "{refused_read}"
    );

    let call_id = request_id_of(&world, "decision", "echo");
    let decision = records(&world, "decision", &call_id);
    assert_eq!(decision[0]["rule"], "pins", "{decision:#?}");
    assert_eq!(decision[0]["identity"], "erin", "{decision:#?}");
    let outcome = records(&world, "outcome", &call_id);
    assert_eq!(outcome[0]["identity"], "erin", "{outcome:#?}");
    // The listing's own pin records (quarantined definitions) are nobody's request; the
    // refusals are erin's.
    for name in ["summary", "notes"] {
        let refusal = (0..50)
            .find_map(|_| {
                let found = world.audit().into_iter().find(|e| {
                    e["event"] == "pin" && e["tool"] == name && e["detail"]["change"] == "refused"
                });
                if found.is_none() {
                    std::thread::sleep(Duration::from_millis(100));
                }
                found
            })
            .unwrap_or_else(|| panic!("no refusal of {name}: {:#?}", world.audit()));
        assert_eq!(refusal["identity"], "erin", "{refusal:#?}");
    }
}
