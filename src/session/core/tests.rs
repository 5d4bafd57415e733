//! The core (gateway topology) against scripted servers: a harness plays each server's side of the protocol
//! (handshake and tool lists automatically, everything else by the test) with a fake clock.

use std::collections::VecDeque;
use std::path::PathBuf;

use serde_json::json;

use super::*;
use crate::gateway::lifecycle;
use crate::mcp::message::code;
use crate::policy::{Layer, LayerSource, load};

const POLICY: &str = r#"
version = 1
[tools]
default = "allow"
deny = ["mcp:beta__delete"]
"#;

fn policy() -> Arc<Policy> {
    let source = LayerSource {
        layer: Layer::User,
        path: PathBuf::from("/p/policy.toml"),
        text: POLICY.to_string(),
    };
    Arc::new(load(&[source], &[]).unwrap())
}

fn policy_from(text: &str) -> Arc<Policy> {
    let source = LayerSource {
        layer: Layer::User,
        path: PathBuf::from("/p/policy.toml"),
        text: text.to_string(),
    };
    Arc::new(load(&[source], &[]).unwrap())
}

fn spec(name: &str) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        startup_timeout: Duration::from_secs(5),
        install_allowance: Duration::ZERO,
        tool_timeout: Some(Duration::from_secs(10)),
        idle_timeout: None,
        eager: false,
        refused: None,
        paths: Default::default(),
        shown_paths: None,
    }
}

struct Harness {
    router: Core,
    now: Instant,
    /// Tools each server lists.
    tools: Vec<Vec<&'static str>>,
    /// Requests and notifications each server received (beyond the handshake).
    received: Vec<VecDeque<Value>>,
    /// The last `initialize` each server received.
    initializes: Vec<Value>,
    to_host: Vec<Value>,
    audit: Vec<Event>,
    /// Servers whose spawn fails.
    broken: Vec<bool>,
    starts: Vec<u32>,
    stops: Vec<u32>,
    generation: Vec<u64>,
    /// What each server's `initialize` answer declares.
    capabilities: Vec<Value>,
}

impl Harness {
    fn new(specs: Vec<ServerSpec>, tools: Vec<Vec<&'static str>>) -> Harness {
        let count = specs.len();
        let now = Instant::now();
        let redactor = Arc::new(Redactor::new([]).unwrap());
        Harness {
            router: Core::new(
                Topology::Gateway {
                    separator: "__".into(),
                },
                specs,
                policy(),
                redactor,
                false,
                now,
            ),
            now,
            tools,
            received: vec![VecDeque::new(); count],
            initializes: vec![Value::Null; count],
            to_host: Vec::new(),
            audit: Vec::new(),
            broken: vec![false; count],
            starts: vec![0; count],
            stops: vec![0; count],
            generation: vec![0; count],
            capabilities: vec![json!({"tools":{"listChanged":true}}); count],
        }
    }

    fn drive(&mut self) {
        loop {
            let actions = self.router.take_actions();
            if actions.is_empty() {
                return;
            }
            for action in actions {
                match action {
                    Action::ToHost(message) => self.to_host.push(message),
                    Action::Audit(event) => self.audit.push(*event),
                    Action::Start { server, generation } => {
                        self.starts[server] += 1;
                        self.generation[server] = generation;
                        if self.broken[server] {
                            self.router.on_spawn_failed(
                                server,
                                generation,
                                "no such file".into(),
                                false,
                                self.now,
                            );
                        } else {
                            self.router.on_spawned(server, generation, self.now);
                        }
                    }
                    Action::Stop {
                        server, generation, ..
                    } => {
                        self.stops[server] += 1;
                        self.router
                            .on_exited(server, generation, "exit code 0", self.now);
                    }
                    Action::Dropped { .. } | Action::CloseInput { .. } => {}
                    Action::ToHostBytes(bytes) => {
                        self.to_host.push(serde_json::from_slice(&bytes).unwrap())
                    }
                    Action::ToServerBytes {
                        server,
                        generation,
                        bytes,
                        ..
                    } => {
                        let message = serde_json::from_slice(&bytes).unwrap();
                        self.server_receives(server, generation, message);
                    }
                    Action::ToServer {
                        server,
                        generation,
                        message,
                    } => {
                        assert_eq!(generation, self.generation[server]);
                        self.server_receives(server, generation, message);
                    }
                }
            }
        }
    }

