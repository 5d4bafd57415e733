//! What every call leaves in the audit log, whichever way it ends.

use super::*;

/// The decision event carries the host's request id in both modes, and the session's policy
/// event the digest `airlock check` prints for the same inputs, and every input it covers.
pub(super) fn decisions_are_audited_with_the_hosts_id_and_the_policy_digest(mode: Mode) {
    let setup = || Setup::fixture("").policy("[tools]\ndeny = [\"mcp:fixture__pid\"]");
    let (world, mut client) = start(mode, setup());
    client.initialize("2025-06-18");
    let denied = client.call(41, &world.tool("pid"), json!({}));
    assert_eq!(denied["result"]["isError"], true);
    assert!(Client::text(&denied).contains("mcp:fixture__pid"));
    let allowed = client.call(
        42,
        &world.tool("echo"),
        json!({"text": "x", "token": "s3cret"}),
    );
    assert!(Client::text(&allowed).contains('x'));
    let decisions = world.events("decision");
    let ids: Vec<&Value> = decisions.iter().map(|e| &e["request_id"]).collect();
    assert_eq!(ids, vec![&json!(41), &json!(42)]);
    assert_eq!(decisions[1]["args"]["token"], "[REDACTED]");
    let policy = world
        .audit()
        .into_iter()
        .find(|e| e["event"] == "policy")
        .unwrap();
    let digest = policy["detail"]["digest"].as_str().unwrap();
    let check = support::check_command(&world, &setup()).output().unwrap();
    let printed = String::from_utf8_lossy(&check.stdout);
    assert!(
        printed.contains(&format!("digest   sha256:{digest}\n")),
        "{policy}\n{printed}"
    );
    let sources: Vec<&str> = policy["detail"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|source| source.as_str().unwrap())
        .collect();
    let mut expected = vec![format!("user {}", world.path("policy.toml").display())];
    if mode == Mode::Serve {
        // The config file is the config layer's input (its servers' own blocks).
        expected.push(format!("config {}", world.path("airlock.toml").display()));
    }
    expected.push("builtin builtin:default.toml".into());
    assert_eq!(sources, expected, "{printed}");
}

/// An unknown tool is answered by airlock (the server never sees the name) as the official
/// SDKs' servers answer it: a tool result with `isError: true` naming the tool.
pub(super) fn unknown_tools_get_an_unknown_tool_result(mode: Mode) {
    // A second server (`serve` only), so a name without a server's prefix routes to none.
    let other = format!(
        "[servers.other]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}, \"--name\", \"other\"]",
        support::fixture().display().to_string()
    );
    let (world, mut client) = start(mode, Setup::fixture("").serve_config(&other));
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("no_such_tool"), json!({}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = Client::text(&answer);
    assert!(text.starts_with("Unknown tool: no_such_tool"), "{text}");
    // Audited as every call is, with the rule that refused it (a refusal's records may follow
    // its answer).
    assert!(support::wait_until(SECS(5), || !world
        .events("outcome")
        .is_empty()));
    let decisions = world.events("decision");
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0]["decision"], "deny");
    assert_eq!(decisions[0]["rule"], "airlock: not a listed tool");
    if mode == Mode::Serve {
        let answer = client.call(2, "no_such_tool", json!({"token": "s3cret"}));
        let text = Client::text(&answer);
        assert!(text.starts_with("Unknown tool: no_such_tool"), "{text}");
        let gateway = || -> Vec<Value> {
            world
                .audit()
                .into_iter()
                .filter(|e| e["server"] == "gateway" && e["request_id"] == 2)
                .collect()
        };
        assert!(support::wait_until(SECS(5), || gateway().len() == 2));
        let gateway = gateway();
        let kinds: Vec<&Value> = gateway.iter().map(|e| &e["event"]).collect();
        assert_eq!(
            kinds,
            [&json!("decision"), &json!("outcome")],
            "{gateway:?}"
        );
        assert_eq!(gateway[0]["rule"], "airlock: not a listed tool");
        assert_eq!(gateway[0]["tool"], "no_such_tool");
        assert_eq!(gateway[0]["args"]["token"], "[REDACTED]");
        assert_eq!(gateway[1]["outcome"], "denied");
    }
}

