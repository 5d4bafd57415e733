//! Tasks through a gateway of two servers: every id a server sends is named for it, in any
//! spelling a lenient host reads, and no server reaches another's tasks (or the host's).

use super::*;

const RELATED: &str = crate::mcp::RELATED_TASK;

/// A `beta__read` call from the host, answered by beta with `result` (through the full path).
fn beta_answers(h: &mut Harness, id: i64, result: Value) -> Value {
    h.host(call(json!(id), "beta__read"));
    let created = h.received[1].pop_front().unwrap();
    h.answer(
        1,
        json!({"jsonrpc":"2.0","id":created["id"],"result":result}),
    );
    h.take_host(json!(id))
}

/// The same, the answer given as the line a server writes (the fast path when it may).
fn beta_answers_line(h: &mut Harness, id: i64, result: Value) -> Value {
    h.host(call(json!(id), "beta__read"));
    let created = h.received[1].pop_front().unwrap();
    let line = json!({"jsonrpc":"2.0","id":created["id"],"result":result}).to_string();
    let generation = h.generation[1];
    h.router
        .on_server_line(1, generation, &mut line.as_bytes().to_vec(), h.now)
        .unwrap();
    h.drive();
    h.take_host(json!(id))
}

#[test]
fn another_spelling_of_a_task_key_never_reaches_the_host() {
    let mut h = two();
    h.initialize(json!({}));
    // A lenient host (last key wins, case folded) would read alpha's id from these.
    let answer = beta_answers(
        &mut h,
        1,
        json!({"task":{"taskId":"x","TaskId":"alpha__t-1","status":"working"}}),
    );
    assert_eq!(
        answer["result"]["task"],
        json!({"taskId":"beta__x","status":"working"})
    );
    let answer = beta_answers_line(
        &mut h,
        2,
        json!({"Task":{"taskId":"alpha__t-1","status":"working"}}),
    );
    assert!(answer["result"].get("Task").is_none(), "{answer}");
    let answer = beta_answers_line(
        &mut h,
        3,
        json!({"ｔａｓｋ":{"taskId":"alpha__t-1","status":"working"}}),
    );
    assert!(answer["result"].get("ｔａｓｋ").is_none(), "{answer}");
    h.answer(
        1,
        json!({"jsonrpc":"2.0","method":"notifications/tasks/status",
            "params":{"taskId":"x","TaskId":"alpha__t-1","status":"failed"}}),
    );
    let status = h
        .to_host
        .iter()
        .find(|m| m["method"] == "notifications/tasks/status")
        .unwrap();
    assert_eq!(
        status["params"],
        json!({"taskId":"beta__x","status":"failed"})
    );
}

#[test]
fn a_related_task_in_any_answer_is_named_for_its_server_on_either_path() {
    let mut h = two();
    h.initialize(json!({}));
    for (id, key) in [(1, RELATED), (2, "IO.modelcontextprotocol/Related-Task")] {
        let answer = beta_answers_line(
            &mut h,
            id,
            json!({"content":[],"_meta":{key:{"taskId":"alpha__t-1"}}}),
        );
        assert_eq!(
            answer["result"]["_meta"],
            if key == RELATED {
                json!({RELATED:{"taskId":"beta__alpha__t-1"}})
            } else {
                json!({})
            },
            "{answer}"
        );
    }
    // An answer naming no task still takes the fast path, as the bytes the server sent.
    let plain = beta_answers_line(&mut h, 3, json!({"content":[],"_meta":{"x":1}}));
    assert_eq!(plain["result"]["_meta"], json!({"x":1}));
}

#[test]
fn no_task_id_without_its_servers_name_reaches_a_server() {
    let mut h = two();
    h.initialize(json!({}));
    for (id, task) in [(1, "t-1"), (2, "beta__"), (3, "gamma__t-1")] {
        h.host(json!({"jsonrpc":"2.0","id":id,"method":"tasks/get","params":{"taskId":task}}));
        assert_eq!(
            h.take_host(json!(id))["error"]["code"],
            code::INVALID_PARAMS,
            "{task}"
        );
    }
    assert!(h.received.iter().all(|r| r.is_empty()));
}

