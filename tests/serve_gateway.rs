//! `airlock serve` end to end with real peers: the official reference servers
//! (server-everything, server-filesystem, from npm) and a fixture server, all confined at once,
//! driven by the official Python SDK client. Peers come from `.ci/install-peers`; without them
//! the test is skipped locally and fails under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

mod support;

use support::{AIRLOCK, audit_lines as events, peers, root};

/// (the SDK's python, the directory of the npm reference servers)
fn peer_paths() -> Option<(PathBuf, PathBuf)> {
    support::sdk_and_reference_servers()
}

#[test]
fn three_real_servers_behind_one_gateway_with_the_python_sdk() {
    let Some((python, npm)) = peer_paths() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let inside = dir.path().join("granted");
    std::fs::create_dir_all(&inside).expect("inside");
    let config = write_config(dir.path(), &npm, &inside);
    let policy = write_policy(dir.path(), &inside);
    let audit = dir.path().join("audit.jsonl");
    let state = dir.path().join("state");
    let out = Command::new(&python)
        .arg(root().join("tests/fixtures/serve/sdk_client.py"))
        .args([
            AIRLOCK.as_ref(),
            config.as_os_str(),
            policy.as_os_str(),
            audit.as_os_str(),
            inside.as_os_str(),
        ])
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", &state)
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("AIRLOCK_ORG_POLICY_DIR", dir.path().join("org"))
        .output()
        .expect("client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().expect("report")).expect("json");
    assert_lists_every_allowed_tool_namespaced(&report);
    assert_each_call_reached_its_server(&report, &inside);
    assert_status_saw_each_server(&report);
    assert_audited_and_cleaned_up(&audit, &state);
}

/// A tool of server-everything answers with `resource_link`s; the host reads one right away,
/// before any resource listing, while another server (the fixture) offers resources too: the
/// gateway routes the read to the server whose tool named the URI.
#[test]
fn a_resource_link_from_a_tool_is_readable_before_any_listing() {
    let Some((_, npm)) = peer_paths() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = root().join("tests/fixtures/serve/fixture_server.py");
    let gateway = EverythingAnd::new(dir.path(), &npm, "fixture", &fixture, &["--notify"]);
    let mut client = gateway.start();
    let links = client.call(1, "everything__get-resource-links", json!({"count": 2}));
    let uri = links["result"]["content"]
        .as_array()
        .and_then(|content| content.iter().find(|item| item["type"] == "resource_link"))
        .and_then(|link| link["uri"].as_str())
        .unwrap_or_else(|| panic!("no resource_link: {links}"))
        .to_string();
    let read = client.request(2, "resources/read", json!({"uri": uri}));
    let contents = &read["result"]["contents"];
    assert_eq!(contents[0]["uri"], uri.as_str(), "{read}");
    client.close_stdin();
    client.wait(std::time::Duration::from_secs(10));
}

/// A hostile server names server-everything's resource as its own: by a `resource_link` from its
/// tool before the host ever listed resources (with a `resources/updated` for it, in
/// everything's name), then by listing it too. Once everything lists the URI as well, its reads
/// are refused naming both, the forged updates never reach the host, and the claimer never
/// answers for it. The first session shows the read going to everything when only it claims it.
#[test]
fn a_server_naming_anothers_resource_never_answers_for_it() {
    let Some((_, npm)) = peer_paths() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let claimer = root().join("tests/fixtures/serve/claimer.py");
    let gateway = EverythingAnd::new(dir.path(), &npm, "claimer", &claimer, &[]);
    let end = |mut client: support::Client| {
        client.close_stdin();
        client.wait(std::time::Duration::from_secs(10));
    };
    // One session to learn a URI of everything's and what reading it gives.
    let mut client = gateway.start();
    let listed = client.request(1, "resources/list", json!({}));
    let uri = listed["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("everything lists no resource: {listed}"))
        .to_string();
    let theirs = client.request(2, "resources/read", json!({"uri": uri}));
    assert_eq!(
        theirs["result"]["contents"][0]["uri"],
        uri.as_str(),
        "{theirs}"
    );
    end(client);

    // A new session: the claimer links it first, then the host lists.
    let mut client = gateway.start();
    let forged = |client: &support::Client| -> Vec<Value> {
        let updated = |m: &&Value| m["method"] == "notifications/resources/updated";
        client.backlog.iter().filter(updated).cloned().collect()
    };
    let linked = client.call(3, "claimer__link", json!({"uri": uri}));
    assert_eq!(
        linked["result"]["content"][0]["uri"],
        uri.as_str(),
        "{linked}"
    );
    client.request(4, "resources/list", json!({}));
    let refused = |answer: &Value| {
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(answer["error"]["code"], -32002, "{answer}");
        assert!(
            message.contains("\"everything\"") && message.contains("\"claimer\""),
            "{answer}"
        );
        assert!(!answer.to_string().contains("EVIL-CONTENT"), "{answer}");
    };
    refused(&client.request(5, "resources/read", json!({"uri": uri})));
    client.call(6, "claimer__link", json!({"uri": uri}));
    assert_eq!(forged(&client), Vec::<Value>::new());

    client.call(7, "claimer__claim", json!({"uri": uri}));
    let both = client.request(8, "resources/list", json!({}));
    let listing: Vec<&Value> = both["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter(|r| r["uri"] == uri.as_str())
        .collect();
    assert_eq!(listing.len(), 2, "{both}");
    refused(&client.request(9, "resources/read", json!({"uri": uri})));
    end(client);
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).expect("audit");
    assert!(
        audit.contains("notifications/resources/updated for"),
        "{audit}"
    );
}

/// A gateway of server-everything and one Python server, with [`write_policy`]'s policy, all
/// in one directory.
struct EverythingAnd<'a> {
    dir: &'a Path,
    config: PathBuf,
    policy: PathBuf,
}

impl<'a> EverythingAnd<'a> {
    fn new(dir: &'a Path, npm: &Path, name: &str, script: &Path, args: &[&str]) -> Self {
        let config = dir.join("airlock.toml");
        let mut argv = vec![script.display().to_string()];
        argv.extend(args.iter().map(|arg| arg.to_string()));
        std::fs::write(
            &config,
            format!(
                "[servers.everything]\ncommand = {node:?}\nargs = [\"{npm}/server-everything/dist/index.js\", \"stdio\"]\n\n[servers.{name}]\ncommand = \"/usr/bin/python3\"\nargs = {argv:?}\n",
                node = support::which("node").display().to_string(),
                npm = npm.display(),
            ),
        )
        .expect("config");
        let granted = dir.join("granted");
        std::fs::create_dir_all(&granted).expect("granted");
        let policy = write_policy(dir, &granted);
        EverythingAnd {
            dir,
            config,
            policy,
        }
    }

    /// `airlock serve` of it, as a host's client after the handshake.
    fn start(&self) -> support::Client {
        let dir = self.dir;
        let child = Command::new(AIRLOCK)
            .args(["serve", "--config"])
            .arg(&self.config)
            .arg("--policy")
            .arg(&self.policy)
            .arg("--audit")
            .arg(dir.join("audit.jsonl"))
            .env("HOME", dir)
            .env("XDG_STATE_HOME", dir.join("state"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", dir.join("org"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("airlock serve");
        let mut client = support::Client::new(child);
        client.initialize("2025-06-18");
        client
    }
}

/// The gateway config: two reference servers, the fixture, and a server that fails to start.
fn write_config(dir: &Path, npm: &Path, inside: &Path) -> PathBuf {
    let node = support::which("node");
    let fixture = root().join("tests/fixtures/serve/fixture_server.py");
    let config = dir.join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[servers.everything]
command = "{node}"
args = ["{npm}/server-everything/dist/index.js", "stdio"]

[servers.fs]
command = "{node}"
args = ["{npm}/server-filesystem/dist/index.js", "{inside}"]
start = "eager"

[servers.fixture]
command = "/usr/bin/python3"
args = ["{fixture}", "--name", "fixture"]

[servers.broken]
command = "/usr/bin/python3"
args = ["{fixture}", "--fail-at-start"]
startup_timeout = 5
"#,
            node = node.display(),
            npm = npm.display(),
            inside = inside.display(),
            fixture = fixture.display(),
        ),
    )
    .expect("config");
    config
}

/// A policy that denies one tool and grants the servers their files.
fn write_policy(dir: &Path, inside: &Path) -> PathBuf {
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[tools]\ndeny = [\"mcp:everything__get-env\"]\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\nwrite = [\"{}\"]\n",
            peers().join("npm").display(),
            inside.display()
        ),
    )
    .expect("policy");
    policy
}

