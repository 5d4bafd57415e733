//! `airlock run` end to end: the real binary, a real confined server, a real client.
//!
//! The interop tests drive the official reference servers (npm) with the official Python SDK
//! client, both installed by `.ci/install-peers`. Without them the tests are skipped locally and
//! fail under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod support;

use support::{AIRLOCK, node, peers, root};

/// Sets a test's own HOME, state, config and org policy dirs (under `dir`) on `command`, so the
/// test neither reads nor writes the machine's (another airlock may be running there).
fn own_state<'a>(command: &'a mut Command, dir: &Path) -> &'a mut Command {
    for sub in ["home", "state", "config", "org"] {
        std::fs::create_dir_all(dir.join(sub)).expect("own dirs");
    }
    command
        .env("HOME", dir.join("home"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("AIRLOCK_ORG_POLICY_DIR", dir.join("org"))
}

/// `airlock` with the test's own dirs.
fn airlock(dir: &Path) -> Command {
    let mut command = Command::new(AIRLOCK);
    own_state(&mut command, dir);
    command
}

fn write_policy(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("policy.toml");
    std::fs::write(&path, format!("version = 1\n{extra}")).expect("policy");
    path
}

fn audit_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("audit")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// `airlock run --policy POLICY EXTRA -- python3 <the serve fixture>` with no host input and
/// `env` set: what it wrote on stderr.
fn fixture_run_stderr(dir: &Path, policy: &Path, extra: &[&str], env: &[(&str, &str)]) -> String {
    fixture_run_stderr_without(dir, policy, extra, env, &[])
}

/// [`fixture_run_stderr`] with `unset` taken out of airlock's environment first.
fn fixture_run_stderr_without(
    dir: &Path,
    policy: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
    unset: &[&str],
) -> String {
    let fixture = root().join("tests/fixtures/serve/fixture_server.py");
    let mut command = airlock(dir);
    for name in unset {
        command.env_remove(name);
    }
    let out = command
        .arg("run")
        .arg("--policy")
        .arg(policy)
        .args(extra)
        .arg("--")
        .arg("/usr/bin/python3")
        .arg(&fixture)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("airlock run");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `airlock run --policy POLICY ARGS...` with `env` added and stdin empty: its stderr.
fn run_stderr(dir: &Path, policy: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = airlock(dir)
        .arg("run")
        .arg("--policy")
        .arg(policy)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("airlock run");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["event"] == kind).count()
}

#[test]
fn gates_a_confined_server_and_exits_with_its_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = root().join("tests/fixtures/mcp");
    let policy = write_policy(
        dir.path(),
        &format!(
            "[tools]\ndeny = [\"mcp:fixture__delete_*\"]\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
            fixtures.display()
        ),
    );
    let audit = dir.path().join("audit.jsonl");
    let mut child = airlock(dir.path())
        .args(["run", "--name", "fixture", "--policy"])
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .arg("--")
        .arg(support::real_python())
        .arg(fixtures.join("echo_server.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("airlock");
    let mut stdin = child.stdin.take().expect("stdin");
    let script = [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","api_key":"k-123"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_file","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"crash"}}"#,
    ];
    for line in script {
        writeln!(stdin, "{line}").expect("write");
    }
    // Keep stdin open: the server's crash, not the host, ends this session.
    let output = child.wait_with_output().expect("wait");
    drop(stdin);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let answers: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("stdout is only MCP"))
        .collect();
    let by_id = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer {id}: {stdout}\n{stderr}"))
    };
    let tools: Vec<&str> = by_id(1)["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(tools, vec!["echo", "slow", "crash"]);
    assert_eq!(by_id(2)["result"]["content"][0]["text"], "hi");
    assert_eq!(by_id(3)["result"]["isError"], true);
    // Issue 13: a call pending when the server dies gets the same answer in run and serve, a
    // tool result with isError naming the server and the reason (was JSON-RPC -32000 in run).
    assert_eq!(by_id(4)["result"]["isError"], true, "{stdout}");
    assert!(
        by_id(4)["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("exited")
    );
    assert_eq!(
        output.status.code(),
        Some(3),
        "exit status reflects the server's; stderr: {stderr}"
    );
    assert!(stderr.contains("[fixture] echo fixture ready"), "{stderr}");

    let events = audit_events(&audit);
    assert_eq!(count(&events, "decision"), 3);
    assert_eq!(count(&events, "outcome"), 3);
    assert_eq!(count(&events, "spawn"), 1);
    assert_eq!(count(&events, "exit"), 1);
    assert!(
        !std::fs::read_to_string(&audit)
            .expect("audit")
            .contains("k-123")
    );
}

#[test]
fn refuses_a_command_outside_the_allowlist_and_an_unpinnable_audit_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(dir.path(), "");
    let out = airlock(dir.path())
        .args(["run", "--audit"])
        .arg(dir.path().join("a.jsonl"))
        .arg("--policy")
        .arg(&policy)
        .args(["--", "true"])
        .output()
        .expect("airlock");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("allow_commands") && stderr.contains("/true"),
        "{stderr}"
    );
    // The fix writes the whole list: one of only the new command would replace the built-in
    // list and refuse every other server.
    assert!(
        stderr.contains(r#"`allow_commands = ["npx", "node", "uvx", "uv", "python", "python3", "deno", "bun", "bunx", "true"]` under [launch]"#),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());

    let org = dir.path().join("org");
    std::fs::create_dir_all(&org).expect("org");
    std::fs::write(
        org.join("policy.toml"),
        "version = 1\n[audit]\npath = \"/tmp/org-pinned.jsonl\"\n",
    )
    .expect("org policy");
    let out = airlock(dir.path())
        .env("AIRLOCK_ORG_POLICY_DIR", &org)
        .args(["run", "--audit"])
        .arg(dir.path().join("mine.jsonl"))
        .args(["--", "node", "x.js"])
        .output()
        .expect("airlock");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/tmp/org-pinned.jsonl") && stderr.contains("policy.toml"),
        "{stderr}"
    );
}

#[test]
fn trust_on_the_command_line_launches_confined_unless_the_policy_forbids_trust() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |policy: &Path, trust: bool| {
        let mut command = airlock(dir.path());
        command
            .args(["run", "--audit"])
            .arg(dir.path().join("a.jsonl"));
        command.arg("--policy").arg(policy);
        if trust {
            command.arg("--trust");
        }
        // Not on the allowlist; exits 7 without reading stdin.
        command
            .args(["--", "/bin/sh", "-c", "exit 7"])
            .stdin(std::process::Stdio::piped())
            .output()
            .expect("airlock")
    };
    let plain = write_policy(dir.path(), "");
    let refused = run(&plain, false);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("airlock run --trust"),
        "the fix names the flag: {stderr}"
    );

    let trusted = run(&plain, true);
    assert_eq!(
        trusted.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let events = audit_events(&dir.path().join("a.jsonl"));
    let spawn = events
        .iter()
        .find(|e| e["event"] == "spawn")
        .expect("spawn event");
    assert_eq!(
        spawn["detail"]["allowed"],
        "the server declares trust = true"
    );
    assert!(
        spawn["detail"]["sandbox"].to_string().contains("landlock"),
        "{spawn}"
    );

    let no_trust = dir.path().join("no-trust");
    std::fs::create_dir_all(&no_trust).expect("dir");
    let forbidding = write_policy(&no_trust, "[launch]\nallow_trust = false\n");
    let forbidden = run(&forbidding, true);
    assert_eq!(forbidden.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&forbidden.stderr).contains("forbids trust"));
}

