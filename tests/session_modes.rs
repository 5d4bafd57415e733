//! The session core's rules, each proven once and run in both modes (`airlock run` and
//! `airlock serve`), end to end: the real binary, a real confined server (the fixture, which
//! misbehaves on request), a line-level host.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Client, Mode, Setup, start};

#[path = "session_modes/broken_peers.rs"]
mod broken_peers;
use broken_peers::*;
#[path = "session_modes/forwarding.rs"]
mod forwarding;
use forwarding::*;
#[path = "session_modes/audit_records.rs"]
mod audit_records;
use audit_records::*;
#[path = "session_modes/value_readings.rs"]
mod value_readings;
use value_readings::*;

#[path = "session_modes/eras.rs"]
mod eras;
use eras::*;
#[path = "session_modes/confirmations.rs"]
mod confirmations;
use confirmations::*;

const SECS: fn(u64) -> Duration = Duration::from_secs;

both_modes!(
    refusals_over_the_budget_are_counted_when_the_server_ends,
    allowed_connections_over_the_budget_are_counted_by_destination,
    the_spawn_record_keeps_no_credential_of_the_command_line,
    no_deadlock_with_large_concurrent_requests_while_the_server_writes,
    no_deadlock_when_the_host_writes_everything_before_reading,
    host_eof_closes_the_servers_input_at_once_and_keeps_its_status,
    what_the_host_asked_before_its_eof_is_still_answered,
    a_host_on_sockets_that_goes_away_ends_the_session_at_once,
    a_silent_server_with_egress_ends_with_the_session_after_the_hosts_eof,
    junk_from_a_server_is_capped_in_audit_and_stderr,
    duplicate_and_broken_answers_never_reach_the_host,
    a_server_cannot_keep_questions_waiting_for_the_host_without_end,
    an_answer_naming_its_id_twice_reaches_the_host_with_one,
    duplicate_host_ids_in_flight_are_handled_once,
    a_call_pending_when_the_server_dies_gets_one_shape_of_answer,
    timeouts_answer_the_host_and_cancel_at_the_server,
    decisions_are_audited_with_the_hosts_id_and_the_policy_digest,
    batches_are_answered_together_in_2025_03_26,
    unknown_tools_get_an_unknown_tool_result,
    sigterm_stops_through_the_kill_sequence_with_an_exit_event,
    a_call_in_flight_at_sigterm_has_its_outcome_before_any_sigkill,
    a_host_that_closes_its_output_ends_the_session,
    malformed_host_input_gets_errors_and_the_session_goes_on,
    a_sandbox_that_cannot_be_set_up_tells_the_host_the_step_and_the_fix,
    a_runner_airlock_does_not_fetch_for_tells_how_to_fill_its_cache,
    a_container_engine_is_refused_with_why_and_what_to_run_instead,
    a_host_that_never_reads_stderr_freezes_nothing,
    a_cancelled_batch_member_does_not_hold_back_the_others,
    a_2024_11_05_session_works_end_to_end,
    list_changed_and_task_status_reach_the_host,
    a_server_that_stops_reading_gets_requests_answered_with_errors,
    a_servers_terminal_escapes_on_stderr_are_shown_not_acted,
    a_project_policy_may_not_blank_the_audit_log,
    an_outcome_is_on_record_soon_after_its_answer_while_the_host_waits,
    a_listing_reaches_the_host_with_only_the_spellings_airlock_checked,
    a_refused_task_augmented_call_is_an_error_naming_the_rule,
    an_allowed_call_goes_on_as_the_bytes_the_host_sent,
    a_session_whose_host_goes_quiet_sleeps,
    a_carriage_return_cannot_split_a_call_into_two_for_the_server,
    a_carriage_return_cannot_split_an_answer_into_two_for_the_host,
    an_argument_rule_fires_on_every_spelling_a_server_reads_as_the_same,
    an_allow_rule_holds_for_a_list_or_object_only_through_every_part,
    only_a_yes_to_a_confirmation_forwards_the_call,
    a_session_keeps_the_era_of_its_one_handshake,
    a_2026_host_gets_only_what_its_era_has,
    a_session_speaks_one_era_and_each_request_carries_it,
    a_call_in_no_era_gets_an_error_and_the_session_still_opens_in_2026,
    a_batch_is_answered_with_one_array_whatever_its_elements,
    a_host_that_does_not_read_its_answers_is_named_for_the_refusals,
    progress_reaches_the_host_only_for_a_request_still_running,
    an_audit_log_of_dev_null_keeps_nothing_and_the_server_still_runs,
    a_servers_own_question_in_a_result_is_taken_out_by_a_gateway,
    a_path_through_a_process_handle_fails_closed,
    the_gate_reads_a_value_as_a_server_cleans_it,
    a_granted_path_that_does_not_exist_is_named_not_silently_dropped,
    a_server_that_dies_at_start_is_told_with_its_last_stderr_line,
    the_audit_log_rotates_at_its_size_and_its_chain_goes_on,
);

