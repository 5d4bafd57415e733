//! The shared harness for rules that hold in both session modes: start airlock in mode X
//! (`run` or `serve`) with server Y, drive it with a line-level client, read its audit log.
//!
//! A test written once as `fn case(mode: Mode)` runs in both modes through [`both_modes!`],
//! which makes one `#[test]` per mode (so nextest runs and reports them separately).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

mod basics;
pub use basics::*;

/// Makes `NAME_run` and `NAME_serve` tests out of `fn NAME(mode: Mode)`.
#[macro_export]
macro_rules! both_modes {
    ($($case:ident),* $(,)?) => {
        $(
            mod $case {
                #[test]
                fn run() {
                    super::$case($crate::support::Mode::Run)
                }
                #[test]
                fn serve() {
                    super::$case($crate::support::Mode::Serve)
                }
            }
        )*
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `airlock run -- SERVER`: the host talks to the server through airlock.
    Run,
    /// `airlock serve` with SERVER as its one server, named `fixture`.
    Serve,
}

/// A key the top level of the JSON object `text` names more than once, if any: keys are
/// compared decoded, regardless of ASCII case and up to a NUL, as the laxest parsers read them
/// (Go's `encoding/json`, cJSON). serde_json's `Value` keeps only the last, so this reads the
/// keys themselves.
pub fn repeated_envelope_key(text: &str) -> Option<String> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
            let mut keys = Vec::new();
            while let Some((key, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                keys.push(key);
            }
            Ok(keys)
        }
    }
    let keys = serde_json::Deserializer::from_str(text)
        .deserialize_map(Keys)
        .ok()?;
    let mut seen = std::collections::HashSet::new();
    keys.into_iter().find(|key| {
        let read = key
            .split('\0')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        !seen.insert(read)
    })
}

/// The fixture server of the session tests (no SDK: starts fast; misbehaves on request).
pub fn fixture() -> PathBuf {
    root().join("tests/fixtures/serve/fixture_server.py")
}

/// What to start: a server command, the policy's extra lines, the tool timeout.
pub struct Setup {
    pub command: Vec<String>,
    pub policy: String,
    pub tool_timeout: u64,
    /// The server's name (`--name` in run, its config key in serve).
    pub name: String,
    /// The org policy (`$AIRLOCK_ORG_POLICY_DIR/policy.toml`), if any.
    pub org_policy: Option<String>,
    /// The server's working directory (run: airlock's own; serve: the server's `cwd`).
    pub cwd: Option<PathBuf>,
    /// More keys of the server's table in serve's config (e.g. `start = "eager"`).
    pub serve_config: String,
    /// The policy's `run_as` (the tests run as root; the server too, unless a test says).
    pub run_as: &'static str,
    /// A project policy (`.airlock/policy.toml` in the directory airlock starts in), if any.
    pub project_policy: Option<String>,
    /// Variables of airlock's own environment (what a host's config sets), besides HOME and XDG.
    pub airlock_env: Vec<(String, String)>,
    /// `--audit` (else `audit.jsonl` in the world).
    pub audit: Option<String>,
}

impl Setup {
    /// The fixture server with extra arguments.
    pub fn fixture(args: &str) -> Setup {
        let mut command = vec![
            "/usr/bin/python3".to_string(),
            fixture().display().to_string(),
        ];
        command.extend(args.split_whitespace().map(str::to_string));
        Setup {
            command,
            policy: String::new(),
            tool_timeout: 180,
            name: "fixture".into(),
            org_policy: None,
            cwd: None,
            serve_config: String::new(),
            run_as: "root",
            project_policy: None,
            airlock_env: Vec::new(),
            audit: None,
        }
    }

    /// Any server command.
    pub fn command(command: &[&str]) -> Setup {
        Setup {
            command: command.iter().map(|a| a.to_string()).collect(),
            ..Setup::fixture("")
        }
    }