#[test]
fn servers_are_not_offered_the_hosts_tasks_and_cannot_ask_for_them() {
    let mut h = two();
    let host_caps = json!({"elicitation":{"form":{}},
        "tasks":{"list":{},"requests":{"elicitation":{"create":{}}}}});
    h.initialize(host_caps);
    h.host(call(json!(1), "alpha__read"));
    h.host(call(json!(2), "beta__read"));
    for server in [0, 1] {
        let handshake = h.initializes[server].clone();
        assert!(
            handshake["params"]["capabilities"].get("tasks").is_none(),
            "{handshake}"
        );
        assert!(
            handshake["params"]["capabilities"]
                .get("elicitation")
                .is_some()
        );
    }
    for (n, method) in ["tasks/get", "tasks/result", "tasks/cancel", "tasks/list"]
        .iter()
        .enumerate()
    {
        let id = format!("b{n}");
        h.answer(
            1,
            json!({"jsonrpc":"2.0","id":id,"method":method,"params":{"taskId":"h-1"}}),
        );
        assert!(
            h.to_host.iter().all(|m| m["method"] != *method),
            "{method} reached the host"
        );
        let declined = h.received[1]
            .iter()
            .find(|m| m["id"] == id.as_str())
            .unwrap_or_else(|| panic!("{method} unanswered: {:?}", h.received[1]));
        assert_eq!(declined["error"]["code"], code::METHOD_NOT_FOUND);
    }
}

#[test]
fn the_hosts_answer_names_the_related_task_as_the_server_knows_it() {
    let mut h = two();
    h.initialize(json!({"elicitation":{"form":{}}}));
    h.host(call(json!(1), "alpha__read"));
    h.received[0].pop_front().unwrap();
    let ask = |h: &mut Harness, id: &str| {
        let question = json!({"jsonrpc":"2.0","id":id,"method":"elicitation/create",
            "params":{"mode":"form","message":"?","requestedSchema":{"type":"object","properties":{}},
                "_meta":{RELATED:{"taskId":"t-1"}}}});
        h.answer(0, question);
        let asked = h.to_host.pop().unwrap();
        assert_eq!(asked["params"]["_meta"][RELATED]["taskId"], "alpha__t-1");
        asked["id"].clone()
    };
    let asked = ask(&mut h, "e1");
    h.host(
        json!({"jsonrpc":"2.0","id":asked,"result":{"action":"decline",
        "_meta":{RELATED:{"taskId":"alpha__t-1"}}}}),
    );
    let got = h.received[0].pop_front().unwrap();
    assert_eq!(got["result"]["_meta"][RELATED]["taskId"], "t-1", "{got}");
    // Another server's task is not alpha's to see.
    let asked = ask(&mut h, "e2");
    h.host(
        json!({"jsonrpc":"2.0","id":asked,"result":{"action":"decline",
        "_meta":{RELATED:{"taskId":"beta__t-1"}}}}),
    );
    let got = h.received[0].pop_front().unwrap();
    assert_eq!(got["result"]["_meta"], json!({}), "{got}");
}

#[test]
fn a_servers_lookalike_task_methods_never_reach_the_host() {
    let mut h = two();
    h.initialize(json!({"elicitation":{"form":{}}}));
    h.host(call(json!(1), "beta__read"));
    h.received[1].pop_front().unwrap();
    let before = h.to_host.len();
    h.answer(
        1,
        json!({"jsonrpc":"2.0","id":"s1","method":"Tasks/Result","params":{"taskId":"h-1"}}),
    );
    h.answer(
        1,
        json!({"jsonrpc":"2.0","method":"Notifications/Tasks/Status",
            "params":{"taskId":"alpha__t-1","status":"cancelled"}}),
    );
    assert_eq!(h.to_host.len(), before, "{:?}", &h.to_host[before..]);
    let declined = h.received[1].pop_front().unwrap();
    assert_eq!(declined["id"], "s1");
    assert_eq!(declined["error"]["code"], code::METHOD_NOT_FOUND);
}

#[test]
fn a_servers_task_augmented_request_reaches_the_host_as_a_plain_one() {
    let mut h = two();
    h.initialize(
        json!({"elicitation":{"form":{}},"tasks":{"requests":{"elicitation":{"create":{}}}}}),
    );
    h.host(call(json!(1), "alpha__read"));
    h.received[0].pop_front().unwrap();
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":"e1","method":"elicitation/create",
            "params":{"mode":"form","message":"?","requestedSchema":{"type":"object","properties":{}},
                "task":{"ttl":60000},"Task":{"ttl":1}}}),
    );
    let asked = h.to_host.pop().unwrap();
    assert_eq!(asked["method"], "elicitation/create");
    assert!(asked["params"].get("task").is_none(), "{asked}");
    assert!(asked["params"].get("Task").is_none(), "{asked}");
}