fn assert_lists_every_allowed_tool_namespaced(report: &Value) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for expected in [
        "everything__echo",
        "fs__write_file",
        "fs__read_text_file",
        "fixture__echo",
    ] {
        assert!(
            tools.contains(&expected),
            "{expected} missing from {tools:?}"
        );
    }
    assert!(
        !tools.contains(&"everything__get-env"),
        "denied tools are hidden: {tools:?}"
    );
    assert!(
        tools.iter().all(|t| t.contains("__")),
        "every tool is namespaced: {tools:?}"
    );
    assert!(
        !tools.iter().any(|t| t.starts_with("broken__")),
        "{tools:?}"
    );
}

fn assert_each_call_reached_its_server(report: &Value, inside: &Path) {
    assert_eq!(report["echo"]["isError"], false, "{report}");
    assert!(
        report["echo"]["text"]
            .as_str()
            .unwrap()
            .contains("hello through the gateway")
    );
    assert_eq!(
        report["fixture"]["text"], "fixture: hi fixture",
        "routed to the right server"
    );
    assert_eq!(report["write"]["isError"], false, "{report}");
    assert_eq!(
        std::fs::read_to_string(inside.join("note.txt")).expect("written"),
        "via serve"
    );
    assert_eq!(report["denied"]["isError"], true);
    assert!(
        report["denied"]["text"]
            .as_str()
            .unwrap()
            .contains("mcp:everything__get-env"),
        "{report}"
    );
    assert_eq!(report["broken"]["isError"], true);
    assert!(
        report["broken"]["text"]
            .as_str()
            .unwrap()
            .contains("broken"),
        "{report}"
    );
    assert_eq!(report["unknown"]["isError"], true);
    assert_eq!(report["fixture_again"]["text"], "fixture: still here");
}