    fn server_receives(&mut self, server: usize, generation: u64, message: Value) {
        let id = message.get("id").cloned();
        match message.get("method").and_then(Value::as_str) {
            Some("initialize") => {
                // A reload adds server slots.
                if self.initializes.len() <= server {
                    self.initializes.resize(server + 1, Value::Null);
                }
                self.initializes[server] = message.clone();
                let capabilities = self
                    .capabilities
                    .get(server)
                    .cloned()
                    .unwrap_or_else(|| json!({"tools":{"listChanged":true}}));
                let answer = json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":"2025-06-18","capabilities":capabilities,"serverInfo":{"name":"s","version":"1"}}});
                self.router.on_server(server, generation, answer, self.now);
            }
            Some("tools/list") => {
                let tools: Vec<Value> = self.tools[server]
                    .iter()
                    .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
                    .collect();
                let answer = json!({"jsonrpc":"2.0","id":id,"result":{"tools":tools}});
                self.router.on_server(server, generation, answer, self.now);
            }
            Some("notifications/initialized") => {}
            _ => self.received[server].push_back(message),
        }
    }

    fn host(&mut self, message: Value) {
        self.router.on_host(message, self.now);
        self.drive();
    }

    fn answer(&mut self, server: usize, message: Value) {
        let generation = self.generation[server];
        self.router.on_server(server, generation, message, self.now);
        self.drive();
    }

    fn tick(&mut self, by: Duration) {
        self.now += by;
        self.router.on_tick(self.now);
        self.drive();
    }

    fn initialize(&mut self, capabilities: Value) {
        self.host(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":capabilities,"clientInfo":{"name":"host","version":"1"}}}));
        self.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        let answer = self.take_host(json!(0));
        assert_eq!(answer["result"]["serverInfo"]["name"], "airlock");
    }

    fn take_host(&mut self, id: Value) -> Value {
        let position = self
            .to_host
            .iter()
            .position(|m| m.get("id") == Some(&id) && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no answer {id} in {:?}", self.to_host));
        self.to_host.remove(position)
    }

    /// Reloads `two()`'s servers with alpha's launch changed: alpha (slot 0) retires and its
    /// replacement, slot 2, starts at once.
    fn reload_replacing_alpha(&mut self) -> ReloadSummary {
        let reloaded = ["alpha", "beta"]
            .map(|name| Reloaded {
                spec: spec(name),
                launch_changed: name == "alpha",
            })
            .to_vec();
        let redactor = Arc::new(Redactor::new([]).unwrap());
        let summary = self.router.reload(reloaded, policy(), redactor, self.now);
        self.tools.push(vec!["read", "write"]);
        self.received.push(VecDeque::new());
        self.broken.push(false);
        self.starts.push(0);
        self.stops.push(0);
        self.generation.push(0);
        self.drive();
        summary
    }

    fn tool_names(&mut self) -> Vec<String> {
        self.host(json!({"jsonrpc":"2.0","id":"list","method":"tools/list"}));
        let list = self.take_host(json!("list"));
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }
}

fn call(id: Value, name: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":{"x":1}}})
}

fn two() -> Harness {
    Harness::new(
        vec![spec("alpha"), spec("beta")],
        vec![vec!["read", "write"], vec!["read", "delete"]],
    )
}

#[test]
fn aggregates_namespaced_tools_and_routes_calls_with_their_own_ids() {
    let mut h = two();
    h.initialize(json!({}));
    assert_eq!(h.starts, vec![0, 0], "lazy servers wait for a request");
    let names = h.tool_names();
    assert_eq!(names, vec!["alpha__read", "alpha__write", "beta__read"]);
    assert_eq!(h.starts, vec![1, 1]);

    h.host(call(json!("c1"), "beta__read"));
    h.host(call(json!(7), "alpha__read"));
    let at_beta = h.received[1].pop_front().unwrap();
    let at_alpha = h.received[0].pop_front().unwrap();
    assert_eq!(at_beta["params"]["name"], "read");
    assert_eq!(at_alpha["params"]["name"], "read");
    assert!(at_beta["id"].is_u64() && at_alpha["id"].is_u64());
    // Answers come back under the host's ids, in whatever order the servers answer.
    h.answer(0, json!({"jsonrpc":"2.0","id":at_alpha["id"],"result":{"content":[{"type":"text","text":"from alpha"}]}}));
    h.answer(1, json!({"jsonrpc":"2.0","id":at_beta["id"],"result":{"content":[{"type":"text","text":"from beta"}]}}));
    assert_eq!(
        h.take_host(json!(7))["result"]["content"][0]["text"],
        "from alpha"
    );
    assert_eq!(
        h.take_host(json!("c1"))["result"]["content"][0]["text"],
        "from beta"
    );
    let decisions = h
        .audit
        .iter()
        .filter(|e| e.event == crate::audit::EventKind::Decision)
        .count();
    assert_eq!(decisions, 2);

    h.host(call(json!(8), "gamma__read"));
    let unknown = h.take_host(json!(8));
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
}

#[test]
fn a_denied_tool_is_neither_listed_nor_forwarded() {
    let mut h = two();
    h.initialize(json!({}));
    assert!(!h.tool_names().contains(&"beta__delete".to_string()));
    h.host(call(json!(1), "beta__delete"));
    let answer = h.take_host(json!(1));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("denied")
    );
    assert!(h.received[1].is_empty(), "nothing reached the server");
}

#[test]
fn a_denied_call_does_not_start_a_stopped_server() {
    let mut h = two();
    h.initialize(json!({}));
    h.host(call(json!(1), "beta__delete"));
    assert_eq!(h.take_host(json!(1))["result"]["isError"], true);
    assert_eq!(h.starts, vec![0, 0]);
}

#[test]
fn a_server_that_fails_to_start_never_blocks_the_others() {
    let mut h = two();
    h.broken[1] = true;
    h.initialize(json!({}));
    assert_eq!(h.tool_names(), vec!["alpha__read", "alpha__write"]);
    assert_eq!(h.router.phase(1), Some(Phase::Backoff));
    h.host(call(json!(1), "beta__read"));
    // The call waited out the backoff: the restart failed again, and the call says why.
    h.tick(Duration::from_secs(1));
    let answer = h.take_host(json!(1));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no such file"),
        "{answer}"
    );
    h.host(call(json!(2), "alpha__read"));
    assert!(h.received[0].pop_front().is_some());
    // Bounded: after MAX_FAILURES it is given up and answers at once.
    for n in 0..10 {
        h.host(call(json!(100 + n), "beta__read"));
        h.tick(Duration::from_secs(40));
    }
    assert_eq!(h.router.phase(1), Some(Phase::Failed));
    assert!(h.starts[1] <= lifecycle::MAX_FAILURES);
    let status = h.router.status();
    assert!(
        status[1]
            .last_error
            .as_deref()
            .unwrap()
            .contains("no such file")
    );
}