/// 16 calls with 200 KiB arguments written while the answers (200 KiB each) are read: the
/// server blocks writing its own output whenever airlock does not read it at once.
fn no_deadlock_with_large_concurrent_requests_while_the_server_writes(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--hostile"));
    client.initialize("2025-06-18");
    let data = "x".repeat(200 * 1024);
    let tool = world.tool("big");
    let mut stdin = client.stdin.take().unwrap();
    let lines: Vec<String> = (1..=16)
        .map(|id| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"data":data}}}).to_string())
        .collect();
    let writer = std::thread::spawn(move || {
        for line in lines {
            writeln!(stdin, "{line}").unwrap();
        }
        stdin
    });
    let started = Instant::now();
    for id in 1..=16 {
        let answer = client.answer(json!(id), SECS(30));
        assert_eq!(Client::text(&answer).len(), data.len(), "answer {id}");
    }
    assert!(started.elapsed() < SECS(30));
    client.stdin = Some(writer.join().unwrap());
    client.close_stdin();
    assert!(
        client.wait(SECS(10)).is_some(),
        "airlock exits after the host's EOF"
    );
    assert_eq!(world.events("outcome").len(), 16);
}

/// The other direction: the host writes all 16 large calls before it reads anything, so the
/// answers pile up toward a host that is not reading while more requests keep coming.
fn no_deadlock_when_the_host_writes_everything_before_reading(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--hostile"));
    client.initialize("2025-06-18");
    let data = "y".repeat(200 * 1024);
    let tool = world.tool("big");
    let stdin = client.stdin.as_mut().unwrap();
    for id in 1..=16 {
        let line = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"data":data}}});
        // Blocks (and would hang the test) if airlock stopped reading the host.
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    for id in 1..=16 {
        let answer = client.answer(json!(id), SECS(30));
        assert_eq!(Client::text(&answer).len(), data.len(), "answer {id}");
    }
    assert_eq!(world.events("decision").len(), 16);
}

/// Host EOF: the server's input closes at once; a server that exits on EOF is not signalled,
/// and `run` exits with the server's own status.
fn host_eof_closes_the_servers_input_at_once_and_keeps_its_status(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--exit-code 7"));
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("echo"), json!({"text": "before eof"}));
    assert!(Client::text(&answer).contains("before eof"));
    let closed = Instant::now();
    client.close_stdin();
    let code = client.wait(SECS(10)).expect("airlock exits");
    assert!(
        closed.elapsed() < Duration::from_millis(450),
        "no kill sequence needed: {:?}",
        closed.elapsed()
    );
    let expected = if mode == Mode::Run { 7 } else { 0 };
    assert_eq!(code, expected);
    let exit = world.events("exit");
    assert_eq!(exit.len(), 1, "{exit:?}");
    assert_eq!(exit[0]["detail"]["ended_by"], "stdinclosed");
    assert_eq!(exit[0]["detail"]["code"], 7);
    assert_eq!(exit[0]["reason"], "ended when its input closed");
}

