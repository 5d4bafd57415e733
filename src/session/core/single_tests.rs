//! The core in `Single` topology (`airlock run`): the host's handshake, names and ids pass
//! through; the test plays the server by hand.

use std::path::PathBuf;

use serde_json::json;

use super::*;
use crate::mcp::message::code;
use crate::policy::{Layer, LayerSource, load};

const POLICY: &str = r#"
version = 1
[tools]
default = "allow"
deny = ["mcp:fake__delete_*"]
"#;

struct Single {
    core: Core,
    now: Instant,
    generation: u64,
    to_server: Vec<Value>,
    to_host: Vec<Value>,
    audit: Vec<Event>,
    stops: u32,
    raw_to_server: Vec<Vec<u8>>,
    raw_to_host: Vec<Vec<u8>>,
}

impl Single {
    fn new() -> Single {
        let source = LayerSource {
            layer: Layer::User,
            path: PathBuf::from("/p/policy.toml"),
            text: POLICY.into(),
        };
        let policy = Arc::new(load(&[source], &[]).unwrap());
        let spec = ServerSpec {
            name: "fake".into(),
            startup_timeout: Duration::from_secs(60),
            install_allowance: Duration::ZERO,
            tool_timeout: Some(Duration::from_secs(10)),
            idle_timeout: None,
            eager: true,
            refused: None,
            paths: Default::default(),
            shown_paths: None,
        };
        let now = Instant::now();
        let redactor = Arc::new(Redactor::new([]).unwrap());
        let core = Core::new(Topology::Single, vec![spec], policy, redactor, false, now);
        let mut single = Single {
            core,
            now,
            generation: 0,
            to_server: Vec::new(),
            to_host: Vec::new(),
            audit: Vec::new(),
            stops: 0,
            raw_to_server: Vec::new(),
            raw_to_host: Vec::new(),
        };
        single.core.start_eager(now);
        single.drive();
        // The host has listed the tools (a call of a name the server did not list is refused).
        single.host(json!({"jsonrpc":"2.0","id":"l","method":"tools/list"}));
        let tools = json!([{"name": "echo"}, {"name": "delete_all"}]);
        single.server(json!({"jsonrpc":"2.0","id":"l","result":{"tools": tools}}));
        single.to_server.clear();
        single.raw_to_server.clear();
        single.to_host.clear();
        single.raw_to_host.clear();
        single.audit.clear();
        single
    }

    fn drive(&mut self) {
        loop {
            let actions = self.core.take_actions();
            if actions.is_empty() {
                return;
            }
            for action in actions {
                match action {
                    Action::Start { server, generation } => {
                        self.generation = generation;
                        self.core.on_spawned(server, generation, self.now);
                    }
                    Action::ToServer { message, .. } => self.to_server.push(message),
                    Action::ToServerBytes { bytes, .. } => {
                        self.to_server.push(serde_json::from_slice(&bytes).unwrap());
                        self.raw_to_server.push(bytes);
                    }
                    Action::ToHostBytes(bytes) => {
                        self.to_host.push(serde_json::from_slice(&bytes).unwrap());
                        self.raw_to_host.push(bytes);
                    }
                    Action::ToHost(message) => self.to_host.push(message),
                    Action::Audit(event) => self.audit.push(*event),
                    Action::Stop { .. } => self.stops += 1,
                    Action::Dropped { .. } | Action::CloseInput { .. } => {}
                }
            }
        }
    }

    fn host(&mut self, message: Value) {
        self.core.on_host(message, self.now);
        self.drive();
    }

    fn server(&mut self, message: Value) {
        self.core.on_server(0, self.generation, message, self.now);
        self.drive();
    }

    fn decisions(&self) -> usize {
        self.audit
            .iter()
            .filter(|e| e.event == crate::audit::EventKind::Decision)
            .count()
    }
}