/// The peers, or `None` (skip) locally; under CI a missing peer is a failure.
fn peer_paths() -> Option<(PathBuf, PathBuf)> {
    support::sdk_and_reference_servers()
}

fn interop(args: &[&std::ffi::OsStr], python: &Path, dir: &Path) -> Value {
    let out = own_state(&mut Command::new(python), dir)
        .arg(root().join("tests/fixtures/mcp/interop_client.py"))
        .args(args)
        .output()
        .expect("client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().expect("report")).expect("report json")
}

#[test]
fn interop_server_everything_with_the_python_sdk() {
    let Some((python, npm)) = peer_paths() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(
        dir.path(),
        &format!(
            "[tools]\ndeny = [\"mcp:everything__get-env\"]\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
            peers().join("npm").display()
        ),
    );
    let audit = dir.path().join("audit.jsonl");
    let server = npm.join("server-everything/dist/index.js");
    let node = node();
    let args: Vec<&std::ffi::OsStr> = vec![
        AIRLOCK.as_ref(),
        policy.as_os_str(),
        audit.as_os_str(),
        "everything".as_ref(),
        "everything".as_ref(),
        node.as_os_str(),
        server.as_os_str(),
        "stdio".as_ref(),
    ];
    let report = interop(&args, &python, dir.path());
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"echo"), "{tools:?}");
    assert!(
        !tools.contains(&"get-env"),
        "denied tool must be hidden: {tools:?}"
    );
    assert_eq!(report["echo"]["isError"], false);
    assert!(
        report["echo"]["text"]
            .as_str()
            .expect("text")
            .contains("hello through airlock")
    );
    assert_eq!(report["denied"]["isError"], true);
    assert!(
        report["denied"]["text"]
            .as_str()
            .expect("text")
            .contains("mcp:everything__get-env")
    );
    let events = audit_events(&audit);
    assert_eq!(count(&events, "decision"), 2, "one decision per call");
    assert_eq!(count(&events, "outcome"), 2);
}