/// A host that writes its requests and closes its input at once (`printf ... | airlock ...`)
/// still gets every answer: a listing and a call that takes longer than the kill sequence's
/// first wait (0.5 s), from a server that finishes its work after EOF as Node servers do. Then
/// the session ends, in `run` with the server's own status.
fn what_the_host_asked_before_its_eof_is_still_answered(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--patient --exit-code 5"));
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    client.send(init);
    client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    client.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    let slow = json!({"name": world.tool("slow"), "arguments": {"seconds": 1.5}});
    client.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":slow}));
    client.close_stdin();
    let listed = client.answer(json!(1), SECS(20));
    let tools = listed["result"]["tools"].as_array().expect("a listing");
    assert!(
        tools.iter().any(|t| t["name"] == world.tool("slow")),
        "{listed}"
    );
    let called = client.answer(json!(2), SECS(20));
    assert_eq!(Client::text(&called), "slow done", "{called}");
    let code = client
        .wait(SECS(10))
        .expect("airlock exits once everything is answered");
    assert_eq!(code, if mode == Mode::Run { 5 } else { 0 });
    let exit = world.events("exit");
    assert_eq!(exit.len(), 1, "{exit:?}");
    assert_eq!(exit[0]["detail"]["code"], 5, "{exit:?}");
    let outcomes = world.events("outcome");
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert_eq!(outcomes[0]["outcome"], "ok", "{outcomes:?}");
}

/// A Node host gives its server sockets, not pipes. When such a host goes away with a call in
/// flight (both its ends close), nobody will read the answer: the session ends at once, not at
/// the call's timeout (180 s here).
fn a_host_on_sockets_that_goes_away_ends_the_session_at_once(mode: Mode) {
    use std::io::{BufRead, BufReader};
    let (world, mut child, mut host_in, host_out) =
        support::start_on_sockets(mode, Setup::fixture("--stubborn"));
    let mut answers = BufReader::new(host_out.try_clone().unwrap());
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    writeln!(host_in, "{init}").unwrap();
    let mut line = String::new();
    answers.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":0"), "{line}");
    writeln!(
        host_in,
        "{}",
        json!({"jsonrpc":"2.0","method":"notifications/initialized"})
    )
    .unwrap();
    let hang = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name": world.tool("hang"), "arguments": {}}});
    writeln!(host_in, "{hang}").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let gone = Instant::now();
    drop((host_in, host_out, answers));
    let exited = support::wait_until(SECS(10), || child.try_wait().unwrap().is_some());
    assert!(exited, "airlock waits for a host that is gone");
    // The kill sequence of a stubborn server (0.5 s, SIGTERM, kill_timeout 1 s, SIGKILL).
    assert!(gone.elapsed() < SECS(5), "{:?}", gone.elapsed());
    let outcomes = world.events("outcome");
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
}

fn timeouts_answer_the_host_and_cancel_at_the_server(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("").tool_timeout(1));
    client.initialize("2025-06-18");
    let started = Instant::now();
    let answer = client.call(1, &world.tool("hang"), json!({}));
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    assert!(started.elapsed() < SECS(5));
    assert!(support::wait_until(SECS(5), || !world
        .events("outcome")
        .is_empty()));
    let outcome = &world.events("outcome")[0];
    assert_eq!(outcome["outcome"], "timeout");
    assert_eq!(outcome["request_id"], 1);
}

/// 2025-03-26 had JSON-RPC batches: each request is gated on its own, the answers come back as
/// one array.
fn batches_are_answered_together_in_2025_03_26(mode: Mode) {
    let setup = Setup::fixture("").policy("[tools]\ndeny = [\"mcp:fixture__pid\"]");
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-03-26");
    let call = |id: i64, tool: &str| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":world.tool(tool),"arguments":{"text":"b"}}});
    client.send(json!([call(1, "echo"), call(2, "pid"), {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}}]));
    let batch = client.next(SECS(10)).expect("an answer");
    let items = batch
        .as_array()
        .unwrap_or_else(|| panic!("one array: {batch}"));
    let mut ids: Vec<i64> = items.iter().map(|m| m["id"].as_i64().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2]);
    assert_eq!(world.events("decision").len(), 2);
}

