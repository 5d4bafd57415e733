//! End to end: `airlock serve --listen unix:PATH` with the real binary. The socket serves a
//! session, `airlock status` names it and `airlock test --url unix:PATH` opens a session through
//! it; only a socket no gateway answers on is ever replaced at PATH: a regular file, a directory
//! or a symbolic link there is refused (exit 2, with the fix) and kept, as is a socket in use.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod http_support;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use http_support::*;
use serde_json::{Value, json};

/// `serve --listen unix:PATH` that is expected to refuse to start: its exit status and stderr.
fn refused_start(world: &World, socket: &Path) -> (Option<i32>, String) {
    let config = world.config(&fixture_server());
    let out = world
        .command(&[
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            &format!("unix:{}", socket.display()),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.stdout.is_empty(), "nothing but MCP on stdout");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_unix_socket_serves_sessions_status_and_airlock_test() {
    let world = World::new();
    let socket = world.path("mcp.sock");
    let mut gateway = world.listen_at(
        &fixture_server(),
        &format!("unix:{}", socket.display()),
        &[],
    );
    assert_eq!(gateway.url, format!("unix:{}", socket.display()));
    let meta = std::fs::symlink_metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "owner only");

    let opened = post_unix(&socket, &[], &initialize("2025-06-18"));
    assert_eq!(opened.status, 200, "{}", opened.body);
    let id = opened.header("mcp-session-id").expect("a session id");
    let headers = [("mcp-session-id", id.as_str())];
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    assert_eq!(post_unix(&socket, &headers, &note).status, 202);
    let answer = post_unix(
        &socket,
        &headers,
        &call(1, "fixture__echo", json!({"text": "via unix"})),
    );
    assert_eq!(
        text_of(&answer.json()),
        "fixture: via unix",
        "{}",
        answer.body
    );

    let status = world.command(&["status", "--json"]).output().unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status[0]["listen"]["url"], gateway.url.as_str(), "{status}");
    assert_eq!(status[0]["listen"]["sessions"], 1, "{status}");
    let shown = world.command(&["status"]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains(&format!("listening at {}", gateway.url)),
        "{shown}"
    );

    // What status shows is what `airlock test --url` takes.
    let tested = world
        .command(&["test", "--url", &gateway.url])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&tested.stdout).into_owned();
    assert!(
        tested.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&tested.stderr)
    );
    assert!(
        report.contains("fixture__echo") && report.contains("opened and ended"),
        "{report}"
    );

    // A second gateway on the same path: the socket answers, so it is in use.
    let (code, stderr) = refused_start(&world, &socket);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("in use by a running gateway"), "{stderr}");
    assert!(
        std::fs::symlink_metadata(&socket)
            .unwrap()
            .file_type()
            .is_socket()
    );
    let still = post_unix(
        &socket,
        &headers,
        &call(2, "fixture__echo", json!({"text": "still"})),
    );
    assert_eq!(text_of(&still.json()), "fixture: still", "{}", still.body);

    gateway.stop();
    assert!(
        !socket.exists(),
        "the gateway removes its socket when it stops"
    );
}

#[test]
fn only_a_stale_socket_is_replaced_at_the_path() {
    let world = World::new();

    let precious = world.path("precious");
    std::fs::write(&precious, "precious\n").unwrap();
    let (code, stderr) = refused_start(&world, &precious);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("is a regular file, not a socket")
            && stderr.contains("Fix: listen on another path"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");

    let dir = world.path("a-dir");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("inside"), "kept").unwrap();
    let (code, stderr) = refused_start(&world, &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is a directory, not a socket"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.join("inside")).unwrap(), "kept");

    let link = world.path("link.sock");
    std::os::unix::fs::symlink(&precious, &link).unwrap();
    let (code, stderr) = refused_start(&world, &link);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("is a symbolic link, not a socket"),
        "{stderr}"
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");

    // A socket nobody answers on (its gateway is gone) is replaced.
    let stale = world.path("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(
        std::fs::symlink_metadata(&stale)
            .unwrap()
            .file_type()
            .is_socket()
    );
    let _gateway = world.listen_at(&fixture_server(), &format!("unix:{}", stale.display()), &[]);
    let answer = post_unix(&stale, &[], &initialize("2025-06-18"));
    assert_eq!(answer.status, 200, "{}", answer.body);
}