    pub fn org_policy(mut self, text: &str) -> Setup {
        self.org_policy = Some(text.to_string());
        self
    }

    /// A project policy, found where airlock starts (the world's directory, in both modes).
    pub fn project_policy(mut self, text: &str) -> Setup {
        self.project_policy = Some(text.to_string());
        self
    }

    pub fn policy(mut self, extra: &str) -> Setup {
        self.policy.push_str(extra);
        self.policy.push('\n');
        self
    }

    /// A line for the server's table in serve's config (ignored in run).
    pub fn serve_config(mut self, line: &str) -> Setup {
        self.serve_config.push_str(line);
        self.serve_config.push('\n');
        self
    }

    pub fn cwd(mut self, dir: &std::path::Path) -> Setup {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// A variable of airlock's own environment, as a host's config sets one.
    pub fn airlock_env(mut self, name: &str, value: &str) -> Setup {
        self.airlock_env.push((name.to_string(), value.to_string()));
        self
    }

    /// The policy's `run_as` (`"nobody"`: as a user's root-run airlock starts servers).
    pub fn run_as(mut self, run_as: &'static str) -> Setup {
        self.run_as = run_as;
        self
    }

    pub fn tool_timeout(mut self, seconds: u64) -> Setup {
        self.tool_timeout = seconds;
        self
    }

    pub fn audit(mut self, target: &str) -> Setup {
        self.audit = Some(target.to_string());
        self
    }
}

/// A temp dir with its own HOME, XDG dirs, org policy dir, policy and audit log.
pub struct World {
    pub dir: tempfile::TempDir,
    pub mode: Mode,
    pub name: String,
}

impl World {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
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

    /// The tool's name as the host sees it in this mode.
    pub fn tool(&self, tool: &str) -> String {
        match self.mode {
            Mode::Run => tool.to_string(),
            Mode::Serve => format!("{}__{tool}", self.name),
        }
    }

    /// The id the host sees of the server's task `task`: a gateway names it as it names tools.
    pub fn task(&self, task: &str) -> String {
        self.tool(task)
    }

    /// The audit log's complete records (a line still being written, without its newline yet,
    /// is not a record).
    pub fn audit(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path("audit.jsonl")).unwrap_or_default();
        let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
        complete
            .lines()
            .map(|l| serde_json::from_str(l).expect("audit line"))
            .collect()
    }

    /// Audit events of one kind about the server (not the gateway's own).
    pub fn events(&self, kind: &str) -> Vec<Value> {
        self.audit()
            .into_iter()
            .filter(|e| e["event"] == kind && e["server"] == self.name.as_str())
            .collect()
    }
}

/// Starts airlock in `mode` with the server of `setup`.
pub fn start(mode: Mode, setup: Setup) -> (World, Client) {
    let (world, child) = start_raw(mode, setup);
    (world, Client::new(child))
}

/// Starts airlock in `mode` with the server of `setup`, its stdio piped and untouched.
pub fn start_raw(mode: Mode, setup: Setup) -> (World, Child) {
    let world = world_for(mode, &setup);
    let child = spawn(&world, &setup);
    (world, child)
}

/// A fresh world for `setup`: its temp dir, HOME, org policy and project policy.
fn world_for(mode: Mode, setup: &Setup) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let world = World {
        dir,
        mode,
        name: setup.name.clone(),
    };
    std::fs::create_dir_all(world.path("home")).expect("home");
    std::fs::create_dir_all(world.path("org")).expect("org");
    if let Some(org) = &setup.org_policy {
        std::fs::write(world.path("org/policy.toml"), org).expect("org policy");
    }
    if let Some(project) = &setup.project_policy {
        std::fs::create_dir_all(world.path(".airlock")).expect("project dir");
        std::fs::write(world.path(".airlock/policy.toml"), project).expect("project policy");
    }
    world
}

