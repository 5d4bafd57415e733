//! The mux: many sessions as one host.

use super::*;
use serde_json::json;

fn init(id: i64, version: &str, caps: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{"protocolVersion":version,"capabilities":caps,"clientInfo":{"name":"c","version":"1"}}})
}

fn call(id: i64, tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}})
}

fn core_msgs(outs: &[Out]) -> Vec<Value> {
    outs.iter()
        .filter_map(|o| match o {
            Out::ToCore(m) => Some(m.clone()),
            Out::ToSession { .. } => None,
        })
        .collect()
}

fn session_msgs(outs: &[Out]) -> Vec<(SessionKey, Value, Option<Value>)> {
    outs.iter()
        .filter_map(|o| match o {
            Out::ToSession {
                key,
                message,
                related,
            } => Some((*key, message.clone(), related.clone())),
            Out::ToCore(_) => None,
        })
        .collect()
}

fn mux_with(sessions: &[(SessionKey, Option<&str>)]) -> Mux {
    let mut mux = Mux::new("__");
    for (key, identity) in sessions {
        mux.open(*key, identity.map(String::from), false);
    }
    mux
}

#[test]
fn one_handshake_reaches_the_core_and_later_sessions_get_its_result() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    let outs = mux.from_client(1, init(0, "2025-06-18", json!({})));
    let sent = core_msgs(&outs);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["params"]["capabilities"], every_capability());
    // The second initialize waits for the first answer.
    assert!(
        mux.from_client(2, init(7, "2025-11-25", json!({"sampling": {}})))
            .is_empty()
    );
    let mut answer = json!({"jsonrpc":"2.0","result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}}}});
    answer["id"] = sent[0]["id"].clone();
    let got = session_msgs(&mux.from_core(answer));
    assert_eq!(got.len(), 2);
    assert_eq!(
        (
            got[0].0,
            &got[0].1["id"],
            &got[0].1["result"]["protocolVersion"]
        ),
        (1, &json!(0), &json!("2025-06-18"))
    );
    assert_eq!(
        (
            got[1].0,
            &got[1].1["id"],
            &got[1].1["result"]["protocolVersion"]
        ),
        (2, &json!(7), &json!("2025-11-25"))
    );
    // A third is answered at once, at the newest version airlock knows if it asks for another.
    mux.open(3, None, false);
    let got = session_msgs(&mux.from_client(3, init(1, "2099-01-01", json!({}))));
    assert_eq!(got[0].1["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn ids_are_made_unique_and_answers_go_back_to_their_session() {
    let mut mux = mux_with(&[(1, Some("alice")), (2, Some("bob"))]);
    let a = core_msgs(&mux.from_client(1, call(1, "fs__read")))[0].clone();
    let b = core_msgs(&mux.from_client(2, call(1, "fs__read")))[0].clone();
    assert_ne!(a["id"], b["id"]);
    assert_eq!(a["params"]["_meta"][META_IDENTITY], "alice");
    assert_eq!(b["params"]["_meta"][META_IDENTITY], "bob");
    let answer = |id: &Value| json!({"jsonrpc":"2.0","id":id,"result":{"content":[]}});
    let got = session_msgs(&mux.from_core(answer(&b["id"])));
    assert_eq!((got[0].0, &got[0].1["id"]), (2, &json!(1)));
    assert!(mux.from_core(answer(&b["id"])).is_empty(), "answered once");
}

#[test]
fn a_clients_own_identity_claim_is_removed() {
    let mut mux = mux_with(&[(1, None)]);
    let mut forged = call(1, "fs__read");
    forged["params"]["_meta"] = json!({META_IDENTITY: "admin"});
    let sent = core_msgs(&mux.from_client(1, forged));
    assert!(sent[0]["params"]["_meta"].get(META_IDENTITY).is_none());
}

#[test]
fn server_requests_go_to_the_one_caller_on_that_server_or_fail_closed() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    mux.from_client(1, init(0, "2025-06-18", json!({"elicitation": {}})));
    mux.from_client(2, init(0, "2025-06-18", json!({})));
    mux.from_client(1, call(5, "fs__write"));
    let elicit = json!({"jsonrpc":"2.0","id":"airlock-gw-1","method":"elicitation/create","params":{"_meta":{"airlock/server":"fs"}}});
    let got = session_msgs(&mux.from_core(elicit.clone()));
    assert_eq!((got[0].0, got[0].2.clone()), (1, Some(json!(5))));
    // Only session 1 may answer it.
    let reply = json!({"jsonrpc":"2.0","id":"airlock-gw-1","result":{"action":"accept"}});
    assert!(mux.from_client(2, reply.clone()).is_empty());
    assert_eq!(core_msgs(&mux.from_client(1, reply)).len(), 1);
    // Two callers on the server: nobody can be told, so the server's request is declined.
    mux.from_client(2, call(9, "fs__write"));
    let mut second = elicit.clone();
    second["id"] = json!("airlock-gw-2");
    let refused = core_msgs(&mux.from_core(second));
    assert_eq!(refused[0]["result"]["action"], "decline");
    // Sampling to a session that did not declare it: an error.
    let sampling = json!({"jsonrpc":"2.0","id":"airlock-gw-3","method":"sampling/createMessage","params":{"_meta":{"airlock/server":"db"}}});
    mux.from_client(2, call(10, "db__query"));
    let refused = core_msgs(&mux.from_core(sampling));
    assert_eq!(refused[0]["error"]["code"], -32601);
}

#[test]
fn airlocks_own_ask_goes_to_the_session_of_the_call() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    mux.from_client(1, init(0, "2025-06-18", json!({"elicitation": {}})));
    mux.from_client(2, init(0, "2025-06-18", json!({"elicitation": {}})));
    mux.from_client(1, call(1, "fs__write"));
    let sent = core_msgs(&mux.from_client(2, call(1, "fs__write")));
    let ask = json!({"jsonrpc":"2.0","id":"airlock-ask-fs-1","method":"elicitation/create","params":{"_meta":{META_REQUEST: sent[0]["id"]}}});
    let got = session_msgs(&mux.from_core(ask));
    assert_eq!((got[0].0, got[0].2.clone()), (2, Some(json!(1))));
}

#[test]
fn progress_and_cancellation_are_mapped_per_session() {
    let mut mux = mux_with(&[(1, None)]);
    let mut request = call(3, "fs__slow");
    request["params"]["_meta"] = json!({"progressToken": "mine"});
    let sent = core_msgs(&mux.from_client(1, request))[0].clone();
    let token = sent["params"]["_meta"]["progressToken"].clone();
    assert_ne!(token, json!("mine"));
    let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":1}});
    let got = session_msgs(&mux.from_core(progress));
    assert_eq!(got[0].1["params"]["progressToken"], "mine");
    assert_eq!(got[0].2, Some(json!(3)));
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}});
    let forwarded = core_msgs(&mux.from_client(1, cancel));
    assert_eq!(forwarded[0]["params"]["requestId"], sent["id"]);
}

