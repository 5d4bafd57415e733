//! What a server or host sends wrong: junk, duplicate and broken answers, ids twice, a server that
//! dies or stops reading.

use super::*;

/// 5000 junk lines: a bounded number of audit events and stderr lines, and MCP still flows.
pub(super) fn junk_from_a_server_is_capped_in_audit_and_stderr(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("junk"), json!({}));
    assert_eq!(Client::text(&answer), "after junk");
    let answer = client.call(2, &world.tool("echo"), json!({"text": "still"}));
    assert!(Client::text(&answer).contains("still"));
    client.close_stdin();
    client.wait(SECS(10)).expect("exits");
    let dropped = world.events("dropped");
    assert!(
        (10..=12).contains(&dropped.len()),
        "10 recorded one by one, then one summary: {}",
        dropped.len()
    );
    let summary = dropped.last().unwrap();
    assert_eq!(summary["detail"]["lines"], 4990, "{summary}");
    let stderr = client.stderr();
    let warnings = stderr.matches("dropped a line").count();
    assert_eq!(warnings, 10, "{}", &stderr[..stderr.len().min(2000)]);
    // Each warning shows the line's start, so a banner is told from corruption.
    assert!(
        stderr.contains("(the line: \"JUNK line 0: this is not JSON-RPC {{{\")"),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
}

/// A second answer to one id, a line that is not UTF-8, and one nested too deep: never forwarded.
pub(super) fn duplicate_and_broken_answers_never_reach_the_host(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--hostile"));
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("dup"), json!({}));
    assert_eq!(Client::text(&answer), "first");
    let answer = client.call(2, &world.tool("badutf8"), json!({}));
    assert_eq!(Client::text(&answer), "after bad bytes");
    // Nested deeper than any parse here reads: on the answer's fast path too, never passed on
    // (a host's parser may crash on it). The harness fails on a line it cannot parse.
    let answer = client.call(3, &world.tool("deep"), json!({}));
    assert_eq!(Client::text(&answer), "after deep");
    client.close_stdin();
    let rest = client.rest(SECS(10));
    assert!(
        rest.iter()
            .all(|m| m["id"] != 1 && m["id"] != 2 && m["id"] != 3),
        "{rest:?}"
    );
    let reasons: Vec<String> = world
        .events("dropped")
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("no request in flight")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("not UTF-8")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("recursion limit")),
        "{reasons:?}"
    );
}

/// A server's answer that names its id twice, first (spelled `\u0069d`) as another of the host's
/// calls, or names it again as `"ID"`: the host gets one id, the one airlock routed and audited. A host whose parser keeps the
/// first of two keys would otherwise take it for the answer to that other call. (The harness
/// fails any test on a line from airlock that names a key twice.)
pub(super) fn an_answer_naming_its_id_twice_reaches_the_host_with_one(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--hostile"));
    client.initialize("2025-06-18");
    // Call 6 is still in flight when call 5's answer names it.
    client.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": world.tool("slow"), "arguments": {"seconds": 1}}}));
    let answer = client.call(5, &world.tool("twoids"), json!({"other": 6}));
    assert_eq!(Client::text(&answer), "two ids");
    // The same in another spelling: Go's encoding/json reads `"ID"` as `id`, and `"ERROR"` as
    // an error airlock would not have audited.
    let answer = client.call(7, &world.tool("upperid"), json!({"other": 6}));
    assert_eq!(Client::text(&answer), "upper id");
    assert_eq!(answer.as_object().map(|o| o.len()), Some(3), "{answer}");
    // `IsError` is an outcome airlock did not audit (it read no `isError`): taken out.
    assert!(answer["result"].get("IsError").is_none(), "{answer}");
    let six = client.answer(json!(6), SECS(10));
    assert_eq!(Client::text(&six), "slow done");
    client.close_stdin();
    assert!(client.rest(SECS(10)).iter().all(|m| m.get("id").is_none()));
    let outcomes: Vec<(Value, Value)> = world
        .events("outcome")
        .iter()
        .map(|e| (e["request_id"].clone(), e["tool"].clone()))
        .collect();
    assert!(
        outcomes.contains(&(json!(5), json!("twoids"))),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&(json!(6), json!("slow"))),
        "{outcomes:?}"
    );
    let seven = world.events("outcome");
    let seven = seven.iter().find(|e| e["request_id"] == 7).unwrap();
    assert_eq!(seven["outcome"], "ok", "what the host reads: {seven}");
}

/// Two requests with one id in flight: one decision, one outcome, one answer. `5.0` is that id
/// too: a JavaScript server parses it as `5`.
pub(super) fn duplicate_host_ids_in_flight_are_handled_once(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-06-18");
    let slow = json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":world.tool("slow"),"arguments":{"seconds":0.3}}});
    client.send(slow.clone());
    client.send(slow.clone());
    let mut as_float = slow;
    as_float["id"] = json!(5.0);
    client.send(as_float);
    let answer = client.answer(json!(5), SECS(10));
    assert_eq!(Client::text(&answer), "slow done");
    client.close_stdin();
    let rest = client.rest(SECS(10));
    assert!(rest.iter().all(|m| m["id"] != 5), "one answer: {rest:?}");
    assert_eq!(world.events("decision").len(), 1);
    assert_eq!(world.events("outcome").len(), 1);
}

