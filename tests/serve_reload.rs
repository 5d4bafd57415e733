//! `airlock serve` reloads its config and policies on SIGHUP and `airlock reload`: a changed or
//! new server starts before the old one is dropped, calls in flight finish, a bad file keeps the
//! running state and says why, and every reload is audited.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Client, Mode, Setup, fixture, processes_with, start, wait_until};

/// A label for the first server that no other process on the machine has in its command line.
fn unique_label(what: &str) -> String {
    format!("{what}-{}", std::process::id())
}

fn server(name: &str, label: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}, \"--name\", {label:?}]\n",
        fixture().display().to_string()
    )
}

#[test]
fn sighup_and_airlock_reload_swap_servers_without_dropping_calls() {
    let v1 = unique_label("v1");
    let (world, mut client) = start(Mode::Serve, Setup::fixture(&format!("--name {v1}")));
    client.initialize("2025-06-18");
    client.request(9, "tools/list", json!({}));
    assert_eq!(
        Client::text(&client.call(1, "fixture__echo", json!({"text": "a"}))),
        format!("{v1}: a")
    );
    // A call in flight across the reload.
    client.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fixture__slow","arguments":{"seconds":1.5}}}));
    std::thread::sleep(Duration::from_millis(200));

    let config = world.path("airlock.toml");
    let good = format!("{}\n{}", server("fixture", "v2"), server("extra", "extra"));
    std::fs::write(&config, &good).unwrap();
    client.signal(libc::SIGHUP);
    // A host that listed tools hears that they changed.
    let changed = (0..50)
        .filter_map(|_| client.next(Duration::from_millis(200)))
        .find(|m| m["method"] == "notifications/tools/list_changed");
    assert!(changed.is_some(), "no list_changed after the reload");
    // The changed server answers new calls at once; the new one is there.
    let answer = client.call(3, "fixture__echo", json!({"text": "b"}));
    assert_eq!(Client::text(&answer), "v2: b");
    assert_eq!(
        Client::text(&client.call(4, "extra__echo", json!({"text": "c"}))),
        "extra: c"
    );
    let slow = client.answer(json!(2), Duration::from_secs(10));
    assert_eq!(
        Client::text(&slow),
        "slow done",
        "the call in flight finished: {slow}"
    );
    // With its call answered, the replaced server is stopped: its process is gone.
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&v1).is_empty()),
        "the replaced server still runs after its last call was answered: {:?}",
        processes_with(&v1)
    );
    // Its exit is audited with why airlock stopped it.
    assert!(
        wait_until(Duration::from_secs(5), || world.audit().iter().any(
            |e| e["event"] == "exit"
                && e["server"] == "fixture"
                && e["detail"]["stopped_because"] == "replaced by a reload"
        )),
        "{:#?}",
        world.audit()
    );

    // A bad file: the running state stays, and the reason is given.
    std::fs::write(&config, "[servers.fixture\nbroken").unwrap();
    let out = world.command(&["reload"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("not reloaded"), "{said}");
    // The reason as the gateway wrote it: file:line:col, then its fix on a line of its own.
    assert!(
        said.contains(&format!("not reloaded: {}:1:", config.display()))
            && said
                .lines()
                .any(|line| line.trim_start().starts_with("fix:")),
        "{said}"
    );
    assert_eq!(
        Client::text(&client.call(5, "fixture__echo", json!({"text": "d"}))),
        "v2: d"
    );
    // airlock reload with a good file again: nothing changed, nothing restarted.
    std::fs::write(&config, &good).unwrap();
    let out = world.command(&["reload"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("reloaded"), "{said}");

    client.close_stdin();
    client.wait(Duration::from_secs(10)).expect("exits");
    let stderr = client.stderr();
    assert!(stderr.contains("reload failed"), "{stderr}");
    let audit = world.audit();
    let policies: Vec<String> = audit
        .iter()
        .filter(|e| e["event"] == "policy")
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        policies.len(),
        4,
        "start, reload, failed reload, reload: {policies:?}"
    );
    assert!(policies[1].starts_with("reload of"), "{policies:?}");
    assert!(policies[2].contains("reload failed"), "{policies:?}");
    let spawns = audit
        .iter()
        .filter(|e| e["event"] == "spawn" && e["server"] == "fixture")
        .count();
    assert_eq!(
        spawns, 2,
        "v1, then v2; the unchanged reload restarts nothing"
    );
    let exits = audit
        .iter()
        .filter(|e| e["event"] == "exit" && e["server"] == "fixture")
        .count();
    assert_eq!(exits, 2);
}