#[test]
fn the_handshake_ids_and_unknown_methods_pass_through_unchanged() {
    let mut s = Single::new();
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"h","version":"1"}}});
    s.host(init.clone());
    assert_eq!(
        s.to_server,
        vec![init],
        "the host's own initialize, verbatim"
    );
    s.server(json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}}));
    assert_eq!(s.to_host[0]["result"]["serverInfo"]["name"], "fake");
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    s.host(note.clone());
    let custom = json!({"jsonrpc":"2.0","id":"c","method":"vendor/custom","x-top":true,"params":{"deep":[1]}});
    s.host(custom.clone());
    assert_eq!(&s.to_server[1..], &[note, custom]);
    // The negotiated version is the server's answer: batches are now allowed.
    s.host(json!([{"jsonrpc":"2.0","id":7,"method":"ping"}]));
    assert_eq!(s.to_server.last().unwrap()["id"], 7);
}

#[test]
fn every_tools_list_page_is_filtered_and_calls_keep_their_names() {
    let mut s = Single::new();
    s.host(json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"2"}}));
    s.server(json!({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","x":1},{"name":"delete_all"}],"nextCursor":"3"}}));
    let page = &s.to_host[0]["result"];
    assert_eq!(page["tools"], json!([{"name":"echo","x":1}]));
    assert_eq!(page["nextCursor"], "3");
    s.host(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}));
    assert_eq!(s.to_server.last().unwrap()["params"]["name"], "echo");
    s.host(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_all"}}));
    assert_eq!(s.to_host.last().unwrap()["result"]["isError"], true);
    assert_eq!(s.decisions(), 2);
}

#[test]
fn a_server_request_whose_id_looks_like_airlocks_own_is_renumbered_and_restored() {
    let mut s = Single::new();
    s.server(json!({"jsonrpc":"2.0","id":3,"method":"roots/list"}));
    assert_eq!(s.to_host[0]["id"], 3, "ids pass unchanged when they can");
    s.server(json!({"jsonrpc":"2.0","id":"airlock-ask-fake-1","method":"sampling/createMessage","params":{}}));
    let renumbered = s.to_host[1]["id"].clone();
    assert_ne!(renumbered, "airlock-ask-fake-1");
    s.host(json!({"jsonrpc":"2.0","id":renumbered,"result":{"ok":true}}));
    assert_eq!(s.to_server.last().unwrap()["id"], "airlock-ask-fake-1");
    s.host(json!({"jsonrpc":"2.0","id":3,"result":{"roots":[]}}));
    assert_eq!(s.to_server.last().unwrap()["id"], 3);
}

#[test]
fn host_eof_closes_the_server_input_only_after_what_the_host_sent_first() {
    let source = LayerSource {
        layer: Layer::User,
        path: PathBuf::from("/p/policy.toml"),
        text: POLICY.into(),
    };
    let policy = Arc::new(load(&[source], &[]).unwrap());
    let spec = ServerSpec {
        name: "fake".into(),
        startup_timeout: Duration::from_secs(60),
        install_allowance: Duration::ZERO,
        tool_timeout: None,
        idle_timeout: None,
        eager: true,
        refused: None,
        paths: Default::default(),
        shown_paths: None,
    };
    let now = Instant::now();
    let redactor = Arc::new(Redactor::new([]).unwrap());
    let mut core = Core::new(Topology::Single, vec![spec], policy, redactor, false, now);
    core.start_eager(now);
    let Some(Action::Start { generation, .. }) = core.take_actions().pop() else {
        panic!("the server starts at once")
    };
    // The host writes and leaves while the server is still starting.
    core.on_host(json!({"jsonrpc":"2.0","id":1,"method":"ping"}), now);
    core.host_closed(now);
    assert!(
        core.take_actions().is_empty(),
        "nothing to send yet, nothing stopped"
    );
    core.on_spawned(0, generation, now);
    let actions = core.take_actions();
    assert!(matches!(&actions[0], Action::ToServer { message, .. } if message["id"] == 1));
    assert!(
        matches!(&actions[1], Action::CloseInput { .. }),
        "{actions:?}"
    );
    assert!(!core.host_finished(now), "the ping is still to be answered");
    core.on_server(
        0,
        generation,
        json!({"jsonrpc":"2.0","id":1,"result":{}}),
        now,
    );
    assert!(
        core.host_finished(now),
        "nothing the host asked is in flight"
    );
}

#[test]
fn stateless_requests_pass_without_a_handshake_and_crash_answers_are_unified() {
    let mut s = Single::new();
    let meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28"});
    s.host(json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":meta}}));
    s.host(
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","_meta":meta}}),
    );
    assert_eq!(s.to_server.len(), 2, "no handshake of airlock's own");
    s.core.on_server_closed(0, s.generation, s.now);
    s.drive();
    let call = s.to_host.iter().find(|m| m["id"] == 2).unwrap();
    assert_eq!(call["result"]["isError"], true);
    let other = s.to_host.iter().find(|m| m["id"] == 1).unwrap();
    assert_eq!(other["error"]["code"], code::SERVER_EXITED);
    assert_eq!(s.stops, 1, "the kill sequence makes sure");
}

#[test]
fn unchanged_messages_go_on_as_the_bytes_that_came() {
    let mut s = Single::new();
    let call = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.50}}}"#;
    s.core.on_host_line(call.to_vec(), s.now).unwrap();
    s.drive();
    assert_eq!(s.raw_to_server, vec![call.to_vec()], "byte for byte");
    let answer = br#"{"id":5,"jsonrpc":"2.0","result":{"content":[],"x":1.50}}"#;
    s.core
        .on_server_line(0, s.generation, &mut answer.to_vec(), s.now)
        .unwrap();
    s.drive();
    assert_eq!(s.raw_to_host, vec![answer.to_vec()], "byte for byte");
    assert_eq!(s.decisions(), 1);
    let outcomes = s
        .audit
        .iter()
        .filter(|e| e.event == crate::audit::EventKind::Outcome)
        .count();
    assert_eq!(outcomes, 1);
    // A second answer to the same id is junk, never forwarded.
    s.core
        .on_server_line(0, s.generation, &mut answer.to_vec(), s.now)
        .unwrap();
    let actions = s.core.take_actions();
    assert!(
        matches!(actions.as_slice(), [Action::Dropped { .. }]),
        "{actions:?}"
    );
}

