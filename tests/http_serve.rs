//! `airlock serve --listen` end to end: the real binary on a loopback port, real clients (the
//! official Python SDK's Streamable HTTP client, the MCP Inspector CLI), rebinding protection,
//! the start-up refusal of an exposed address, both faces at once, `airlock status`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod http_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use http_support::*;
use serde_json::{Value, json};

#[test]
fn the_python_sdk_client_works_through_the_gateway_in_every_mode() {
    let world = World::new();
    let mut gateway = world.listen(&fixture_server(), &[]);
    let calls = json!({
        "echo": ["fixture__echo", {"text": "over http"}],
        "slow": ["fixture__slow", {"seconds": 0.3}],
        "unknown": ["fixture__nope", {}],
    })
    .to_string();
    for mode in ["legacy", "auto", "2026-07-28"] {
        let out = Command::new(python())
            .arg(root().join("tests/fixtures/http/sdk_http_client.py"))
            .args([gateway.url.as_str(), mode, "-", calls.as_str()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{mode}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            gateway.stderr()
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            report["tools"]
                .as_array()
                .unwrap()
                .contains(&json!("fixture__echo")),
            "{mode}: {report}"
        );
        assert_eq!(
            report["calls"]["echo"]["text"], "fixture: over http",
            "{mode}: {report}"
        );
        assert_eq!(
            report["calls"]["slow"]["isError"], false,
            "{mode}: {report}"
        );
        assert_eq!(
            report["calls"]["unknown"]["isError"], true,
            "{mode}: {report}"
        );
    }
    gateway.stop();
    // Every call was decided and its outcome recorded, in the one gateway's audit log.
    let audit = world.audit();
    let decisions = audit.iter().filter(|e| e["event"] == "decision").count();
    let outcomes = audit.iter().filter(|e| e["event"] == "outcome").count();
    assert_eq!((decisions, outcomes), (9, 9), "{audit:#?}");
}

#[test]
fn the_inspector_cli_lists_and_calls_over_http() {
    let world = World::new();
    let gateway = world.listen(&fixture_server(), &[]);
    let inspector = |extra: &[&str]| {
        let out = Command::new(http_peer("mcp-inspector"))
            .env("PATH", path_with_node22())
            .env("HOME", world.path("home"))
            .args(["--cli", gateway.url.as_str(), "--transport", "http"])
            .args(extra)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str::<Value>(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}"))
    };
    let listed = inspector(&["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"fixture__echo"), "{listed}");
    let called = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "fixture__echo",
        "--tool-arg",
        "text=inspected",
    ]);
    assert_eq!(
        called["content"][0]["text"], "fixture: inspected",
        "{called}"
    );
}

#[test]
fn a_foreign_origin_or_host_is_refused() {
    let world = World::new();
    let gateway = world.listen(&fixture_server(), &[]);
    let evil = post(
        &gateway.url,
        &[("origin", "http://evil.example")],
        &initialize("2025-06-18"),
    );
    assert_eq!(evil.status, 403, "{}", evil.body);
    assert!(
        evil.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DNS rebinding")
    );
    let rebound = post(
        &gateway.url,
        &[("host", "evil.example")],
        &initialize("2025-06-18"),
    );
    assert_eq!(rebound.status, 403);
    let local = post(
        &gateway.url,
        &[("origin", "http://localhost:6274")],
        &initialize("2025-06-18"),
    );
    assert_eq!(local.status, 200, "{}", local.body);

    // What a proxy in front may read otherwise: two Host (or Origin) headers, a foreign host in
    // an absolute-form target beside a local Host header.
    let body = initialize("2025-06-18").to_string();
    let json = "content-type: application/json\r\naccept: application/json, text/event-stream\r\n";
    for (head, status) in [
        (
            format!("POST /mcp HTTP/1.1\r\nhost: localhost\r\nhost: evil.example\r\n{json}"),
            400,
        ),
        (
            format!(
                "POST /mcp HTTP/1.1\r\nhost: localhost\r\norigin: http://localhost\r\norigin: http://evil.example\r\n{json}"
            ),
            400,
        ),
        (
            format!("POST http://evil.example/mcp HTTP/1.1\r\nhost: localhost\r\n{json}"),
            403,
        ),
        (
            format!("POST /mcp HTTP/1.1\r\nhost: [::1]evil.example\r\n{json}"),
            403,
        ),
        (
            format!(
                "POST /mcp HTTP/1.1\r\nhost: localhost\r\norigin: http://[::1]evil.example\r\n{json}"
            ),
            403,
        ),
        (
            format!("POST /mcp HTTP/1.1\r\nhost: localhost\r\n{json}content-type: text/plain\r\n"),
            400,
        ),
        (
            format!("POST http://localhost/mcp HTTP/1.1\r\nhost: localhost\r\n{json}"),
            200,
        ),
    ] {
        let reply = RawConnection::open(&gateway.url)
            .send(&head, &body)
            .unwrap();
        assert_eq!(reply.status, status, "{head}{}", reply.body);
    }

    // A page may POST text/plain or a form anywhere without a CORS preflight: not a message.
    for content_type in ["text/plain", "application/x-www-form-urlencoded", ""] {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: {content_type}\r\naccept: application/json, text/event-stream\r\n"
        );
        let reply = RawConnection::open(&gateway.url)
            .send(&head, &body)
            .unwrap();
        assert_eq!(reply.status, 415, "{content_type}: {}", reply.body);
    }
    let no_type =
        "POST /mcp HTTP/1.1\r\nhost: localhost\r\naccept: application/json, text/event-stream\r\n";
    let reply = RawConnection::open(&gateway.url)
        .send(no_type, &body)
        .unwrap();
    assert_eq!(reply.status, 415, "{}", reply.body);
}

