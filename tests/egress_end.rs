//! End to end, in `run` and `serve`: what the network hand-over still owes the audit log when a
//! server's sandbox ends is written before airlock exits. A server made 700 refused connects
//! (600 are recorded one by one, the rest counted) and left one allowed connection open to a
//! peer that never reads (its socket outlives the server, its end unseen). Both the count of the
//! refusals past the budget and that connection's `net_close` used to be lost: airlock's
//! shutdown stopped waiting 200 ms after the last event, while the hand-over held them for its
//! 3 s grace.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::net::TcpListener;
use std::time::Duration;

use serde_json::json;
use support::{Client, Mode, Setup, start};

both_modes!(a_connection_that_outlives_its_server_and_the_refusals_past_the_budget_are_audited);

fn a_connection_that_outlives_its_server_and_the_refusals_past_the_budget_are_audited(mode: Mode) {
    // A peer that accepts and never reads: the server's connection stays full and open.
    let tarpit = TcpListener::bind("127.0.0.2:0").unwrap();
    let port = tarpit.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in tarpit.incoming() {
            held.push(stream);
        }
    });
    let closed = TcpListener::bind("127.0.0.2:0").unwrap();
    let refused_port = closed.local_addr().unwrap().port();
    drop(closed);
    let network =
        format!("network = {{ allow = [\"127.0.0.2:{port}\", \"127.0.0.2:{refused_port}\"] }}");
    let (world, mut client) = start(mode, Setup::fixture("--hostile").policy(&network));
    client.initialize("2025-06-18");
    client.request(1, "tools/list", json!({}));
    let arguments =
        json!({"refusals": 700, "refused_port": refused_port, "host": "127.0.0.2", "port": port});
    let answer = client.call(2, &world.tool("linger"), arguments);
    assert_eq!(
        Client::text(&answer),
        "refused 700, one connection left open",
        "{answer}"
    );
    client.close_stdin();
    assert!(
        client.wait(Duration::from_secs(20)).is_some(),
        "airlock exits"
    );
    let connects = world.events("net_connect");
    let kept = connects
        .iter()
        .find(|e| e["decision"] == "allow" && e["detail"]["port"] == port)
        .unwrap_or_else(|| panic!("no allowed connect: {connects:?}"));
    let closes = world.events("net_close");
    assert!(
        closes
            .iter()
            .any(|e| e["detail"]["conn"] == kept["detail"]["conn"]
                && e["reason"] == "its end was not seen before the sandbox was gone"),
        "the connection left open has its net_close: {closes:?}"
    );
    let counted = connects
        .iter()
        .find(|e| !e["detail"]["unrecorded"].is_null())
        .unwrap_or_else(|| {
            panic!(
                "no count of the refusals past the budget: {} connects, last {}",
                connects.len(),
                connects.last().unwrap()
            )
        });
    assert_eq!(
        counted["detail"]["unrecorded"]["connections"], 100,
        "{counted}"
    );
}
