//! Network egress by name, end to end: real MCP servers (Python with urllib, Node with its
//! built-in fetch; no proxy variables anywhere) under `airlock run --allow-net` and `airlock serve`
//! (one parameterised case, both modes), as root and as an ordinary user.
//!
//! The machine reaches only the package registries and itself, so the allow list names one
//! registry's host, read at run time from npm's configuration; the other registry's host (pip's
//! index) must not resolve; an HTTP server this test starts on 127.0.0.1, on a port the list
//! allows for 127.0.0.2 only, must be refused by airlock (and never see a connection). The audit log must show
//! each connection and refusal, the allowed one attributed to the tool call that made it.
//! No test traffic goes anywhere but loopback and the registry.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod sandbox_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use sandbox_support::{chmod, is_root, peers};

/// The host part of a URL (`https://user@host:port/path` → `host`).
fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = authority.rsplit('@').next().unwrap_or(authority);
    host.split(':').next().unwrap_or(host).to_ascii_lowercase()
}

fn output(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// npm's registry host, from `npm config get registry`.
fn npm_registry_host() -> String {
    let host = url_host(output("npm", &["config", "get", "registry"]).trim());
    assert!(!host.is_empty(), "npm config get registry gave no host");
    host
}

/// pip's index host: `pip config list` (index-url), else PIP_INDEX_URL, else pip's own default.
fn pip_index_host() -> String {
    let configured = output("python3", &["-m", "pip", "config", "list"])
        .lines()
        .find(|line| line.contains("index-url"))
        .and_then(|line| line.split_once('='))
        .map(|(_, value)| value.trim().trim_matches('\'').to_string());
    let url = configured
        .or_else(|| std::env::var("PIP_INDEX_URL").ok())
        .unwrap_or_else(|| {
            output(
                "python3",
                &[
                    "-c",
                    "from pip._internal.models.index import PyPI; print(PyPI.simple_url)",
                ],
            )
        });
    let host = url_host(url.trim());
    assert!(!host.is_empty(), "no pip index host");
    host
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Run,
    Serve,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum As {
    Root,
    Ordinary,
}

struct Case {
    root: PathBuf,
    mode: Mode,
    user: As,
    allowed: String,
    loopback_port: u16,
}

/// A loopback HTTP server that counts the connections it accepts (airlock must make none).
fn loopback_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let mut stream = stream;
            let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    (port, accepted)
}

impl Case {
    fn new(mode: Mode, user: As, allowed: &str, loopback_port: u16) -> Case {
        let root = std::env::temp_dir().join(format!(
            "airlock-net-{}-{mode:?}-{user:?}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["", "state", "config/airlock", "org", "home", "work"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            chmod(&root.join(dir), 0o777);
        }
        // Pass the machine's CA bundle variables (its registry access may need them); the limits
        // are the defaults.
        std::fs::write(
            root.join("config/airlock/policy.toml"),
            "version = 1\n[sandbox]\nenv = [\"PATH\", \"LANG\", \"NODE_EXTRA_CA_CERTS\", \"SSL_CERT_FILE\"]\n",
        )
        .unwrap();
        Case {
            root,
            mode,
            user,
            allowed: allowed.to_string(),
            loopback_port,
        }
    }

    fn audit_path(&self) -> PathBuf {
        self.root.join("state/audit.jsonl")
    }

    fn allow_list(&self) -> Vec<String> {
        // A neighbouring loopback address on the test server's port: the port is listed, so a
        // connection to 127.0.0.1 reaches airlock's decision, and must be refused there.
        vec![
            self.allowed.clone(),
            format!("127.0.0.2:{}", self.loopback_port),
        ]
    }

    fn command(&self, servers: &[(&str, Vec<String>)]) -> Command {
        let mut cmd = sandbox_support::airlock_as(match self.user {
            As::Ordinary if is_root() => Some(sandbox_support::USER_UID),
            As::Root | As::Ordinary => None,
        });
        let audit = self.audit_path();
        match self.mode {
            Mode::Run => {
                let (name, argv) = &servers[0];
                cmd.args(["run", "--name", name, "--audit"]).arg(&audit);
                for entry in self.allow_list() {
                    cmd.arg(format!("--allow-net={entry}"));
                }
                cmd.arg("--").args(argv);
            }
            Mode::Serve => {
                let mut config = String::new();
                for (name, argv) in servers {
                    config.push_str(&format!(
                        "[servers.{name}]\ncommand = {:?}\nargs = {:?}\n[servers.{name}.sandbox]\nnetwork = {{ allow = {:?} }}\n",
                        argv[0],
                        &argv[1..],
                        self.allow_list()
                    ));
                }
                let path = self.root.join("work/airlock.toml");
                std::fs::write(&path, config).unwrap();
                chmod(&path, 0o644);
                cmd.args(["serve", "--config"])
                    .arg(&path)
                    .arg("--audit")
                    .arg(&audit);
            }
        }
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.root.join("home"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"))
            .current_dir(self.root.join("work"));
        for name in ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"] {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.audit_path())
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// One MCP session: initialize, then `fetch` for each URL through `tool`; returns the texts and
/// the request ids.
fn fetch_all(mut cmd: Command, tool: &str, urls: &[String]) -> Vec<(i64, String)> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut stderr = child.stderr.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut send = |msg: Value| {
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    };
    let mut read = |id: i64| -> Value {
        loop {
            assert!(Instant::now() < deadline, "timed out waiting for {id}");
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap() == 0 {
                let mut err = String::new();
                let _ = stderr.read_to_string(&mut err);
                panic!("airlock closed stdout before answer {id}; stderr:\n{err}");
            }
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg["id"] == id {
                return msg;
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "net-egress-test", "version": "1"}}}),
    );
    read(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    read(2);
    let mut texts = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let id = 10 + i as i64;
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {"url": url}}}));
        let answer = read(id);
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text in {answer}"))
            .to_string();
        texts.push((id, text));
    }
    drop(stdin);
    let _ = child.wait();
    texts
}