#[test]
fn subscriptions_are_per_session_and_closing_cleans_up() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    let sub = |id: i64| json!({"jsonrpc":"2.0","id":id,"method":"resources/subscribe","params":{"uri":"file:///a"}});
    assert_eq!(
        core_msgs(&mux.from_client(1, sub(1))).len(),
        1,
        "first subscriber: to the core"
    );
    let local = session_msgs(&mux.from_client(2, sub(1)));
    assert_eq!(local[0].1["result"], json!({}), "second: answered here");
    let updated = json!({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}});
    assert_eq!(session_msgs(&mux.from_core(updated.clone())).len(), 2);
    mux.from_client(1, call(4, "fs__slow"));
    let outs = mux.close(1);
    let sent = core_msgs(&outs);
    assert!(
        sent.iter()
            .any(|m| m["method"] == "notifications/cancelled")
    );
    assert!(
        !sent.iter().any(|m| m["method"] == "resources/unsubscribe"),
        "session 2 still subscribed"
    );
    let outs = mux.close(2);
    assert!(
        core_msgs(&outs)
            .iter()
            .any(|m| m["method"] == "resources/unsubscribe")
    );
    assert!(session_msgs(&mux.from_core(updated)).is_empty());
}

#[test]
fn list_changed_goes_to_every_session_and_logs_only_to_the_caller() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    let changed = json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"});
    assert_eq!(session_msgs(&mux.from_core(changed)).len(), 2);
    let log = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"fs","data":"x"}});
    assert!(
        session_msgs(&mux.from_core(log.clone())).is_empty(),
        "nobody calls fs"
    );
    mux.from_client(2, call(1, "fs__read"));
    let got = session_msgs(&mux.from_core(log));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 2);
}