/// A grant of a path this host does not have is skipped by the sandbox: the user hears it when
/// the server is planned (stderr, with the fix), and `airlock check` shows it as missing rather
/// than as bound; so is a variable of the server's environment that names a path it is not
/// granted. The server still starts and works.
pub(super) fn a_granted_path_that_does_not_exist_is_named_not_silently_dropped(mode: Mode) {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("not-yet");
    let setup = || {
        Setup::fixture("")
            .policy(&format!(
                "write = [{:?}]\nenv = [\"DATA_FILE\"]",
                missing.display().to_string()
            ))
            .airlock_env("DATA_FILE", "/srv/not-granted/data.json")
    };
    let (world, mut client) = start(mode, setup());
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("echo"), json!({"text": "works"}));
    assert!(Client::text(&answer).contains("works"), "{answer}");
    client.close_stdin();
    client.wait(SECS(10));
    let stderr = client.stderr();
    let told = format!("{} is granted (policy grant", missing.display());
    assert!(stderr.contains(&told), "{stderr}");
    assert!(stderr.contains("mkdir -p"), "{stderr}");
    // A variable passed to the server that names a path it is not granted: named, not its value.
    assert!(
        stderr.contains("its environment names a path it is not granted (DATA_FILE)"),
        "{stderr}"
    );
    assert!(!stderr.contains("/srv/not-granted"), "{stderr}");
    let check = support::check_command(&world, &setup()).output().unwrap();
    let printed = String::from_utf8_lossy(&check.stdout);
    let shown = format!("write {}  (policy grant", missing.display());
    let line = printed
        .lines()
        .find(|line| line.trim_start().starts_with(&shown))
        .unwrap_or_else(|| panic!("{printed}"));
    assert!(line.contains("missing on this host"), "{line}");
}

/// A server's command line often carries credentials (a host entry's `args`: a database URL
/// with its password, `--api-key=...`): the spawn record keeps the command, masked as
/// `install --dry-run` masks it, never the credentials.
pub(super) fn the_spawn_record_keeps_no_credential_of_the_command_line(mode: Mode) {
    let args = "postgres://user:hunter2pass@localhost/db --api-key=sk-proj-abcdefghijklmnopqrstuvwxyz0123 --password plainpw123 --port 5432 -p S3cr3tPw1 --config {\"apiKey\":\"jsonS3cretValue\"}";
    let (world, mut client) = start(mode, Setup::fixture(args));
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("echo"), json!({"text": "x"}));
    assert!(Client::text(&answer).contains('x'), "{answer}");
    let spawns = world.events("spawn");
    let argv = spawns
        .iter()
        .find_map(|event| event["detail"]["argv"].as_array())
        .unwrap_or_else(|| panic!("{spawns:?}"));
    let shown: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
    assert!(shown.contains(&"postgres://localhost/db"), "{shown:?}");
    assert!(
        shown.contains(&"--port") && shown.contains(&"5432"),
        "{shown:?}"
    );
    let log = std::fs::read_to_string(world.path("audit.jsonl")).unwrap();
    for secret in [
        "hunter2pass",
        "abcdefghijklmnop",
        "plainpw123",
        "S3cr3tPw1",
        "jsonS3cret",
    ] {
        assert!(
            !log.contains(secret),
            "{secret} in the audit log: {shown:?}"
        );
    }
}

/// A server that spends the refusal budget on junk lookups cannot hide what it does next or
/// what went unrecorded: lookups and connections have a budget each, and the count left unsaid
/// is recorded when the sandbox is gone.
pub(super) fn refusals_over_the_budget_are_counted_when_the_server_ends(mode: Mode) {
    let world = network_then_fixture(
        mode,
        "for i in range(605):\n    try: socket.getaddrinfo(f'junk{i}.example', 80)\n    except OSError: pass",
        &["allowed.example".to_string()],
    );
    let refusals = world.events("net_connect");
    let unrecorded = refusals
        .iter()
        .find(|e| e["detail"]["unrecorded"].is_object())
        .unwrap_or_else(|| panic!("no count of unrecorded refusals: {} events", refusals.len()));
    // 605 names, 600 recorded: at least 5 unrecorded (a resolver may ask twice, or for the
    // search list's names too).
    let lookups = unrecorded["detail"]["unrecorded"]["lookups"]
        .as_u64()
        .unwrap();
    assert!(lookups >= 5, "{unrecorded}");
    assert!(
        unrecorded["reason"]
            .as_str()
            .unwrap()
            .contains("were not recorded one by one"),
        "{unrecorded}"
    );
}

