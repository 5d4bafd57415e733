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

/// A bare `\r` between a line's tokens is JSON whitespace to the gate, but a line end to many
/// readers (this Python server's `for line in sys.stdin`, Java's and .NET's `readLine`): a
/// denied call hidden between two of them inside an allowed call's arguments must not reach the
/// server as a message of its own. The server gets one line, the one the gate read.
pub(super) fn a_carriage_return_cannot_split_a_call_into_two_for_the_server(mode: Mode) {
    let setup = Setup::fixture("--extra").policy("[tools]\ndeny = [\"mcp:fixture__pid\"]");
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    client.request(1, "tools/list", json!({}));
    let hidden = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{}","arguments":{{}}}}}}"#,
        world.tool("pid")
    );
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{}","arguments":{{"x":{}}}}}}}"#,
        world.tool("raw"),
        format_args!("\r{hidden}\r")
    );
    let stdin = client.stdin.as_mut().unwrap();
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    let answer = client.answer(json!(7), SECS(10));
    let seen = Client::text(&answer);
    assert!(!seen.contains('\r'), "{seen:?}");
    let seen: Value = serde_json::from_str(&seen)
        .unwrap_or_else(|err| panic!("the server got one whole message ({err}): {answer}"));
    assert_eq!(seen["params"]["name"], "raw", "{seen}");
    assert_eq!(
        seen["params"]["arguments"]["x"]["params"]["name"],
        world.tool("pid")
    );
    let decided: Vec<Value> = world
        .events("decision")
        .iter()
        .map(|e| e["tool"].clone())
        .collect();
    assert_eq!(decided, vec![json!("raw")]);
}

/// The same the other way: a server's answer with a forged answer between bare `\r`s reaches
/// the host without a `\r` a host's reader could end a line at.
pub(super) fn a_carriage_return_cannot_split_an_answer_into_two_for_the_host(mode: Mode) {
    use std::io::BufRead;
    let (world, mut child) = support::start_raw(mode, Setup::fixture("--hostile"));
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":world.tool("crlf"),"arguments":{}}}),
    ];
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let answer = loop {
        let mut line = Vec::new();
        assert!(
            stdout.read_until(b'\n', &mut line).unwrap() > 0,
            "airlock's output ended"
        );
        if serde_json::from_slice::<Value>(&line).unwrap()["id"] == 3 {
            break line;
        }
    };
    assert!(
        !answer.contains(&b'\r'),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        answer["result"]["x"]["id"], 99,
        "the answer is the server's, whole"
    );
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}

/// CPU time (user + system) airlock's process has used so far, in clock ticks (`USER_HZ`, 100 a
/// second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which may hold spaces) are space-separated; utime and
    // stime are the 14th and 15th of the line.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The loop polls a moment before it sleeps when its peer lately answered that fast (see
/// `session/shell/spin.rs`); a host that goes quiet after a quick run of calls finds airlock
/// asleep, not polling: over two idle seconds it uses next to no CPU.
pub(super) fn a_session_whose_host_goes_quiet_sleeps(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-06-18");
    for id in 1..=50 {
        let answer = client.call(id, &world.tool("echo"), json!({"text": "x"}));
        assert!(!Client::text(&answer).is_empty(), "{answer}");
    }
    // Past the held outcome's 100 ms, so the timer has nothing left to do.
    std::thread::sleep(Duration::from_millis(300));
    let pid = client.child.id();
    let before = cpu_ticks(pid);
    std::thread::sleep(SECS(2));
    let used = cpu_ticks(pid) - before;
    assert!(
        used <= 10,
        "airlock used {used} ticks (1/100 s) of CPU in 2 idle seconds"
    );
    let answer = client.call(51, &world.tool("echo"), json!({"text": "awake"}));
    assert!(Client::text(&answer).contains("awake"), "{answer}");
}

/// A session keeps the era of its one handshake: a second `initialize` is refused (-32600) and
/// never reaches the server, so it cannot turn on 2025-03-26 batches after a 2025-06-18
/// handshake; and a handshake-era version named in a request's `_meta` (where only 2026-07-28 and
/// later are declared) declares nothing (a review found both switching the session's era).
pub(super) fn a_session_keeps_the_era_of_its_one_handshake(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-06-18");
    let again = client.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}),
    );
    assert_eq!(again["error"]["code"], -32600, "{again}");
    let echo = world.tool("echo");
    let call = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": echo, "arguments": {"text": "ok"}}})
    };
    client.send(json!([call(2), call(3)]));
    let refused = client.next(SECS(10)).expect("an answer to the batch");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2025-06-18"),
        "{refused}"
    );
    assert!(Client::text(&client.call(4, &echo, json!({"text": "ok"}))).contains("ok"));

    // A second `initialize` sent before the first is answered is refused too, and the first
    // still gets its answer (a gateway kept only the later one's id).
    let (_world, mut client) = start(mode, Setup::fixture(""));
    let init = |id: i64, version: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}})
    };
    let both = format!("{}\n{}", init(0, "2025-06-18"), init(1, "2025-03-26"));
    let stdin = client.stdin.as_mut().unwrap();
    writeln!(stdin, "{both}").unwrap();
    stdin.flush().unwrap();
    let first = client.answer(json!(0), SECS(10));
    assert_eq!(first["result"]["protocolVersion"], "2025-06-18", "{first}");
    let second = client.answer(json!(1), SECS(10));
    assert_eq!(second["error"]["code"], -32600, "{second}");

    // No handshake at all: a `_meta` naming 2025-03-26 does not turn batches on.
    let (world, mut client) = start(mode, Setup::fixture(""));
    let echo = world.tool("echo");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2025-03-26",
        "io.modelcontextprotocol/clientCapabilities": {}});
    client.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": meta}}));
    let _ = client.answer(json!(1), SECS(10));
    client.send(json!([{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": echo, "arguments": {"text": "ok"}, "_meta": meta}}]));
    let refused = client.next(SECS(10)).expect("an answer to the batch");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
}

/// Only airlock asks a host for input through a result: a gateway takes a 2026-07-28 multi
/// round-trip answer's keys (`resultType`, `inputRequests`, `requestState`, however spelled) out
/// of its servers' answers, on the fast path too (a review found a server's own question and an
/// `airlock-mrtr-` token reaching a 2025 host whole). `run` is the server's own voice to the
/// host, era included: it passes them as the server wrote them.
pub(super) fn a_servers_own_question_in_a_result_is_taken_out_by_a_gateway(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--hostile"));
    client.initialize("2025-06-18");
    client.request(1, "tools/list", json!({}));
    let answer = client.call(2, &world.tool("mint_question"), json!({}));
    let result = answer["result"].as_object().unwrap();
    assert_eq!(Client::text(&answer), "minted", "{answer}");
    let carried: Vec<&String> = result
        .keys()
        .filter(|key| {
            ["resulttype", "inputrequests", "requeststate"].contains(&key.to_lowercase().as_str())
        })
        .collect();
    match mode {
        Mode::Run => assert_eq!(carried.len(), 3, "{answer}"),
        Mode::Serve => assert!(carried.is_empty(), "{answer}"),
    }
}