#[test]
fn an_exposed_address_without_authentication_is_refused_at_start() {
    let world = World::new();
    let config = world.config(&fixture_server());
    let out = world
        .command(&[
            "serve",
            "--config",
            &config.display().to_string(),
            "--listen",
            "0.0.0.0:0",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without authentication"),
        "{stderr}"
    );
    assert!(
        stderr.contains("fix:") && stderr.contains("airlock token create"),
        "{stderr}"
    );
    // A bad [http] value is a load error with its position.
    let bad = world.config(&format!(
        "{}\n[http]\nlisten = \"8080\"\n",
        fixture_server()
    ));
    let out = world
        .command(&["serve", "--config", &bad.display().to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("airlock.toml:7:10"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A hostile server cannot send its question to another client's call by claiming the marker of
/// airlock's own confirmation request (`airlock/request`, naming a call): gateway call ids are
/// easy to guess, and that client never called it.
#[test]
fn a_server_cannot_ask_its_questions_on_another_clients_call() {
    let world = World::new();
    let fixture = root().join("tests/fixtures/serve/fixture_server.py");
    let config = format!(
        "{}[servers.evil]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}, \"--hostile\"]\nstart = \"eager\"\n",
        fixture_server(),
        fixture.display().to_string()
    );
    let gateway = world.listen(&config, &[]);
    let open = || {
        let mut init = initialize("2025-06-18");
        init["params"]["capabilities"] = json!({"elicitation": {}});
        let reply = post(&gateway.url, &[], &init);
        let id = reply.header("mcp-session-id").expect("a session id");
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        post(&gateway.url, &[("mcp-session-id", id.as_str())], &note);
        id
    };
    let (victim, attacker) = (open(), open());
    let url = gateway.url.clone();
    let waiting = std::thread::spawn(move || {
        let slow = call(1, "fixture__slow", json!({"seconds": 2}));
        post(&url, &[("mcp-session-id", victim.as_str())], &slow)
    });
    std::thread::sleep(Duration::from_millis(500));
    let asked = post(
        &gateway.url,
        &[("mcp-session-id", attacker.as_str())],
        &call(2, "evil__phish", json!({})),
    );
    assert!(asked.body.contains("asked"), "{}", asked.body);
    let victims_stream = waiting.join().unwrap();
    assert!(
        victims_stream.body.contains("slow done"),
        "{}",
        victims_stream.body
    );
    assert!(
        !victims_stream.body.contains("PHISH"),
        "another server's question reached the client: {}",
        victims_stream.body
    );
}

/// A client that cancels its call is done with it: the call's stream ends without an answer,
/// and the id is the client's to use again (it was "already in flight" until the session ended).
#[test]
fn a_cancelled_call_ends_its_stream_and_frees_its_id() {
    let world = World::new();
    let gateway = world.listen(&fixture_server(), &[]);
    let session = session(&gateway.url, &[]);
    let url = gateway.url.clone();
    let waiting_session = session.clone();
    let started = std::time::Instant::now();
    let slow = std::thread::spawn(move || {
        let call = call(5, "fixture__slow", json!({"seconds": 30}));
        post(&url, &[("mcp-session-id", waiting_session.as_str())], &call)
    });
    std::thread::sleep(Duration::from_millis(500));
    let cancel = json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"changed my mind"}});
    let headers = [("mcp-session-id", session.as_str())];
    assert_eq!(post(&gateway.url, &headers, &cancel).status, 202);
    let ended = slow.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the stream ended with the cancellation"
    );
    assert!(!ended.body.contains("slow done"), "{}", ended.body);
    let again = post(
        &gateway.url,
        &headers,
        &call(5, "fixture__echo", json!({"text": "id 5 again"})),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(text_of(&again.json()), "fixture: id 5 again");
}

/// Two clients of one gateway, a server offering tasks: a task, its status and its result are
/// the creating client's. The other client cannot read, list or cancel it by its id (a
/// server's task ids are a counter here, as they often are).
#[test]
fn a_task_is_its_creating_clients_only() {
    let world = World::new();
    let config =
        fixture_server().replace("fixture_server.py\"]", "fixture_server.py\", \"--tasks\"]");
    let gateway = world.listen(&config, &[]);
    let open = || {
        let reply = post(&gateway.url, &[], &initialize("2025-11-25"));
        assert_eq!(reply.status, 200, "{}", reply.body);
        let id = reply.header("mcp-session-id").expect("a session id");
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        assert_eq!(
            post(&gateway.url, &[("mcp-session-id", id.as_str())], &note).status,
            202
        );
        id
    };
    let (mine, theirs) = (open(), open());
    let ask = |session: &str, id: i64, method: &str, params: Value| {
        let message = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        post(&gateway.url, &[("mcp-session-id", session)], &message).json()
    };
    let created = ask(
        &mine,
        1,
        "tools/call",
        json!({"name":"fixture__echo","arguments":{"text":"mine"},"task":{"ttl":60000}}),
    );
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {created}"))
        .to_string();
    for (n, method) in ["tasks/get", "tasks/result", "tasks/cancel"]
        .iter()
        .enumerate()
    {
        let refused = ask(&theirs, 10 + n as i64, method, json!({"taskId": task}));
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
    }
    let listed = ask(&theirs, 20, "tasks/list", json!({}));
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");

    let result = ask(&mine, 2, "tasks/result", json!({"taskId": task}));
    assert_eq!(text_of(&result), "fixture: mine", "{result}");
    let listed = ask(&mine, 3, "tasks/list", json!({}));
    assert_eq!(
        listed["result"]["tasks"][0]["taskId"],
        task.as_str(),
        "{listed}"
    );
    let status = ask(&mine, 4, "tasks/get", json!({"taskId": task}));
    assert_eq!(
        status["result"]["status"], "completed",
        "not cancelled by the other: {status}"
    );
}

/// What the gateway remembers of who made a task is bounded (1,024 tasks a client): past it the
/// client's oldest task is forgotten and answered as unknown, to its creator too, while its
/// newer tasks and another client's stay theirs.
#[test]
fn a_clients_oldest_task_is_forgotten_past_the_bound_and_never_anothers() {
    let world = World::new();
    // A thousand calls at once: no rate limit in the way.
    let config = format!(
        "{}\n[http]\nrate_limit = 0\n",
        fixture_server().replace("fixture_server.py\"]", "fixture_server.py\", \"--tasks\"]")
    );
    let gateway = world.listen(&config, &[]);
    let open = || {
        let reply = post(&gateway.url, &[], &initialize("2025-11-25"));
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.header("mcp-session-id").expect("a session id")
    };
    let (mine, theirs) = (open(), open());
    // The answer, whether it came as JSON or at the end of a stream (a task's status
    // notification may ride along with it).
    let ask = |session: &str, id: i64, method: &str, params: Value| {
        let message = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        let reply = post(&gateway.url, &[("mcp-session-id", session)], &message);
        if reply.body.trim_start().starts_with('{') {
            return reply.json();
        }
        reply
            .body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer to {id}: {}", reply.body))
    };
    let create = |session: &str, id: i64| {
        let created = ask(
            session,
            id,
            "tools/call",
            json!({"name":"fixture__echo","arguments":{"text":"t"},"task":{"ttl":60000}}),
        );
        created["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {created}"))
            .to_string()
    };
    let other = create(&theirs, 1);
    // One more than the bound.
    let tasks: Vec<String> = (0..1025).map(|n| create(&mine, 100 + n)).collect();
    let oldest = ask(&mine, 2, "tasks/get", json!({"taskId": tasks[0]}));
    assert_eq!(oldest["error"]["code"], -32602, "{oldest}");
    let next = ask(&mine, 3, "tasks/get", json!({"taskId": tasks[1]}));
    assert!(next["result"]["status"].is_string(), "{next}");
    let kept = ask(&theirs, 4, "tasks/get", json!({"taskId": other}));
    assert!(kept["result"]["status"].is_string(), "{kept}");
}

#[test]
fn limits_answer_with_clear_errors() {
    let world = World::new();
    let config = format!(
        "{}\n[http]\nmax_body_bytes = 2000\nsessions_per_client = 2\n",
        fixture_server()
    );
    let gateway = world.listen(&config, &[]);
    let big = call(1, "fixture__echo", json!({"text": "x".repeat(5000)}));
    let reply = post(&gateway.url, &[], &big);
    assert_eq!(reply.status, 413);
    assert!(reply.body.contains("max_body_bytes"), "{}", reply.body);
    session(&gateway.url, &[]);
    session(&gateway.url, &[]);
    let third = post(&gateway.url, &[], &initialize("2025-06-18"));
    assert_eq!(third.status, 429);
    assert!(third.body.contains("sessions_per_client"), "{}", third.body);
}

/// `airlock serve --listen 127.0.0.1:0 --stdio` with the fixture server: the process (killed
/// however the test ends, through the guard), its URL, and its stdio host's ends.
fn listen_with_stdio(
    world: &World,
) -> (
    std::process::Child,
    KillOnDrop,
    String,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
) {
    let config = world.config(&fixture_server());
    let mut child = world
        .command(&[
            "serve",
            "--config",
            &config.display().to_string(),
            "--listen",
            "127.0.0.1:0",
            "--stdio",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child.id());
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut url = String::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        if let Some(found) = line.split("Streamable HTTP at ").nth(1) {
            url = found.trim().to_string();
            break;
        }
        line.clear();
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, guard, url, stdin, stdout)
}

/// The stdio host beside the listener is one connection, held to one era as on stdio alone: after
/// its 2026-07-28 requests, one without the envelope is `-32602` and `initialize` `-32022` (a
/// review found both served there: an envelope-less `logging/setLevel` would turn on log
/// messages the host never opted in to).
#[test]
fn the_stdio_host_beside_the_listener_speaks_one_era() {
    let world = World::new();
    let (mut child, guard, _url, mut stdin, mut stdout) = listen_with_stdio(&world);
    let envelope = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let mut ask = |message: Value| -> Value {
        writeln!(stdin, "{message}").unwrap();
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "stdout closed");
        serde_json::from_str(&line).unwrap()
    };
    let listed =
        ask(json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":envelope}}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let bare =
        ask(json!({"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let init = ask(initialize("2025-06-18"));
    assert_eq!(init["error"]["code"], -32022, "{init}");
    let still = ask(
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{
        "name":"fixture__echo","arguments":{"text":"still"},"_meta":envelope}}),
    );
    assert_eq!(text_of(&still), "fixture: still", "{still}");
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    std::mem::forget(guard); // reaped: its pid may be reused
}

#[test]
fn stdio_and_http_serve_one_gateway_at_once() {
    let world = World::new();
    let (mut child, guard, url, mut stdin, mut stdout) = listen_with_stdio(&world);
    for message in [
        initialize("2025-06-18"),
        call(1, "fixture__echo", json!({"text": "stdio"})),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "stdout closed");
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    assert_eq!(text_of(&answers[1]), "fixture: stdio");
    let id = session(&url, &[]);
    let reply = post(
        &url,
        &[("mcp-session-id", id.as_str())],
        &call(1, "fixture__echo", json!({"text": "http"})),
    );
    assert_eq!(text_of(&reply.json()), "fixture: http");
    // Both faces reach the same server process (one process per server, not per session).
    let pid_stdio = {
        writeln!(stdin, "{}", call(2, "fixture__pid", json!({}))).unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        text_of(&serde_json::from_str(&line).unwrap())
    };
    let pid_http = text_of(
        &post(
            &url,
            &[("mcp-session-id", id.as_str())],
            &call(2, "fixture__pid", json!({})),
        )
        .json(),
    );
    assert_eq!(pid_stdio, pid_http);
    // The stdio host leaving ends only its session: HTTP goes on.
    drop(stdin);
    std::thread::sleep(Duration::from_millis(300));
    let reply = post(
        &url,
        &[("mcp-session-id", id.as_str())],
        &call(3, "fixture__echo", json!({"text": "still"})),
    );
    assert_eq!(text_of(&reply.json()), "fixture: still");
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    std::mem::forget(guard); // reaped: its pid may be reused
    stdio_ids_are_audited_as_sent(&world);
}

/// The stdio host's calls are audited under the ids it used (1 and 2, as on stdio alone); the
/// HTTP session's under the gateway's ids for them.
fn stdio_ids_are_audited_as_sent(world: &World) {
    let audit = world.audit();
    let ids = |tool: &str| -> Vec<Value> {
        audit
            .iter()
            .filter(|e| e["event"] == "decision" && e["tool"] == tool)
            .map(|e| e["request_id"].clone())
            .collect()
    };
    let echo = ids("echo");
    assert_eq!(echo.len(), 3, "{audit:#?}");
    assert_eq!(echo[0], json!(1), "the stdio host's own id: {echo:?}");
    assert!(
        echo[1..]
            .iter()
            .all(|id| id.as_str().is_some_and(|id| id.starts_with("airlock-h"))),
        "{echo:?}"
    );
    assert!(ids("pid").contains(&json!(2)), "{audit:#?}");
}

struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill only sends a signal to the child this test started (gone: ESRCH).
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

#[test]
fn status_shows_the_listening_gateway() {
    let world = World::new();
    let gateway = world.listen(&fixture_server(), &[]);
    session(&gateway.url, &[]);
    let out = world.command(&["status", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status[0]["listen"]["url"], gateway.url.as_str(), "{status}");
    assert_eq!(status[0]["listen"]["sessions"], 1, "{status}");
    let text = world.command(&["status"]).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains(&gateway.url));
}

#[test]
fn airlock_test_opens_a_session_with_a_listening_gateway() {
    let world = World::new();
    let gateway = world.listen(
        &format!("{}\n[http.auth]\ntokens = true\n", fixture_server()),
        &[],
    );
    let refused = world
        .command(&["test", "--url", &gateway.url])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("AIRLOCK_TOKEN"));
    let token = world.token("tester");
    let out = world
        .command(&["test", "--url", &gateway.url])
        .env("AIRLOCK_TOKEN", &token)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("fixture__echo") && stdout.contains("opened and ended"),
        "{stdout}"
    );
}

/// A session has one handshake over HTTP too: a second `initialize` on an open session is
/// refused (-32600) and its version stays (a review had it switch the session to another).
#[test]
fn a_sessions_second_initialize_is_refused_over_http() {
    let world = World::new();
    let gateway = world.listen(&fixture_server(), &[]);
    let id = session(&gateway.url, &[]);
    let headers = [("mcp-session-id", id.as_str())];
    let mut again = initialize("2025-03-26");
    again["id"] = json!(1);
    let reply = post(&gateway.url, &headers, &again);
    assert_eq!(reply.json()["error"]["code"], -32600, "{}", reply.body);
    let answer = post(
        &gateway.url,
        &headers,
        &call(2, "fixture__echo", json!({"text": "still"})),
    );
    assert!(text_of(&answer.json()).contains("still"), "{}", answer.body);
}