/// A request of a batch that the host cancels is never answered (as the protocol says), so the
/// batch's array carries the other answers as soon as they are in, and the session goes on.
fn a_cancelled_batch_member_does_not_hold_back_the_others(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-03-26");
    let call = |id: i64, tool: &str| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":world.tool(tool),"arguments":{"text":"b"}}});
    client.send(json!([call(1, "hang"), call(2, "echo")]));
    std::thread::sleep(Duration::from_millis(300));
    client.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}));
    let batch = client.next(SECS(10)).expect("the batch's answers");
    let items = batch
        .as_array()
        .unwrap_or_else(|| panic!("one array: {batch}"));
    assert_eq!(items.len(), 1, "{batch}");
    assert_eq!(items[0]["id"], 2);
    assert!(Client::text(&items[0]).contains('b'), "{batch}");
    let after = client.call(3, &world.tool("echo"), json!({"text": "after"}));
    assert!(Client::text(&after).contains("after"), "{after}");
    client.close_stdin();
    let rest = client.rest(SECS(10));
    assert!(
        rest.iter().all(|m| m["id"] != 1),
        "no answer to the cancelled: {rest:?}"
    );
}

/// SIGTERM: every server through the kill sequence, then the exit event.
fn sigterm_stops_through_the_kill_sequence_with_an_exit_event(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--stubborn"));
    client.initialize("2025-06-18");
    client.call(1, &world.tool("echo"), json!({"text": "up"}));
    client.signal(libc::SIGTERM);
    let code = client.wait(SECS(10)).expect("exits");
    assert_eq!(code, 0);
    let exit = world.events("exit");
    assert_eq!(exit.len(), 1);
    assert_eq!(exit[0]["detail"]["ended_by"], "sigkill", "{exit:?}");
    assert_eq!(exit[0]["reason"], "stopped by airlock");
    assert_eq!(
        exit[0]["detail"]["stopped_because"],
        "airlock received SIGTERM"
    );
}

/// A host that closes its end of airlock's stdout is gone: the session ends, with the exit
/// event, instead of executing calls whose answers nobody receives.
fn a_host_that_closes_its_output_ends_the_session(mode: Mode) {
    let (world, mut child) = support::start_raw(mode, Setup::fixture("--stubborn"));
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let _ = writeln!(stdin, "{init}");
    let exited = support::wait_until(SECS(10), || child.try_wait().unwrap().is_some());
    assert!(exited, "airlock keeps running for a host that is gone");
    let audit = world.audit();
    assert_eq!(audit.last().unwrap()["event"], "exit", "{audit:?}");
    drop(stdin);
}

/// Framing limits and unreadable input from the host: an error answer each, at once (not held
/// until the host sends something else), and the session goes on.
fn malformed_host_input_gets_errors_and_the_session_goes_on(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-06-18");
    let stdin = client.stdin.as_mut().unwrap();
    stdin.write_all(b"{not json\n").unwrap();
    stdin.flush().unwrap();
    let alone = client
        .next(SECS(5))
        .expect("the answer to a line that is not JSON, with nothing sent after it");
    assert_eq!(alone["error"]["code"], json!(-32700), "{alone}");
    let stdin = client.stdin.as_mut().unwrap();
    stdin.write_all(b"{not json\n").unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":4}\n")
        .unwrap();
    let mut huge = vec![b'['; 5 * 1024 * 1024];
    huge.push(b'\n');
    stdin.write_all(&huge).unwrap();
    stdin
        .write_all(b"[{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}]\n")
        .unwrap();
    stdin.flush().unwrap();
    let mut errors = Vec::new();
    for _ in 0..4 {
        let answer = client.next(SECS(10)).expect("an error answer");
        errors.push((answer["id"].clone(), answer["error"]["code"].clone()));
    }
    assert_eq!(
        errors,
        vec![
            (Value::Null, json!(-32700)),
            (json!(4), json!(-32600)),
            (Value::Null, json!(-32600)),
            (Value::Null, json!(-32600)),
        ]
    );
    let answer = client.call(10, &world.tool("echo"), json!({"text": "after"}));
    assert!(Client::text(&answer).contains("after"));
}

