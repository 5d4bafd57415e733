//! A line-level MCP client for the `airlock serve` tests, and a world to run the gateway in.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

// A binary that also loads `support` has this file twice: the same small helpers, no state.
#[allow(clippy::duplicate_mod)]
#[path = "../support/basics.rs"]
mod basics;
#[allow(unused_imports)] // each test binary uses its own part
pub use basics::{processes_with, wait_until};

pub fn fixture() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/serve/fixture_server.py"
    ))
}

/// A temp dir with a policy (servers run as root so they can use the temp dir; kill_timeout 1 s).
pub struct World {
    pub dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("policy.toml"),
            "version = 1\n[tools]\ndeny = [\"mcp:good__pid\"]\n[sandbox]\nrun_as = \"root\"\nkill_timeout = 1\n",
        )
        .expect("policy");
        World { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `airlock.toml` from `(name, extra args, extra keys)`.
    pub fn config(&self, servers: &[(&str, &str, &str)]) -> PathBuf {
        let mut text = String::new();
        for (name, args, keys) in servers {
            let mut argv = vec![format!("{:?}", fixture().display().to_string())];
            for arg in args.split_whitespace() {
                argv.push(format!("{arg:?}"));
            }
            text.push_str(&format!(
                "[servers.{name}]\ncommand = \"/usr/bin/python3\"\nargs = [{}]\n{keys}\n\n",
                argv.join(", ")
            ));
        }
        let path = self.path("airlock.toml");
        std::fs::write(&path, text).expect("config");
        path
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(AIRLOCK);
        cmd.args(args)
            .env("HOME", self.path("home"))
            .env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.path("org"));
        cmd
    }

    pub fn serve(&self, config: &Path) -> Client {
        let mut cmd = self.command(&[
            "serve",
            "--config",
            config.to_str().expect("utf8"),
            "--policy",
            self.path("policy.toml").to_str().expect("utf8"),
            "--audit",
            self.path("audit.jsonl").to_str().expect("utf8"),
        ]);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("airlock serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("non-MCP line on airlock's stdout ({e}): {line}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Client {
            child,
            stdin,
            rx,
            backlog: Vec::new(),
        }
    }

    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("audit line"))
            .collect()
    }

    pub fn status(&self) -> Value {
        let out = self
            .command(&["status", "--json"])
            .output()
            .expect("status");
        assert!(
            out.status.success(),
            "status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("status json")
    }
}

pub struct Client {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    pub backlog: Vec<Value>,
}

impl Client {
    pub fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    }

    /// The answer to `id`, keeping everything else in the backlog.
    pub fn answer(&mut self, id: Value, within: Duration) -> Value {
        if let Some(pos) = self
            .backlog
            .iter()
            .position(|m| m.get("id") == Some(&id) && m.get("method").is_none())
        {
            return self.backlog.remove(pos);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(message)
                    if message.get("id") == Some(&id) && message.get("method").is_none() =>
                {
                    return message;
                }
                Ok(message) => self.backlog.push(message),
                Err(_) => panic!(
                    "no answer to {id} within {within:?}; got {:?}",
                    self.backlog
                ),
            }
        }
    }

    pub fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        self.answer(json!(id), Duration::from_secs(20))
    }

    pub fn initialize(&mut self) {
        let init = self.request(0, "initialize", json!({"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}));
        assert_eq!(init["result"]["serverInfo"]["name"], "airlock", "{init}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    }

    pub fn tools(&mut self, id: i64) -> Vec<String> {
        let list = self.request(id, "tools/list", json!({}));
        list["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{list}"))
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_string())
            .collect()
    }

    pub fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
    }

    pub fn text(answer: &Value) -> String {
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Closes airlock's stdin, as a host that goes away does; true once airlock has exited
    /// within `within`.
    pub fn close_and_wait(&mut self, within: Duration) -> bool {
        drop(self.stdin.take());
        wait_until(within, || self.child.try_wait().ok().flatten().is_some())
    }

    pub fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut err, &mut text);
        }
        text
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