#[test]
fn a_listen_streams_notifications_go_to_its_session_under_its_own_id() {
    let mut mux = Mux::new("__");
    mux.open(4, None, true);
    let listen = json!({"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}});
    let sent = core_msgs(&mux.from_client(4, listen))[0].clone();
    let tagged = json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId": sent["id"]}}});
    let got = session_msgs(&mux.from_core(tagged));
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].0, got[0].2.clone()), (4, Some(json!("L1"))));
    assert_eq!(
        got[0].1["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L1"
    );
}

#[test]
fn the_stdio_host_keeps_its_ids_unless_they_could_be_the_muxs_own() {
    let mut mux = Mux::new("__");
    mux.open(0, None, false);
    mux.keep_ids(0);
    mux.open(1, None, false);
    let to_core = |outs: Vec<Out>| match outs.as_slice() {
        [Out::ToCore(message)] => message.clone(),
        other => panic!("{other:?}"),
    };
    let ping = |id: Value| json!({"jsonrpc":"2.0","id":id,"method":"ping"});
    assert_eq!(to_core(mux.from_client(0, ping(json!(7))))["id"], 7);
    assert_eq!(to_core(mux.from_client(0, ping(json!("abc"))))["id"], "abc");
    // An id shaped like the mux's own, or one in flight already, is replaced.
    let shaped = to_core(mux.from_client(0, ping(json!("airlock-h1-1"))));
    assert_ne!(shaped["id"], "airlock-h1-1");
    let again = to_core(mux.from_client(0, ping(json!(7))));
    assert_ne!(again["id"], 7);
    // An HTTP session's ids are always the mux's.
    let http = to_core(mux.from_client(1, ping(json!(7))));
    assert!(
        http["id"].as_str().unwrap().starts_with("airlock-h1-"),
        "{http}"
    );
    // Answers go back to their own session with the id it used.
    let outs = mux.from_core(json!({"jsonrpc":"2.0","id":7,"result":{}}));
    assert!(
        matches!(&outs[..], [Out::ToSession { key: 0, message, .. }] if message["id"] == 7),
        "{outs:?}"
    );
    // A cancellation of a kept numeric id reaches the core under that id.
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"abc"}});
    assert_eq!(
        to_core(mux.from_client(0, cancel))["params"]["requestId"],
        "abc"
    );
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}});
    let forwarded = to_core(mux.from_client(0, cancel));
    assert_eq!(forwarded["params"]["requestId"], again["id"], "{forwarded}");
}

#[test]
fn a_task_its_status_and_its_result_are_the_creating_sessions_only() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    let mut create = call(5, "fixture__echo");
    create["params"]["task"] = json!({"ttl": 60000});
    let sent = core_msgs(&mux.from_client(1, create));
    let answer = json!({"jsonrpc":"2.0","id":sent[0]["id"],"result":{"task":{"taskId":"t-1","status":"working"}}});
    assert_eq!(session_msgs(&mux.from_core(answer))[0].0, 1);
    // The status goes to session 1 only; a task nobody here created, to nobody.
    let status = |task: &str| json!({"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":task,"status":"completed"}});
    let got = session_msgs(&mux.from_core(status("t-1")));
    assert_eq!(got.iter().map(|m| m.0).collect::<Vec<_>>(), vec![1]);
    assert!(session_msgs(&mux.from_core(status("t-9"))).is_empty());
    // Session 2 may not name it: answered here, nothing reaches the core.
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let ask = json!({"jsonrpc":"2.0","id":8,"method":method,"params":{"taskId":"t-1"}});
        let outs = mux.from_client(2, ask.clone());
        assert!(core_msgs(&outs).is_empty(), "{method}");
        assert_eq!(
            session_msgs(&outs)[0].1["error"]["code"],
            -32602,
            "{method}"
        );
        assert_eq!(core_msgs(&mux.from_client(1, ask)).len(), 1, "{method}");
    }
    // A listing shows each session its own tasks.
    let list = json!({"jsonrpc":"2.0","id":9,"method":"tasks/list"});
    let sent = core_msgs(&mux.from_client(2, list));
    let all = json!({"jsonrpc":"2.0","id":sent[0]["id"],"result":{"tasks":[{"taskId":"t-1"},{"taskId":"t-2"}]}});
    let got = session_msgs(&mux.from_core(all));
    assert_eq!(got[0].1["result"]["tasks"], json!([]));
    // A session that ends takes its tasks along.
    mux.close(1);
    assert!(session_msgs(&mux.from_core(status("t-1"))).is_empty());
}