/// A grant that leads to the home through a symlink passes the plan (the name is not the home)
/// and is refused by the confine helper when it builds the server's root. The host's answer
/// carries the helper's sentence (the step, the grant, what to change), not only "it exited":
/// in run the answer to `initialize` (the server's own), in serve the answer to the call.
fn a_sandbox_that_cannot_be_set_up_tells_the_host_the_step_and_the_fix(mode: Mode) {
    // The same world first with a server that works.
    let (world, mut client) = start(mode, Setup::fixture(""));
    client.initialize("2025-06-18");
    let echoed = client.call(1, &world.tool("echo"), json!({"text":"hi"}));
    assert!(Client::text(&echoed).contains("hi"), "{echoed}");
    client.close_stdin();
    assert!(client.wait(SECS(10)).is_some());
    let link = world.path("homelink");
    std::os::unix::fs::symlink(world.path("home"), &link).unwrap();
    let setup = Setup::fixture("").policy(&format!("write = [{:?}]", link.display().to_string()));
    let mut client = support::start_again(&world, setup);
    let (told, init) = what_the_host_is_told(mode, &world, &mut client);
    for part in [
        "the sandbox could not be set up: its `server root` step failed",
        &link.display().to_string(),
        "Fix: remove or narrow the grant",
    ] {
        assert!(
            told.contains(part),
            "{part:?} not in the host's answer: {told}\n{init}"
        );
    }
    assert!(!told.contains("its output closed"), "{told}");
}