/// 2026-07-28: the host answers a server's question in the retry's `inputResponses`; the related
/// task in them goes back as the server's own id, another server's is taken out.
#[test]
fn input_responses_name_the_related_task_as_the_server_knows_it() {
    for (named, expected) in [
        ("alpha__t-1", json!({RELATED:{"taskId":"t-1"}})),
        ("beta__t-1", json!({})),
    ] {
        let mut h = two();
        let meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},
            "io.modelcontextprotocol/clientInfo":{"name":"m","version":"2"}});
        let ask = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"alpha__read","arguments":{},"_meta":meta.clone()}});
        h.host(ask);
        h.received[0].pop_front().unwrap();
        h.answer(
            0,
            json!({"jsonrpc":"2.0","id":"s1","method":"elicitation/create",
                "params":{"mode":"form","message":"?","requestedSchema":{"type":"object","properties":{}},
                    "_meta":{RELATED:{"taskId":"t-1"}}}}),
        );
        let asked = h.take_host(json!(1))["result"].clone();
        let (key, input) = asked["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        assert_eq!(input["params"]["_meta"][RELATED]["taskId"], "alpha__t-1");
        let mut retry = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
            "params":{"name":"alpha__read","arguments":{},"_meta":meta}});
        retry["params"]["requestState"] = asked["requestState"].clone();
        retry["params"]["inputResponses"] =
            json!({key.clone(): {"action":"decline","_meta":{RELATED:{"taskId":named}}}});
        h.host(retry);
        let got = h.received[0].iter().find(|m| m["id"] == "s1").unwrap();
        assert_eq!(got["result"]["_meta"], expected, "{named}: {got}");
    }
}

/// A task-augmented call's progress token stays valid until its task ends (2025-11-25): the
/// server's progress on it reaches the host after the `CreateTaskResult`, not after the end.
#[test]
fn a_tasks_progress_reaches_the_host_until_the_task_ends() {
    let mut h = two();
    h.initialize(json!({}));
    h.host(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"beta__read",
        "arguments":{},"task":{"ttl":60000},"_meta":{"progressToken":"p1"}}}),
    );
    let sent = h.received[1].pop_front().unwrap();
    let token = sent["params"]["_meta"]["progressToken"].clone();
    h.answer(
        1,
        json!({"jsonrpc":"2.0","id":sent["id"],"result":{"task":{"taskId":"t-1","status":"working"}}}),
    );
    h.take_host(json!(1));
    let progress = json!({"jsonrpc":"2.0","method":"notifications/progress",
        "params":{"progressToken":token,"progress":1}});
    let progressed = |h: &Harness| {
        h.to_host
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .count()
    };
    h.answer(1, progress.clone());
    assert_eq!(progressed(&h), 1, "{:?}", h.to_host);
    assert_eq!(h.to_host.last().unwrap()["params"]["progressToken"], "p1");
    h.answer(
        1,
        json!({"jsonrpc":"2.0","method":"notifications/tasks/status",
            "params":{"taskId":"t-1","status":"completed"}}),
    );
    h.answer(1, progress);
    assert_eq!(progressed(&h), 1, "the token ended with its task");
}

/// A `tasks/get` of `task` from the host: what beta receives (its own id), else the host's
/// answer.
fn beta_gets(h: &mut Harness, id: i64, task: &str) -> Result<Value, Value> {
    h.host(json!({"jsonrpc":"2.0","id":id,"method":"tasks/get","params":{"taskId":task}}));
    match h.received[1].pop_front() {
        Some(request) => Ok(request["params"]["taskId"].clone()),
        None => Err(h.take_host(json!(id))),
    }
}

#[test]
fn a_task_of_a_server_that_started_again_is_unknown_and_never_the_new_processs() {
    let mut h = two();
    h.initialize(json!({}));
    let working = json!({"task":{"taskId":"t-1","status":"working"}});
    let first = beta_answers(&mut h, 1, working.clone());
    assert_eq!(first["result"]["task"]["taskId"], "beta__t-1");
    assert_eq!(beta_gets(&mut h, 2, "beta__t-1"), Ok(json!("t-1")));

    // beta dies with its tasks; its next start counts its ids from 1 again.
    let generation = h.generation[1];
    h.router.on_server_closed(1, generation, h.now);
    h.drive();
    h.to_host.clear();
    h.host(call(json!(3), "beta__read"));
    h.tick(lifecycle::backoff(1));
    assert_eq!(h.starts[1], 2);
    let created = h.received[1].pop_front().expect("sent after the restart");
    h.answer(
        1,
        json!({"jsonrpc":"2.0","id":created["id"],"result":working}),
    );
    let second = h.take_host(json!(3));
    assert_eq!(second["result"]["task"]["taskId"], "beta__~2~t-1");

    let stale = beta_gets(&mut h, 4, "beta__t-1").expect_err("not passed on");
    assert_eq!(stale["error"]["code"], code::INVALID_PARAMS, "{stale}");
    assert_eq!(beta_gets(&mut h, 5, "beta__~2~t-1"), Ok(json!("t-1")));
    // A start that has not happened is no task's either.
    let future = beta_gets(&mut h, 6, "beta__~3~t-1").expect_err("not passed on");
    assert_eq!(future["error"]["code"], code::INVALID_PARAMS);
}