fn servers() -> Vec<(&'static str, Vec<String>)> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/net");
    let python = peers().join("sandbox-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `bash .ci/install-peers`",
        python.display()
    );
    let node = output("sh", &["-c", "command -v node"]).trim().to_string();
    vec![
        (
            "py",
            vec![
                python.display().to_string(),
                fixtures.join("fetch_server.py").display().to_string(),
            ],
        ),
        (
            "node",
            vec![
                node,
                fixtures.join("fetch_server.mjs").display().to_string(),
            ],
        ),
    ]
}

fn connect_events<'a>(events: &'a [Value], server: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event"] == "net_connect" && e["server"] == server)
        .collect()
}

fn check_case(mode: Mode, user: As) {
    let allowed = npm_registry_host();
    let other = pip_index_host();
    assert_ne!(allowed, other);
    let (port, accepted) = loopback_server();
    let case = Case::new(mode, user, &allowed, port);
    let urls = [
        format!("https://{allowed}/"),
        format!("https://{other}/simple/"),
        format!("http://127.0.0.1:{port}/"),
    ];
    let servers = servers();
    let sessions: Vec<(&str, Vec<(i64, String)>)> = match mode {
        Mode::Run => servers
            .iter()
            .map(|server| {
                let texts = fetch_all(case.command(std::slice::from_ref(server)), "fetch", &urls);
                (server.0, texts)
            })
            .collect(),
        Mode::Serve => servers
            .iter()
            .map(|(name, _)| {
                let texts = fetch_all(case.command(&servers), &format!("{name}__fetch"), &urls);
                (*name, texts)
            })
            .collect(),
    };
    let events = case.audit();
    let context = |what: &str| format!("{mode:?} as {user:?}: {what}\naudit: {events:#?}");
    for (server, texts) in &sessions {
        let [(allowed_id, reached), (_, other_host), (_, loopback)] = texts.as_slice() else {
            panic!("{}", context("three answers expected"));
        };
        assert_eq!(
            reached,
            "status 200",
            "{}",
            context(&format!("{server} reaching the allowed registry"))
        );
        assert!(
            other_host.starts_with("error"),
            "{}",
            context(&format!("{server}: {other_host}"))
        );
        assert!(
            loopback.starts_with("error"),
            "{}",
            context(&format!("{server}: {loopback}"))
        );
        assert_connections_audited(
            &Audited {
                mode,
                events: &events,
                allowed: &allowed,
                other: &other,
                port,
            },
            server,
            allowed_id,
            &context,
        );
    }
    // `airlock audit summary` counts them per server: the registry allowed, and the other
    // registry's lookup and the loopback connection refused (at least: a runtime may retry).
    let summary = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["audit", "summary", "--json"])
        .arg(case.audit_path())
        .output()
        .unwrap();
    let summary: Value = serde_json::from_slice(&summary.stdout).unwrap();
    for (server, _) in &sessions {
        let row = &summary["servers"][server];
        assert!(
            row["net_allowed"].as_u64() >= Some(1) && row["net_refused"].as_u64() >= Some(2),
            "{}",
            context(&format!("{server}: audit summary {row}"))
        );
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the loopback server was reached"
    );
    let _ = std::fs::remove_dir_all(&case.root);
}