#[test]
fn a_policy_change_applies_to_new_calls_and_a_bad_policy_keeps_the_running_one() {
    let (world, mut client) = start(Mode::Serve, Setup::fixture("--name v1"));
    client.initialize("2025-06-18");
    client.request(9, "tools/list", json!({}));
    assert_eq!(
        Client::text(&client.call(1, "fixture__echo", json!({"text": "a"}))),
        "v1: a"
    );
    // A call in flight across the reload finishes under the policy it was allowed by.
    client.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fixture__slow","arguments":{"seconds":1.5}}}));
    std::thread::sleep(Duration::from_millis(200));
    let policy = world.path("policy.toml");
    let sandbox = "version = 1\n[sandbox]\nrun_as = \"root\"\nkill_timeout = 1\n";
    let denying = format!("{sandbox}[tools]\ndeny = [\"mcp:fixture__echo\"]\n");
    std::fs::write(&policy, &denying).unwrap();
    client.signal(libc::SIGHUP);
    let denied = support::wait_until(Duration::from_secs(10), || {
        let answer = client.call(3, "fixture__echo", json!({"text": "b"}));
        answer["result"]["isError"] == true
    });
    assert!(denied, "the reloaded policy denies echo");
    let slow = client.answer(json!(2), Duration::from_secs(10));
    assert_eq!(Client::text(&slow), "slow done", "{slow}");
    // The server was left running, and its tools are listed through the new policy.
    let listed = client.request(10, "tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"fixture__pid") && !names.contains(&"fixture__echo"),
        "{names:?}"
    );

    // A bad policy file (by SIGHUP): the running policy stays, and stderr says why.
    std::fs::write(&policy, "version = 1\n[tools\ndeny = [").unwrap();
    client.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(500));
    let still = client.call(4, "fixture__echo", json!({"text": "c"}));
    assert_eq!(still["result"]["isError"], true, "still denied: {still}");
    let other = client.call(5, "fixture__pid", json!({}));
    assert!(
        other["result"].is_object(),
        "the server still answers: {other}"
    );

    client.close_stdin();
    client.wait(Duration::from_secs(10)).expect("exits");
    let stderr = client.stderr();
    assert!(stderr.contains("reload failed"), "{stderr}");
    assert!(
        stderr.contains("policy.toml:2"),
        "file and line of the bad policy: {stderr}"
    );
    let failed = world
        .audit()
        .into_iter()
        .filter(|e| e["event"] == "policy")
        .filter(|e| {
            e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("reload failed"))
        })
        .count();
    assert_eq!(failed, 1, "the failed reload is audited");
}

#[test]
fn a_bad_config_by_sighup_while_a_call_is_in_flight_keeps_the_running_server() {
    let v1 = unique_label("kept");
    let (world, mut client) = start(Mode::Serve, Setup::fixture(&format!("--name {v1}")));
    client.initialize("2025-06-18");
    client.request(9, "tools/list", json!({}));
    client.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fixture__slow","arguments":{"seconds":1.5}}}));
    std::thread::sleep(Duration::from_millis(200));
    let running = processes_with(&v1);
    assert!(!running.is_empty(), "the server runs");

    std::fs::write(world.path("airlock.toml"), "[servers.fixture\nbroken").unwrap();
    client.signal(libc::SIGHUP);
    let slow = client.answer(json!(2), Duration::from_secs(10));
    assert_eq!(
        Client::text(&slow),
        "slow done",
        "the call in flight finished: {slow}"
    );
    // The same server, the same process, answers the next call.
    assert_eq!(
        Client::text(&client.call(3, "fixture__echo", json!({"text": "b"}))),
        format!("{v1}: b")
    );
    assert_eq!(processes_with(&v1), running);

    client.close_stdin();
    client.wait(Duration::from_secs(10)).expect("exits");
    let stderr = client.stderr();
    assert!(stderr.contains("reload failed"), "{stderr}");
    assert!(
        stderr.contains("airlock.toml:1"),
        "where the file is bad: {stderr}"
    );
    let audit = world.audit();
    let failed = audit
        .iter()
        .filter(|e| e["event"] == "policy")
        .filter(|e| {
            e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("reload failed"))
        })
        .count();
    assert_eq!(failed, 1, "the failed reload is audited");
    let spawns = audit
        .iter()
        .filter(|e| e["event"] == "spawn" && e["server"] == "fixture")
        .count();
    assert_eq!(spawns, 1, "nothing restarted");
}