#[test]
fn a_cancelled_batch_member_does_not_hold_back_the_others_or_the_fast_path() {
    let mut s = Single::new();
    s.host(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}));
    s.server(json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}}));
    s.to_host.clear();
    let call = |id: i64| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{}}});
    s.host(json!([call(1), call(2)]));
    s.server(json!({"jsonrpc":"2.0","id":2,"result":{"content":[]}}));
    assert!(s.to_host.is_empty(), "the batch waits for its other member");
    s.host(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}));
    assert_eq!(s.to_host.len(), 1, "{:?}", s.to_host);
    let answers = s.to_host[0].as_array().expect("one array");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["id"], 2);
    // The answer to a later request takes the fast path again (as the bytes that came).
    s.host(call(3));
    let answer = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#;
    s.core
        .on_server_line(0, s.generation, &mut answer.to_vec(), s.now)
        .unwrap();
    s.drive();
    assert_eq!(s.raw_to_host, vec![answer.to_vec()]);
}

/// A refusal of airlock's own listing for the gate (`-32022` without `data.requested`) answers
/// the calls that named the version the listing's envelope named when it was sent, not the
/// latest request's (a review found the refusal handed to the wrong call).
#[test]
fn a_refused_listing_answers_the_calls_of_the_version_it_was_sent_in() {
    let mut s = Single::new();
    let envelope = |version: &str| {
        json!({"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {}})
    };
    let call = |id: i64, version: &str| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"fresh","arguments":{},"_meta":envelope(version)}})
    };
    // A call after the server's list changed waits for airlock's own listing.
    s.server(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
    s.host(call(1, "2026-07-28"));
    s.host(call(2, "2099-01-01"));
    let listing = s
        .to_server
        .iter()
        .find(|m| m["method"] == "tools/list")
        .cloned()
        .unwrap_or_else(|| panic!("airlock's own listing: {:?} {:?}", s.to_server, s.to_host));
    assert_eq!(
        listing["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    s.server(json!({"jsonrpc":"2.0","id":listing["id"],
        "error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["x"]}}}));
    let answer = |id: i64| {
        s.to_host
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no answer to {id}: {:?}", s.to_host))
    };
    assert_eq!(
        answer(1)["error"]["code"],
        code::UNSUPPORTED_PROTOCOL_VERSION
    );
    assert!(answer(2).get("error").is_none() || answer(2)["error"]["code"] != -32022);
}
