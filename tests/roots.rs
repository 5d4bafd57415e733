//! Roots the host offers, end to end in both modes with the official filesystem server: a host
//! that declares `roots` answers the server's `roots/list` with a granted directory and one the
//! sandbox does not show. The answer reaches the server unchanged, the server keeps working in
//! its grant, and airlock's stderr names the root the server cannot reach and how to grant it
//! (once), and says nothing of the granted one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Client, Mode, Setup, start};

both_modes!(a_root_the_sandbox_does_not_show_is_named_with_its_grant);

fn a_root_the_sandbox_does_not_show_is_named_with_its_grant(mode: Mode) {
    let Some(server) = support::npm_server("server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (granted, outside) = (base.join("notes"), base.join("repo"));
    for path in [&granted, &outside] {
        std::fs::create_dir_all(path).unwrap();
    }
    std::fs::write(granted.join("a.txt"), "granted words").unwrap();
    let g = granted.display().to_string();
    let npm = support::peers().join("npm").display().to_string();
    let node = support::node().display().to_string();
    let setup = Setup::command(&[&node, &server.display().to_string(), &g])
        .policy(&format!("read = [{npm:?}]\nwrite = [{g:?}]"));
    let (world, mut client) = start(mode, setup);
    let params = json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": true}},
        "clientInfo": {"name": "test", "version": "1"}
    });
    let init = client.request(0, "initialize", params);
    assert!(init.get("result").is_some(), "{init}");
    client.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));

    // The server asks for the host's roots once it is initialized (serve starts it for the
    // first request that needs it): answer with both directories.
    client.send(json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}));
    let ask = loop {
        let message = client
            .next(Duration::from_secs(20))
            .expect("the server's roots/list");
        if message["method"] == "roots/list" {
            break message;
        }
    };
    let roots = json!({"roots": [
        {"uri": format!("file://{g}"), "name": "notes"},
        {"uri": format!("file://{}", outside.display()), "name": "repo"},
    ]});
    client.send(json!({"jsonrpc":"2.0","id": ask["id"], "result": roots}));

    let listed = client.answer(json!(5), Duration::from_secs(20));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    // The server still works in its grant.
    let read = client.call(
        1,
        &world.tool("read_text_file"),
        json!({"path": granted.join("a.txt")}),
    );
    assert_eq!(Client::text(&read), "granted words", "{read}");

    client.close_stdin();
    client.wait(Duration::from_secs(10));
    let stderr = client.stderr();
    let told = format!(
        "the host offers the root {}, which the server's sandbox does not show it",
        outside.display()
    );
    assert_eq!(stderr.matches(&told).count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("--allow-write={}", outside.display())),
        "{stderr}"
    );
    assert!(
        !stderr.contains(&format!("the host offers the root {g},")),
        "{stderr}"
    );
}
