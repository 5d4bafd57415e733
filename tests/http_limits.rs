//! End to end: the listener's rate limit and idle-session expiry with the real binary on
//! loopback. A burst of keep-alive POSTs gets an answer for every request, `429` with
//! `Retry-After` once over the limit, never a connection closed without an answer; an idle
//! session ends (its id answers `404`) while one in use lives on.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod http_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use http_support::*;
use serde_json::json;

#[test]
fn a_keep_alive_burst_gets_an_answer_for_every_request_and_429_with_retry_after() {
    let world = World::new();
    let config = format!(
        "{}\n[http]\nrate_limit = 20\nrate_burst = 40\n",
        fixture_server()
    );
    let gateway = world.listen(&config, &[]);
    let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}).to_string();
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut connection = RawConnection::open(&gateway.url);
    for i in 0..400 {
        let reply = connection
            .post(&list)
            .unwrap_or_else(|| panic!("request {i}: the connection closed without an answer"));
        *statuses.entry(reply.status).or_default() += 1;
        if reply.status == 429 {
            let wait: u64 = reply
                .header("retry-after")
                .unwrap_or_else(|| panic!("request {i}: 429 without Retry-After: {reply:?}"))
                .parse()
                .unwrap();
            assert!((1..=2).contains(&wait), "{reply:?}");
            assert!(reply.body.contains("[http] rate_limit"), "{reply:?}");
        }
        if reply.header("connection") == Some("close") {
            connection = RawConnection::open(&gateway.url);
        }
    }
    // Without a session every admitted POST of tools/list is a 400 (no Mcp-Session-Id).
    assert!(
        statuses.get(&429).copied().unwrap_or(0) >= 300,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.keys().copied().collect::<Vec<_>>(),
        vec![400, 429],
        "{statuses:?}"
    );

    // A body too large to read for a refusal: the 429 says the connection closes, and it does.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"pad\":\"{}\"}}",
        "x".repeat(100 * 1024)
    );
    // Empty the bucket first (it refills at 20/s, and a slow machine may have taken seconds
    // over the burst above), then send the large request at once on the same connection.
    let mut connection = RawConnection::open(&gateway.url);
    for _ in 0..100 {
        let reply = connection.post(&list).expect("an answer");
        if reply.header("connection") == Some("close") {
            connection = RawConnection::open(&gateway.url);
        }
        if reply.status == 429 {
            break;
        }
    }
    let reply = connection
        .post(&big)
        .expect("an answer to the large request");
    assert_eq!(reply.status, 429, "{reply:?}");
    assert_eq!(reply.header("connection"), Some("close"), "{reply:?}");
    assert!(reply.header("retry-after").is_some(), "{reply:?}");
}

#[test]
fn an_idle_session_expires_and_one_in_use_lives_on() {
    let world = World::new();
    let config = format!("{}\n[http]\nsession_idle_timeout = 1\n", fixture_server());
    let gateway = world.listen(&config, &[]);
    let idle = session(&gateway.url, &[]);
    let busy = session(&gateway.url, &[]);
    let ping = |id: i64, session: &str| {
        post(
            &gateway.url,
            &[("mcp-session-id", session)],
            &json!({"jsonrpc":"2.0","id":id,"method":"ping"}),
        )
    };
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(4) {
        n += 1;
        let reply = ping(n, &busy);
        assert_eq!(reply.status, 200, "the session in use: {}", reply.body);
        std::thread::sleep(Duration::from_millis(300));
    }
    let expired = ping(1000, &idle);
    assert_eq!(expired.status, 404, "{}", expired.body);
    assert_eq!(ping(1001, &busy).status, 200);
    // The client starts again with initialize, as the transport says.
    let again = session(&gateway.url, &[]);
    assert_eq!(ping(1002, &again).status, 200);
}
