//! A rotation of the audit log that the file system stops half-way, end to end: the session
//! stops rather than write after the file's `rotated` record, and the next airlock to write the
//! log finishes the rotation, so every file verifies again. The failure is injected with
//! `strace` into the one `rename` that puts the new file in place. (Rotation itself, in `run`
//! and `serve`: `session_modes`, `the_audit_log_rotates_at_its_size_and_its_chain_goes_on`.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;

use serde_json::{Value, json};

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

fn strace() -> Option<PathBuf> {
    let path = support::which("strace");
    if path.as_os_str().is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace is missing (.ci/install-peers installs it)"
        );
        return None;
    }
    Some(path)
}

/// Runs `airlock run` on the fixture server (through `wrapper` when given) and makes up to
/// `calls` calls of 4,000 bytes each; returns the calls answered, the exit code and stderr.
fn session(dir: &Path, wrapper: &[String], calls: u64) -> (u64, Option<i32>, String) {
    session_with(dir, wrapper, calls, json!({"text": "r".repeat(4000)}))
}

fn session_with(
    dir: &Path,
    wrapper: &[String],
    calls: u64,
    arguments: Value,
) -> (u64, Option<i32>, String) {
    let (policy, audit) = (dir.join("policy.toml"), dir.join("audit.jsonl"));
    let mut argv: Vec<String> = wrapper.to_vec();
    argv.push(AIRLOCK.to_string());
    for arg in ["run", "--name", "fixture", "--policy"] {
        argv.push(arg.to_string());
    }
    argv.push(policy.display().to_string());
    argv.push("--audit".to_string());
    argv.push(audit.display().to_string());
    argv.push("--".to_string());
    argv.push("/usr/bin/python3".to_string());
    argv.push(support::fixture().display().to_string());
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("HOME", dir.join("home"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("AIRLOCK_ORG_POLICY_DIR", dir.join("org"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut exchange = |message: Value, answer: bool| -> bool {
        if writeln!(stdin, "{message}").is_err() {
            return false;
        }
        let mut line = String::new();
        !answer || stdout.read_line(&mut line).is_ok_and(|read| read > 0)
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    assert!(exchange(init, true));
    exchange(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
    );
    let mut answered = 0;
    for id in 1..=calls {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": arguments}});
        if !exchange(call, true) {
            break;
        }
        answered += 1;
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    (
        answered,
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `airlock audit -f --json --event decision LOG` (stderr as given), and the records it prints,
/// read on a thread: a follower that missed records would wait for them for ever, so the test
/// reads them with a timeout.
fn follow(log: &Path, stderr: Stdio) -> (Child, Receiver<Value>) {
    let mut follower = Command::new(AIRLOCK)
        .args(["audit", "-f", "--json", "--event", "decision"])
        .arg(log)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let (sender, received) = std::sync::mpsc::channel();
    let stdout = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(serde_json::from_str(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    (follower, received)
}

/// A policy that rotates the log at 1 MiB and keeps `keep` rotated files.
fn rotating_policy(dir: &Path, keep: u32) {
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "version = 1\n[sandbox]\nrun_as = \"root\"\n[audit]\nrotate_mb = 1\nkeep_rotated = {keep}\n"
        ),
    )
    .unwrap();
}

/// Arguments of 15 strings under 4 KiB each, logged whole: about 60 KB of records a call, so
/// the log rotates every 17 calls or so.
fn big_arguments() -> Value {
    let arguments: serde_json::Map<String, Value> = (0..15)
        .map(|key| (format!("k{key}"), Value::from("r".repeat(4000))))
        .collect();
    Value::Object(arguments)
}

fn last_record(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn a_rotation_stopped_half_way_stops_the_session_and_the_next_start_finishes_it() {
    let Some(strace) = strace() else {
        eprintln!("skipped: strace is not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    rotating_policy(dir.path(), 8);
    let staging = dir.path().join(".audit.jsonl.rotating");
    let failing_rename = [
        strace.display().to_string(),
        "-f".into(),
        "-qq".into(),
        "-o".into(),
        "/dev/null".into(),
        "-P".into(),
        staging.display().to_string(),
        "-e".into(),
        "trace=rename,renameat,renameat2".into(),
        "-e".into(),
        "inject=rename,renameat,renameat2:error=EIO".into(),
    ];
    // A follower reading along sees the `rotated` record with nothing after it yet: it waits
    // for the rotation to be finished (it once read the closed file again and again, without
    // end), then goes on in the file that replaces it.
    let log = dir.path().join("audit.jsonl");
    std::fs::write(&log, "").unwrap();
    let (mut follower, received) = follow(&log, Stdio::null());
    // About 4.6 KB of records a call: the file is full after some 230 calls.
    let (answered, code, stderr) = session(dir.path(), &failing_rename, 400);
    assert!((100..400).contains(&answered), "{answered}\n{stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("cannot go on writing the audit log").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("stopped half-way"), "{stderr}");
    // The closed file is still at the log's path, and nothing came after its `rotated` record.
    assert_eq!(last_record(&log)["event"], "rotated");
    assert!(staging.exists());
    // One that follows the closed file by its dated name goes on into the log once the
    // rotation is finished, too.
    let dated = last_record(&log)["detail"]["renamed_to"]
        .as_str()
        .unwrap()
        .to_string();
    let (mut by_name, by_name_received) = follow(&dir.path().join(&dated), Stdio::null());

    std::thread::sleep(std::time::Duration::from_secs(1));
    let (answered, code, stderr) = session(dir.path(), &[], 20);
    assert_eq!((answered, code), (20, Some(0)), "{stderr}");
    let mut by_name_sessions = std::collections::BTreeSet::new();
    while let Ok(record) = by_name_received.recv_timeout(std::time::Duration::from_secs(3)) {
        by_name_sessions.insert(record["session"].to_string());
    }
    let _ = by_name.kill();
    let _ = by_name.wait();
    assert_eq!(by_name_sessions.len(), 2, "{by_name_sessions:?}");
    let mut seen = Vec::new();
    while let Ok(record) = received.recv_timeout(std::time::Duration::from_secs(3)) {
        seen.push((record["session"].clone(), record["seq"].clone()));
    }
    let _ = follower.kill();
    let _ = follower.wait();
    let sessions: std::collections::BTreeSet<String> = seen
        .iter()
        .map(|(session, _)| session.to_string())
        .collect();
    assert_eq!(sessions.len(), 2, "both sessions' decisions: {sessions:?}");
    let unique: std::collections::BTreeSet<String> =
        seen.iter().map(|(a, b)| format!("{a}{b}")).collect();
    assert_eq!(unique.len(), seen.len(), "no record printed twice");
    assert!(seen.len() > 120, "{}", seen.len());
    assert!(
        stderr.contains("half-way through a rotation; finished it"),
        "{stderr}"
    );
    assert!(!staging.exists());
    let output = Command::new(AIRLOCK)
        .args(["audit", "verify", "--all", &log.display().to_string()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert_eq!(
        said.lines().count(),
        2,
        "the closed file, then the log: {said}"
    );
    assert!(said.contains("whose last line it links to"), "{said}");
}

/// `airlock audit -f` started before a session whose log rotates every few calls (about 60 KB
/// of records a call, so several rotations fall between two of its polls) prints every
/// decision once, in order, across all the files.
#[test]
fn following_the_log_misses_no_file_however_fast_it_rotates() {
    let dir = tempfile::tempdir().unwrap();
    rotating_policy(dir.path(), 0);
    let log = dir.path().join("audit.jsonl");
    std::fs::write(&log, "").unwrap();
    let (mut follower, received) = follow(&log, Stdio::inherit());
    let (answered, code, stderr) = session_with(dir.path(), &[], 200, big_arguments());
    assert_eq!((answered, code), (200, Some(0)), "{stderr}");
    let rotated = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("audit.2") && name.ends_with(".jsonl")
        })
        .count();
    assert!(rotated >= 8, "{rotated} rotations");
    let mut ids = Vec::new();
    while ids.len() < 200 {
        match received.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(record) => ids.push(record["request_id"].as_u64().unwrap()),
            Err(_) => break,
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    assert_eq!(ids, (1..=200).collect::<Vec<u64>>());
}

/// `airlock audit -f` given a rotated file (as a user picks one from `ls`) shows that file and
/// then the files that came after it, into the live log, instead of waiting at its end.
#[test]
fn following_a_rotated_file_goes_on_into_the_files_after_it() {
    let dir = tempfile::tempdir().unwrap();
    rotating_policy(dir.path(), 0);
    let (answered, code, stderr) = session_with(dir.path(), &[], 40, big_arguments());
    assert_eq!((answered, code), (40, Some(0)), "{stderr}");
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("audit.2") && name.ends_with(".jsonl")
        })
        .collect();
    rotated.sort();
    assert!(rotated.len() >= 2, "{rotated:?}");
    let (mut follower, received) = follow(&rotated[0], Stdio::piped());
    // A later session, written to the live log only.
    let (answered, code, stderr) = session(dir.path(), &[], 3);
    assert_eq!((answered, code), (3, Some(0)), "{stderr}");
    let mut records = Vec::new();
    while let Ok(record) = received.recv_timeout(std::time::Duration::from_secs(5)) {
        records.push(record);
        if records.len() == 43 {
            break;
        }
    }
    let _ = follower.kill();
    let output = follower.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    let ids: Vec<u64> = records
        .iter()
        .map(|record| record["request_id"].as_u64().unwrap())
        .collect();
    // The first file's own calls, then every later one, the later session's last.
    assert_eq!(ids.first(), Some(&1), "{ids:?} {said}");
    assert_eq!(&ids[ids.len() - 3..], &[1, 2, 3], "{ids:?} {said}");
    assert_eq!(ids.len(), 43, "{ids:?} {said}");
    assert!(!said.contains("half-way"), "{said}");

    // A copy of that file beside another log leads nowhere: that log's records (a session of
    // its own) are not shown as if they came after it.
    let other = tempfile::tempdir().unwrap();
    rotating_policy(other.path(), 0);
    let (answered, code, stderr) = session(other.path(), &[], 2);
    assert_eq!((answered, code), (2, Some(0)), "{stderr}");
    let copy = other.path().join(rotated[0].file_name().unwrap());
    std::fs::copy(&rotated[0], &copy).unwrap();
    let (follower, received) = follow(&copy, Stdio::piped());
    let mut sessions = std::collections::BTreeSet::new();
    while let Ok(record) = received.recv_timeout(std::time::Duration::from_secs(3)) {
        sessions.insert(record["session"].to_string());
    }
    // It says so and ends, rather than wait for a rotation nothing will finish.
    let output = follower.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(said.contains("nothing more to follow"), "{said}");
}

/// A follower that falls behind by more than `keep_rotated` files (stopped, or piped into a
/// pager) finds the files it had not read deleted: it says so and goes on with the oldest file
/// kept, instead of waiting for ever for a file that will not come.
#[test]
fn a_follower_behind_retention_says_so_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    rotating_policy(dir.path(), 1);
    let log = dir.path().join("audit.jsonl");
    std::fs::write(&log, "").unwrap();
    let (mut follower, received) = follow(&log, Stdio::piped());
    let pid = follower.id().to_string();
    let signal = |name: &str| {
        let status = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(status.success());
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    signal("-STOP");
    let (answered, code, stderr) = session_with(dir.path(), &[], 100, big_arguments());
    assert_eq!((answered, code), (100, Some(0)), "{stderr}");
    signal("-CONT");
    // A later session, whose decisions the follower must still show.
    let (answered, code, stderr) = session(dir.path(), &[], 5);
    assert_eq!((answered, code), (5, Some(0)), "{stderr}");
    let mut sessions = std::collections::BTreeSet::new();
    while sessions.len() < 2 {
        match received.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(record) => {
                sessions.insert(record["session"].to_string());
            }
            Err(_) => break,
        }
    }
    let _ = follower.kill();
    let output = follower.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(sessions.len(), 2, "the later session is shown too; {said}");
    assert!(said.contains("were deleted (audit.keep_rotated)"), "{said}");
}

/// An ordinary user's own log rotates as root's does. A log root owns, shared with that user
/// through its group, is not rotated by the user (the new file could not be given root as its
/// owner): the session warns, goes on, and the log keeps growing whole.
#[test]
fn an_ordinary_user_rotates_their_own_log_and_leaves_roots_to_grow() {
    const USER: &str = "65533";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "version = 1\n[audit]\nrotate_mb = 1\n",
    )
    .unwrap();
    let chown = |owner: &str, path: &Path| {
        let status = Command::new("chown").arg(owner).arg(path).status().unwrap();
        assert!(status.success());
    };
    chown(&format!("{USER}:{USER}"), dir.path());
    let as_user: Vec<String> = [
        "setpriv",
        "--reuid",
        USER,
        "--regid",
        USER,
        "--clear-groups",
        "--",
    ]
    .map(String::from)
    .to_vec();
    let (answered, code, stderr) = session(dir.path(), &as_user, 300);
    assert_eq!((answered, code), (300, Some(0)), "{stderr}");
    let log = dir.path().join("audit.jsonl");
    let history = |log: &Path| {
        let output = Command::new(AIRLOCK)
            .args(["audit", "verify", "--all"])
            .arg(log)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        assert_eq!(output.status.code(), Some(0), "{said}");
        said.lines().count()
    };
    assert_eq!(history(&log), 2, "one rotation, by the user");
    for file in [log.clone(), dir.path().join("audit.jsonl.checkpoint")] {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&file).unwrap().uid(), 65533);
        // Root's now, writable by the user's group.
        chown(&format!("0:{USER}"), &file);
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o660))
            .unwrap();
    }
    let in_group: Vec<String> = [
        "setpriv", "--reuid", USER, "--regid", USER, "--groups", USER, "--",
    ]
    .map(String::from)
    .to_vec();
    let (answered, code, stderr) = session(dir.path(), &in_group, 300);
    assert_eq!((answered, code), (300, Some(0)), "{stderr}");
    assert!(
        stderr.contains("only root or that user can rotate this log"),
        "{stderr}"
    );
    assert_eq!(history(&log), 2, "no rotation by the user of root's log");
    assert!(std::fs::metadata(&log).unwrap().len() > 1024 * 1024);
}

/// `verify --all` tells a rotated file that retention deleted from one deleted by hand: each
/// `continued` record holds the `keep_rotated` its rotation applied, so the oldest file's missing
/// predecessor is explained by it, and a file missing from the middle of the history (older
/// files still there, every rotation since kept it) fails the check.
#[test]
fn verify_all_fails_when_a_file_retention_kept_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    rotating_policy(dir.path(), 3);
    let (answered, code, stderr) = session_with(dir.path(), &[], 100, big_arguments());
    assert_eq!((answered, code), (100, Some(0)), "{stderr}");
    let log = dir.path().join("audit.jsonl");
    let verify_all = || {
        let output = Command::new(AIRLOCK)
            .args(["audit", "verify", "--all"])
            .arg(&log)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        (output.status.code(), said)
    };
    let (code, said) = verify_all();
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        said.lines().count(),
        4,
        "three rotated files and the log: {said}"
    );
    assert!(
        said.lines().next().unwrap().contains("which is not here"),
        "retention deleted the oldest files' predecessors: {said}"
    );
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("audit.2") && name.ends_with(".jsonl")
        })
        .collect();
    rotated.sort();
    assert_eq!(rotated.len(), 3, "{rotated:?}");
    // Given a rotated file, the rotations after it are out of view: nothing to judge by.
    for file in &rotated {
        let output = Command::new(AIRLOCK)
            .args(["audit", "verify", "--all"])
            .arg(file)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{}: {said}", file.display());
    }
    let middle = &rotated[1];
    std::fs::remove_file(middle).unwrap();
    std::fs::remove_file(format!("{}.checkpoint", middle.display())).unwrap();
    let (code, said) = verify_all();
    let name = middle.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "{name}, which is gone, and no rotation deleted it"
        )),
        "{said}"
    );
    // What is left still verifies file by file.
    for file in [&rotated[0], &rotated[2], &log] {
        let output = Command::new(AIRLOCK)
            .args(["audit", "verify"])
            .arg(file)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", file.display());
    }
}