/// Starts airlock in `mode` with the server of `setup`; its stderr is handed back unread, for
/// the test to read when (and if) it wants, like a host that ignores airlock's stderr.
pub fn start_with_stderr_unread(
    mode: Mode,
    setup: Setup,
) -> (World, Client, std::process::ChildStderr) {
    let (world, mut child) = start_raw(mode, setup);
    let stderr = child.stderr.take().expect("stderr");
    (world, Client::new(child), stderr)
}

/// Starts airlock again in an existing world (same state dir, pins and audit log): a new
/// session, as when a host reconnects.
pub fn start_again(world: &World, setup: Setup) -> Client {
    Client::new(spawn(world, &setup))
}

fn spawn(world: &World, setup: &Setup) -> Child {
    spawn_with(world, setup, Stdio::piped(), Stdio::piped())
}

/// Starts airlock in `mode` with its stdin and stdout on unix sockets, as Node hosts (Claude
/// Code, Cursor, the Inspector) give their servers: the host's ends (write, read) come back.
pub fn start_on_sockets(
    mode: Mode,
    setup: Setup,
) -> (
    World,
    Child,
    std::os::unix::net::UnixStream,
    std::os::unix::net::UnixStream,
) {
    let world = world_for(mode, &setup);
    let (host_in, airlock_in) = std::os::unix::net::UnixStream::pair().expect("socketpair");
    let (host_out, airlock_out) = std::os::unix::net::UnixStream::pair().expect("socketpair");
    let child = spawn_with(
        &world,
        &setup,
        Stdio::from(std::os::fd::OwnedFd::from(airlock_in)),
        Stdio::from(std::os::fd::OwnedFd::from(airlock_out)),
    );
    (world, child, host_in, host_out)
}

fn spawn_with(world: &World, setup: &Setup, stdin: Stdio, stdout: Stdio) -> Child {
    let mode = world.mode;
    let policy = world.path("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[sandbox]\nrun_as = {:?}\nkill_timeout = 1\n{}",
            setup.run_as, setup.policy
        ),
    )
    .expect("policy");
    let audit =
        (setup.audit.clone()).unwrap_or_else(|| world.path("audit.jsonl").display().to_string());
    let policy = policy.display().to_string();
    let timeout = setup.tool_timeout.to_string();
    let mut cmd = match mode {
        Mode::Run => {
            let mut args = vec!["run", "--name", &setup.name, "--policy", &policy];
            args.extend(["--audit", &audit, "--tool-timeout", &timeout, "--"]);
            args.extend(setup.command.iter().map(String::as_str));
            let mut cmd = world.command(&args);
            if let Some(cwd) = &setup.cwd {
                cmd.current_dir(cwd);
            } else if setup.project_policy.is_some() {
                cmd.current_dir(world.path(""));
            }
            cmd
        }
        Mode::Serve => {
            let config = world.path("airlock.toml");
            let (program, rest) = setup.command.split_first().expect("command");
            let argv: Vec<String> = rest.iter().map(|a| format!("{a:?}")).collect();
            std::fs::write(
                &config,
                format!(
                    "[servers.{}]\ncommand = {program:?}\nargs = [{}]\ntool_timeout = {timeout}\n{}{}",
                    setup.name,
                    argv.join(", "),
                    setup
                        .cwd
                        .as_ref()
                        .map(|cwd| format!("cwd = {:?}\n", cwd.display().to_string()))
                        .unwrap_or_default(),
                    setup.serve_config,
                ),
            )
            .expect("config");
            // Given as a user does, relative to the directory serve starts in.
            let args = [
                "serve",
                "--config",
                "airlock.toml",
                "--policy",
                &policy,
                "--audit",
                &audit,
            ];
            let mut cmd = world.command(&args);
            cmd.current_dir(world.path(""));
            cmd
        }
    };
    cmd.envs(setup.airlock_env.iter().map(|(k, v)| (k, v)));
    cmd.stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("airlock")
}