/// What the host is told about a server that fails at once: in run the error answering its
/// `initialize` (the server's own), in serve the result of a call to the server; and the
/// `initialize` answer.
fn what_the_host_is_told(
    mode: Mode,
    world: &support::World,
    client: &mut Client,
) -> (String, Value) {
    let params = json!({"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}});
    let init = client.request(0, "initialize", params);
    let told = match mode {
        Mode::Run => init["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        Mode::Serve => {
            client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
            let answer = client.call(1, &world.tool("echo"), json!({"text":"hi"}));
            assert_eq!(answer["result"]["isError"], true, "{answer}");
            Client::text(&answer)
        }
    };
    (told, init)
}

/// An executable shell script at `path` standing in for a program: `body` after its `#!`.
fn stand_in(path: &std::path::Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mut permissions = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(path, permissions).unwrap();
}

/// A `bun x`/`deno run npm:` server whose package cannot be fetched (stand-in runners that fail
/// as bun and deno do offline): the host is told how to fill the runner's cache, not only the
/// exit code, whether airlock ran no install step (a command line it cannot read) or its install
/// step failed. (The real runtimes' first use: tests/first_use_runners.rs.)
fn a_runner_airlock_does_not_fetch_for_tells_how_to_fill_its_cache(mode: Mode) {
    let bin = tempfile::tempdir().unwrap();
    for runner in ["bun", "deno"] {
        stand_in(
            &bin.path().join(runner),
            "echo \"error: the package is not in the cache and the network is offline\" >&2\nexit 1",
        );
    }
    let bun = bin.path().join("bun").display().to_string();
    let deno = bin.path().join("deno").display().to_string();
    for (command, expected) in [
        // A command line airlock cannot read with certainty: no install step, and the exit
        // tells how to fill the cache.
        (
            vec![
                bun.as_str(),
                "x",
                "--an-option-airlock-does-not-know",
                "@scope/server",
            ],
            vec![
                "exit code 1",
                "airlock did not install @scope/server for this command line; if it is not in bun's cache yet, run `bunx @scope/server` once outside airlock",
            ],
        ),
        // One it reads: the install step runs (this deno fails it) and its failure tells how
        // to fill the cache.
        (
            vec![deno.as_str(), "run", "-A", "npm:@scope/server@1"],
            vec![
                "installing @scope/server@1",
                "exited with 1: error: the package is not in the cache and the network is offline",
                "run `deno cache npm:@scope/server@1` once outside airlock",
            ],
        ),
    ] {
        let (world, mut client) = start(mode, Setup::command(&command));
        let (told, init) = what_the_host_is_told(mode, &world, &mut client);
        for part in expected {
            assert!(
                told.contains(part),
                "{command:?}: {part:?} not in: {told}\n{init}"
            );
        }
    }
}

/// A server started through a container engine cannot run inside the sandbox (docker's socket
/// is root on the machine): it is refused at launch, `--trust` or not, and the host is told why
/// and what to run instead, not a container CLI's last line of usage.
fn a_container_engine_is_refused_with_why_and_what_to_run_instead(mode: Mode) {
    let bin = tempfile::tempdir().unwrap();
    let docker = bin.path().join("docker");
    stand_in(&docker, "echo \"Run 'docker run --help'\" >&2\nexit 126");
    let docker = docker.display().to_string();
    let setup = Setup::command(&[&docker, "run", "-i", "--rm", "ghcr.io/x/server"])
        .policy(&format!("[launch]\nallow_commands = [{docker:?}]\n"));
    let (world, mut client) = start(mode, setup);
    let told = match mode {
        // `run` refuses before its session: exit 2 and why on stderr, as for any launch refusal.
        Mode::Run => {
            assert_eq!(client.wait(SECS(10)), Some(2));
            client.stderr()
        }
        Mode::Serve => what_the_host_is_told(mode, &world, &mut client).0,
    };
    assert!(told.contains("is a container engine"), "{told}");
    assert!(told.contains("npx -y PACKAGE"), "{told}");
    assert!(!told.contains("docker run --help"), "{told}");
}

/// A host that reads only stdout: the server writes 4 MB to stderr (far past the pipe's 64 KiB
/// and airlock's 1 MiB queue), and calls are still answered, the tool timeout still fires, and
/// SIGTERM still stops the session. Once the host reads stderr, it learns how many lines it
/// missed.
fn a_host_that_never_reads_stderr_freezes_nothing(mode: Mode) {
    let setup = Setup::fixture("--extra").tool_timeout(2);
    let (world, mut client, stderr) = support::start_with_stderr_unread(mode, setup);
    client.initialize("2025-06-18");
    let noise = client.call(1, &world.tool("noise"), json!({"megabytes": 4}));
    assert_eq!(Client::text(&noise), "noise done");
    let echo = client.call(2, &world.tool("echo"), json!({"text": "still here"}));
    assert!(Client::text(&echo).contains("still here"), "{echo}");
    let started = Instant::now();
    let hung = client.call(3, &world.tool("hang"), json!({}));
    assert_eq!(hung["error"]["code"], -32001, "the timer fires: {hung}");
    assert!(started.elapsed() < SECS(6));
    // Now the host starts reading stderr, and stops the session.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut { stderr }, &mut text);
        text
    });
    client.signal(libc::SIGTERM);
    assert_eq!(client.wait(SECS(10)), Some(0), "SIGTERM stops airlock");
    let text = reader.join().unwrap();
    assert!(
        text.contains("[fixture] noise ...."),
        "relayed lines arrive"
    );
    let notice = text
        .lines()
        .find(|l| l.contains("stderr lines dropped"))
        .unwrap_or_else(|| panic!("no notice of the drops in {} bytes", text.len()));
    let count: u64 = notice
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count: {notice}"));
    assert!(count > 1000, "{notice}");
    assert_eq!(world.events("exit").len(), 1);
}