#[test]
fn a_tasks_question_goes_to_its_creator_and_a_stateless_clients_task_outlives_its_request() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    for key in [1, 2] {
        mux.from_client(key, init(0, "2025-11-25", json!({"elicitation": {}})));
    }
    let mut create = call(5, "fixture__ask");
    create["params"]["task"] = json!({});
    let sent = core_msgs(&mux.from_client(1, create));
    let created = json!({"jsonrpc":"2.0","id":sent[0]["id"],"result":{"task":{"taskId":"t-1","status":"input_required"}}});
    mux.from_core(created);
    // Session 2 has a call in flight on the same server; session 1 waits on its task's result.
    core_msgs(&mux.from_client(2, call(7, "fixture__slow")));
    let waiting = json!({"jsonrpc":"2.0","id":8,"method":"tasks/result","params":{"taskId":"t-1"}});
    core_msgs(&mux.from_client(1, waiting));
    let asked_by = |server: &str, task: &str| {
        json!({"jsonrpc":"2.0","id":"airlock-gw-1","method":"elicitation/create","params":{"message":"pin?","_meta":{
        META_SERVER: server, "io.modelcontextprotocol/related-task": {"taskId": task}}}})
    };
    let question = |task: &str| asked_by("fixture", task);
    // Another server naming the task reaches nobody.
    let outs = mux.from_core(asked_by("other", "t-1"));
    assert!(session_msgs(&outs).is_empty(), "{:?}", session_msgs(&outs));
    let got = session_msgs(&mux.from_core(question("t-1")));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].0, &got[0].2),
        (1, &Some(json!(8))),
        "on the tasks/result stream"
    );
    // A task nobody here created: refused, not given to whoever calls that server.
    let outs = mux.from_core(question("t-9"));
    assert!(session_msgs(&outs).is_empty());
    assert_eq!(core_msgs(&outs).len(), 1, "a refusal to the core");

    // A stateless client's task is its identity's, after its request's session has ended.
    mux.open(3, Some("ci".into()), true);
    let mut create = call(1, "fixture__echo");
    create["params"]["task"] = json!({});
    let sent = core_msgs(&mux.from_client(3, create));
    mux.from_core(json!({"jsonrpc":"2.0","id":sent[0]["id"],"result":{"task":{"taskId":"t-2"}}}));
    mux.close(3);
    let get = json!({"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t-2"}});
    mux.open(4, Some("ci".into()), true);
    assert_eq!(
        core_msgs(&mux.from_client(4, get.clone())).len(),
        1,
        "the same identity"
    );
    mux.open(5, Some("other".into()), true);
    let refused = mux.from_client(5, get.clone());
    assert!(core_msgs(&refused).is_empty(), "another identity");
    assert!(core_msgs(&mux.from_client(2, get)).is_empty(), "a session");
}

/// A task-augmented call's progress token stays valid until its task ends (2025-11-25): the
/// server's progress after the `CreateTaskResult` still reaches the creating session, under the
/// client's own token; after a final status, nobody.
#[test]
fn a_tasks_progress_reaches_its_session_until_the_task_ends() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    let mut create = call(5, "fixture__echo");
    create["params"]["task"] = json!({"ttl": 60000});
    create["params"]["_meta"] = json!({"progressToken": "mine"});
    let sent = core_msgs(&mux.from_client(1, create))[0].clone();
    let token = sent["params"]["_meta"]["progressToken"].clone();
    let answer = json!({"jsonrpc":"2.0","id":sent["id"],"result":{"task":{"taskId":"fixture__t-1","status":"working"}}});
    mux.from_core(answer);
    let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":1}});
    let got = session_msgs(&mux.from_core(progress.clone()));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].0, &got[0].1["params"]["progressToken"]),
        (1, &json!("mine"))
    );
    let done = json!({"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"fixture__t-1","status":"completed"}});
    mux.from_core(done);
    assert!(session_msgs(&mux.from_core(progress)).is_empty());
}

/// Past `MAX_TASKS_PER_OWNER` tasks, the mux forgets the owner's oldest: naming it is then
/// answered here as an unknown task, even by its creator, while another session's task stays
/// its own.
#[test]
fn a_sessions_oldest_task_is_forgotten_past_the_bound_and_never_anothers() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    let create = |mux: &mut Mux, session: SessionKey, task: &str| {
        let mut call = call(5, "fixture__echo");
        call["params"]["task"] = json!({"ttl": 60000});
        let sent = core_msgs(&mux.from_client(session, call));
        let answer = json!({"jsonrpc":"2.0","id":sent[0]["id"],"result":{"task":{"taskId":task,"status":"working"}}});
        assert_eq!(session_msgs(&mux.from_core(answer))[0].0, session);
    };
    create(&mut mux, 2, "other");
    for n in 0..=crate::http::tasks::MAX_TASKS_PER_OWNER {
        create(&mut mux, 1, &format!("t-{n}"));
    }
    let get =
        |task: &str| json!({"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":task}});
    let outs = mux.from_client(1, get("t-0"));
    assert!(core_msgs(&outs).is_empty(), "the oldest is forgotten");
    assert_eq!(session_msgs(&outs)[0].1["error"]["code"], -32602);
    assert_eq!(core_msgs(&mux.from_client(1, get("t-1"))).len(), 1);
    assert_eq!(core_msgs(&mux.from_client(2, get("other"))).len(), 1);
    assert!(core_msgs(&mux.from_client(2, get("t-1"))).is_empty());
}

