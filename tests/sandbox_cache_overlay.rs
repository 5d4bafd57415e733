//! End to end: `npx -y <pkg>` from the user's npm cache works under the default policy (network
//! none, no grants) through a private copy-on-write overlay of the cache, and nothing the server
//! does reaches the real cache. As an ordinary user (the test's own uid, or uid 65533 via setpriv
//! when the tests run as root) and as root (the server then runs as nobody and the cache is root's,
//! in a home nobody cannot traverse).
//!
//! The server's layer of its cache view is on its scratch disk (a tmpfs of `disk_mb`, this
//! instance's alone): nothing it writes reaches the user's disk, and nothing outlives it. (Until
//! the constructed root, the layer was kept under airlock's state dir and shared between runs,
//! with a lock and temporary layers for concurrent instances; these tests asserted that.)
//!
//! The populated cache comes from `.ci/install-peers` (`.peers/npm-cache`, as a first `npx -y`
//! outside the sandbox leaves it); each test copies it into a throwaway home.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::collections::BTreeMap;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sandbox_support::{chmod, is_root, peers, snapshot, text};

const PACKAGE: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// The ordinary user the tests become when they run as root (no name needed: setpriv).
const USER_UID: u32 = 65533;

/// A throwaway world: `root/` (0755) holding `home/` with `.npm` (a copy of the peers cache) owned
/// by `owner`, mode `home_mode`, plus state/config dirs the server's uid can traverse.
struct Home {
    root: PathBuf,
    home: PathBuf,
    cache: PathBuf,
    /// `Some(uid)`: run airlock as this uid (setpriv); `None`: as the test process.
    run_as: Option<u32>,
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn setup(tag: &str, run_as: Option<u32>, home_mode: u32) -> Home {
    let source = peers().join("npm-cache");
    assert!(
        source.join("_npx").is_dir(),
        "{} is missing: run `bash .ci/install-peers`",
        source.display()
    );
    let root = std::env::temp_dir().join(format!("airlock-npmcache-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let home = root.join("home");
    for dir in ["", "home", "config", "org", "tools"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        chmod(&root.join(dir), 0o755);
    }
    let cache = home.join(".npm");
    let status = Command::new("cp")
        .arg("-a")
        .arg(&source)
        .arg(&cache)
        .status()
        .unwrap();
    assert!(status.success(), "copying the npm cache");
    if let Some(uid) = run_as {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{uid}"))
            .arg(&home)
            .status()
            .unwrap();
        assert!(status.success(), "chown the test home");
    }
    chmod(&home, home_mode);
    // Where the hostile script lives: readable by whoever the server runs as.
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/sandbox/npm_cache_hostile.js"
        ),
        root.join("tools/npm_cache_hostile.js"),
    )
    .unwrap();
    chmod(&root.join("tools/npm_cache_hostile.js"), 0o644);
    Home {
        root,
        home,
        cache,
        run_as,
    }
}

impl Home {
    fn state(&self) -> PathBuf {
        if self.run_as.is_some() || !is_root() {
            self.home.join(".local/state")
        } else {
            // root: the server runs as nobody, who cannot traverse a 0700 home.
            self.root.join("state")
        }
    }

    fn airlock(&self, args: &[&str]) -> Command {
        let mut cmd = sandbox_support::airlock_as(self.run_as);
        cmd.args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.state())
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"))
            .current_dir(&self.root);
        if self.run_as.is_none() && is_root() {
            // airlock's audit sink would create `airlock/` 0700 (root's), which nobody, the
            // server's uid, could not traverse to its private dirs: make it traversable first.
            let dir = self.state().join("airlock");
            std::fs::create_dir_all(&dir).unwrap();
            chmod(&self.state(), 0o755);
            chmod(&dir, 0o755);
        }
        cmd
    }

    /// Where the server's private dirs would be on disk: nothing may be there (its home, tmp and
    /// cache layer are on its scratch disk).
    fn server_dir(&self, server: &str) -> PathBuf {
        self.state().join("airlock/servers").join(server)
    }
}

/// One `airlock run -- npx -y <pkg>` with its stdio, spoken to line by line.
struct Session {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
    deadline: Instant,
}

impl Session {
    fn start(home: &Home) -> Session {
        let mut child = home
            .airlock(&["run", "--", "npx", "-y", PACKAGE])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Session {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            deadline: Instant::now() + Duration::from_secs(90),
        }
    }

