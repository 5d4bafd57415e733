//! The harness of the `serve --listen` tests: a throwaway world (HOME, XDG dirs, org policy dir),
//! the real `airlock` binary listening on a loopback port the kernel picks, and an HTTP client.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

pub const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

#[path = "../support/basics.rs"]
mod basics;
#[allow(unused_imports)] // each test binary uses its own part
pub use basics::{peers, root};

/// The small stdio server of the session tests, as a config entry named `fixture`.
pub fn fixture_server() -> String {
    format!(
        "[servers.fixture]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\nstart = \"eager\"\n",
        root()
            .join("tests/fixtures/serve/fixture_server.py")
            .display()
            .to_string()
    )
}

/// The official server-everything from npm (installed by .ci/install-peers), named `everything`.
pub fn everything_server() -> Option<String> {
    let entry =
        peers().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    entry.exists().then(|| {
        format!(
            "[servers.everything]\ncommand = \"node\"\nargs = [{:?}]\nstart = \"eager\"\n",
            entry.display().to_string()
        )
    })
}

pub struct World {
    pub dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> World {
        let world = World {
            dir: tempfile::tempdir().unwrap(),
        };
        for sub in ["home", "state", "config", "org"] {
            std::fs::create_dir_all(world.path(sub)).unwrap();
        }
        world
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(AIRLOCK);
        command
            .args(args)
            .env("HOME", self.path("home"))
            .env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.path("org"))
            .env_remove("AIRLOCK_LOG");
        command
    }

    /// Writes the user policy (`version = 1` is added).
    pub fn policy(&self, text: &str) {
        let dir = self.path("config/airlock");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("policy.toml"), format!("version = 1\n{text}")).unwrap();
    }

    pub fn config(&self, text: &str) -> PathBuf {
        let path = self.path("airlock.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn token_store(&self) -> PathBuf {
        self.path("config/airlock/tokens.json")
    }

    /// `airlock token create NAME`: the token it printed.
    pub fn token(&self, name: &str) -> String {
        let out = self.command(&["token", "create", name]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    pub fn audit(&self) -> Vec<Value> {
        let path = self.path("state/airlock/audit.jsonl");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Starts `airlock serve --config CONFIG --listen 127.0.0.1:0 EXTRA...` and waits for its URL.
    pub fn listen(&self, config: &str, extra: &[&str]) -> Listening {
        self.listen_at(config, "127.0.0.1:0", extra)
    }

    /// Starts `airlock serve --config CONFIG --listen ADDR EXTRA...` and waits for its URL.
    pub fn listen_at(&self, config: &str, addr: &str, extra: &[&str]) -> Listening {
        let config = self.config(config);
        let config = config.display().to_string();
        let mut args = vec!["serve", "--config", config.as_str(), "--listen", addr];
        args.extend_from_slice(extra);
        let mut child = self
            .command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let log = Arc::new(Mutex::new(String::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.split("Streamable HTTP at ").nth(1) {
                    let _ = tx.send(url.trim().to_string());
                }
                kept.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let Ok(url) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!("airlock did not start listening:\n{}", log.lock().unwrap());
        };
        Listening { child, url, log }
    }
}

pub struct Listening {
    pub child: Child,
    pub url: String,
    pub log: Arc<Mutex<String>>,
}

impl Listening {
    pub fn stderr(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// SIGTERM, then wait (the gateway stops its servers and writes its exit event).
    pub fn stop(&mut self) {
        // SAFETY: kill only sends a signal to a pid this test started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// One HTTP exchange's result.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    }
}

/// A blocking POST of one JSON-RPC message (the tests are plain `#[test]`s; each exchange runs on
/// a small runtime of its own).
pub fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> Reply {
    let mut all = vec![
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
    ];
    all.extend_from_slice(headers);
    exchange(reqwest::Method::POST, url, &all, Some(body.to_string()))
}

pub fn exchange(
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> Reply {
    exchange_with(reqwest::Client::new(), method, url, headers, body)
}

/// A POST to the gateway listening on the unix socket `socket` (its endpoint `/mcp`).
pub fn post_unix(socket: &Path, headers: &[(&str, &str)], body: &Value) -> Reply {
    let client = reqwest::Client::builder()
        .unix_socket(socket)
        .build()
        .unwrap();
    let mut all = vec![
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
    ];
    all.extend_from_slice(headers);
    exchange_with(
        client,
        reqwest::Method::POST,
        "http://localhost/mcp",
        &all,
        Some(body.to_string()),
    )
}

pub fn exchange_with(
    client: reqwest::Client,
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> Reply {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut request = client.request(method, url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = tokio::time::timeout(Duration::from_secs(30), request.send())
            .await
            .expect("an answer within 30 s")
            .expect("the request went through");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        Reply {
            status,
            headers,
            body,
        }
    })
}

/// POSTs `call` with `headers` and reads its SSE stream as it comes: each question a server asks
/// on it (`elicitation/create`) is answered with `result` at once. Returns the call's answer
/// (`id` as the call's) and the questions asked.
pub fn call_answering_questions(
    url: &str,
    headers: &[(&str, &str)],
    call: &Value,
    result: &Value,
) -> (Value, Vec<Value>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let request = |body: String| {
            let mut request = client
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json");
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.body(body)
        };
        let mut stream = request(call.to_string()).send().await.unwrap();
        let (mut seen, mut asked) = (String::new(), Vec::new());
        loop {
            let chunk = tokio::time::timeout(Duration::from_secs(20), stream.chunk())
                .await
                .expect("the call's stream goes on")
                .unwrap();
            let Some(chunk) = chunk else { break };
            seen.push_str(&String::from_utf8_lossy(&chunk));
            let messages: Vec<Value> = seen
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str(data.trim()).ok())
                .collect();
            for ask in messages
                .iter()
                .filter(|m| m["method"] == "elicitation/create")
                .skip(asked.len())
            {
                let answer = json!({"jsonrpc":"2.0","id": ask["id"], "result": result});
                let reply = request(answer.to_string()).send().await.unwrap();
                assert_eq!(reply.status().as_u16(), 202);
                asked.push(ask.clone());
            }
            if let Some(done) = messages
                .iter()
                .find(|m| m["id"] == call["id"] && m.get("method").is_none())
            {
                return (done.clone(), asked);
            }
        }
        // A reply without a stream (`application/json`) is the answer itself.
        match serde_json::from_str::<Value>(&seen) {
            Ok(answer) => (answer, asked),
            Err(_) => panic!("no answer to the call in: {seen}"),
        }
    })
}

pub fn initialize(version: &str) -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"test","version":"1"}}})
}