/// A server that opens connection after connection to an allowed destination cannot make the
/// audit log grow without bound: 600 connections a minute are recorded one by one (a
/// `net_connect` and a `net_close` each), the rest are counted per destination, with their bytes,
/// and the counts are recorded when the sandbox is gone. Every connection is accounted for.
pub(super) fn allowed_connections_over_the_budget_are_counted_by_destination(mode: Mode) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = std::io::Write::write_all(&mut stream, b"ok");
        }
    });
    // A listener that never reads: a connection that leaves data for it is not gone from the
    // kernel when the server ends, and its end may come after airlock's.
    let stuck = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stuck_port = stuck.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let held: Vec<_> = stuck.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(60));
        drop(held);
    });
    const CONNECTIONS: usize = 650;
    let world = network_then_fixture(
        mode,
        &format!(
            "for i in range({CONNECTIONS}):\n    s = socket.create_connection(('127.0.0.1', {port}))\n    s.sendall(b'hello')\n    s.recv(2)\n    s.close()\ns = socket.create_connection(('127.0.0.1', {stuck_port}))\ns.setblocking(False)\ntry: s.send(b'x' * 8000000)\nexcept BlockingIOError: pass\ns.close()"
        ),
        &[
            format!("127.0.0.1:{port}"),
            format!("127.0.0.1:{stuck_port}"),
        ],
    );
    let connects = world.events("net_connect");
    let (counted, one_by_one): (Vec<&Value>, Vec<&Value>) = connects
        .iter()
        .filter(|e| e["decision"] == "allow")
        .partition(|e| e["detail"]["unrecorded"].is_object());
    assert_eq!(one_by_one.len(), 600, "recorded one by one");
    let closes = world.events("net_close");
    assert_eq!(
        closes.len(),
        600,
        "a net_close for each recorded connection"
    );
    // Every connection over the budget is in the counts, the stuck one too (counted when made:
    // its end came after airlock's). A later record may add the bytes of ends seen after.
    let counted_connections: u64 = counted
        .iter()
        .map(|c| c["detail"]["unrecorded"]["connections"].as_u64().unwrap())
        .sum();
    assert_eq!(
        counted_connections as usize,
        CONNECTIONS - 600 + 1,
        "{counted:?}"
    );
    let counts = counted[0];
    let unrecorded = &counts["detail"]["unrecorded"];
    let destinations = unrecorded["destinations"].as_array().unwrap();
    let stuck_one = destinations
        .iter()
        .find(|d| d["port"] == stuck_port)
        .unwrap_or_else(|| panic!("the stuck connection is counted: {counts}"));
    assert_eq!(stuck_one["connections"], 1, "{counts}");
    let destination = destinations
        .iter()
        .find(|d| d["port"] == port)
        .unwrap_or_else(|| panic!("the short ones are counted: {counts}"));
    assert_eq!(destination["host"], "127.0.0.1", "{counts}");
    assert_eq!(destination["port"], port, "{counts}");
    assert_eq!(destination["connections"], CONNECTIONS - 600, "{counts}");
    assert_eq!(destination["failed"], 0, "{counts}");
    // The bytes are the kernel's counts at each socket's end (as in a `net_close`), summed: each
    // connection sent at most 5 and got at most 2, and what came down was counted.
    let bytes = |key: &str| destination[key].as_u64().unwrap();
    assert!(
        bytes("bytes_up") <= 5 * (CONNECTIONS as u64 - 600),
        "{counts}"
    );
    let down = bytes("bytes_down");
    assert!(
        down > 0 && down <= 2 * (CONNECTIONS as u64 - 600),
        "{counts}"
    );
    // A count spans many calls' time: it is attributed to none.
    assert!(counts.get("request_id").is_none(), "{counts}");
}

/// A server that first runs `python` (with `os` and `socket` imported) under a network allow
/// list, then becomes the fixture server: one call through it, the host's EOF, and airlock's end.
fn network_then_fixture(mode: Mode, python: &str, allow: &[String]) -> support::World {
    let fixture = support::fixture().display().to_string();
    let script = format!(
        "import os, socket\n{python}\nos.execv('/usr/bin/python3', ['/usr/bin/python3', {fixture:?}])\n"
    );
    let fixtures = support::fixture().parent().unwrap().display().to_string();
    let setup = Setup::command(&["/usr/bin/python3", "-c", &script]).policy(&format!(
        "network = {{ allow = {allow:?} }}\nread = [{fixtures:?}]"
    ));
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("echo"), json!({"text": "x"}));
    assert!(Client::text(&answer).contains('x'), "{answer}");
    client.close_stdin();
    assert!(client.wait(SECS(20)).is_some(), "airlock ends");
    world
}

