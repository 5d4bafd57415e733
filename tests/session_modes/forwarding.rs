//! What reaches the server of an allowed call.

use super::*;

/// An allowed call goes on as the bytes the host sent (spacing, key order, number spellings,
/// escapes: what a byte-copy proxy would deliver), with only what airlock must change put in:
/// nothing in `run`; in `serve` the gateway's own id and the tool's name as its server knows it.
/// A line another parser could read otherwise than the gate did (a key twice) is re-encoded from
/// the gate's reading instead.
pub(super) fn an_allowed_call_goes_on_as_the_bytes_the_host_sent(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--extra"));
    client.initialize("2025-06-18");
    // As hosts do: listed first (a call before any listing waits for airlock's own).
    client.request(1, "tools/list", json!({}));
    let template = r#"{ "params" : {"arguments":{"n":1.50,"e":"caf\u00e9","z":[ ]},"name":"NAME"}, "id":ID,"method":"tools/call","jsonrpc":"2.0"}"#;
    let line = template
        .replace("NAME", &world.tool("raw"))
        .replace("ID", "7");
    let stdin = client.stdin.as_mut().unwrap();
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    let answer = client.answer(json!(7), SECS(10));
    let seen = Client::text(&answer);
    let seen_id = serde_json::from_str::<Value>(&seen).unwrap()["id"].clone();
    let expected = template
        .replace("NAME", "raw")
        .replace("ID", &seen_id.to_string());
    assert_eq!(seen, expected, "the server got the host's bytes");
    match mode {
        Mode::Run => assert_eq!(seen_id, 7, "the host's own id"),
        Mode::Serve => assert!(seen_id.is_u64(), "the gateway's id: {seen}"),
    }

    let twice = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","name":"NAME","arguments":{}}}"#
        .replace("NAME", &world.tool("raw"));
    let stdin = client.stdin.as_mut().unwrap();
    writeln!(stdin, "{twice}").unwrap();
    stdin.flush().unwrap();
    let answer = client.answer(json!(8), SECS(10));
    let seen = Client::text(&answer);
    assert_ne!(seen, twice);
    assert_eq!(seen.matches("\"name\"").count(), 1, "{seen}");
    let seen: Value = serde_json::from_str(&seen).unwrap();
    assert_eq!(
        seen["params"]["name"], "raw",
        "the name the gate decided on"
    );
}