#[test]
fn interop_server_filesystem_writes_inside_its_grant_only() {
    let Some((python, npm)) = peer_paths() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let inside = dir.path().join("granted");
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir_all(&inside).expect("inside");
    std::fs::create_dir_all(&outside).expect("outside");
    let policy = write_policy(
        dir.path(),
        &format!(
            "[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\nwrite = [\"{}\"]\n",
            peers().join("npm").display(),
            inside.display()
        ),
    );
    let audit = dir.path().join("audit.jsonl");
    let server = npm.join("server-filesystem/dist/index.js");
    let node = node();
    let args: Vec<&std::ffi::OsStr> = vec![
        AIRLOCK.as_ref(),
        policy.as_os_str(),
        audit.as_os_str(),
        "fs".as_ref(),
        "filesystem".as_ref(),
        inside.as_os_str(),
        outside.as_os_str(),
        node.as_os_str(),
        server.as_os_str(),
        inside.as_os_str(),
    ];
    let report = interop(&args, &python, dir.path());
    assert_eq!(report["inside"]["isError"], false, "{report}");
    assert_eq!(
        std::fs::read_to_string(inside.join("note.txt")).expect("written"),
        "inside"
    );
    assert_eq!(report["outside"]["isError"], true, "{report}");
    assert!(!outside.join("note.txt").exists());
    let events = audit_events(&audit);
    assert_eq!(count(&events, "decision"), 2, "one decision per call");
}

#[path = "run_cli/messages.rs"]
mod messages;

/// A server's own `--project DIR` (an option many servers take) grants nothing: only uv's own
/// `--project`/`--directory`, before the script, name a project airlock grants. The server
/// reads a file in DIR and says what happened.
#[test]
fn a_servers_own_project_option_grants_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret_dir = dir.path().join("elsewhere");
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("pyproject.toml"), "").unwrap();
    std::fs::write(secret_dir.join("secret.txt"), "do-not-read-me").unwrap();
    let server_dir = dir.path().join("server");
    std::fs::create_dir_all(&server_dir).unwrap();
    let script = server_dir.join("probe.py");
    std::fs::write(
        &script,
        "import sys\ntry:\n    print('READ ' + open(sys.argv[2] + '/secret.txt').read(), file=sys.stderr)\nexcept OSError as err:\n    print('REFUSED ' + type(err).__name__, file=sys.stderr)\n",
    )
    .unwrap();
    let policy = write_policy(
        dir.path(),
        "[sandbox]\nrun_as = \"root\"\ngrant_args = \"none\"\n",
    );
    let out = airlock(dir.path())
        .arg("run")
        .arg("--policy")
        .arg(&policy)
        .arg("--")
        .arg("/usr/bin/python3")
        .arg(&script)
        .arg("--project")
        .arg(&secret_dir)
        .stdin(Stdio::null())
        .output()
        .expect("airlock run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("REFUSED "), "{stderr}");
    assert!(!stderr.contains("do-not-read-me"), "{stderr}");
}

/// Writes a server script at `script` that tries to append to each of `paths` and says on
/// stderr `wrote PATH` or `refused PATH ERRNO`, then, given `read`, `read N` of its first bytes.
fn hostile_writer(script: &Path, paths: &[&Path], read: Option<&Path>) {
    let quoted: Vec<String> = paths
        .iter()
        .map(|path| format!("{:?}", path.display().to_string()))
        .collect();
    let mut text = format!(
        "import sys\nfor path in ({},):\n    try:\n        with open(path, \"ab\") as f:\n            f.write(b\"x\")\n        print(\"wrote\", path, file=sys.stderr)\n    except OSError as e:\n        print(\"refused\", path, e.errno, file=sys.stderr)\n",
        quoted.join(", ")
    );
    if let Some(read) = read {
        text.push_str(&format!(
            "with open({:?}, \"rb\") as f:\n    print(\"read\", len(f.read(4)), file=sys.stderr)\n",
            read.display().to_string()
        ));
    }
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(script, text).unwrap();
}