/// The server dies with calls pending: each gets a tool result `isError: true` naming the
/// server and why, in both modes; each call has its outcome.
pub(super) fn a_call_pending_when_the_server_dies_gets_one_shape_of_answer(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-06-18");
    let hang = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":world.tool("hang"),"arguments":{}}});
    client.send(hang);
    let crash = client.call(2, &world.tool("crash"), json!({}));
    let hung = client.answer(json!(1), SECS(10));
    for answer in [&crash, &hung] {
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let text = Client::text(answer);
        assert!(
            text.contains("fixture") && text.contains("exited"),
            "{text}"
        );
    }
    // Outcomes are written right after the answers (which do not wait for the log).
    assert!(support::wait_until(SECS(5), || world
        .events("outcome")
        .len()
        == 2));
    let outcomes = world.events("outcome");
    assert!(
        outcomes.iter().all(|e| e["outcome"] == "error"),
        "{outcomes:?}"
    );
    assert!(support::wait_until(SECS(5), || !world
        .events("exit")
        .is_empty()));
    let exit = &world.events("exit")[0];
    assert_eq!(exit["detail"]["ended_by"], "exited", "{exit}");
    assert_eq!(exit["detail"]["code"], 7, "{exit}");
    assert_eq!(exit["reason"], "exited on its own");
}

/// A server that stops reading its input: every request is still answered (with an error:
/// the tool timeout, or at once when the queue toward it is full), nothing freezes, and what
/// the server keeps writing still reaches the host.
pub(super) fn a_server_that_stops_reading_gets_requests_answered_with_errors(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--extra").tool_timeout(3));
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("deaf"), json!({}));
    assert_eq!(Client::text(&answer), "deaf now");
    // 20 MiB of calls: more than the pipe and airlock's 16 MiB queue toward the server.
    let text = "z".repeat(1024 * 1024);
    let tool = world.tool("echo");
    let mut stdin = client.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for id in 10..30 {
            let line = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"text":text}}});
            writeln!(stdin, "{line}").expect("airlock keeps reading the host");
        }
        stdin.flush().unwrap();
        stdin
    });
    let started = Instant::now();
    let mut logs = 0;
    let mut answered = Vec::new();
    while answered.len() < 20 && started.elapsed() < SECS(30) {
        let Some(message) = client.next(SECS(1)) else {
            continue;
        };
        if message["method"] == "notifications/message" {
            logs += 1;
        } else if let Some(id) = message["id"].as_i64() {
            // A tool call's error is a tool result with isError (timeouts are -32001).
            let error = message.get("error").is_some() || message["result"]["isError"] == true;
            assert!(error, "{message}");
            answered.push(id);
        }
    }
    client.stdin = Some(writer.join().unwrap());
    answered.sort();
    assert_eq!(
        answered,
        (10..30).collect::<Vec<_>>(),
        "every request answered"
    );
    assert!(
        logs > 5,
        "the server's output still flows: {logs} log lines"
    );
    client.signal(libc::SIGTERM);
    assert_eq!(client.wait(SECS(10)), Some(0));
    assert_eq!(world.events("outcome").len(), 21, "one outcome per call");
}

/// A server that dies at start is told to the host with its own last words on stderr (redacted
/// as anything quoted to the host is), not only its exit code: the model reads why.
pub(super) fn a_server_that_dies_at_start_is_told_with_its_last_stderr_line(mode: Mode) {
    let script = "import sys\nsys.stderr.write('starting\\nfatal: the key ghp_0123456789abcdefghijklmnopqrstuvwxyzAB was refused\\n')\nsys.exit(3)\n";
    let (world, mut client) = start(mode, Setup::command(&["/usr/bin/python3", "-c", script]));
    client.send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}));
    let first = client.answer(json!(1), SECS(10));
    let told = match mode {
        Mode::Run => first.to_string(),
        Mode::Serve => {
            client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
            client
                .call(2, &world.tool("anything"), json!({}))
                .to_string()
        }
    };
    assert!(told.contains("exit code 3"), "{told}");
    assert!(
        told.contains("its last line on stderr: fatal: the key [REDACTED] was refused"),
        "{told}"
    );
    assert!(!told.contains("ghp_0123"), "{told}");
}