#[test]
fn a_reloads_replacement_goes_on_counting_starts_and_the_old_process_keeps_its_tasks() {
    let mut h = two();
    h.initialize(json!({}));
    h.tool_names();
    let working = json!({"task":{"taskId":"t-1","status":"working"}});
    // A call in flight keeps the old alpha running after the reload.
    h.host(call(json!(1), "alpha__read"));
    let in_flight = h.received[0].pop_front().unwrap();
    h.host(call(json!(2), "alpha__read"));
    let created = h.received[0].pop_front().unwrap();
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":created["id"],"result":working}),
    );
    assert_eq!(
        h.take_host(json!(2))["result"]["task"]["taskId"],
        "alpha__t-1"
    );

    // The replacement is slot 2.
    h.reload_replacing_alpha();
    h.host(call(json!(3), "alpha__read"));
    let created = h.received[2]
        .pop_front()
        .expect("the replacement takes new calls");
    h.answer(
        2,
        json!({"jsonrpc":"2.0","id":created["id"],"result":working}),
    );
    assert_eq!(
        h.take_host(json!(3))["result"]["task"]["taskId"],
        "alpha__~2~t-1"
    );

    let get = |id: i64, task: &str| json!({"jsonrpc":"2.0","id":id,"method":"tasks/get","params":{"taskId":task}});
    h.host(get(4, "alpha__t-1"));
    let old = h.received[0].pop_front().expect("the old process is asked");
    assert_eq!(old["params"]["taskId"], "t-1");
    h.host(get(5, "alpha__~2~t-1"));
    let new = h.received[2].pop_front().expect("the new process is asked");
    assert_eq!(new["params"]["taskId"], "t-1");

    let status = json!({"taskId":"t-1","status":"working"});
    h.answer(0, json!({"jsonrpc":"2.0","id":old["id"],"result":status}));
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":in_flight["id"],"result":{"content":[]}}),
    );
    assert_eq!(h.take_host(json!(4))["result"]["taskId"], "alpha__t-1");
    assert_eq!(h.stops[0], 1, "the old process is done");
    h.host(get(6, "alpha__t-1"));
    assert!(h.received.iter().all(VecDeque::is_empty));
    assert_eq!(h.take_host(json!(6))["error"]["code"], code::INVALID_PARAMS);
}

#[test]
fn a_task_list_of_a_process_that_died_before_the_list_settled_is_named_for_that_process() {
    let mut h = two();
    let tasks =
        json!({"tools":{"listChanged":true},"tasks":{"list":{},"requests":{"tools":{"call":{}}}}});
    h.capabilities = vec![tasks.clone(), tasks];
    h.initialize(json!({}));
    h.tool_names();
    h.host(json!({"jsonrpc":"2.0","id":1,"method":"tasks/list"}));
    let asked = |h: &mut Harness, server: usize| {
        let request = h.received[server].pop_front().expect("asked for its tasks");
        assert_eq!(request["method"], "tasks/list");
        request["id"].clone()
    };
    let (of_alpha, of_beta) = (asked(&mut h, 0), asked(&mut h, 1));
    let listed = |id: Value| json!({"jsonrpc":"2.0","id":id,"result":{"tasks":[{"taskId":"t-1","status":"working"}]}});
    h.answer(1, listed(of_beta));
    // beta dies and starts again (its next start counts from t-1 too) before alpha answers.
    let generation = h.generation[1];
    h.router.on_server_closed(1, generation, h.now);
    h.drive();
    h.host(call(json!(2), "beta__read"));
    h.tick(lifecycle::backoff(1));
    assert_eq!(h.starts[1], 2);
    h.answer(0, listed(of_alpha));
    let ids: Vec<Value> = h.take_host(json!(1))["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| task["taskId"].clone())
        .collect();
    assert_eq!(
        ids,
        [json!("alpha__t-1"), json!("beta__t-1")],
        "not beta__~2~t-1"
    );
}