/// serve offers the host the `tasks` capability of a server that has it whether the server
/// starts lazily (the default: not running yet at the handshake) or eagerly.
#[test]
fn serve_offers_tasks_alike_for_lazy_and_eager_servers() {
    for when in ["lazy", "eager"] {
        let setup = Setup::fixture("--tasks").serve_config(&format!("start = {when:?}"));
        let (_world, mut client) = start(Mode::Serve, setup);
        let init = client.initialize("2025-11-25");
        let tasks = &init["result"]["capabilities"]["tasks"];
        assert_eq!(
            tasks["requests"]["tools"]["call"],
            json!({}),
            "{when}: {init}"
        );
        assert!(tasks.get("list").is_some(), "{when}: {init}");
    }
}

/// SIGHUP ends a `run` session through the kill sequence (serve reloads instead: see
/// serve_reload.rs), with the exit event.
#[test]
fn sighup_stops_run_through_the_kill_sequence_with_an_exit_event() {
    let (world, mut client) = start(Mode::Run, Setup::fixture("--stubborn"));
    client.initialize("2025-06-18");
    client.call(1, &world.tool("echo"), json!({"text": "up"}));
    client.signal(libc::SIGHUP);
    assert_eq!(
        client.wait(SECS(10)),
        Some(0),
        "exits after the kill sequence"
    );
    let exit = world.events("exit");
    assert_eq!(exit.len(), 1, "{exit:?}");
    assert_eq!(exit[0]["detail"]["ended_by"], "sigkill", "{exit:?}");
    assert_eq!(exit[0]["reason"], "stopped by airlock");
    assert_eq!(
        exit[0]["detail"]["stopped_because"],
        "airlock received SIGHUP"
    );
    assert_eq!(world.audit().last().unwrap()["event"], "exit");
}

/// The oldest version a host may speak: the handshake, listing and a call, with nothing of the
/// later versions in the answers.
fn a_2024_11_05_session_works_end_to_end(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture(""));
    let init = client.initialize("2024-11-05");
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05", "{init}");
    let list = client.request(1, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == world.tool("echo").as_str()),
        "{list}"
    );
    let answer = client.call(2, &world.tool("echo"), json!({"text": "old"}));
    assert!(Client::text(&answer).contains("old"), "{answer}");
    assert!(answer["result"].get("resultType").is_none(), "{answer}");
    let pong = client.request(3, "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    assert_eq!(world.events("decision").len(), 1);
}

/// A server's `list_changed` of resources and prompts, and a task's status, reach the host.
fn list_changed_and_task_status_reach_the_host(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--extra --notify --tasks"));
    client.initialize("2025-11-25");
    client.request(1, "tools/list", json!({}));
    client.request(2, "resources/list", json!({}));
    let answer = client.call(3, &world.tool("notify"), json!({}));
    assert_eq!(Client::text(&answer), "notified");
    let mut methods: Vec<String> = Vec::new();
    // (Tools' list_changed is the gate's: serve reads the tools again and tells the host only
    // when they differ, see gate_spellings.rs.)
    let wanted = [
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
        "notifications/tasks/status",
    ];
    let deadline = Instant::now() + SECS(10);
    while !wanted.iter().all(|w| methods.iter().any(|m| m == w)) && Instant::now() < deadline {
        if let Some(message) = client.next(SECS(1)) {
            if message["method"] == "notifications/tasks/status" {
                assert_eq!(message["params"]["taskId"], world.task("t-1"), "{message}");
            }
            if let Some(method) = message["method"].as_str() {
                methods.push(method.to_string());
            }
        }
    }
    for method in wanted {
        assert!(
            methods.iter().any(|m| m == method),
            "{method} in {methods:?}"
        );
    }
}