#[test]
fn an_initialize_whose_params_are_no_object_is_refused_and_the_handshake_still_happens() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    for params in [json!([]), json!("x"), json!(3)] {
        let outs = mux.from_client(
            1,
            json!({"jsonrpc":"2.0","id":5,"method":"initialize","params":params}),
        );
        assert!(core_msgs(&outs).is_empty());
        let got = session_msgs(&outs);
        assert_eq!(got[0].1["error"]["code"], -32602, "{params}");
    }
    let sent = core_msgs(&mux.from_client(2, init(0, "2025-06-18", json!({}))));
    assert_eq!(sent[0]["params"]["capabilities"], every_capability());
}

#[test]
fn a_request_the_mux_cannot_place_on_a_server_makes_its_question_ambiguous_not_anothers() {
    let mut mux = mux_with(&[(1, None), (2, None), (3, None)]);
    for key in [1, 2, 3] {
        mux.from_client(key, init(0, "2025-06-18", json!({"elicitation": {}})));
    }
    // Bob calls a tool of `notes`; Alice reads a resource, which the core may route to `notes`.
    mux.from_client(2, call(5, "notes__slow"));
    let read = core_msgs(&mux.from_client(
        1,
        json!({"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"notes://ask"}}),
    ));
    // A third client only listens: that is no work of any server's.
    mux.from_client(
        3,
        json!({"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{}}),
    );
    let elicit = json!({"jsonrpc":"2.0","id":"airlock-gw-1","method":"elicitation/create","params":{"message":"PIN?","_meta":{"airlock/server":"notes"}}});
    let outs = mux.from_core(elicit);
    assert!(session_msgs(&outs).is_empty(), "{outs:?}");
    assert_eq!(core_msgs(&outs)[0]["result"]["action"], "decline");
    let log = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"notes","data":"Alice's note"}});
    assert!(session_msgs(&mux.from_core(log)).is_empty());
    // Once Alice's read is answered, Bob is the one caller again (the listener never counts).
    mux.from_core(json!({"jsonrpc":"2.0","id":read[0]["id"],"result":{"contents":[]}}));
    let elicit = json!({"jsonrpc":"2.0","id":"airlock-gw-2","method":"elicitation/create","params":{"message":"PIN?","_meta":{"airlock/server":"notes"}}});
    let got = session_msgs(&mux.from_core(elicit));
    assert_eq!((got[0].0, got[0].2.clone()), (2, Some(json!(5))));
}

fn asks_for_input(
    mux: &mut Mux,
    sent: &Value,
    token: &str,
) -> Vec<(SessionKey, Value, Option<Value>)> {
    session_msgs(
        &mux.from_core(json!({"jsonrpc":"2.0","id":sent["id"],"result":{
        "resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create"}},
        "requestState":token}})),
    )
}

