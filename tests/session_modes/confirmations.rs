//! A call held for the user's confirmation goes on only on an answer that says yes.

use super::*;

/// An `ask` rule holds the call and asks the host (`elicitation/create`, a boolean `approve`);
/// only `accept` with `approve` true (or no content) forwards it. An `approve` of `"false"` or
/// `0`, or `approve`, `content` or `action` spelled otherwise too, is a "no" (reviews found them
/// forwarding the call), and the
/// audit record of the answer says the call was not approved.
pub(super) fn only_a_yes_to_a_confirmation_forwards_the_call(mode: Mode) {
    let setup = Setup::fixture("").policy("[tools]\nask = [\"mcp:fixture__echo\"]\n");
    let (world, mut client) = start(mode, setup);
    let params = json!({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "test", "version": "1"}});
    assert!(
        client
            .request(0, "initialize", params)
            .get("result")
            .is_some()
    );
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let echo = world.tool("echo");
    let answers = [
        (
            json!({"action": "accept", "content": {"approve": "false"}}),
            false,
        ),
        (
            json!({"action": "accept", "content": {"approve": 0}}),
            false,
        ),
        (
            json!({"action": "accept", "content": {"Approve": false}}),
            false,
        ),
        (
            json!({"action": "accept", "Content": {"approve": false}}),
            false,
        ),
        (json!({"action": "accept", "Action": "decline"}), false),
        (
            json!({"action": "accept", "content": {"approve": true}}),
            true,
        ),
    ];
    for (id, (result, forwarded)) in (1..).zip(answers) {
        client.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": echo, "arguments": {"text": "ok"}}}));
        let question = loop {
            let message = client.next(SECS(10)).expect("the confirmation question");
            if message["method"] == "elicitation/create" {
                break message;
            }
        };
        client.send(json!({"jsonrpc": "2.0", "id": question["id"], "result": result}));
        let answer = client.answer(json!(id), SECS(10));
        assert_eq!(
            Client::text(&answer).contains("fixture: ok"),
            forwarded,
            "{result}: {answer}"
        );
    }
    let decided: Vec<Value> = world
        .events("elicitation")
        .iter()
        .map(|event| event["decision"].clone())
        .collect();
    assert_eq!(decided, ["deny", "deny", "deny", "deny", "deny", "allow"]);
}
