//! One core serving requests of both protocol eras, as behind the HTTP face's mux: each request
//! is answered, and its server's questions asked, in the era the request spoke, whatever era
//! the requests handled since spoke.

use serde_json::{Value, json};

use super::*;

fn modern(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})
}

fn mixed() -> Harness {
    let mut h = two();
    h.router.trust_identity_meta();
    h.initialize(json!({"elicitation": {}}));
    h.tool_names();
    h
}

fn elicit(id: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"elicitation/create","params":{"message":"sure?","requestedSchema":{"type":"object","properties":{}}}})
}

#[test]
fn an_answer_keeps_the_era_of_its_request() {
    let mut h = mixed();
    h.host(call(json!("old"), "alpha__read"));
    let old = h.received[0].pop_front().unwrap();
    h.host(modern(
        json!("new"),
        "tools/call",
        json!({"name":"alpha__read","arguments":{}}),
    ));
    let new = h.received[0].pop_front().unwrap();
    // The handshake-era call is answered after the 2026-07-28 request was handled.
    for received in [&old, &new] {
        h.answer(
            0,
            json!({"jsonrpc":"2.0","id":received["id"],"result":{"content":[]}}),
        );
    }
    let old = h.take_host(json!("old"));
    assert!(old["result"].get("resultType").is_none(), "{old}");
    assert_eq!(
        h.take_host(json!("new"))["result"]["resultType"],
        "complete"
    );
    // So is a list, and a handshake-era request after one of 2026-07-28 speaks its own era.
    h.host(modern(json!("l26"), "prompts/list", json!({})));
    h.take_host(json!("l26"));
    h.host(json!({"jsonrpc":"2.0","id":"l25","method":"prompts/list"}));
    let listed = h.take_host(json!("l25"));
    assert_eq!(listed["result"]["prompts"], json!([]), "{listed}");
    assert!(listed["result"].get("ttlMs").is_none(), "{listed}");
}

#[test]
fn a_servers_question_goes_the_way_its_call_understands() {
    let mut h = mixed();
    // A 2026-07-28 request was the last one handled; the call in flight is a handshake one.
    h.host(call(json!("old"), "alpha__read"));
    let old = h.received[0].pop_front().unwrap();
    // It declared no elicitation: that is its own, not the handshake session's.
    let mut discover = modern(json!("d"), "server/discover", json!({}));
    discover["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"sampling": {}});
    h.host(discover);
    h.take_host(json!("d"));
    h.to_host.clear();
    h.answer(0, elicit("q1"));
    let asked = h
        .to_host
        .iter()
        .find(|m| m["method"] == "elicitation/create");
    assert!(
        asked.is_some(),
        "asked as a request: {:?} server got {:?}",
        h.to_host,
        h.received[0]
    );
    assert!(
        h.to_host.iter().all(|m| m.get("id") != Some(&json!("old"))),
        "the handshake call is not answered with a question: {:?}",
        h.to_host
    );
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":old["id"],"result":{"content":[]}}),
    );
    h.take_host(json!("old"));

    // And a question during a 2026-07-28 call comes back as that call's result.
    h.to_host.clear();
    h.host(modern(
        json!("new"),
        "tools/call",
        json!({"name":"alpha__read","arguments":{}}),
    ));
    h.received[0].pop_front().unwrap();
    h.host(json!({"jsonrpc":"2.0","id":"p","method":"prompts/list"}));
    h.take_host(json!("p"));
    h.answer(0, elicit("q2"));
    let result = h.take_host(json!("new"))["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{result}");
}

/// airlock's own answer given later (here: the server died mid-call) is shaped for the call's
/// own era, not for the request that came last.
#[test]
fn airlocks_own_later_answers_keep_their_requests_era() {
    let mut h = mixed();
    h.host(call(json!("old"), "alpha__read"));
    h.host(modern(
        json!("new"),
        "tools/call",
        json!({"name":"alpha__read","arguments":{}}),
    ));
    // The last request handled is a handshake one; then the server dies.
    h.host(json!({"jsonrpc":"2.0","id":"p","method":"prompts/list"}));
    h.take_host(json!("p"));
    let generation = h.generation[0];
    h.router.on_server_closed(0, generation, h.now);
    h.drive();
    let old = h.take_host(json!("old"));
    assert_eq!(old["result"]["isError"], true, "{old}");
    assert!(old["result"].get("resultType").is_none(), "{old}");
    let new = h.take_host(json!("new"));
    assert_eq!(new["result"]["resultType"], "complete", "{new}");
}