/// `airlock check` of what `start` launched in `world`: the same policy, and the same config
/// (`serve`) or server command line (`run`).
pub fn check_command(world: &World, setup: &Setup) -> Command {
    let policy = world.path("policy.toml").display().to_string();
    let mut cmd = match world.mode {
        Mode::Run => {
            let mut args = vec!["check", "--name", &setup.name, "--policy", &policy, "--"];
            args.extend(setup.command.iter().map(String::as_str));
            world.command(&args)
        }
        Mode::Serve => world.command(&["check", "--config", "airlock.toml", "--policy", &policy]),
    };
    cmd.current_dir(world.path(""));
    cmd
}

/// A host speaking to airlock's stdio, one JSON message per line.
pub struct Client {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    pub backlog: Vec<Value>,
    stderr: mpsc::Receiver<String>,
}

impl Client {
    pub fn new(mut child: Child) -> Client {
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let text = std::str::from_utf8(&line)
                    .unwrap_or_else(|e| panic!("airlock wrote a line that is not UTF-8 ({e})"));
                let value: Value = serde_json::from_str(text)
                    .unwrap_or_else(|e| panic!("non-MCP line on airlock's stdout ({e}): {text}"));
                // Every reader must read a message as airlock did: a host whose parser keeps the
                // first of two `id`s would take an answer for another call.
                if let Some(key) = repeated_envelope_key(text) {
                    panic!("airlock wrote a message naming {key:?} twice: {text}");
                }
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let (etx, erx) = mpsc::channel();
        // A stderr the test took for itself is not read here.
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = BufReader::new(stderr).read_to_string(&mut text);
                let _ = etx.send(text);
            });
        }
        let stdin = child.stdin.take();
        Client {
            child,
            stdin,
            rx,
            backlog: Vec::new(),
            stderr: erx,
        }
    }

    pub fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    }

    /// The next message (of any kind), or `None` within `within`.
    pub fn next(&mut self, within: Duration) -> Option<Value> {
        if !self.backlog.is_empty() {
            return Some(self.backlog.remove(0));
        }
        self.rx.recv_timeout(within).ok()
    }

    /// The answer to `id`, keeping everything else in the backlog.
    pub fn answer(&mut self, id: Value, within: Duration) -> Value {
        let is_answer = |m: &Value| m.get("id") == Some(&id) && m.get("method").is_none();
        if let Some(pos) = self.backlog.iter().position(is_answer) {
            return self.backlog.remove(pos);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(message) if is_answer(&message) => return message,
                Ok(message) => self.backlog.push(message),
                Err(_) => panic!(
                    "no answer to {id} within {within:?}; got {:?}",
                    self.backlog
                ),
            }
        }
    }

    /// Everything airlock writes until its stdout closes (or `within` passes).
    pub fn rest(&mut self, within: Duration) -> Vec<Value> {
        let mut all = std::mem::take(&mut self.backlog);
        let deadline = Instant::now() + within;
        while let Ok(message) = self
            .rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            all.push(message);
        }
        all
    }

    pub fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        self.answer(json!(id), Duration::from_secs(20))
    }

    /// The host's handshake at `version` (in serve airlock answers it, in run the server).
    pub fn initialize(&mut self, version: &str) -> Value {
        let params = json!({"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"test","version":"1"}});
        let init = self.request(0, "initialize", params);
        assert!(init.get("result").is_some(), "{init}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        init
    }

    pub fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        let params = json!({"name": tool, "arguments": arguments});
        self.request(id, "tools/call", params)
    }

    pub fn text(answer: &Value) -> String {
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Waits for airlock to exit; its exit code.
    pub fn wait(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// airlock's stderr, once it has exited.
    pub fn stderr(&mut self) -> String {
        self.stderr
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_default()
    }

    pub fn signal(&self, signal: i32) {
        let pid = self.child.id() as i32;
        // SAFETY: kill takes integers; the pid is our unreaped child.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every record of an audit log (JSON lines).
pub fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("audit")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}