/// A log that reaches `audit.rotate_mb` is rotated while calls go on: the full file keeps a
/// dated name beside the log, the chain goes on in the new file, `airlock audit verify` proves
/// each file and the link to the one before, and only `audit.keep_rotated` rotated files stay.
pub(super) fn the_audit_log_rotates_at_its_size_and_its_chain_goes_on(mode: Mode) {
    let setup = Setup::fixture("").policy("[audit]\nrotate_mb = 1\nkeep_rotated = 2\n");
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    // About 4.6 KB of records a call (the argument is logged whole below 4 KiB): a file fills
    // every 230 calls or so, so 700 calls rotate it three times and the oldest is deleted.
    let text = "r".repeat(4000);
    let tool = world.tool("echo");
    for id in 1..=700 {
        let answer = client.call(id, &tool, json!({ "text": text }));
        assert!(Client::text(&answer).contains(&text), "call {id}: {answer}");
    }
    client.close_stdin();
    assert!(client.wait(SECS(10)).is_some());
    let log = world.path("audit.jsonl");
    let mut rotated: Vec<String> = std::fs::read_dir(world.path(""))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("audit.2") && name.ends_with(".jsonl"))
        .collect();
    rotated.sort();
    assert_eq!(rotated.len(), 2, "{rotated:?}");
    let verify = |file: &std::path::Path| {
        let output = world
            .command(&["audit", "verify", &file.display().to_string()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert_eq!(output.status.code(), Some(0), "{stdout}");
        stdout
    };
    let said = verify(&log);
    assert!(
        said.contains(&format!(
            "goes on from the rotated file {}, whose last line it links to",
            rotated[1]
        )),
        "{said}"
    );
    let said = verify(&world.path(&rotated[1]));
    assert!(
        said.contains(&format!("rotated file {}, whose last line", rotated[0])),
        "{said}"
    );
    let said = verify(&world.path(&rotated[0]));
    assert!(said.contains("which is not here"), "{said}");
    // Every call of the files kept has its decision, the newest file's last calls included.
    let ids: Vec<i64> = rotated
        .iter()
        .map(|name| world.path(name))
        .chain([log])
        .flat_map(|file| support::audit_lines(&file))
        .filter(|record| record["event"] == "decision")
        .map(|record| record["request_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.last(), Some(&700));
    assert!(ids.len() > 400, "{}", ids.len());
    assert!(ids.windows(2).all(|pair| pair[1] == pair[0] + 1));
    // `airlock audit summary` reads the rotated files kept, not only the newest.
    let log = world.path("audit.jsonl").display().to_string();
    let output = world
        .command(&["audit", "summary", "--json", &log])
        .output()
        .unwrap();
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        summary["servers"][world.name.as_str()]["calls"],
        ids.len(),
        "{summary}"
    );
    // `verify --all` proves every file kept and the links between them, and fails at an edit
    // in a rotated file.
    let verify_all = || {
        world
            .command(&["audit", "verify", "--all", &log])
            .output()
            .unwrap()
    };
    let output = verify_all();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    let middle = world.path(&rotated[1]);
    let text = std::fs::read_to_string(&middle).unwrap();
    std::fs::write(&middle, text.replacen("\"rrrr", "\"srrr", 1)).unwrap();
    let output = verify_all();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("{}:", middle.display())) && stdout.contains("was edited"),
        "{stdout}"
    );
}

/// A host that ends airlock with SIGTERM and then SIGKILL before airlock's kill sequence is
/// through (the TypeScript SDK's close waits 2 s; a stubborn server takes the whole sequence):
/// a call answered in the first second after the signal is answered and audited as usual, and
/// one still in flight then has its outcome on record before the SIGKILL. Before, it had a
/// decision and nothing more, and `audit verify` found nothing wrong.
pub(super) fn a_call_in_flight_at_sigterm_has_its_outcome_before_any_sigkill(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--stubborn"));
    client.initialize("2025-06-18");
    for (id, seconds) in [(7, 30.0), (8, 0.5)] {
        client.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name": world.tool("slow"), "arguments": {"seconds": seconds}}}));
    }
    assert!(
        support::wait_until(SECS(10), || world.events("decision").len() == 2),
        "{:?}",
        world.audit()
    );
    client.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(1500));
    client.signal(libc::SIGKILL);
    // Killed by a signal: no exit code to see.
    assert_eq!(client.wait(SECS(10)), None);
    let outcome = |id: i64| {
        let found: Vec<Value> = world
            .events("outcome")
            .into_iter()
            .filter(|e| e["request_id"] == id)
            .collect();
        assert_eq!(found.len(), 1, "{id}: {:?}", world.audit());
        found[0].clone()
    };
    assert_eq!(outcome(8)["outcome"], "ok");
    let abandoned = outcome(7);
    assert_eq!(abandoned["outcome"], "error");
    let reason = abandoned["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("airlock received SIGTERM"), "{reason}");
}

