//! Routing of gateway messages onto a session's streams.

use super::*;
use crate::http::sink::SinkReceiver;
use serde_json::json;

fn state() -> SessionState {
    SessionState::new(Instant::now(), 64, 1 << 20)
}

fn sink() -> (Sink, SinkReceiver) {
    super::super::sink::sink()
}

fn call(id: i64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"t"}})
}

fn answer(id: i64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"content":[]}})
}

fn frames(rx: &mut SinkReceiver) -> Vec<Frame> {
    let mut out = Vec::new();
    while let Some(frame) = rx.try_recv() {
        out.push(frame);
    }
    out
}

fn text(frame: &Frame) -> String {
    match frame {
        Frame::Json { body, .. } | Frame::Sse(body) => String::from_utf8_lossy(body).into_owned(),
        Frame::End => "END".into(),
    }
}

#[test]
fn an_immediate_answer_is_plain_json_and_leaves_nothing_behind() {
    let mut state = state();
    let (tx, mut rx) = sink();
    state.register(&call(1), true, tx, Instant::now()).unwrap();
    assert_eq!(state.deliver(&answer(1), None), None);
    let got = frames(&mut rx);
    assert!(matches!(&got[..], [Frame::Json { status: 200, .. }]));
    assert!(state.idle() && state.replay.is_empty() && state.streams.is_empty());
    // A second answer to the same id has nowhere to go.
    assert!(state.deliver(&answer(1), None).is_some());
}

#[test]
fn progress_before_the_answer_turns_the_stream_into_sse() {
    let mut state = state();
    let (tx, mut rx) = sink();
    let mut request = call(7);
    request["params"]["_meta"] = json!({"progressToken": "p1"});
    let number = state.register(&request, true, tx, Instant::now()).unwrap();
    let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1","progress":1}});
    state.deliver(&progress, None);
    state.deliver(&answer(7), None);
    let got: Vec<String> = frames(&mut rx).iter().map(text).collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got[0].starts_with(&format!("id: {number}-1\nevent: message\ndata: {{")));
    assert!(got[0].contains("notifications/progress"));
    assert!(got[1].starts_with(&format!("id: {number}-2\n")) && got[1].contains("\"id\":7"));
    assert_eq!(got[2], "END");
    assert!(state.idle());
}

#[test]
fn server_requests_prefer_the_get_stream_then_the_open_call() {
    let mut state = state();
    let elicit =
        json!({"jsonrpc":"2.0","id":"airlock-gw-1","method":"elicitation/create","params":{}});
    // No stream at all: it waits on the GET stream.
    assert_eq!(state.target(&elicit, None), Target::Stream(GET_STREAM));
    let (tx, _rx) = sink();
    let number = state.register(&call(1), true, tx, Instant::now()).unwrap();
    // A call is open and no GET stream: the call's stream gets it.
    assert_eq!(state.target(&elicit, None), Target::Stream(number));
    let (get_tx, _get_rx) = sink();
    state.attach(get_tx, None, Instant::now()).unwrap();
    assert_eq!(state.target(&elicit, None), Target::Stream(GET_STREAM));
    // What the gateway says is related wins.
    assert_eq!(
        state.target(&elicit, Some(&json!(1))),
        Target::Stream(number)
    );
}

#[test]
fn messages_for_an_absent_get_stream_wait_for_the_next_get() {
    let mut state = state();
    let note = json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"});
    state.deliver(&note, None);
    state.deliver(&note, None);
    let (tx, mut rx) = sink();
    state.attach(tx, None, Instant::now()).unwrap();
    let got: Vec<String> = frames(&mut rx).iter().map(text).collect();
    assert_eq!(got.len(), 2);
    assert!(got[0].starts_with("id: 0-1\n") && got[1].starts_with("id: 0-2\n"));
    // A second plain GET while one is attached is refused.
    let (other, _) = sink();
    assert_eq!(
        state.attach(other, None, Instant::now()),
        Err(AttachError::Busy)
    );
}