/// A server's stderr reaches the user's terminal with its name in front: escape sequences that
/// retitle the window and a carriage return that would put a forged airlock line over the
/// `[fixture]` prefix are shown as text instead.
fn a_servers_terminal_escapes_on_stderr_are_shown_not_acted(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--hostile"));
    client.initialize("2025-06-18");
    let answer = client.call(1, &world.tool("forge"), json!({}));
    assert_eq!(Client::text(&answer), "forged");
    client.close_stdin();
    client.wait(SECS(10)).expect("exits");
    let stderr = client.stderr();
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\r') && !stderr.contains('\x07'),
        "{stderr:?}"
    );
    assert!(
        stderr.contains(
            "[fixture] normal\\x1b]0;PWNED\\x07 \\x1b[2K\\x0d2026-01-01T00:00:00Z INFO airlock"
        ),
        "{stderr}"
    );
}

/// A redaction hides what the audit log shows, so a project (a repository someone cloned) may
/// not add one: `(?s).+` would blank every tool name and argument. Refused at load, exit 2,
/// with the file's position, and nothing on stdout.
fn a_project_policy_may_not_blank_the_audit_log(mode: Mode) {
    let setup = Setup::fixture("").project_policy("version = 1\n[audit]\nredact = [\"(?s).+\"]\n");
    let (world, child) = support::start_raw(mode, setup);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let project = world.path(".airlock/policy.toml");
    assert!(
        stderr.contains(&format!("{}:3:11:", project.display())),
        "{stderr}"
    );
    assert!(stderr.contains("may only narrow"), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "nothing on stdout for a load error"
    );
    assert!(world.events("decision").is_empty());
}

/// A Go host matches keys regardless of case (and `ſ` as `s`), cJSON stops a key at a NUL: a
/// server's `"Tools"` list beside its `"tools"`, or a tool's `"Description"` beside its
/// `"description"`, would reach such a host in place of what airlock filtered and pinned. The
/// listing reaches the host with the exact spellings only, and the tools still work.
fn a_listing_reaches_the_host_with_only_the_spellings_airlock_checked(mode: Mode) {
    let (world, mut client) = start(mode, Setup::fixture("--lenient-keys"));
    client.initialize("2025-06-18");
    let listed = client.request(1, "tools/list", json!({}));
    let text = listed.to_string();
    for other_spelling in [
        "\"Tools\"",
        "\"NextCursor\"",
        "\"Description\"",
        "\u{017F}",
        "\\u0000",
        "unchecked",
        "IGNORE PREVIOUS",
    ] {
        assert!(!text.contains(other_spelling), "{other_spelling} in {text}");
    }
    let tools = listed["result"]["tools"].as_array().expect("a listing");
    let echo = tools
        .iter()
        .find(|tool| tool["name"] == world.tool("echo"))
        .expect("echo is listed");
    assert_eq!(echo["description"], "Echo text", "{echo}");
    let answer = client.call(2, &world.tool("echo"), json!({"text": "still works"}));
    assert!(Client::text(&answer).contains("still works"), "{answer}");
}

/// A task-augmented call (2025-11-25) that the policy refuses: the official SDK clients validate
/// its answer as a `CreateTaskResult`, so a tool result would be dropped as malformed with the
/// reason in it. airlock answers a JSON-RPC error naming the rule; a plain call still gets the
/// tool result a model reads.
fn a_refused_task_augmented_call_is_an_error_naming_the_rule(mode: Mode) {
    let setup = Setup::fixture("--tasks").policy("[tools]\ndeny = [\"mcp:fixture__echo\"]");
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-11-25");
    client.request(1, "tools/list", json!({}));
    let params =
        json!({"name": world.tool("echo"), "arguments": {"text": "x"}, "task": {"ttl": 60000}});
    let refused = client.request(2, "tools/call", params);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let text = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(text.contains("mcp:fixture__echo"), "{refused}");
    let plain = client.call(3, &world.tool("echo"), json!({"text": "x"}));
    assert_eq!(plain["result"]["isError"], true, "{plain}");
    // Both refusals are on record as decisions (the log is written after the answers).
    let recorded = || world.events("decision").len() == 2;
    assert!(
        support::wait_until(SECS(5), recorded),
        "{:?}",
        world.audit()
    );
}
