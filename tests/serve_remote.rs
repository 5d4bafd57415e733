//! `airlock serve` with remote servers, end to end and loopback-only: the official reference
//! server (server-everything, from npm) over Streamable HTTP and over legacy HTTP+SSE, a stdlib
//! Python Streamable HTTP fixture that records the headers it receives, a stdio fixture beside
//! them, and a remote server that is down; driven by the official Python SDK client. Peers come
//! from `.ci/install-peers`; without them the tests are skipped locally and fail under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod serve_support;
mod support;

use support::audit_lines as events;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use serve_support::{Client, World, wait_until};

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");
/// A header value that must reach the server and never show anywhere else.
const TOKEN: &str = "tok-5f1e9a77c3d24b6e";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/serve")
}

/// (the venv's python, server-everything's dist/index.js)
fn peer_paths() -> Option<(PathBuf, PathBuf)> {
    support::sdk_and_everything()
}

/// A port nobody listens on right now (the kernel's pick, released at once).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// A peer process killed (and reaped) when the test ends, however it ends.
struct Peer(Child);

impl Peer {
    fn wait_listening(self, port: u16) -> Peer {
        assert!(
            wait_until(Duration::from_secs(15), || listening(port)),
            "peer did not listen on {port}"
        );
        self
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// server-everything over `streamableHttp` or `sse`, bound to 127.0.0.1 by the loopback preload.
fn everything(index: &Path, mode: &str, port: u16) -> Peer {
    let child = Command::new("node")
        .arg("--import")
        .arg(fixtures().join("loopback.mjs"))
        .arg(index)
        .arg(mode)
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node");
    Peer(child).wait_listening(port)
}

fn http_fixture(port: u16, record: &Path) -> Peer {
    let child = Command::new("/usr/bin/python3")
        .arg(fixtures().join("http_fixture.py"))
        .arg(port.to_string())
        .arg(record)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    Peer(child).wait_listening(port)
}

fn recorded(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("record line"))
        .collect()
}

#[test]
fn remote_servers_next_to_a_stdio_one_with_the_python_sdk() {
    let Some((python, index)) = peer_paths() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (web, old, hdr, down) = (free_port(), free_port(), free_port(), free_port());
    let _web = everything(&index, "streamableHttp", web);
    let _old = everything(&index, "sse", old);
    let record = dir.path().join("headers.jsonl");
    let _hdr = http_fixture(hdr, &record);
    assert!(!listening(down), "port {down} should be free");

    let config = write_config(dir.path(), [web, old, hdr, down]);
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "version = 1\n[tools]\ndeny = [\"mcp:web__get-env\"]\n[sandbox]\nrun_as = \"root\"\n",
    )
    .expect("policy");
    let audit = dir.path().join("audit.jsonl");
    let calls = json!({
        "web": ["web__echo", {"message": "over streamable http"}],
        "old": ["old__echo", {"message": "over legacy sse"}],
        "fixture": ["fixture__echo", {"text": "over stdio"}],
        "hdr": ["hdr__echo", {"text": "with a header"}],
        "denied": ["web__get-env", {}],
        "leak": ["hdr__leak", {}],
        "down": ["down__echo", {"text": "x"}],
        "web_again": ["web__echo", {"message": "still here"}],
    });
    let out = Command::new(&python)
        .arg(fixtures().join("sdk_remote_client.py"))
        .args([
            AIRLOCK.as_ref(),
            config.as_os_str(),
            policy.as_os_str(),
            audit.as_os_str(),
            calls.to_string().as_ref(),
        ])
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("AIRLOCK_ORG_POLICY_DIR", dir.path().join("org"))
        .env("AIRLOCK_LOG", "debug")
        .env("FIXTURE_TOKEN", TOKEN)
        .output()
        .expect("client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed: {stdout}\n{stderr}");
    let report: Value = serde_json::from_str(stdout.lines().last().expect("report")).expect("json");

    assert_lists_the_tools_of_every_live_server(&report);
    assert_each_call_answered_by_its_server(&report);
    assert_the_header_reached_every_request(&record);
    assert_audited_without_the_token(&audit, &stderr);
}

/// The gateway config: three remote servers on `ports` (web, old, hdr; down listens nowhere) and
/// a stdio fixture.
fn write_config(dir: &Path, [web, old, hdr, down]: [u16; 4]) -> PathBuf {
    let config = dir.join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[servers.web]
transport = "http"
url = "http://127.0.0.1:{web}/mcp"

[servers.old]
transport = "sse"
url = "http://127.0.0.1:{old}/sse"

[servers.hdr]
url = "http://127.0.0.1:{hdr}/mcp"
headers = {{ X-Fixture-Token = "${{env:FIXTURE_TOKEN}}" }}

[servers.down]
url = "http://127.0.0.1:{down}/mcp"
startup_timeout = 2

[servers.fixture]
command = "/usr/bin/python3"
args = ["{fixture}", "--name", "fixture"]
"#,
            fixture = fixtures().join("fixture_server.py").display(),
        ),
    )
    .expect("config");
    config
}

