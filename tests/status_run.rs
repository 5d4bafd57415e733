//! `airlock status` sees every running session, `airlock run` instances included (each registers
//! the same owner-only control socket as a gateway): the server, airlock's and the server's pid,
//! uptime, calls, denials and the last error; a session that ended is gone from the list.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Mode, Setup, World, start};

both_modes!(status_lists_the_session_with_its_calls_and_denials);

fn status_json(world: &World) -> Vec<Value> {
    let out = world.command(&["status", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn status_lists_the_session_with_its_calls_and_denials(mode: Mode) {
    let setup = Setup::fixture("").policy("[tools]\ndeny = [\"mcp:fixture__pid\"]");
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let allowed = client.call(1, &world.tool("echo"), json!({"text": "hi"}));
    assert!(allowed["result"].is_object(), "{allowed}");
    let denied = client.call(2, &world.tool("pid"), json!({}));
    assert_eq!(denied["result"]["isError"], true);

    // The socket is owner-only, in the directory gateways use.
    let sockets = world.path("state/airlock/gateways");
    assert_eq!(
        std::fs::metadata(&sockets).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let socket = std::fs::read_dir(&sockets)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let documents = status_json(&world);
    assert_eq!(documents.len(), 1, "{documents:?}");
    let document = &documents[0];
    let expected_mode = match mode {
        Mode::Run => "run",
        Mode::Serve => "serve",
    };
    assert_eq!(document["mode"], expected_mode);
    assert_eq!(document["pid"], json!(client.child.id()));
    assert!(document["uptime_s"].is_u64());
    let server = &document["servers"][0];
    assert_eq!(server["name"], "fixture");
    assert_eq!(server["calls"], 2, "{document}");
    assert_eq!(server["denials"], 1, "{document}");
    assert!(
        server["pid"].as_u64().is_some_and(|pid| pid > 0),
        "{document}"
    );
    assert!(server["last_error"].is_null());

    let out = world.command(&["status"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    match mode {
        Mode::Run => {
            assert!(text.starts_with("airlock run (1)\n"), "{text}");
            let row = text.lines().nth(2).unwrap();
            let words: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(words[0], client.child.id().to_string(), "{text}");
            assert_eq!(words[1], "fixture");
            assert_eq!(words[5..], ["2", "1", "-"], "{text}");
        }
        Mode::Serve => {
            // The config was given relative to serve's directory; status, run from elsewhere,
            // names the file itself.
            assert_eq!(
                document["config"],
                std::fs::canonicalize(world.path("airlock.toml"))
                    .unwrap()
                    .display()
                    .to_string(),
                "{document}"
            );
            assert!(text.starts_with("gateway pid "), "{text}");
            assert!(text.contains("DENIALS"), "{text}");
        }
    }

    // Once the session ends, its socket is gone and status finds nothing.
    client.close_stdin();
    assert!(client.wait(Duration::from_secs(10)).is_some());
    let out = world.command(&["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "nothing running is an answer");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no running `airlock run` or `airlock serve`")
    );
    let out = world.command(&["status", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}