    fn send(&mut self, msg: serde_json::Value) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(stdin, "{msg}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to airlock: {e}"))
    }

    fn response(&mut self, id: i64) -> Result<serde_json::Value, String> {
        loop {
            if Instant::now() > self.deadline {
                return Err(format!("timed out waiting for response {id}"));
            }
            let mut line = String::new();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                return Err(format!("stdout closed before response {id}"));
            }
            let msg: serde_json::Value = serde_json::from_str(&line)
                .map_err(|e| format!("non-JSON on stdout ({e}): {line}"))?;
            if msg["id"] == id {
                return Ok(msg);
            }
        }
    }

    fn initialize(&mut self) -> Result<serde_json::Value, String> {
        self.send(serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"airlock-test","version":"0"}}}))?;
        let init = self.response(1)?;
        self.send(serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}))?;
        Ok(init)
    }

    fn echo(&mut self, message: &str) -> Result<serde_json::Value, String> {
        self.send(serde_json::json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":message}}}))?;
        self.response(2)
    }

    /// EOF: airlock stops the server and exits. Returns airlock's stderr.
    fn finish(mut self) -> String {
        drop(self.stdin.take());
        let output = self.child.wait_with_output().unwrap();
        String::from_utf8_lossy(&output.stderr).into_owned()
    }
}

/// The echo text of a `tools/call echo` answer.
fn echo_text(call: &serde_json::Value, stderr: &str) -> String {
    call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{call}\n{stderr}"))
        .to_string()
}

/// initialize → initialized → tools/call echo through `airlock run`; returns the echo text.
fn echo_through_airlock_run(home: &Home) -> String {
    let mut session = Session::start(home);
    let result = session
        .initialize()
        .and_then(|init| Ok((init, session.echo("hello from the npm cache")?)));
    let stderr = session.finish();
    let (init, call) = result.unwrap_or_else(|err| panic!("{err}; airlock stderr:\n{stderr}"));
    assert!(init["result"]["serverInfo"].is_object(), "{init}\n{stderr}");
    echo_text(&call, &stderr)
}

fn check_npx_from_cache(home: &Home) {
    let before = snapshot(&home.cache);
    let text = echo_through_airlock_run(home);
    assert!(text.contains("hello from the npm cache"), "{text}");
    assert!(
        before == snapshot(&home.cache),
        "the real npm cache changed"
    );
    // npm wrote (its tmp dir, index entries) into its layer on the scratch disk, not on disk.
    assert!(
        !home.server_dir("server-everything").exists(),
        "the server wrote to the disk: {}",
        home.server_dir("server-everything").display()
    );
}

/// Two MCP hosts start the same command at once: same server name, same user, same state dir.
/// overlayfs must not share an upper/work pair between two mounts: each instance has its own on
/// its own scratch disk. Both answer while both are alive; the real cache stays untouched and
/// nothing is left on disk.
#[test]
fn two_instances_of_one_server_run_at_once() {
    let run_as = is_root().then_some(USER_UID);
    let home = setup("twice", run_as, 0o700);
    let before = snapshot(&home.cache);
    let mut sessions = [Session::start(&home), Session::start(&home)];
    let mut results: Vec<Result<String, String>> = Vec::new();
    // Both initialised before either is asked anything: both are alive for both calls.
    let inits: Vec<_> = sessions.iter_mut().map(Session::initialize).collect();
    for (session, init) in sessions.iter_mut().zip(inits) {
        results.push(init.and_then(|_| {
            let call = session.echo("hello from one of two")?;
            call["result"]["content"][0]["text"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("no echo text: {call}"))
        }));
    }
    let stderrs: Vec<String> = sessions.into_iter().map(Session::finish).collect();
    let report = stderrs.join("\n----\n");
    for result in &results {
        match result {
            Ok(text) => assert!(text.contains("hello from one of two"), "{text}\n{report}"),
            Err(err) => panic!("{err}\n{report}"),
        }
    }
    assert!(
        before == snapshot(&home.cache),
        "the real npm cache changed\n{report}"
    );
    assert!(
        !home.server_dir("server-everything").exists(),
        "layers left on disk\n{report}"
    );
}

#[test]
fn npx_from_the_npm_cache_works_as_an_ordinary_user() {
    let run_as = is_root().then_some(USER_UID);
    let home = setup("user", run_as, 0o700);
    check_npx_from_cache(&home);
}

/// airlock as root: the server runs as nobody, the cache is root's, in a home nobody cannot enter.
#[test]
fn npx_from_the_npm_cache_works_as_root() {
    if !is_root() {
        return; // needs root; the ordinary-user test covers this uid
    }
    let home = setup("root", None, 0o700);
    check_npx_from_cache(&home);
}