fn assert_lists_the_tools_of_every_live_server(report: &Value) {
    // Namespaced tools of every live server, side by side; the denied one hidden, none of down.
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for expected in [
        "web__echo",
        "old__echo",
        "hdr__echo",
        "hdr__slow",
        "fixture__echo",
    ] {
        assert!(tools.contains(&expected), "{expected} missing: {tools:?}");
    }
    assert!(!tools.contains(&"web__get-env"), "{tools:?}");
    assert!(tools.contains(&"old__get-env"), "only web's is denied");
    assert!(!tools.iter().any(|t| t.starts_with("down__")), "{tools:?}");
}

fn assert_each_call_answered_by_its_server(report: &Value) {
    let call = |key: &str| &report["calls"][key];
    let text = |key: &str| call(key)["text"].as_str().unwrap_or_default().to_string();
    assert_eq!(call("web")["isError"], false, "{report}");
    assert!(text("web").contains("over streamable http"), "{report}");
    assert_eq!(call("old")["isError"], false, "{report}");
    assert!(text("old").contains("over legacy sse"), "{report}");
    assert_eq!(text("fixture"), "fixture: over stdio");
    assert_eq!(text("hdr"), "hdr: with a header");
    assert_eq!(call("denied")["isError"], true);
    assert!(text("denied").contains("mcp:web__get-env"), "{report}");
    assert_eq!(call("leak")["isError"], true, "{report}");
    assert!(text("leak").contains("HTTP 500"), "{report}");
    assert!(
        !text("leak").contains(TOKEN),
        "the echoed token is scrubbed"
    );
    assert_eq!(call("down")["isError"], true, "{report}");
    assert!(
        text("down").contains("down") && text("down").contains("refused"),
        "{report}"
    );
    assert!(text("web_again").contains("still here"), "{report}");
}

fn assert_the_header_reached_every_request(record: &Path) {
    // The configured header reached the server on every request (POST, GET, DELETE), and the
    // session id and protocol version were sent once negotiated.
    assert!(
        wait_until(Duration::from_secs(5), || recorded(record)
            .iter()
            .any(|r| r["method"] == "DELETE")),
        "the session is deleted at shutdown: {:?}",
        recorded(record)
    );
    let requests = recorded(record);
    assert!(requests.len() >= 5, "{requests:?}");
    for request in &requests {
        assert_eq!(request["headers"]["x-fixture-token"], TOKEN, "{request}");
    }
    assert!(requests[0]["headers"].get("mcp-session-id").is_none());
    assert!(
        requests[0]["headers"]["accept"]
            .as_str()
            .is_some_and(|a| a.contains("application/json") && a.contains("text/event-stream")),
        "{requests:?}"
    );
    for request in &requests[1..] {
        assert!(
            request["headers"].get("mcp-session-id").is_some(),
            "{request}"
        );
        assert!(
            request["headers"].get("mcp-protocol-version").is_some(),
            "{request}"
        );
    }
    assert!(
        requests.iter().any(|r| r["method"] == "GET"),
        "GET stream tried"
    );
}

fn assert_audited_without_the_token(audit: &Path, stderr: &str) {
    // Decisions audited for remote servers like for stdio ones; the token nowhere.
    let audit_text = std::fs::read_to_string(audit).expect("audit");
    assert!(!audit_text.contains(TOKEN), "token in the audit log");
    assert!(!stderr.contains(TOKEN), "token on airlock's stderr");
    let log = events(audit);
    let has = |event: &str, server: &str, extra: &dyn Fn(&Value) -> bool| {
        log.iter()
            .any(|e| e["event"] == event && e["server"] == server && extra(e))
    };
    assert!(has("decision", "web", &|e| e["tool"] == "echo"
        && e["decision"] == "allow"));
    assert!(has("decision", "old", &|e| e["tool"] == "echo"
        && e["decision"] == "allow"));
    assert!(has("decision", "web", &|e| e["tool"] == "get-env"
        && e["decision"] == "deny"));
    assert!(has("outcome", "web", &|e| e["outcome"] == "ok"));
    assert!(has("outcome", "old", &|e| e["outcome"] == "ok"));
    assert!(has("spawn", "web", &|e| e["detail"]["transport"] == "http"));
    assert!(has("spawn", "old", &|e| e["detail"]["transport"] == "sse"));
    assert!(has("spawn", "hdr", &|e| e["detail"]["headers"]
        == json!(["X-Fixture-Token"])));
    assert!(has("exit", "down", &|e| e["reason"]
        .as_str()
        .is_some_and(|r| r.contains("refused"))));
}

