//! The official Python SDK client (mcp 2.3.0) in each of its ways of connecting — `auto`
//! (probes `server/discover`: 2026-07-28 where offered), `legacy` (the initialize handshake) and
//! `lowlevel` (`ClientSession` by hand) — through `airlock run` and `airlock serve` in front of
//! the official server-everything: twelve features each (tools, resources, prompts, completion,
//! logging, progress, cancellation, sampling, elicitation, roots, structured content, and the
//! connection's server info). Peers come from `.ci/install-peers`; without them the tests are
//! skipped locally and fail under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use support::{AIRLOCK, Mode, Setup, peers, root};

both_modes!(every_sdk_mode_gets_every_feature);
both_modes!(a_python_sdk_2_server_answers_a_2026_host);

fn peer_paths() -> Option<(PathBuf, PathBuf)> {
    support::sdk_and_everything()
}

fn every_sdk_mode_gets_every_feature(mode: Mode) {
    let Some((python, server)) = peer_paths() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[sandbox]\nrun_as = \"root\"\nkill_timeout = 1\nread = [\"{}\"]\n",
            peers().join("npm").display()
        ),
    )
    .unwrap();
    let node = support::node().display().to_string();
    let server = server.display().to_string();
    let (prefix, command) = through_airlock(
        mode,
        dir.path(),
        "everything",
        &[node.as_str(), server.as_str(), "stdio"],
        &policy,
    );
    for sdk_mode in ["auto", "legacy", "lowlevel"] {
        let report = client_report(
            &python,
            "sdk_probe.py",
            &[sdk_mode, prefix.as_str()],
            &command,
            dir.path(),
        );
        let failed: Vec<(&String, &Value)> = report
            .as_object()
            .unwrap()
            .iter()
            .filter(|(name, value)| *name != "protocol" && value.as_str() != Some("ok"))
            .collect();
        assert!(failed.is_empty(), "{mode:?} / {sdk_mode}: {failed:?}");
        assert_eq!(report.as_object().unwrap().len(), 13, "{report}");
        // Through serve, `auto` speaks 2026-07-28 with airlock; run passes the handshake through
        // to server-everything, which speaks 2025-11-25.
        let expected = if mode == Mode::Serve && sdk_mode == "auto" {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(report["protocol"], expected, "{mode:?} / {sdk_mode}");
    }
}

/// A 2026-07-28 host (the SDK client in its default mode) calling a tool of a server written with
/// the Python SDK 2.x, which refuses a request that carries the 2026-07-28 envelope on a
/// handshake-era connection. Through `serve` the gateway speaks the handshake era to the server,
/// so the envelope must not reach it; through `run` the two speak directly.
fn a_python_sdk_2_server_answers_a_2026_host(mode: Mode) {
    let Some(python) = support::sdk_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = root().join("tests/fixtures/sandbox/py_server.py");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[launch]\nallow_commands = [{:?}]\n[sandbox]\nrun_as = \"root\"\nkill_timeout = 1\n",
            python.display().to_string()
        ),
    )
    .unwrap();
    let python_path = python.display().to_string();
    let server = server.display().to_string();
    let (prefix, command) = through_airlock(
        mode,
        dir.path(),
        "py",
        &[python_path.as_str(), server.as_str()],
        &policy,
    );
    let tool = format!("{prefix}echo");
    let report = client_report(
        &python,
        "modern_call.py",
        &[tool.as_str(), "from a 2026 host"],
        &command,
        dir.path(),
    );
    assert_eq!(report["protocol"], "2026-07-28", "{mode:?}: {report}");
    assert!(
        report["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("from a 2026 host")),
        "{mode:?}: {report}"
    );
}

/// `server` (program and arguments) behind `airlock run` or, as the only server of a config,
/// `airlock serve`, with `policy` and an audit log in `dir`: the tool-name prefix a host uses
/// (`NAME__` through serve) and the command line.
fn through_airlock(
    mode: Mode,
    dir: &std::path::Path,
    name: &str,
    server: &[&str],
    policy: &std::path::Path,
) -> (String, Vec<String>) {
    let audit = dir.join("audit.jsonl");
    let common = [
        "--policy".to_string(),
        policy.display().to_string(),
        "--audit".into(),
        audit.display().to_string(),
    ];
    let mut command = vec![AIRLOCK.to_string()];
    match mode {
        Mode::Run => {
            command.extend(["run".into(), "--name".into(), name.to_string()]);
            command.extend(common);
            command.push("--".into());
            command.extend(server.iter().map(|word| word.to_string()));
            (String::new(), command)
        }
        Mode::Serve => {
            let config = dir.join("airlock.toml");
            std::fs::write(
                &config,
                format!(
                    "[servers.{name}]\ncommand = {:?}\nargs = {:?}\n",
                    server[0],
                    &server[1..]
                ),
            )
            .unwrap();
            command.extend([
                "serve".into(),
                "--config".into(),
                config.display().to_string(),
            ]);
            command.extend(common);
            (format!("{name}__"), command)
        }
    }
}

/// Runs the SDK client `fixture` (in tests/fixtures/mcp) against `command` with a home in `dir`;
/// its report: the JSON object on the last line of its output.
fn client_report(
    python: &std::path::Path,
    fixture: &str,
    args: &[&str],
    command: &[String],
    dir: &std::path::Path,
) -> Value {
    let out = Command::new(python)
        .arg(root().join("tests/fixtures/mcp").join(fixture))
        .args(args)
        .args(command)
        .env("HOME", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("AIRLOCK_ORG_POLICY_DIR", dir.join("org"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap_or_else(|_| {
        panic!(
            "{fixture} {args:?}: no report: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A 2026-07-28 host through `serve` is not listed server-everything's tool that requires a
/// 2025-11-25 task (`execution.taskSupport: "required"`): that era has no such tasks, so every
/// call of it would fail; no tool it is listed carries `execution` (no field of that era's
/// tools). A 2025-11-25 host is listed it as the server lists it. (Found by a review: the model
/// was shown a tool it could never call.)
#[test]
fn a_2026_host_is_not_listed_a_tool_that_requires_a_task() {
    let Some((_, server)) = peer_paths() else {
        return;
    };
    let node = support::node().display().to_string();
    let server = server.display().to_string();
    let setup = || {
        let mut setup = Setup::command(&[node.as_str(), server.as_str(), "stdio"]);
        setup.name = "everything".into();
        setup.policy = format!("read = [{:?}]\n", peers().join("npm").display().to_string());
        setup
    };
    let research = "everything__simulate-research-query";
    let names = |list: &Value| -> Vec<String> {
        let tools = list["result"]["tools"].as_array().expect("tools");
        tools
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };

    let (_world, mut client) = support::start(Mode::Serve, setup());
    client.initialize("2025-11-25");
    let listed = client.request(1, "tools/list", json!({}));
    assert!(names(&listed).iter().any(|n| n == research), "{listed}");

    let (_world, mut client) = support::start(Mode::Serve, setup());
    let envelope = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let listed = client.request(1, "tools/list", json!({"_meta": envelope}));
    let tools = names(&listed);
    assert!(tools.iter().any(|n| n == "everything__echo"), "{listed}");
    assert!(!tools.iter().any(|n| n == research), "{listed}");
    let with_execution = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|tool| tool.get("execution").is_some());
    assert!(!with_execution, "{listed}");
}