#[test]
fn a_request_state_is_retried_by_the_client_it_was_handed_to_only_and_once() {
    let mut mux = Mux::new("__");
    mux.open(4, Some("alice".into()), true);
    mux.open(5, Some("mallory".into()), true);
    mux.open(6, Some("alice".into()), true);
    let sent = core_msgs(&mux.from_client(4, call(1, "notes__ask")));
    let got = asks_for_input(&mut mux, &sent[0], "airlock-mrtr-T");
    assert_eq!(got[0].1["result"]["requestState"], "airlock-mrtr-T");
    let retry = |id: i64| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"notes__log",
            "arguments":{},"requestState":"airlock-mrtr-T","inputResponses":{"q":{"action":"accept"}}}})
    };
    let refused = mux.from_client(5, retry(2));
    assert!(core_msgs(&refused).is_empty());
    assert_eq!(session_msgs(&refused)[0].1["error"]["code"], -32602);
    // Alice's retry arrives as a request of its own (a stateless client has no session).
    assert_eq!(core_msgs(&mux.from_client(6, retry(3))).len(), 1);
    assert!(
        core_msgs(&mux.from_client(6, retry(4))).is_empty(),
        "used up"
    );
}

#[test]
fn a_question_that_may_be_about_another_clients_request_is_not_put_on_this_one() {
    let mut mux = Mux::new("__");
    mux.open(4, Some("alice".into()), true);
    mux.open(5, Some("bob".into()), true);
    let alices = core_msgs(&mux.from_client(4, call(1, "notes__ask")));
    let bobs = core_msgs(&mux.from_client(5, call(1, "notes__log")));
    // The core put the server's question on Bob's call, its newest on `notes`.
    let got = asks_for_input(&mut mux, &bobs[0], "B");
    assert_eq!(got[0].0, 5);
    assert!(got[0].1.get("result").is_none(), "{:?}", got[0].1);
    assert_eq!(got[0].1["id"], 1);
    // Alice's own call, alone on the server now, may carry one.
    let got = asks_for_input(&mut mux, &alices[0], "A");
    assert_eq!(
        (got[0].0, &got[0].1["result"]["requestState"]),
        (4, &json!("A"))
    );
}

#[test]
fn a_client_keeps_a_bounded_number_of_listen_streams_open() {
    let mut mux = Mux::new("__");
    mux.open(4, Some("alice".into()), true);
    mux.open(5, Some("bob".into()), true);
    let listen = |id: usize| json!({"jsonrpc":"2.0","id":id,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}});
    for id in 0..MAX_LISTENS {
        assert_eq!(core_msgs(&mux.from_client(4, listen(id))).len(), 1);
    }
    let refused = mux.from_client(4, listen(99));
    assert!(core_msgs(&refused).is_empty());
    assert_eq!(session_msgs(&refused)[0].1["error"]["code"], -32600);
    assert_eq!(
        core_msgs(&mux.from_client(5, listen(1))).len(),
        1,
        "another client's own"
    );
}

#[test]
fn a_wait_for_a_tasks_result_is_a_caller_on_the_tasks_server_only() {
    let mut mux = mux_with(&[(1, None), (2, None)]);
    for key in [1, 2] {
        mux.from_client(key, init(0, "2025-11-25", json!({"elicitation": {}})));
    }
    let mut create = call(5, "jobs__run");
    create["params"]["task"] = json!({"ttl": 60000});
    let sent = core_msgs(&mux.from_client(1, create));
    let made = json!({"jsonrpc":"2.0","id":sent[0]["id"],"result":{"task":{"taskId":"t-1","status":"working"}}});
    mux.from_core(made);
    let wait = json!({"jsonrpc":"2.0","id":6,"method":"tasks/result","params":{"taskId":"t-1"}});
    assert_eq!(core_msgs(&mux.from_client(1, wait)).len(), 1);
    mux.from_client(2, call(7, "notes__ask"));
    let elicit = json!({"jsonrpc":"2.0","id":"airlock-gw-1","method":"elicitation/create","params":{"message":"?","_meta":{"airlock/server":"notes"}}});
    let got = session_msgs(&mux.from_core(elicit));
    assert_eq!((got[0].0, got[0].2.clone()), (2, Some(json!(7))));
    let asks_jobs = json!({"jsonrpc":"2.0","id":"airlock-gw-2","method":"elicitation/create","params":{"message":"?","_meta":{"airlock/server":"jobs"}}});
    let got = session_msgs(&mux.from_core(asks_jobs));
    assert_eq!((got[0].0, got[0].2.clone()), (1, Some(json!(6))));
}