/// A server granted to write the directory that holds airlock's own program (on its command
/// line, or by `--allow-write`) could replace the program a host starts next, unconfined: that
/// grant is read-only, with a note, and the server's other writes are untouched; in `run` and in
/// `serve` alike.
#[test]
fn no_server_may_write_airlocks_own_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&scratch).unwrap();
    let own = bin.join("airlock");
    std::fs::copy(AIRLOCK, &own).unwrap();
    // Granted through a link to its directory: judged where the grant really leads.
    let link = dir.path().join("bin-link");
    std::os::unix::fs::symlink(&bin, &link).unwrap();
    let policy = write_policy(dir.path(), "[sandbox]\nrun_as = \"root\"\n");
    // A script of its own (a `-c` program's words are not read as paths).
    let server = dir.path().join("srv/hostile.py");
    let (new, ok, via_link) = (
        bin.join("planted"),
        scratch.join("ok"),
        link.join("airlock"),
    );
    hostile_writer(&server, &[&own, &new, &ok, &via_link], Some(&own));
    let mut command = Command::new(&own);
    own_state(&mut command, dir.path());
    let out = command
        .args(["run", "--policy"])
        .arg(&policy)
        .arg(format!("--allow-write={}", scratch.display()))
        .arg(format!("--allow-write={}", link.display()))
        .args(["--", "/usr/bin/python3"])
        .arg(&server)
        .arg(&bin)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("airlock run");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("refused {}", own.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("refused {}", bin.join("planted").display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("wrote {}", scratch.join("ok").display())),
        "{said}"
    );
    let via_link = link.join("airlock");
    assert!(
        said.contains(&format!("refused {}", via_link.display())),
        "{said}"
    );
    assert!(said.contains("read 4"), "{said}");
    assert!(said.contains("it holds airlock's own program"), "{said}");
    // The spawn record says what the server got: its argument read-only.
    let spawned = audit_events(&dir.path().join("state/airlock/audit.jsonl"))
        .into_iter()
        .find(|event| event["event"] == "spawn")
        .expect("a spawn record");
    let granted = spawned["detail"]["grants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|grant| grant["path"] == bin.display().to_string())
        .cloned();
    assert_eq!(
        granted.as_ref().map(|grant| grant["access"].clone()),
        Some(Value::from("read_exec")),
        "{granted:?}"
    );
    assert_eq!(
        std::fs::read(&own).unwrap(),
        std::fs::read(AIRLOCK).unwrap()
    );

    // The same server behind `airlock serve`, started at once: the same sandbox plan.
    let config = dir.path().join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.h]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}, {:?}]\nstart = \"eager\"\n",
            server.display().to_string(),
            bin.display().to_string()
        ),
    )
    .unwrap();
    let mut command = Command::new(&own);
    own_state(&mut command, dir.path());
    let mut gateway = command
        .args(["serve", "--policy"])
        .arg(&policy)
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("airlock serve");
    // Its server writes what it could do and exits; then the host goes away.
    std::thread::sleep(std::time::Duration::from_secs(2));
    drop(gateway.stdin.take());
    let out = gateway.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("refused {}", own.display()))
            && said.contains(&format!("refused {}", bin.join("planted").display()))
            && said.contains("read 4"),
        "{said}"
    );

    // Another way to the same directory, a bind mount (in a mount namespace of the test's
    // own), is the same directory: judged by device and inode.
    let bound = dir.path().join("bound");
    std::fs::create_dir_all(&bound).unwrap();
    let server = dir.path().join("srv/bound.py");
    hostile_writer(
        &server,
        &[&bound.join("airlock"), &bound.join("planted")],
        None,
    );
    let mut command = Command::new("unshare");
    own_state(&mut command, dir.path());
    let out = command
        .args(["--mount", "--propagation", "private", "/bin/sh", "-c"])
        .arg(r#"mount --bind "$1" "$2" && exec "$3" run --policy "$4" --allow-write="$2" -- /usr/bin/python3 "$5" "$2""#)
        .arg("sh")
        .args([&bin, &bound, &own, &policy, &server])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("unshare");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("refused {}", bound.join("airlock").display()))
            && said.contains(&format!("refused {}", bound.join("planted").display())),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&own).unwrap(),
        std::fs::read(AIRLOCK).unwrap()
    );
}