/// A config given relative to serve's directory, with a per-server sandbox block (whose origin,
/// the config file, is part of the server's sandbox plan): a reload from another directory that
/// changes nothing keeps the running server.
#[test]
fn a_reload_that_changes_nothing_keeps_a_server_with_its_own_sandbox_block() {
    let label = unique_label("kept");
    let setup = Setup::fixture(&format!("--name {label}")).serve_config(
        "start = \"eager\"\n[servers.fixture.sandbox]\nread = [\"/usr/share/zoneinfo\"]",
    );
    let (world, mut client) = start(Mode::Serve, setup);
    client.initialize("2025-06-18");
    assert_eq!(
        Client::text(&client.call(1, "fixture__echo", json!({"text": "a"}))),
        format!("{label}: a")
    );
    let out = world
        .command(&["reload"])
        .current_dir("/")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(r#"started [], retiring [], unchanged ["fixture"]"#),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each gateway is named by its config file (absolute) and pid.
    let config = std::fs::canonicalize(world.path("airlock.toml")).unwrap();
    assert!(
        said.starts_with(&format!("{} (gateway pid ", config.display())),
        "{said}"
    );
    assert_eq!(
        Client::text(&client.call(2, "fixture__echo", json!({"text": "b"}))),
        format!("{label}: b")
    );
    let spawns = world
        .audit()
        .iter()
        .filter(|event| event["event"] == "spawn")
        .count();
    assert_eq!(spawns, 1, "{:#?}", world.audit());
}

#[test]
fn a_reload_sets_how_the_audit_log_rotates_and_never_moves_it() {
    let setup = Setup::fixture("").policy("[audit]\nrotate_mb = 0\n");
    let (world, mut client) = start(Mode::Serve, setup);
    client.initialize("2025-06-18");
    // About 4.6 KB of records a call: 250 calls pass 1 MiB, with rotation off.
    let text = "r".repeat(4000);
    let echo = |client: &mut Client, id: i64| {
        let answer = client.call(id, "fixture__echo", json!({ "text": text }));
        assert!(Client::text(&answer).contains(&text), "call {id}: {answer}");
    };
    for id in 1..=250 {
        echo(&mut client, id);
    }
    let log = world.path("audit.jsonl");
    let rotated = || {
        std::fs::read_dir(world.path(""))
            .unwrap()
            .filter_map(|entry| entry.unwrap().file_name().into_string().ok())
            .filter(|name| name.starts_with("audit.2") && name.ends_with(".jsonl"))
            .count()
    };
    assert!(std::fs::metadata(&log).unwrap().len() > 1024 * 1024);
    assert_eq!(rotated(), 0);

    // The reloaded policy rotates at 1 MiB: the next call's records rotate the file.
    let policy = world.path("policy.toml");
    let text_of_policy = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(
        &policy,
        text_of_policy.replace("rotate_mb = 0", "rotate_mb = 1"),
    )
    .unwrap();
    let out = world.command(&["reload"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    echo(&mut client, 251);
    assert!(
        wait_until(Duration::from_secs(5), || rotated() == 1),
        "the reloaded rotate_mb was not applied: {} rotated file(s)",
        rotated()
    );

    // An org policy that pins the log elsewhere: the reload is refused whole and says how to
    // move it; the gateway goes on writing its log.
    let elsewhere = world.path("elsewhere.jsonl");
    std::fs::write(
        world.path("org/policy.toml"),
        format!(
            "version = 1\n[audit]\npath = {:?}\n[tools]\ndeny = [\"mcp:fixture__echo\"]\n",
            elsewhere.display().to_string()
        ),
    )
    .unwrap();
    let out = world.command(&["reload"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("cannot move the audit log") && said.contains("restart `airlock serve`"),
        "{said}"
    );
    // Nothing of that policy is in force: echo is still allowed, and audited where it was.
    echo(&mut client, 252);
    client.close_stdin();
    client.wait(Duration::from_secs(10)).expect("exits");
    assert!(!elsewhere.exists());
    let decided: Vec<Value> = world
        .audit()
        .into_iter()
        .filter(|e| e["event"] == "decision" && e["request_id"] == 252)
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["decision"], "allow", "{decided:?}");
    let verify = world
        .command(&["audit", "verify", "--all", &log.display().to_string()])
        .output()
        .unwrap();
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}