#[test]
fn a_failed_start_is_in_the_hosts_log_unless_the_host_asked_for_higher_levels_only() {
    let airlock_logs = |h: &Harness| {
        h.to_host
            .iter()
            .filter(|m| {
                m["method"] == "notifications/message" && m["params"]["logger"] == "airlock"
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    let mut h = two();
    h.broken[1] = true;
    h.initialize(json!({}));
    h.tool_names();
    let logs = airlock_logs(&h);
    assert!(!logs.is_empty(), "{:?}", h.to_host);
    assert_eq!(logs[0]["params"]["level"], "error");
    assert!(
        logs[0]["params"]["data"]
            .as_str()
            .unwrap()
            .starts_with("server `beta` failed"),
        "{logs:?}"
    );
    // airlock's own words: the reason (which may quote the server) stays on stderr.
    assert!(
        !logs[0]["params"]["data"]
            .as_str()
            .unwrap()
            .contains("no such file"),
        "{logs:?}"
    );
    let told = logs.len();
    // Only critical and above from now on: the next failed start is not sent.
    h.host(json!({"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"critical"}}));
    h.take_host(json!("lvl"));
    h.host(call(json!(1), "beta__read"));
    h.tick(Duration::from_secs(1));
    h.take_host(json!(1));
    assert!(h.starts[1] >= 2, "{:?}", h.starts);
    assert_eq!(airlock_logs(&h).len(), told, "{:?}", h.to_host);
}

#[test]
fn refused_servers_are_failed_from_the_start_with_their_reason() {
    let mut b = spec("beta");
    b.refused = Some("not on the allowlist".into());
    let mut h = Harness::new(vec![spec("alpha"), b], vec![vec!["read"], vec!["read"]]);
    h.initialize(json!({}));
    assert_eq!(h.tool_names(), vec!["alpha__read"]);
    h.host(call(json!(1), "beta__read"));
    let answer = h.take_host(json!(1));
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not on the allowlist")
    );
    assert_eq!(h.starts, vec![1, 0]);
}

#[test]
fn a_crash_mid_call_answers_the_call_and_the_next_call_restarts_transparently() {
    let mut h = two();
    h.initialize(json!({}));
    h.tool_names();
    h.host(call(json!(1), "alpha__read"));
    h.received[0].clear();
    let generation = h.generation[0];
    h.router.on_server_closed(0, generation, h.now);
    h.drive();
    let answer = h.take_host(json!(1));
    assert_eq!(answer["result"]["isError"], true);
    assert_eq!(h.stops[0], 1, "the kill sequence makes sure it is gone");
    h.host(call(json!(2), "alpha__read"));
    assert!(h.received[0].is_empty(), "queued during the backoff");
    h.tick(lifecycle::backoff(1));
    let sent = h.received[0].pop_front().expect("sent after the restart");
    assert_eq!(h.starts[0], 2);
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":sent["id"],"result":{"content":[]}}),
    );
    assert!(h.take_host(json!(2))["result"].is_object());
    assert_eq!(h.router.status()[0].restarts, 1);
}

#[test]
fn idle_servers_stop_and_the_next_call_restarts_them() {
    let mut a = spec("alpha");
    a.idle_timeout = Some(Duration::from_secs(60));
    let mut h = Harness::new(vec![a], vec![vec!["read"]]);
    h.initialize(json!({}));
    h.tool_names();
    h.tick(Duration::from_secs(30));
    assert_eq!(h.router.phase(0), Some(Phase::Ready));
    h.tick(Duration::from_secs(31));
    assert_eq!(h.router.phase(0), Some(Phase::Stopped));
    assert_eq!(h.stops, vec![1]);
    // Listing does not wake it: the tools are remembered.
    assert_eq!(h.tool_names(), vec!["alpha__read"]);
    assert_eq!(h.starts, vec![1]);
    h.host(call(json!(5), "alpha__read"));
    assert_eq!(h.starts, vec![2]);
    let sent = h.received[0].pop_front().unwrap();
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":sent["id"],"result":{"content":[]}}),
    );
    assert!(h.take_host(json!(5))["result"].is_object());
}

#[test]
fn tool_timeout_answers_the_host_and_cancels_downstream() {
    let mut a = spec("alpha");
    a.tool_timeout = Some(Duration::from_secs(2));
    let mut h = Harness::new(vec![a], vec![vec!["hang"]]);
    h.initialize(json!({}));
    h.host(call(json!(9), "alpha__hang"));
    let sent = h.received[0].pop_front().unwrap();
    h.tick(Duration::from_secs(3));
    let answer = h.take_host(json!(9));
    assert_eq!(answer["error"]["code"], code::REQUEST_TIMEOUT, "{answer}");
    let cancel = h.received[0].pop_front().unwrap();
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], sent["id"]);
    // A late answer does not reach the host.
    h.answer(0, json!({"jsonrpc":"2.0","id":sent["id"],"result":{}}));
    assert!(h.to_host.is_empty(), "{:?}", h.to_host);
}

#[test]
fn progress_tokens_and_cancellations_cross_the_hop() {
    let mut h = two();
    h.initialize(json!({}));
    let mut request = call(json!(3), "beta__read");
    request["params"]["_meta"] = json!({"progressToken": "tok"});
    h.host(request);
    let sent = h.received[1].pop_front().unwrap();
    let token = sent["params"]["_meta"]["progressToken"].clone();
    assert_ne!(token, json!("tok"));
    h.answer(1, json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":1}}));
    let progress = h.to_host.pop().unwrap();
    assert_eq!(progress["params"]["progressToken"], "tok");
    h.host(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}));
    let cancel = h.received[1].pop_front().unwrap();
    assert_eq!(cancel["params"]["requestId"], sent["id"]);
}