#[test]
fn a_call_waiting_for_its_retry_still_counts_on_its_server() {
    // Alice's call was answered with a question and runs on until her retry: a second question
    // of that server may be about it, so it goes on nobody else's call.
    let mut mux = Mux::new("__");
    mux.open(4, Some("alice".into()), true);
    mux.open(5, Some("mallory".into()), true);
    let alices = core_msgs(&mux.from_client(4, call(1, "notes__pay")));
    let got = asks_for_input(&mut mux, &alices[0], "airlock-mrtr-A");
    assert_eq!(got[0].1["result"]["requestState"], "airlock-mrtr-A");
    let mallorys = core_msgs(&mux.from_client(5, call(1, "notes__log")));
    let got = asks_for_input(&mut mux, &mallorys[0], "airlock-mrtr-M");
    assert_eq!(got[0].0, 5);
    assert!(got[0].1.get("result").is_none(), "{:?}", got[0].1);
}

#[test]
fn a_request_its_client_gave_up_still_counts_on_its_server_for_a_while() {
    // A server that ignores the cancellation may ask about Alice's call after she gave it up:
    // that question goes on nobody else's call.
    let elicit = json!({"jsonrpc":"2.0","id":"airlock-gw-1","method":"elicitation/create","params":{"message":"IBAN?","_meta":{"airlock/server":"notes"}}});
    for closes in [false, true] {
        let mut mux = mux_with(&[(1, None), (2, None)]);
        for key in [1, 2] {
            mux.from_client(key, init(0, "2025-11-25", json!({"elicitation": {}})));
        }
        mux.from_client(1, call(5, "notes__pay"));
        if closes {
            mux.close(1);
        } else {
            let cancel = json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}});
            mux.from_client(1, cancel);
        }
        mux.from_client(2, call(6, "notes__log"));
        let outs = mux.from_core(elicit.clone());
        assert!(session_msgs(&outs).is_empty(), "closes {closes}: {outs:?}");
        assert_eq!(core_msgs(&outs)[0]["result"]["action"], "decline");
    }
}

#[test]
fn a_tasks_question_is_never_put_on_another_clients_call() {
    // Alice (a session) created task t-1 and is not polling; Bob (a 2026-07-28 client) has the
    // only call on that server. The server's question about t-1, put on Bob's call as an input
    // request, is refused instead of handing Bob Alice's question and its answer.
    let mut mux = mux_with(&[(1, None)]);
    mux.from_client(1, init(0, "2025-11-25", json!({"elicitation": {}})));
    let mut create = call(5, "notes__wire");
    create["params"]["task"] = json!({});
    let sent = core_msgs(&mux.from_client(1, create));
    mux.from_core(json!({"jsonrpc":"2.0","id":sent[0]["id"],"result":{"task":{"taskId":"t-1","status":"working"}}}));
    mux.open(2, Some("bob".into()), true);
    let bobs = core_msgs(&mux.from_client(2, call(1, "notes__slow")));
    let question = |task: &str| {
        json!({"jsonrpc":"2.0","id":bobs[0]["id"],"result":{"resultType":"input_required",
            "inputRequests":{"q":{"method":"elicitation/create","params":{"message":"wire?",
                "_meta":{"io.modelcontextprotocol/related-task":{"taskId":task}}}}},
            "requestState":"airlock-mrtr-B"}})
    };
    let got = session_msgs(&mux.from_core(question("t-1")));
    assert_eq!(got[0].0, 2);
    assert!(got[0].1.get("result").is_none(), "{:?}", got[0].1);
    assert!(
        got[0].1["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("did not create"),
        "{:?}",
        got[0].1
    );
}

/// A session has one handshake: its second `initialize`, answered or waiting, is refused, and
/// its version stays the one it was answered with (a review had a second one switch it).
#[test]
fn a_sessions_second_initialize_is_refused() {
    let mut mux = mux_with(&[(1, None)]);
    let sent = core_msgs(&mux.from_client(1, init(0, "2025-06-18", json!({}))));
    let waiting = session_msgs(&mux.from_client(1, init(1, "2025-03-26", json!({}))));
    assert_eq!(waiting[0].1["error"]["code"], -32600, "{waiting:?}");
    let mut answer =
        json!({"jsonrpc":"2.0","result":{"protocolVersion":"2025-06-18","capabilities":{}}});
    answer["id"] = sent[0]["id"].clone();
    let got = session_msgs(&mux.from_core(answer));
    assert_eq!(got[0].1["result"]["protocolVersion"], "2025-06-18");
    let again = session_msgs(&mux.from_client(1, init(2, "2025-03-26", json!({}))));
    assert_eq!(again[0].1["error"]["code"], -32600, "{again:?}");
}