/// A server with egress that never answers, and a host that closes its input: the session ends
/// through the kill sequence within seconds. (The wait for the last connection events at the
/// end once went on for ever, at full CPU, deaf to SIGTERM, when another wake kept coming back.)
pub(super) fn a_silent_server_with_egress_ends_with_the_session_after_the_hosts_eof(mode: Mode) {
    let setup = Setup::command(&["/usr/bin/python3", "-c", "import time\ntime.sleep(3600)"])
        .policy("network = { allow = [\"allowed.example\"] }")
        .tool_timeout(2);
    let (_world, mut client) = start(mode, setup);
    client.send(json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}
    }));
    std::thread::sleep(Duration::from_millis(500));
    client.close_stdin();
    // The initialize due (2 s), stdin grace, the 3 s kill timeout, the connection events'
    // drain: well under 15 s.
    assert!(
        client.wait(SECS(15)).is_some(),
        "airlock still runs 15 s after the host's EOF"
    );
}

/// A server asking the host questions it never answers (`roots/list`, 300 times): 256 of them
/// reach the host, each further one gets an error at once, and the server goes on working.
pub(super) fn a_server_cannot_keep_questions_waiting_for_the_host_without_end(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--hostile"));
    let params = json!({"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"test","version":"1"}});
    assert!(
        client
            .request(0, "initialize", params)
            .get("result")
            .is_some()
    );
    client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    let answer = client.call(1, &world.tool("ask_many"), json!({"count": 300}));
    assert_eq!(Client::text(&answer), "asked");
    let answers = client.call(2, &world.tool("answers"), json!({}));
    let answers: Value = serde_json::from_str(&Client::text(&answers)).unwrap();
    let refused = answers
        .as_object()
        .unwrap()
        .values()
        .filter(|a| {
            a["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("already wait"))
        })
        .count();
    assert_eq!(refused, 300 - 256, "{answers}");
    let asked = client
        .backlog
        .iter()
        .filter(|m| m["method"] == "roots/list")
        .count();
    assert_eq!(asked, 256);
    client.close_stdin();
    client.rest(SECS(10));
}

/// A host that sends its calls and does not read the answers: airlock stops reading the server
/// for it (a bound on memory), the server blocks writing and stops reading its input, and the
/// calls that then find the server's queue full are refused. The refusal names the host's stall
/// beside the server's, in the answer and the audit record (a review found the server alone
/// blamed for the host's stall; a second, a stuck server blamed on the host by the first fix).
pub(super) fn a_host_that_does_not_read_its_answers_is_named_for_the_refusals(mode: Mode) {
    let (world, mut child) = support::start_raw(mode, Setup::fixture("--hostile"));
    let data = "z".repeat(200 * 1024);
    let tool = world.tool("big");
    let calls = 160;
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    writeln!(stdin, "{init}").unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc":"2.0","method":"notifications/initialized"})
    )
    .unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})
    )
    .unwrap();
    // Nothing of airlock's output is read while the calls go in.
    for id in 10..10 + calls {
        let line = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"data":data}}});
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    // The last lines written are taken in while the host still reads nothing.
    std::thread::sleep(Duration::from_millis(500));
    child.stdin = Some(stdin);
    let mut client = Client::new(child);
    let refusals: Vec<String> = (10..10 + calls)
        .map(|id| Client::text(&client.answer(json!(id), SECS(60))))
        .filter(|text| text.len() != data.len())
        .collect();
    assert!(
        !refusals.is_empty(),
        "no call was refused: the test did not fill the queue"
    );
    for text in &refusals {
        assert!(
            text.contains("the host is not reading its answers"),
            "{text}"
        );
    }
    let blamed: Vec<Value> = world
        .events("outcome")
        .into_iter()
        .filter(|e| {
            e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("not reading"))
        })
        .collect();
    assert!(!blamed.is_empty());
    for event in &blamed {
        let reason = event["reason"].as_str().unwrap();
        assert!(reason.contains("while the host is not reading"), "{event}");
    }
}

/// Progress reaches the host only for a token of a request still running: a server's progress
/// naming a token no request gave, or a token after its request was answered, is dropped in
/// both modes (`run` passed both: found by a review; a host may take a stray token for another
/// call's, or one it reuses).
pub(super) fn progress_reaches_the_host_only_for_a_request_still_running(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--hostile"));
    client.initialize("2025-06-18");
    client.request(1, "tools/list", json!({}));
    let stray = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{
        "name": world.tool("stray_progress"), "arguments": {"other": "never-given"},
        "_meta": {"progressToken": "mine"}}});
    client.send(stray);
    assert_eq!(Client::text(&client.answer(json!(3), SECS(10))), "strayed");
    let echo = client.call(4, &world.tool("echo"), json!({"text": "after"}));
    assert!(Client::text(&echo).contains("after"));
    let progress: Vec<&Value> = client
        .backlog
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    let tokens: Vec<&Value> = progress
        .iter()
        .map(|m| &m["params"]["progressToken"])
        .collect();
    assert!(tokens.contains(&&json!("mine")), "{progress:?}");
    assert!(!tokens.contains(&&json!("never-given")), "{progress:?}");
    let mine_late = progress
        .iter()
        .any(|m| m["params"]["progressToken"] == "mine" && m["params"]["progress"] == 2);
    assert!(!mine_late, "progress after its answer: {progress:?}");
}