#[test]
fn server_requests_name_their_server_or_are_declined() {
    let mut h = two();
    h.initialize(json!({"roots": {}}));
    h.tool_names();
    // A server claiming airlock's own `airlock/request` (which picks the HTTP client a
    // question goes to) loses it.
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":"r1","method":"roots/list","params":{"_meta":{"airlock/request":"airlock-h2-1"}}}),
    );
    let forwarded = h.to_host.pop().unwrap();
    assert_eq!(forwarded["params"]["_meta"][META_SERVER], "alpha");
    assert!(
        forwarded["params"]["_meta"]
            .get("airlock/request")
            .is_none(),
        "{forwarded}"
    );
    let host_id = forwarded["id"].clone();
    h.host(json!({"jsonrpc":"2.0","id":host_id,"result":{"roots":[]}}));
    let back = h.received[0].pop_front().unwrap();
    assert_eq!(back["id"], "r1");
    // No sampling or elicitation declared by the host: declined, nothing reaches the host.
    h.answer(
        1,
        json!({"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{}}),
    );
    let declined = h.received[1].pop_front().unwrap();
    assert_eq!(declined["error"]["code"], code::METHOD_NOT_FOUND);
    h.answer(
        1,
        json!({"jsonrpc":"2.0","id":6,"method":"elicitation/create","params":{"message":"?"}}),
    );
    let declined = h.received[1].pop_front().unwrap();
    assert_eq!(declined["result"]["action"], "decline");
    assert!(h.to_host.is_empty());
}

#[test]
fn list_changed_relists_regates_and_notifies_the_host() {
    let mut h = two();
    h.initialize(json!({}));
    h.tool_names();
    h.tools[0] = vec!["read", "write", "fresh"];
    h.answer(
        0,
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
    );
    let note = h.to_host.pop().unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
    assert!(h.tool_names().contains(&"alpha__fresh".to_string()));
    // beta's list changes to include a denied tool only: still filtered.
    h.tools[1] = vec!["read", "delete", "delete"];
    h.answer(
        1,
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
    );
    assert!(!h.tool_names().contains(&"beta__delete".to_string()));
}

#[test]
fn eager_servers_shake_hands_with_the_host_capabilities_and_delay_initialize() {
    let mut a = spec("alpha");
    a.eager = true;
    let mut h = Harness::new(vec![a, spec("beta")], vec![vec!["read"], vec!["x"]]);
    h.router.start_eager(h.now);
    h.drive();
    assert_eq!(h.starts, vec![1, 0]);
    assert_eq!(
        h.router.phase(0),
        Some(Phase::Starting),
        "waits for the host's capabilities"
    );
    h.initialize(json!({"roots": {}}));
    assert_eq!(h.router.phase(0), Some(Phase::Ready));
}

#[test]
fn long_lists_page_behind_airlocks_own_cursor() {
    let many: Vec<&'static str> = (0..PAGE_SIZE + 5)
        .map(|i| &*Box::leak(format!("t{i}").into_boxed_str()))
        .collect();
    let mut h = Harness::new(vec![spec("alpha")], vec![many]);
    h.initialize(json!({}));
    h.host(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    let first = h.take_host(json!(1));
    assert_eq!(
        first["result"]["tools"].as_array().unwrap().len(),
        PAGE_SIZE
    );
    let cursor = first["result"]["nextCursor"].clone();
    h.host(json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":cursor}}));
    let second = h.take_host(json!(2));
    assert_eq!(second["result"]["tools"].as_array().unwrap().len(), 5);
    assert!(second["result"].get("nextCursor").is_none());
    h.host(json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"bogus"}}));
    assert_eq!(h.take_host(json!(3))["error"]["code"], code::INVALID_PARAMS);
}