fn assert_status_saw_each_server(report: &Value) {
    // airlock status, read while the gateway ran.
    assert_eq!(report["status_exit"], 0, "{report}");
    let gateway = &report["status"][0];
    let server = |name: &str| {
        gateway["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {gateway}"))
            .clone()
    };
    assert_eq!(server("fixture")["state"], "ready");
    assert_eq!(server("fixture")["tools"], 7);
    assert!(server("fixture")["last_call"].is_string());
    assert_ne!(server("broken")["state"], "ready");
    assert!(
        server("broken")["last_error"]
            .as_str()
            .unwrap()
            .contains("exited"),
        "{gateway}"
    );
}

fn assert_audited_and_cleaned_up(audit: &Path, state: &Path) {
    let events = events(audit);
    let decisions: Vec<&Value> = events.iter().filter(|e| e["event"] == "decision").collect();
    assert_eq!(
        decisions.len(),
        7,
        "one decision per call, the unknown tool's too"
    );
    let unrouted: Vec<&&Value> = decisions
        .iter()
        .filter(|e| e["server"] == "gateway")
        .collect();
    assert_eq!(unrouted.len(), 1, "{unrouted:?}");
    assert_eq!(unrouted[0]["rule"], "airlock: not a listed tool");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "spawn" && e["server"] == "fs")
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "exit" && e["server"] == "everything")
    );
    // The socket is gone with the gateway.
    let sockets = std::fs::read_dir(state.join("airlock/gateways"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(sockets, 0);
}