pub fn call(id: i64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":arguments}})
}

/// Opens a session (initialize + initialized) and returns its id.
pub fn session(url: &str, auth: &[(&str, &str)]) -> String {
    let reply = post(url, auth, &initialize("2025-06-18"));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let id = reply.header("mcp-session-id").expect("a session id");
    let mut headers = auth.to_vec();
    headers.push(("mcp-session-id", id.as_str()));
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    assert_eq!(post(url, &headers, &note).status, 202);
    id
}

/// The text of a tool result (or the error message).
pub fn text_of(answer: &Value) -> String {
    if let Some(error) = answer.get("error") {
        return error["message"].as_str().unwrap_or_default().to_string();
    }
    answer["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect()
}

pub fn python() -> PathBuf {
    peers().join("sandbox-venv/bin/python")
}

pub fn node22() -> PathBuf {
    peers().join("node22/bin/node")
}

pub fn http_peer(bin: &str) -> PathBuf {
    peers().join("http-npm/node_modules/.bin").join(bin)
}

/// PATH with the pinned Node 22 first (the conformance suite and the Inspector need it).
pub fn path_with_node22() -> String {
    let node = node22();
    let dir = node
        .parent()
        .unwrap_or(Path::new("/"))
        .display()
        .to_string();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

/// One keep-alive HTTP/1.1 connection spoken by hand, so a connection closed without an answer
/// is seen as such (an HTTP client library would retry on a fresh connection and hide it).
pub struct RawConnection {
    reader: BufReader<std::net::TcpStream>,
}

/// An answer read off a [`RawConnection`].
#[derive(Debug)]
pub struct RawReply {
    pub status: u16,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

impl RawConnection {
    /// Connects to the host and port of `url` (`http://127.0.0.1:PORT/mcp`).
    pub fn open(url: &str) -> RawConnection {
        let authority = url.trim_start_matches("http://").split('/').next().unwrap();
        let stream = std::net::TcpStream::connect(authority).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        RawConnection {
            reader: BufReader::new(stream),
        }
    }

    /// POSTs `body` to `/mcp` and reads the answer; `None` when the connection was closed (or
    /// failed) before a whole answer came.
    pub fn post(&mut self, body: &str) -> Option<RawReply> {
        self.send(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n",
            body,
        )
    }

    /// Sends `head` (the request line and headers, each line ending in CRLF) with
    /// `content-length` and `body`, and reads the answer as [`RawConnection::post`] does.
    pub fn send(&mut self, head: &str, body: &str) -> Option<RawReply> {
        use std::io::{Read, Write};
        let request = format!("{head}content-length: {}\r\n\r\n{body}", body.len());
        self.reader.get_mut().write_all(request.as_bytes()).ok()?;
        let mut status_line = String::new();
        if self.reader.read_line(&mut status_line).ok()? == 0 {
            return None;
        }
        let status = status_line.split(' ').nth(1)?.parse().ok()?;
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':')?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let length: usize = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .and_then(|(_, value)| value.parse().ok())?;
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).ok()?;
        Some(RawReply {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}