#[test]
fn a_dropped_connection_resumes_where_it_left_off() {
    let mut state = state();
    let (tx, mut rx) = sink();
    let mut request = call(3);
    request["params"]["_meta"] = json!({"progressToken": 9});
    let number = state.register(&request, true, tx, Instant::now()).unwrap();
    let progress = |n: i64| json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":9,"progress":n}});
    state.deliver(&progress(1), None);
    assert_eq!(frames(&mut rx).len(), 1);
    drop(rx); // the connection breaks (not a cancellation before 2026-07-28)
    state.deliver(&progress(2), None);
    state.deliver(&answer(3), None);
    assert!(!state.idle() || state.pending.is_empty());
    let (tx, mut rx) = sink();
    let after = EventId {
        stream: number,
        seq: 1,
    };
    state.attach(tx, Some(after), Instant::now()).unwrap();
    let got: Vec<String> = frames(&mut rx).iter().map(text).collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got[0].contains("\"progress\":2") && got[1].contains("\"id\":3"));
    assert_eq!(got[2], "END");
    assert!(state.streams.is_empty());
}

#[test]
fn priming_events_start_streams_for_recent_clients_only() {
    let mut state = state();
    let (tx, mut rx) = sink();
    state.register(&call(1), false, tx, Instant::now()).unwrap();
    state.deliver(&answer(1), None);
    assert!(
        !text(&frames(&mut rx)[0]).contains("data: \n"),
        "no version yet: no priming"
    );
    state.version = Some("2025-11-25".into());
    let (tx, mut rx) = sink();
    let number = state.register(&call(2), false, tx, Instant::now()).unwrap();
    state.deliver(&answer(2), None);
    let got: Vec<String> = frames(&mut rx).iter().map(text).collect();
    assert_eq!(got[0], format!("id: {number}-0\ndata: \n\n"));
}

#[test]
fn the_initialize_answer_sets_the_version_and_duplicates_are_refused() {
    let mut state = state();
    let (tx, _rx) = sink();
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}});
    state.register(&init, true, tx, Instant::now()).unwrap();
    let (tx2, _rx2) = sink();
    assert!(matches!(
        state.register(&init, true, tx2, Instant::now()),
        Err(RegisterError::Duplicate(_))
    ));
    state.deliver(
        &json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}),
        None,
    );
    assert_eq!(state.version.as_deref(), Some("2025-06-18"));
}

#[test]
fn stateless_answers_carry_http_statuses_and_no_ids() {
    let mut state = state();
    state.stateless = true;
    let (tx, mut rx) = sink();
    state.register(&call(1), true, tx, Instant::now()).unwrap();
    state.deliver(
        &json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}),
        None,
    );
    assert!(matches!(
        frames(&mut rx)[..],
        [Frame::Json { status: 404, .. }]
    ));
    let (tx, mut rx) = sink();
    state.register(&call(2), false, tx, Instant::now()).unwrap();
    state.deliver(&answer(2), None);
    let got: Vec<String> = frames(&mut rx).iter().map(text).collect();
    assert!(got[0].starts_with("event: message\ndata: "), "{got:?}");
    assert!(state.replay.is_empty());
}

#[test]
fn a_slow_connection_is_detached_not_buffered() {
    let mut state = state();
    let (tx, _rx) = super::super::sink::sink_of(1);
    state.attach(tx, None, Instant::now()).unwrap();
    let note = json!({"jsonrpc":"2.0","method":"notifications/message","params":{}});
    state.deliver(&note, None);
    state.deliver(&note, None); // the queue of 1 is full: detached
    assert!(!state.streams[&GET_STREAM].live());
    assert_eq!(state.replay.len(), 2, "kept for resumption");
}

#[test]
fn closing_ends_every_stream() {
    let mut state = state();
    let (tx, mut rx) = sink();
    state.register(&call(1), true, tx, Instant::now()).unwrap();
    state.close();
    assert_eq!(frames(&mut rx), vec![Frame::End]);
    assert!(state.deliver(&answer(1), None).is_some());
    let (tx, _rx) = sink();
    assert_eq!(
        state.register(&call(2), true, tx, Instant::now()),
        Err(RegisterError::Closed)
    );
}
