//! End to end: resumption with `Last-Event-ID`. A call answered over SSE whose connection breaks
//! goes on (a broken connection is not a cancellation); `GET` with the id of the last event the
//! client saw replays that stream's later events, the answer included, and nothing it saw.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod http_support;

use std::time::Duration;

use http_support::*;
use serde_json::{Value, json};

/// One server-sent event: its id and its data (empty for a priming event).
#[derive(Debug, Clone)]
struct Event {
    id: String,
    data: String,
}

impl Event {
    fn message(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Reads events off `response` until `done` says stop (or the stream ends).
async fn read_events(
    response: &mut reqwest::Response,
    mut done: impl FnMut(&[Event]) -> bool,
) -> Vec<Event> {
    let mut text = String::new();
    let mut events = Vec::new();
    while !done(&events) {
        let chunk = tokio::time::timeout(Duration::from_secs(20), response.chunk())
            .await
            .expect("the stream goes on")
            .unwrap();
        let Some(chunk) = chunk else { break };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let field = |name: &str| {
                block
                    .lines()
                    .filter_map(|line| line.strip_prefix(name))
                    .map(|value| value.trim_start().to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let id = field("id:");
            if !id.is_empty() {
                events.push(Event {
                    id,
                    data: field("data:"),
                });
            }
        }
    }
    events
}

fn answers(events: &[Event], id: i64) -> bool {
    events.iter().any(|e| {
        e.message()
            .is_some_and(|m| m["id"] == id && m.get("result").is_some())
    })
}

/// POSTs a `slow` call (`seconds`) with a progress token, reads its SSE stream up to the
/// progress and breaks the connection. Returns the priming event and the progress event.
async fn start_and_break(
    client: &reqwest::Client,
    url: &str,
    session: &str,
    id: i64,
    seconds: f64,
) -> (Event, Event) {
    let mut slow = call(id, "fixture__slow", json!({"seconds": seconds}));
    slow["params"]["_meta"] = json!({"progressToken": format!("p{id}")});
    let mut response = client
        .post(url)
        .header("mcp-session-id", session)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(slow.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let seen = read_events(&mut response, |events| {
        events.iter().any(|e| {
            e.message()
                .is_some_and(|m| m["method"] == "notifications/progress")
        })
    })
    .await;
    drop(response);
    let priming = seen.first().expect("a priming event").clone();
    assert!(priming.data.is_empty(), "{seen:?}");
    assert_ne!(
        priming.id.split('-').next(),
        Some("0"),
        "a POST's stream is its own: {seen:?}"
    );
    let progress = seen.last().unwrap().clone();
    assert_ne!(priming.id, progress.id, "{seen:?}");
    (priming, progress)
}

#[test]
fn a_broken_stream_is_resumed_with_last_event_id() {
    let world = World::new();
    let gateway = world.listen(&fixture_server(), &[]);
    let init = post(&gateway.url, &[], &initialize("2025-11-25"));
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init.header("mcp-session-id").unwrap();
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    assert_eq!(
        post(&gateway.url, &[("mcp-session-id", &session)], &note).status,
        202
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let resume = |last: String| {
            let request = client
                .get(&gateway.url)
                .header("mcp-session-id", &session)
                .header("accept", "text/event-stream")
                .header("last-event-id", last);
            async move { request.send().await.unwrap() }
        };

        // Live: the connection breaks after the progress; resumed at once from the progress, the
        // answer comes when the server sends it, and nothing the client saw comes again.
        let (priming, progress) = start_and_break(&client, &gateway.url, &session, 5, 2.0).await;
        let mut live = resume(progress.id.clone()).await;
        assert_eq!(live.status().as_u16(), 200);
        let events = read_events(&mut live, |events| answers(events, 5)).await;
        let answer = events.iter().find_map(Event::message).expect("the answer");
        assert_eq!(text_of(&answer), "slow done", "{answer}");
        // A resumed stream may open with an empty (priming) event; no message is sent twice.
        let messages: Vec<&Event> = events.iter().filter(|e| !e.data.is_empty()).collect();
        assert_eq!(messages.len(), 1, "only the answer: {events:?}");
        assert!(messages[0].id != progress.id && messages[0].id != priming.id);
        let stream = priming.id.split('-').next().unwrap().to_string();
        assert!(
            events
                .iter()
                .all(|e| e.id.starts_with(&format!("{stream}-"))),
            "{events:?}"
        );

        // Replayed: the call ends while no connection is open; resumed from the priming event,
        // the progress and the answer come from the replay buffer, in order.
        let (priming, progress) = start_and_break(&client, &gateway.url, &session, 6, 0.3).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let mut replay = resume(priming.id.clone()).await;
        let events = read_events(&mut replay, |events| answers(events, 6)).await;
        let messages: Vec<&Event> = events.iter().filter(|e| !e.data.is_empty()).collect();
        let kinds: Vec<String> = messages
            .iter()
            .filter_map(|e| e.message())
            .map(|m| m["method"].as_str().unwrap_or("answer").to_string())
            .collect();
        assert_eq!(kinds, ["notifications/progress", "answer"], "{events:?}");
        assert_eq!(messages[0].id, progress.id, "{events:?}");
        assert_ne!(messages[1].id, progress.id, "{events:?}");
    });

    // Both calls ran to their end: a broken connection is not a cancellation.
    let outcome = world
        .audit()
        .into_iter()
        .filter(|e| e["event"] == "outcome" && e["tool"] == "slow")
        .map(|e| e["outcome"].clone())
        .collect::<Vec<_>>();
    assert_eq!(
        outcome,
        [json!("ok"), json!("ok")],
        "broken connections cancel nothing"
    );
}