/// Every outcome is held until the next call's decision is written, and goes into the log just
/// before it (see `may_hold` in the session shell); a host that sends nothing more still finds
/// it on record within `HOLD_AT_MOST` (100 ms; 1 s allowed here for a loaded machine), with the
/// session up. Also when the last answer is followed by a line that is not JSON: recording that
/// line releases the held outcome, and both are written at once, not at the next call. A host
/// that waits for each answer reads the log in the order of its calls.
pub(super) fn an_outcome_is_on_record_soon_after_its_answer_while_the_host_waits(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--stray"));
    client.initialize("2025-06-18");
    for (tool, id, dropped) in [("echo", 1, 0), ("echo", 2, 0), ("stray", 3, 1)] {
        let answer = client.call(id, &world.tool(tool), json!({"text": "x"}));
        assert!(!Client::text(&answer).is_empty(), "{answer}");
        let answered = Instant::now();
        let on_record = support::wait_until(SECS(5), || {
            world.events("outcome").len() as i64 == id && world.events("dropped").len() == dropped
        });
        let waited = answered.elapsed();
        assert!(
            on_record,
            "after call {id}, with the session still up: outcomes {:?}, dropped {:?}",
            world.events("outcome"),
            world.events("dropped")
        );
        assert!(waited < SECS(1), "call {id}'s outcome took {waited:?}");
    }
    assert!(
        client.wait(Duration::from_millis(20)).is_none(),
        "the session is still up"
    );
    let ids: Vec<Value> = world
        .events("outcome")
        .iter()
        .map(|e| e["request_id"].clone())
        .collect();
    assert_eq!(ids, [json!(1), json!(2), json!(3)], "each outcome once");
    // Calls one after another, each sent as soon as the last is answered: each outcome still
    // comes before the next call's decision.
    for id in 4..=6 {
        let answer = client.call(id, &world.tool("echo"), json!({"text": "x"}));
        assert!(!Client::text(&answer).is_empty(), "{answer}");
    }
    assert!(support::wait_until(SECS(5), || world
        .events("outcome")
        .len()
        == 6));
    let calls: Vec<String> = world
        .audit()
        .iter()
        .filter(|e| e["event"] == "decision" || e["event"] == "outcome")
        .filter(|e| e["server"] == world.name.as_str())
        .map(|e| format!("{} {}", e["event"].as_str().unwrap_or("?"), e["request_id"]))
        .collect();
    let in_call_order: Vec<String> = (1..=6)
        .flat_map(|id| [format!("decision {id}"), format!("outcome {id}")])
        .collect();
    assert_eq!(calls, in_call_order, "in the order of the calls");
}

/// `--audit /dev/null` is a user's way of keeping no log: the server still starts and answers
/// (the audit log is a path no grant may expose, and every server's own /dev holds a /dev/null,
/// so its sandbox refused to start), and airlock says that nothing is kept.
/// So is any device every server's own /dev holds (`/dev/zero` was refused the same way after the
/// first fix: found by a review).
pub(super) fn an_audit_log_of_dev_null_keeps_nothing_and_the_server_still_runs(mode: Mode) {
    for device in ["/dev/null", "/dev/zero"] {
        let setup = Setup::fixture("").audit(device);
        let (world, mut client) = start(mode, setup);
        client.initialize("2025-06-18");
        client.request(1, "tools/list", json!({}));
        let answer = client.call(2, &world.tool("echo"), json!({"text": "kept nowhere"}));
        assert!(
            Client::text(&answer).contains("kept nowhere"),
            "{device}: {answer}"
        );
        client.close_stdin();
        assert!(client.wait(SECS(10)).is_some());
        let stderr = client.stderr();
        assert!(
            stderr.contains("no record of the calls is kept"),
            "{device}: {stderr}"
        );
    }
}