#[test]
fn stateless_hosts_get_discover_and_no_handshake_is_needed() {
    let mut h = two();
    let envelope = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{}});
    h.host(json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":envelope}}));
    let discover = h.take_host(json!(1));
    assert!(
        discover["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    let mut stamped = call(json!(2), "alpha__read");
    stamped["params"]["_meta"] = envelope;
    h.host(stamped);
    assert!(h.received[0].pop_front().is_some());
    // A request without the envelope is no request of this session's era.
    h.host(call(json!(3), "alpha__read"));
    assert_eq!(h.take_host(json!(3))["error"]["code"], code::INVALID_PARAMS);
}

#[test]
fn shutdown_stops_everything_running_and_nothing_restarts() {
    let mut h = two();
    h.initialize(json!({}));
    h.tool_names();
    h.router.shutdown("airlock received SIGTERM");
    h.drive();
    assert_eq!(h.stops, vec![1, 1]);
    h.host(call(json!(1), "alpha__read"));
    assert_eq!(h.starts, vec![1, 1]);
}

#[test]
fn after_host_eof_what_it_asked_is_answered_and_what_it_was_asked_gets_an_error() {
    let mut h = two();
    h.initialize(json!({"roots": {}}));
    h.tool_names();
    h.host(call(json!(1), "alpha__read"));
    h.answer(
        1,
        json!({"jsonrpc":"2.0","id":"r1","method":"roots/list","params":{}}),
    );
    h.to_host.clear();
    h.router.host_closed(h.now);
    h.drive();
    // The host can no longer answer beta's question: beta is told so at once.
    let told = h.received[1].pop_back().unwrap();
    assert_eq!(told["id"], "r1");
    assert_eq!(told["error"]["code"], code::INTERNAL_ERROR);
    // alpha's call is still in flight: the session waits for it, nothing is stopped.
    assert!(!h.router.host_finished(h.now));
    assert_eq!(h.stops, vec![0, 0]);
    let forwarded = h.received[0].pop_back().unwrap();
    let answer = json!({"jsonrpc":"2.0","id":forwarded["id"],"result":{"content":[]}});
    h.answer(0, answer);
    assert_eq!(h.take_host(json!(1))["result"]["content"], json!([]));
    assert!(h.router.host_finished(h.now));
    // A question a server asks after the EOF is answered at once too, never sent to the host.
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":"r2","method":"roots/list","params":{}}),
    );
    let told = h.received[0].pop_back().unwrap();
    assert_eq!(told["id"], "r2");
    assert_eq!(told["error"]["code"], code::INTERNAL_ERROR);
    assert!(h.to_host.is_empty(), "{:?}", h.to_host);
}

#[test]
fn a_server_that_never_answers_after_host_eof_is_waited_for_until_its_tool_timeout() {
    let mut h = two();
    h.initialize(json!({}));
    h.tool_names();
    h.host(call(json!(1), "alpha__read"));
    h.router.host_closed(h.now);
    h.drive();
    assert!(!h.router.host_finished(h.now));
    let due = h.router.next_deadline().unwrap();
    assert!(!h.router.host_finished(due - Duration::from_millis(1)));
    assert!(h.router.host_finished(due + Duration::from_secs(1)));
}

#[test]
fn a_server_replaced_while_a_call_is_in_flight_stops_once_the_call_is_answered() {
    let mut h = two();
    h.initialize(json!({}));
    h.tool_names();
    h.host(call(json!(1), "alpha__read"));
    let in_flight = h.received[0].pop_front().unwrap();
    // The replacement is slot 2.
    let summary = h.reload_replacing_alpha();
    assert_eq!(summary.retired, vec![0]);
    assert_eq!(h.starts[2], 1, "the replacement starts at once");
    assert_eq!(
        h.stops[0], 0,
        "the call in flight keeps the old one running"
    );

    h.answer(0, json!({"jsonrpc":"2.0","id":in_flight["id"],"result":{"content":[{"type":"text","text":"old"}]}}));
    assert_eq!(h.take_host(json!(1))["result"]["content"][0]["text"], "old");
    // No timer is due (no idle or tool timeout is pending): the answer itself ends it.
    assert_eq!(h.router.next_deadline(), None);
    assert_eq!(
        h.stops[0], 1,
        "the old server is stopped once its call is answered"
    );
    assert_eq!(h.stops[2], 0);
}

#[path = "era_tests.rs"]
mod era;

#[path = "mixed_era_tests.rs"]
mod mixed_era;

#[path = "resource_tests.rs"]
mod resources;

#[path = "tasks_tests.rs"]
mod tasks;

#[path = "reload_tests.rs"]
mod reload;

#[path = "in_flight_tests.rs"]
mod in_flight;

#[test]
fn a_server_cannot_keep_requests_waiting_for_the_host_without_end() {
    use super::upstream::{MAX_REQUESTS_TO_HOST, MAX_SERVER_ID_BYTES};
    let mut h = two();
    h.initialize(json!({"roots": {}}));
    h.tool_names();
    for n in 0..MAX_REQUESTS_TO_HOST + 3 {
        h.answer(0, json!({"jsonrpc":"2.0","id":n,"method":"roots/list"}));
    }
    let asked = h
        .to_host
        .iter()
        .filter(|m| m["method"] == "roots/list")
        .count();
    assert_eq!(asked, MAX_REQUESTS_TO_HOST);
    let refused: Vec<Value> = h.received[0].drain(..).collect();
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert_eq!(refused[0]["id"], MAX_REQUESTS_TO_HOST);
    assert!(
        refused[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already wait")
    );
    // The other server is not held back, but its ids are bounded.
    for length in [MAX_SERVER_ID_BYTES, MAX_SERVER_ID_BYTES + 1] {
        let id = "x".repeat(length);
        h.answer(1, json!({"jsonrpc":"2.0","id":id,"method":"roots/list"}));
    }
    let asked = h
        .to_host
        .iter()
        .filter(|m| m["method"] == "roots/list")
        .count();
    assert_eq!(asked, MAX_REQUESTS_TO_HOST + 1);
    let refused: Vec<Value> = h.received[1].drain(..).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
}