fn hostile(home: &Home) -> (Output, BTreeMap<String, String>) {
    let script = home.root.join("tools/npm_cache_hostile.js");
    let mut child = home
        .airlock(&[
            "__sandbox-exec",
            "--server",
            "hostile-npm",
            // As `airlock run` grants paths on the command line: never the real cache.
            "--grant-args",
            "write",
            "--",
            "node",
            script.to_str().unwrap(),
            home.cache.to_str().unwrap(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held open until the script is done: EOF on stdin starts airlock's kill sequence.
    let stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let results = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (out, results)
}

/// Returns the first run's results.
fn check_hostile(home: &Home) -> BTreeMap<String, String> {
    let before = snapshot(&home.cache);
    let (out, results) = hostile(home);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    // Every write succeeds in the server's own view ...
    for (name, expected) in [
        ("plant", "PLANTED"),
        ("overwrite", "PLANTED"),
        ("append", "ok"),
        ("delete", "ok"),
        ("rename", "ok"),
        ("chmod", "ok"),
        ("symlink", "ok"),
        ("mountinfo", "overlay"),
    ] {
        assert_eq!(
            results.get(name).map(String::as_str),
            Some(expected),
            "{name}\n{report}"
        );
    }
    assert!(
        results["view"].ends_with("servers/hostile-npm/home/.npm"),
        "{report}"
    );
    // ... the real cache is not reachable by its path: it does not exist in the server's root
    // (landlock refused it with EACCES before the constructed root) ...
    assert_eq!(
        results.get("real-read").map(String::as_str),
        Some("ENOENT"),
        "{report}"
    );
    assert_eq!(
        results.get("real-write").map(String::as_str),
        Some("ENOENT"),
        "{report}"
    );
    // ... and is exactly as it was: every write landed in the server's own layer, on its scratch
    // disk, and nothing on the user's disk.
    assert!(
        before == snapshot(&home.cache),
        "the real npm cache changed\n{report}"
    );
    assert!(
        !home.server_dir("hostile-npm").exists(),
        "the server wrote to the disk\n{report}"
    );
    // A second run starts from the real cache again: the first run's layer went with it.
    let (out, again) = hostile(home);
    assert_eq!(
        again.get("planted-before").map(String::as_str),
        Some("no"),
        "{}",
        text(&out)
    );
    assert_eq!(again.get("plant").map(String::as_str), Some("PLANTED"));
    assert!(
        before == snapshot(&home.cache),
        "the real npm cache changed"
    );
    results
}

#[test]
fn a_hostile_server_cannot_write_the_real_npm_cache_as_an_ordinary_user() {
    let run_as = is_root().then_some(USER_UID);
    let home = setup("hostile-user", run_as, 0o700);
    let results = check_hostile(&home);
    // SAFETY: geteuid cannot fail.
    let uid = run_as.unwrap_or_else(|| unsafe { libc::geteuid() });
    assert_eq!(results.get("planted-uid"), Some(&uid.to_string()));
}

#[test]
fn a_hostile_server_cannot_write_the_real_npm_cache_as_root() {
    if !is_root() {
        return;
    }
    let home = setup("hostile-root", None, 0o700);
    let results = check_hostile(&home);
    // The uid is nobody: what the server creates in its view is not root's.
    assert_eq!(
        results.get("planted-uid").map(String::as_str),
        Some("65534")
    );
}

/// Finished install layers stack above the real cache however many there are. The kernel copies
/// each fsconfig string with a 256-byte limit, and three layer paths of an ordinary user's state
/// dir joined into one `lowerdir` exceed it: a bunx server reinstalled on three days (bunx's
/// packages go stale after a day) failed every start with `Invalid argument`.
#[test]
fn four_install_layers_still_mount() {
    let run_as = is_root().then_some(USER_UID);
    let home = setup("layers", run_as, 0o700);
    let args = ["-y".to_string(), PACKAGE.to_string()];
    let spec = airlock::fetch::detect(std::path::Path::new("npx"), None, &args)
        .unwrap()
        .store_name();
    let store = home
        .server_dir("server-everything")
        .join("packages/npm")
        .join(spec);
    for n in 1..=4u64 {
        let layer = store.join("layers").join(format!(
            "{:020}-{}",
            1_764_090_000_000_000_000 + n,
            12_340 + n
        ));
        std::fs::create_dir_all(&layer).unwrap();
        std::fs::write(layer.join("layer-marker"), format!("{n}\n")).unwrap();
    }
    if let Some(uid) = run_as {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{uid}"))
            .arg(home.state().join("airlock"))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let text = echo_through_airlock_run(&home);
    assert!(text.contains("hello from the npm cache"), "{text}");
}
