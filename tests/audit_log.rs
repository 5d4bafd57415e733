//! The audit log end to end: real `airlock run` sessions write it, `airlock audit` reads, follows,
//! summarises and verifies it; tampered copies are caught; two airlock processes appending to
//! one log at once still leave a log that verifies; large arguments are capped.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp")
}

/// The real interpreter (not a pyenv shim, which would need the user's home inside the sandbox).
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A private HOME / XDG / org dir, a policy that lets the echo fixture run, and the log path.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let world = World {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(world.path("org")).unwrap();
        std::fs::write(
            world.path("policy.toml"),
            format!(
                "version = 1\n[tools]\ndeny = [\"mcp:fx__delete_*\"]\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
                fixtures().display()
            ),
        )
        .unwrap();
        world
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log(&self) -> PathBuf {
        self.path("audit.jsonl")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(AIRLOCK);
        command
            .args(args)
            .env("HOME", self.dir.path())
            .env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.path("org"));
        command
    }

    fn airlock(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Starts `airlock run` on the echo fixture, writing to the world's log.
    fn spawn_run(&self) -> Child {
        self.spawn_run_at(&self.log(), self.dir.path())
    }

    /// Starts `airlock run` on the echo fixture in `cwd`, writing to `log`.
    fn spawn_run_at(&self, log: &Path, cwd: &Path) -> Child {
        let policy = self.path("policy.toml");
        self.command(&["run", "--name", "fx", "--policy"])
            .current_dir(cwd)
            .arg(&policy)
            .arg("--audit")
            .arg(log)
            .arg("--")
            .arg(python())
            .arg(fixtures().join("echo_server.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// One `airlock run` session: the handshake, then `calls` (tool name, arguments), then EOF.
    fn session(&self, calls: &[(&str, Value)]) -> Vec<Value> {
        let mut child = self.spawn_run();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{}", initialize()).unwrap();
        for (id, (tool, args)) in calls.iter().enumerate() {
            writeln!(stdin, "{}", call(id as u64 + 1, tool, args)).unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn verify(&self, file: &Path) -> Output {
        self.command(&["audit", "verify"])
            .arg(file)
            .output()
            .unwrap()
    }
}

fn initialize() -> String {
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string()
}

fn call(id: u64, tool: &str, args: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
        .to_string()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A log from two sessions with a denial, and a copy of it (with its checkpoint) per tamper case.
fn two_sessions() -> World {
    let world = World::new();
    world.session(&[
        ("echo", json!({"text": "one"})),
        ("delete_file", json!({"path": "/x"})),
    ]);
    world.session(&[("echo", json!({"text": "two"}))]);
    world
}

/// Copies the log and its checkpoint to `name`, with `edit` applied to the log's lines.
fn tampered(world: &World, name: &str, edit: impl FnOnce(&mut Vec<String>)) -> PathBuf {
    let mut lines: Vec<String> = std::fs::read_to_string(world.log())
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    edit(&mut lines);
    let copy = world.path(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&copy, text).unwrap();
    std::fs::copy(
        world.path("audit.jsonl.checkpoint"),
        world.path(&format!("{name}.checkpoint")),
    )
    .unwrap();
    copy
}

type LineEdit = dyn FnOnce(&mut Vec<String>);

#[test]
fn verify_accepts_an_untouched_log_and_names_each_kind_of_tampering() {
    let world = two_sessions();
    let records = world.records();
    // policy, spawn, 2×(decision, outcome), 4 pins (the host called before listing: airlock
    // listed the tools, and pinned them), exit; then 5
    assert_eq!(records.len(), 16, "{records:?}");
    let untouched = world.verify(&world.log());
    assert_eq!(untouched.status.code(), Some(0), "{}", text(&untouched));
    let stdout = String::from_utf8_lossy(&untouched.stdout);
    assert!(
        stdout
            .contains("16 record(s) in 2 session(s); chain intact; the end matches the checkpoint, which covers every record"),
        "{stdout}"
    );

    let cases: [(&str, Box<LineEdit>, &str); 6] = [
        (
            "edited.jsonl",
            Box::new(|lines: &mut Vec<String>| {
                lines[3] = lines[3].replacen("\"fx\"", "\"fy\"", 1);
            }),
            "line 4 was edited",
        ),
        (
            "deleted.jsonl",
            Box::new(|lines: &mut Vec<String>| {
                lines.remove(3);
            }),
            "records were deleted before line 4",
        ),
        (
            "swapped.jsonl",
            Box::new(|lines: &mut Vec<String>| lines.swap(2, 3)),
            "records were reordered",
        ),
        (
            "cut.jsonl",
            Box::new(|lines: &mut Vec<String>| {
                lines.pop();
            }),
            "the log was cut",
        ),
        (
            // The last record edited shorter: still there, so not "cut".
            "shortened.jsonl",
            Box::new(|lines: &mut Vec<String>| {
                let last = lines.pop().unwrap();
                // One digit fewer in the timestamp's fraction: valid JSON, same session and seq.
                let fraction = last.find('.').unwrap() + 1;
                lines.push(format!("{}{}", &last[..fraction], &last[fraction + 1..]));
            }),
            "line 16 was edited: it is the checkpoint's last record",
        ),
        (
            // A record forged after the end, chained to the last line as airlock would.
            "forged.jsonl",
            Box::new(|lines: &mut Vec<String>| {
                let last = lines.last().unwrap().clone();
                let prev = airlock::hash::sha256_hex(last.as_bytes());
                lines.push(format!(
                    r#"{{"ts":"2026-11-25T13:40:00Z","session":"deadbeefdeadbeef","seq":1,"event":"decision","server":"fx","tool":"echo","decision":"allow","prev":"{prev}"}}"#
                ));
            }),
            "lines 17..17 (1 record(s)) come after the checkpoint's last record",
        ),
    ];
    for (name, edit, expected) in cases {
        let copy = tampered(&world, name, edit);
        let out = world.verify(&copy);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(expected),
            "{name}: {}",
            text(&out)
        );
    }
    // One byte, anywhere in the middle: the line it is in is named.
    let mut bytes = std::fs::read(world.log()).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] = if bytes[middle] == b'a' { b'b' } else { b'a' };
    let line = bytes[..middle].iter().filter(|b| **b == b'\n').count() + 1;
    std::fs::write(world.path("byte.jsonl"), &bytes).unwrap();
    std::fs::copy(
        world.path("audit.jsonl.checkpoint"),
        world.path("byte.jsonl.checkpoint"),
    )
    .unwrap();
    let out = world.verify(&world.path("byte.jsonl"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("byte.jsonl:{line}: ")),
        "line {line}: {}",
        text(&out)
    );

    // Without the checkpoint the chain alone cannot see a cut tail: verify says so and fails,
    // unless told to check the chain alone.
    let cut = world.path("cut.jsonl");
    std::fs::remove_file(world.path("cut.jsonl.checkpoint")).unwrap();
    let out = world.verify(&cut);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--no-checkpoint"),
        "{}",
        text(&out)
    );
    let out = world.airlock(&["audit", "verify", "--no-checkpoint", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let missing = world.airlock(&["audit", "verify", "/nonexistent/audit.jsonl"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
}

/// Sends one call to a running airlock and reads its answer.
fn round_trip(stdin: &mut impl Write, stdout: &mut impl BufRead, id: u64) {
    writeln!(
        stdin,
        "{}",
        call(id, "echo", &json!({"text": format!("r{id}")}))
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], id, "{line}");
}

#[test]
fn two_airlock_processes_appending_to_one_log_leave_a_log_that_verifies() {
    let world = World::new();
    let mut children: Vec<Child> = (0..2).map(|_| world.spawn_run()).collect();
    let mut pipes: Vec<_> = children
        .iter_mut()
        .map(|child| {
            let mut stdin = child.stdin.take().unwrap();
            let mut stdout = BufReader::new(child.stdout.take().unwrap());
            writeln!(stdin, "{}", initialize()).unwrap();
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            (stdin, stdout)
        })
        .collect();
    // Strictly alternating calls: the two sessions' records interleave in the file.
    for id in 1..=20 {
        for (stdin, stdout) in &mut pipes {
            round_trip(stdin, stdout, id);
        }
    }
    // Then both at full speed at once: appends race for the lock.
    const BURST: u64 = 300;
    std::thread::scope(|scope| {
        for (stdin, stdout) in &mut pipes {
            scope.spawn(move || {
                for id in 100..100 + BURST {
                    writeln!(stdin, "{}", call(id, "echo", &json!({"text": "burst"}))).unwrap();
                }
                stdin.flush().unwrap();
                for _ in 0..BURST {
                    let mut line = String::new();
                    stdout.read_line(&mut line).unwrap();
                }
            });
        }
    });
    drop(pipes);
    for child in children {
        child.wait_with_output().unwrap();
    }

    let records = world.records();
    let sessions: Vec<&str> = {
        let mut seen: Vec<&str> = records
            .iter()
            .map(|r| r["session"].as_str().unwrap())
            .collect();
        seen.dedup();
        seen
    };
    assert!(
        sessions.len() > 40,
        "the sessions' records interleave: {} runs",
        sessions.len()
    );
    for session in [sessions[0], sessions[1]] {
        let seqs: Vec<u64> = records
            .iter()
            .filter(|r| r["session"] == session)
            .map(|r| r["seq"].as_u64().unwrap())
            .collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(
            seqs, expected,
            "session {session} numbers its records 1, 2, ..."
        );
        // policy, spawn, 320 × (decision, outcome), exit; and, from the session that pinned the
        // fixture's 4 tools first (the host calls before listing, so airlock lists), 4 pins
        let pins = records
            .iter()
            .filter(|r| r["session"] == session && r["event"] == "pin")
            .count();
        assert_eq!(seqs.len() - pins, 3 + 2 * (20 + BURST as usize));
    }
    let out = world.verify(&world.log());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("in 2 session(s); chain intact"),
        "{}",
        text(&out)
    );
}

/// `airlock run` of the echo fixture with no `--audit`: its records go to the default log.
fn run_default(world: &World, calls: &[(&str, Value)]) {
    let mut child = world
        .command(&["run", "--name", "fx", "--policy"])
        .arg(world.path("policy.toml"))
        .arg("--")
        .arg(python())
        .arg(fixtures().join("echo_server.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", initialize()).unwrap();
    for (id, (tool, args)) in calls.iter().enumerate() {
        writeln!(stdin, "{}", call(id as u64 + 1, tool, args)).unwrap();
    }
    drop(stdin);
    child.wait().unwrap();
}

/// `airlock audit summary` of the three calls (one denied) of the first session.
fn assert_summary(world: &World) {
    let summary = world.airlock(&["audit", "summary", "--json"]);
    let summary: Value = serde_json::from_slice(&summary.stdout).unwrap();
    let fx = &summary["servers"]["fx"];
    assert_eq!(
        (
            fx["calls"].as_u64(),
            fx["denied"].as_u64(),
            fx["errors"].as_u64()
        ),
        (Some(3), Some(1), Some(0))
    );
    assert_eq!(fx["starts"], 1);
    assert_eq!(
        (&fx["net_allowed"], &fx["net_refused"]),
        (&json!(0), &json!(0))
    );
    assert!(
        fx["p50_ms"].as_f64().unwrap() > 0.0
            && fx["p95_ms"].as_f64().unwrap() >= fx["p50_ms"].as_f64().unwrap()
    );
    let table = world.airlock(&["audit", "summary"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("starts"),
        "{}",
        text(&table)
    );
}

#[test]
fn show_filters_summarises_and_follows_the_default_log() {
    let world = World::new();
    // No --audit: the records go to the default log under XDG_STATE_HOME, where `airlock audit`
    // looks without being told.
    let default_log = world.path("state/airlock/audit.jsonl");
    run_default(
        &world,
        &[
            ("echo", json!({"text": "a"})),
            ("delete_file", json!({})),
            ("echo", json!({"text": "b"})),
        ],
    );
    assert!(default_log.is_file());

    let denials = world.airlock(&["audit", "--decision", "deny"]);
    let shown = String::from_utf8_lossy(&denials.stdout);
    assert_eq!(shown.lines().count(), 1, "{}", text(&denials));
    assert!(
        shown.contains("delete_file  deny  tools.deny \"mcp:fx__delete_*\""),
        "{shown}"
    );
    let as_json = world.airlock(&["audit", "--json", "--event", "outcome", "--tool", "ech*"]);
    let outcomes: Vec<Value> = String::from_utf8_lossy(&as_json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(outcomes.len(), 2);
    assert!(
        outcomes
            .iter()
            .all(|o| o["outcome"] == "ok" && o["prev"].is_string())
    );
    let session = outcomes[0]["session"].as_str().unwrap();
    let by_session = world.airlock(&["audit", "--session", &session[..6], "--json"]);
    assert_eq!(
        String::from_utf8_lossy(&by_session.stdout).lines().count(),
        13,
        "policy, spawn, 2 × (decision, outcome), exit and the 4 tools pinned by airlock's listing"
    );
    let nobody = world.airlock(&["audit", "--identity", "alice"]);
    assert_eq!(nobody.status.code(), Some(0));
    assert!(nobody.stdout.is_empty());
    let future = world.airlock(&["audit", "--since", "2999-01-01"]);
    assert!(future.stdout.is_empty(), "{}", text(&future));
    let bad_time = world.airlock(&["audit", "--since", "yesterday"]);
    assert_eq!(bad_time.status.code(), Some(2), "{}", text(&bad_time));

    assert_summary(&world);

    // Follow: records of a session that starts later appear as they are written.
    let mut follower = world
        .command(&["audit", "-f", "--json", "--event", "exit"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("\"event\":\"exit\""), "{first}");
    run_default(&world, &[("echo", json!({"text": "c"}))]);
    let started = Instant::now();
    let second = lines.next().unwrap().unwrap();
    let second: Value = serde_json::from_str(&second).unwrap();
    assert_ne!(
        second["session"], session,
        "a new session's exit record, followed"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    follower.kill().unwrap();
    follower.wait().unwrap();
}

#[test]
fn a_large_argument_is_logged_capped_with_its_size_and_hash() {
    let world = World::new();
    let big = "x".repeat(200 * 1024);
    let answers = world.session(&[("echo", json!({"text": big, "note": "small"}))]);
    assert_eq!(
        answers.iter().find(|a| a["id"] == 1).unwrap()["result"]["content"][0]["text"],
        big.as_str()
    );
    let log = std::fs::read_to_string(world.log()).unwrap();
    let decision = log
        .lines()
        .find(|l| l.contains("\"event\":\"decision\""))
        .unwrap();
    assert!(decision.len() < 2048, "{} bytes", decision.len());
    let record: Value = serde_json::from_str(decision).unwrap();
    let logged = record["args"]["text"].as_str().unwrap();
    let hash = airlock::hash::sha256_hex(big.as_bytes());
    assert!(
        logged.ends_with(&format!("[capped: 204800 bytes, sha256 {hash}]")),
        "{logged}"
    );
    assert_eq!(record["args"]["note"], "small");
}

/// What `airlock audit` prints of a record is shown, never acted: a tool name a host chose with
/// a line break and terminal escapes in it stays on its one line, its escapes visible.
#[test]
fn show_prints_control_characters_as_text() {
    let world = World::new();
    run_default(
        &world,
        &[(
            "evil\r\n2026-01-01 forged\u{1b}]0;TITLE\u{7}\u{2028}\u{200b}",
            json!({}),
        )],
    );
    let shown = world.airlock(&["audit", "--event", "decision"]);
    let out = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        !out.contains('\r') && !out.contains('\u{1b}') && !out.contains('\u{7}'),
        "{out:?}"
    );
    assert!(
        out.contains("evil\\x0d\\x0a2026-01-01 forged\\x1b]0;TITLE\\x07\\u{2028}\\u{200b}"),
        "{out}"
    );
}

/// airlock as root writing a log in a directory another user may write (a shared log
/// directory, a user's state dir under `sudo -E`): a link that user planted at the log's path or
/// at its checkpoint is not followed. Before, root airlock rewrote the link's target with its
/// checkpoint, or created the file a dangling link named (`/etc/ld.so.preload`) with the call's
/// arguments in it. A link of the running user's own is followed, as it always was.
#[test]
fn a_link_another_user_planted_at_the_log_is_not_followed() {
    use std::os::unix::fs::{PermissionsExt, lchown, symlink};
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (a file of root's and a link of another user's)");
        return;
    }
    const OTHER: u32 = 65534;
    let world = World::new();
    let shared = world.path("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = world.path("victim");
    std::fs::write(&victim, "root's own file\n").unwrap();
    let created = world.path("created-by-airlock");
    let log = shared.join("audit.jsonl");
    let run_in = |log: &Path, cwd: &Path| {
        let mut child = world.spawn_run_at(log, cwd);
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{}", initialize()).unwrap();
        writeln!(
            stdin,
            "{}",
            call(1, "echo", &json!({"text": "x /tmp/evil.so y"}))
        )
        .unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let run = |log: &Path| run_in(log, world.dir.path());
    // The checkpoint: a link to root's file.
    let checkpoint = shared.join("audit.jsonl.checkpoint");
    symlink(&victim, &checkpoint).unwrap();
    lchown(&checkpoint, Some(OTHER), Some(OTHER)).unwrap();
    let out = run(&log);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root's own file\n"
    );
    std::fs::remove_file(&checkpoint).unwrap();
    std::fs::remove_file(&log).unwrap();
    // The log: a dangling link naming a file for airlock to create.
    symlink(&created, &log).unwrap();
    lchown(&log, Some(OTHER), Some(OTHER)).unwrap();
    let out = run(&log);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("a link another user planted"),
        "{}",
        text(&out)
    );
    assert!(!created.exists());
    // A file, or a FIFO, another user made at the log's path in the shared directory.
    std::fs::remove_file(&log).unwrap();
    std::fs::write(&log, "").unwrap();
    std::os::unix::fs::chown(&log, Some(OTHER), Some(OTHER)).unwrap();
    let out = run(&log);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("another user planted"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");
    std::fs::remove_file(&log).unwrap();
    let fifo = |path: &Path| {
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o666) }, 0);
    };
    fifo(&log);
    std::os::unix::fs::chown(&log, Some(OTHER), Some(OTHER)).unwrap();
    let out = run(&log);
    assert!(!out.status.success(), "{}", text(&out));
    // Named bare, from the shared directory.
    let out = run_in(Path::new("audit.jsonl"), &shared);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!checkpoint.exists());
    std::fs::remove_file(&log).unwrap();
    // A checkpoint file another user made: the chain's anchor would be theirs to rewrite.
    std::fs::write(&checkpoint, "").unwrap();
    std::os::unix::fs::chown(&checkpoint, Some(OTHER), Some(OTHER)).unwrap();
    let out = run(&log);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "");
    std::fs::remove_file(&checkpoint).unwrap();
    std::fs::remove_file(&log).unwrap();
    // A FIFO at the checkpoint's place stops airlock at once, not for ever.
    fifo(&checkpoint);
    let started = Instant::now();
    let out = run(&log);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(started.elapsed() < Duration::from_secs(20));
    std::fs::remove_file(&checkpoint).unwrap();
    std::fs::remove_file(&log).unwrap();
    // A link of root's own to the log is followed: the log lives where it leads.
    symlink(&created, &log).unwrap();
    let out = run(&log);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        std::fs::read_to_string(&created)
            .unwrap()
            .contains("\"decision\"")
    );
}

/// Before anything ran, `airlock audit` and `airlock audit summary` say there are no records yet
/// (exit 0), not an error about a missing file (a new user's first try); a path given that is
/// not there is still an error, since it may be a typo.
#[test]
fn a_fresh_user_has_no_records_yet_and_a_missing_given_log_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let airlock = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(args)
            .env("HOME", dir.path().join("home"))
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", dir.path().join("org"))
            .output()
            .unwrap()
    };
    for args in [&["audit"][..], &["audit", "summary"]] {
        let output = airlock(args);
        let said = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {said}");
        assert!(said.contains("no audit records yet"), "{said}");
        assert!(output.stdout.is_empty());
    }
    let missing = dir.path().join("typo.jsonl");
    let output = airlock(&["audit", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    // A log that is gone beside its checkpoint was moved or deleted: an error, not a fresh start.
    let state = dir.path().join("state/airlock");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("audit.jsonl.checkpoint"), "x").unwrap();
    let output = airlock(&["audit"]);
    assert_eq!(output.status.code(), Some(2));
}

/// `airlock audit -f` before anything ran waits for the log (as `tail -F` does) and follows the
/// first session's records, instead of failing on a missing file.
#[test]
fn following_a_log_that_is_not_there_yet_waits_for_it() {
    let world = World::new();
    let mut follower = world
        .command(&["audit", "-f", "--json", "--event", "exit"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        follower.try_wait().unwrap().is_none(),
        "still waiting for the log"
    );
    run_default(&world, &[("echo", json!({"text": "first"}))]);
    let (sender, lines) = std::sync::mpsc::channel();
    let stdout = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let first = lines.recv_timeout(Duration::from_secs(10));
    follower.kill().unwrap();
    follower.wait().unwrap();
    let first = first.expect("the first session's exit record");
    assert!(first.contains("\"event\":\"exit\""), "{first}");
}