/// Writes a config with the http fixture as `hdr` (and a stdio fixture as `good`).
fn fixture_config(world: &World, port: u16) -> PathBuf {
    let path = world.path("airlock.toml");
    std::fs::write(
        &path,
        format!(
            "[servers.hdr]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ X-Fixture-Token = \"{TOKEN}\" }}\nstartup_timeout = 10\n\n[servers.good]\ncommand = \"/usr/bin/python3\"\nargs = [\"{}\", \"--name\", \"good\"]\n",
            fixtures().join("fixture_server.py").display()
        ),
    )
    .expect("config");
    path
}

#[test]
fn a_remote_server_that_dies_mid_call_fails_its_pending_calls_and_restarts_on_the_next() {
    let world = World::new();
    let port = free_port();
    let record = world.path("headers.jsonl");
    let mut server = http_fixture(port, &record);
    let config = fixture_config(&world, port);
    let mut client = world.serve(&config);
    client.initialize();
    let tools = client.tools(1);
    if !tools.contains(&"hdr__slow".to_string()) {
        drop(client.stdin.take());
        panic!("{tools:?}\n{}", client.stderr());
    }
    assert_eq!(
        Client::text(&client.call(2, "hdr__echo", json!({"text": "one"}))),
        "hdr: one"
    );

    // A call in flight when the server dies is answered with an error at once.
    client.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hdr__slow","arguments":{"seconds": 30}}}));
    std::thread::sleep(Duration::from_millis(500));
    server.kill();
    let pending = client.answer(json!(3), Duration::from_secs(5));
    assert_eq!(pending["result"]["isError"], true, "{pending}");
    let text = Client::text(&pending);
    assert!(text.contains("hdr"), "{text}");
    assert!(text.contains("broke") || text.contains("lost"), "{text}");
    // The others keep working.
    assert_eq!(
        Client::text(&client.call(4, "good__echo", json!({"text": "fine"}))),
        "good: fine"
    );

    // The server comes back; the next call reconnects (new session) after the backoff.
    let _server = http_fixture(port, &record);
    let again = client.call(5, "hdr__echo", json!({"text": "two"}));
    assert_eq!(Client::text(&again), "hdr: two", "{again}");

    assert!(client.close_and_wait(Duration::from_secs(5)));
    let stderr = client.stderr();
    assert!(!stderr.contains(TOKEN), "token on stderr");
    let log = world.audit();
    assert!(
        log.iter().any(|e| e["event"] == "exit"
            && e["server"] == "hdr"
            && e["detail"]["ended_by"] == "remote"),
        "{log:?}"
    );
    assert!(
        log.iter()
            .filter(|e| e["event"] == "spawn" && e["server"] == "hdr")
            .count()
            >= 2,
        "reconnected"
    );
    assert!(
        !std::fs::read_to_string(world.path("audit.jsonl"))
            .expect("audit")
            .contains(TOKEN)
    );
}

#[test]
fn airlock_test_handshakes_with_remote_servers() {
    let world = World::new();
    let port = free_port();
    let _server = http_fixture(port, &world.path("headers.jsonl"));
    let config = fixture_config(&world, port);
    let policy = world.path("policy.toml");
    let out = world
        .command(&[
            "test",
            "hdr",
            "--config",
            config.to_str().expect("utf8"),
            "--policy",
            policy.to_str().expect("utf8"),
        ])
        .output()
        .expect("airlock test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("remote: no sandbox"), "{stdout}");
    assert!(stdout.contains("tools:    3"), "{stdout}");
    assert!(stdout.contains("hdr__echo"), "{stdout}");
    assert!(!stdout.contains(TOKEN), "{stdout}");

    let down = free_port();
    std::fs::write(
        &config,
        format!("[servers.gone]\nurl = \"http://127.0.0.1:{down}/mcp\"\n"),
    )
    .expect("config");
    let out = world
        .command(&[
            "test",
            "gone",
            "--config",
            config.to_str().expect("utf8"),
            "--policy",
            policy.to_str().expect("utf8"),
        ])
        .output()
        .expect("airlock test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAILED") && stdout.contains("refused"),
        "{stdout}"
    );
}