/// What one egress session left in the audit log, and what it should be checked against.
struct Audited<'a> {
    mode: Mode,
    events: &'a [Value],
    allowed: &'a str,
    other: &'a str,
    port: u16,
}

/// One server's connections in the audit log: the allowed one attributed to its call and closed
/// with its byte counts, the other registry's lookup and the loopback connection refused.
fn assert_connections_audited(
    audited: &Audited,
    server: &str,
    allowed_id: &i64,
    context: &dyn Fn(&str) -> String,
) {
    let Audited {
        mode,
        events,
        allowed,
        other,
        port,
    } = *audited;
    let connects = connect_events(events, server);
    let allowed_event = connects
        .iter()
        .find(|e| e["decision"] == "allow" && e["detail"]["host"] == allowed)
        .unwrap_or_else(|| panic!("{}", context(&format!("{server}: no allowed net_connect"))));
    assert_eq!(allowed_event["detail"]["port"], 443);
    // The connection carries the request id of the one call in flight: the id its decision
    // event has (in run the host's own id; serve audits its own numbering).
    let first_decision = events
        .iter()
        .find(|e| e["event"] == "decision" && e["server"] == server)
        .unwrap_or_else(|| panic!("{}", context("no decision event")));
    assert_eq!(
        allowed_event["request_id"],
        first_decision["request_id"],
        "{}",
        context("attribution")
    );
    if mode == Mode::Run {
        assert_eq!(
            allowed_event["request_id"],
            *allowed_id,
            "{}",
            context("attribution")
        );
    }
    let conn = &allowed_event["detail"]["conn"];
    let close = events
        .iter()
        .find(|e| {
            e["event"] == "net_close" && e["server"] == server && e["detail"]["conn"] == *conn
        })
        .unwrap_or_else(|| panic!("{}", context(&format!("{server}: no net_close"))));
    assert!(close["detail"]["bytes_down"].as_u64().unwrap() > 0);
    assert!(close["detail"]["bytes_up"].as_u64().unwrap() > 0);
    assert!(close["duration_ms"].as_f64().is_some());
    assert!(
        connects.iter().any(|e| e["decision"] == "deny"
            && e["detail"]["host"] == other
            && e["detail"]["kind"] == "lookup"),
        "{}",
        context(&format!(
            "{server}: the other registry's lookup is not audited as refused"
        ))
    );
    assert!(
        connects.iter().any(|e| e["decision"] == "deny"
            && e["detail"]["host"] == "127.0.0.1"
            && e["detail"]["port"] == port),
        "{}",
        context(&format!(
            "{server}: the loopback connection is not audited as refused"
        ))
    );
}

#[test]
fn egress_by_name_through_run_and_serve_as_root_and_as_an_ordinary_user() {
    let users: &[As] = if is_root() {
        &[As::Root, As::Ordinary]
    } else {
        &[As::Ordinary]
    };
    for &user in users {
        for mode in [Mode::Run, Mode::Serve] {
            check_case(mode, user);
        }
    }
}
