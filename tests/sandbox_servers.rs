//! End to end, the positive side: real MCP servers answer `tools/call` under the default policy
//! (no grants), through `airlock __sandbox-exec` (plan + spawn_confined, as `run` uses them), with
//! airlock as root and as an ordinary user (setpriv to 65534: airlock not root, memory bounded by
//! `RLIMIT_DATA` with shared memory refused), and the ordinary user's server is confined as well.
//! Peers come from `.ci/install-peers`; a missing peer fails the test with the install command.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandbox_support::*;

fn peers() -> PathBuf {
    std::env::var_os("AIRLOCK_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.peers")))
}

fn require(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run `bash .ci/install-peers`",
        path.display()
    );
    path
}

/// initialize → initialized → tools/call; returns the tools/call response line.
fn call_tool(mut cmd: Command, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let send = |stdin: &mut std::process::ChildStdin, msg: serde_json::Value| {
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut read_response = |id: i64| loop {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for response {id}"
        );
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
            panic!("server closed stdout before response {id}; stderr:\n{err}");
        }
        let msg: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("non-JSON on stdout ({e}): {line}"));
        if msg["id"] == id {
            return msg;
        }
    };
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"airlock-test","version":"0"}}}),
    );
    let init = read_response(1);
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":tool,"arguments":arguments}}),
    );
    let response = read_response(2);
    drop(stdin);
    let _ = child.wait();
    response
}

/// Who runs airlock: the test process, and when that is root also an ordinary user (no memory
/// cgroup for it: `RLIMIT_DATA`, with shared anonymous memory, memfd and SysV shm refused).
fn runners() -> Vec<Option<u32>> {
    if is_root() {
        vec![None, Some(65534)]
    } else {
        vec![None]
    }
}

#[test]
fn real_node_mcp_server_answers_under_the_default_policy() {
    let script =
        require(peers().join(
            "sandbox-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        ));
    let w = world();
    for uid in runners() {
        let mut cmd = airlock_as(uid);
        cmd.args([
            "__sandbox-exec",
            "--server",
            "node-everything",
            "--",
            "node",
        ])
        .arg(&script)
        .arg("stdio");
        w.env(&mut cmd);
        let response = call_tool(
            cmd,
            "echo",
            serde_json::json!({"message": "hello from the sandbox"}),
        );
        let text = response["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.contains("hello from the sandbox"),
            "{uid:?}: {response}"
        );
    }
}

#[test]
fn real_python_mcp_server_in_a_venv_answers_under_the_default_policy() {
    let python = require(peers().join("sandbox-venv/bin/python"));
    let w = world();
    for uid in runners() {
        let mut cmd = airlock_as(uid);
        cmd.args(["__sandbox-exec", "--server", "py-echo", "--"])
            .arg(&python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/sandbox/py_server.py"
            ));
        w.env(&mut cmd);
        let response = call_tool(cmd, "echo", serde_json::json!({"text": "hi"}));
        let text = response["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        // SAFETY: geteuid cannot fail and touches no memory.
        let euid = unsafe { libc::geteuid() };
        // As root the server runs as nobody; an ordinary user's server keeps the user's uid.
        let expected_uid = uid.unwrap_or(if euid == 0 { 65534 } else { euid });
        assert_eq!(
            text,
            format!("hi (uid {expected_uid})"),
            "{uid:?}: {response}"
        );
    }
}

/// airlock itself unprivileged: no uid switch, a user namespace instead of root's powers; the
/// same refusals hold, and RLIMIT_NPROC counts only the sandbox (set inside its user namespace).
#[test]
fn ordinary_user_is_confined_too() {
    if !is_root() {
        return; // already an ordinary user: the other tests cover it
    }
    let w = world();
    let run = |args: &[&str]| {
        let mut cmd = sandbox_support::airlock_as(Some(65534));
        cmd.args(["__sandbox-exec", "--server", "nobody", "--"]);
        cmd.arg(&w.hostile).args(args);
        w.env(&mut cmd);
        cmd.stdin(Stdio::null()).output().unwrap()
    };
    let out = run(&["id"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("uid=65534"),
        "{}",
        text(&out)
    );
    assert_refused(&run(&["read", w.secret.to_str().unwrap()]));
    assert_refused(&run(&["tcp", "1"]));
    assert_refused(&run(&["unshare"]));
    let out = run(&["forkbomb"]);
    assert_refused(&out);
}
