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

/// A credential the host put in airlock's environment (its config's `env`) that the policy does
/// not pass: airlock names it on stderr with the flag that would pass it, never its value; once
/// passed, nothing is said.
#[test]
fn a_withheld_credential_is_named_with_the_flag_that_passes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(dir.path(), "[sandbox]\nrun_as = \"root\"\n");
    let secret = [("API_KEY", "sk-do-not-show-me-0123456789")];
    let start = |extra: &[&str]| fixture_run_stderr(dir.path(), &policy, extra, &secret);
    let withheld = start(&[]);
    assert!(
        withheld.contains("not passed to the server")
            && withheld.contains(": API_KEY;")
            && withheld.contains("--allow-env=API_KEY"),
        "{withheld}"
    );
    assert!(!withheld.contains("sk-do-not-show-me"), "{withheld}");
    let passed = start(&["--allow-env=API_KEY"]);
    assert!(!passed.contains("not passed to the server"), "{passed}");
}

/// A launch airlock refuses is told to the host as the answer to its first request, fix
/// included (a host shows its servers' errors, not their stderr: a new user's trial saw only a
/// server that disconnected), and airlock still exits 2; the same for a policy that does not load
/// and an audit log that cannot be opened, and after notifications the host sent first.
#[test]
fn a_refused_launch_answers_the_hosts_first_request_with_the_fix() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let tool = dir.path().join("mytool");
    std::fs::write(&tool, "#!/bin/sh\nexit 0\n").expect("tool");
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let good = write_policy(dir.path(), "[sandbox]\nrun_as = \"root\"\n");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "version = 1\n[sandbox]\nrun_az = \"root\"\n").expect("policy");
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let note = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#;
    let audit_in_proc = "--audit=/proc/nowhere/audit.jsonl";
    let odd = r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#;
    let cases: [(&PathBuf, Option<&str>, String, &str, i32); 4] = [
        (&good, None, init.to_string(), "--trust", 2),
        (&bad, None, init.to_string(), "run_az", 2),
        // Notifications, and a request with an id no answer can name, are passed over.
        (&good, None, format!("{note}\n{odd}\n{init}"), "--trust", 2),
        // An audit log that cannot be opened is told too.
        (&good, Some(audit_in_proc), init.to_string(), "audit", 1),
    ];
    for (policy, extra, lines, expected, code) in cases {
        let mut child = airlock(dir.path())
            .arg("run")
            .arg("--policy")
            .arg(policy)
            .args(extra)
            .arg("--")
            .arg(&tool)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("airlock run");
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "{lines}").expect("write");
        let out = child.wait_with_output().expect("wait");
        drop(stdin);
        assert_eq!(out.status.code(), Some(code), "{lines}");
        let said = String::from_utf8_lossy(&out.stdout);
        let answer: Value = serde_json::from_str(said.trim()).expect("one JSON-RPC answer");
        assert_eq!(answer["id"], 0, "{said}");
        assert_eq!(answer["error"]["code"], -32000, "{said}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{message}");
    }
}

/// One of airlock's own flags after the server's command is the server's argument, and airlock
/// says so (a new user put `--allow-read` there and was told to grant it with `--allow-read`).
#[test]
fn an_airlock_flag_after_the_command_is_named_as_the_servers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(dir.path(), "[sandbox]\nrun_as = \"root\"\n");
    let stderr = run_stderr(
        dir.path(),
        &policy,
        &[
            "--trust",
            "/bin/sh",
            "-c",
            "exit 0",
            "sh",
            "--allow-read=/etc",
            "--verbose",
        ],
        &[],
    );
    assert!(
        stderr.contains("--allow-read=/etc comes after the server's command"),
        "{stderr}"
    );
    assert!(!stderr.contains("--verbose comes after"), "{stderr}");
    // Deno's permission flags are its own: `deno run --allow-net` is said nothing about.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::os::unix::fs::symlink("/bin/sh", bin.join("deno")).expect("link");
    let deno = bin.join("deno").display().to_string();
    let stderr = run_stderr(
        dir.path(),
        &policy,
        &[
            "--trust",
            &deno,
            "-c",
            "exit 0",
            "deno",
            "--allow-net",
            "--policy=x",
            "server.ts",
        ],
        &[],
    );
    assert!(!stderr.contains("--allow-net comes after"), "{stderr}");
    assert!(stderr.contains("--policy=x comes after"), "{stderr}");
}

/// The default passes the locale by its names, and a `PREFIX_*` family passes its variables but
/// never one whose name or value reads like a credential: the server gets `LC_MESSAGES` and
/// `MY_REGION`, not `LC_GITHUB_TOKEN`, `LC_X` or `MY_NOTE` holding tokens, which airlock names as
/// withheld instead (reviews found any `LC_` name and value passed).
#[test]
fn a_variable_family_passes_no_credential() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(dir.path(), "[sandbox]\nrun_as = \"root\"\n");
    let stderr = run_stderr(
        dir.path(),
        &policy,
        &[
            "--trust",
            "--allow-env=MY_*",
            "--",
            "/bin/sh",
            "-c",
            "env >&2",
        ],
        &[
            ("LC_MESSAGES", "C"),
            ("LC_GITHUB_TOKEN", "ghp_do_not_pass_me_0123456789"),
            ("LC_X", "ghp_0123456789abcdefghijklmnopqrstuvwxyz"),
            ("MY_REGION", "eu"),
            ("MY_MODEL", "sk-large-v2"),
            ("MY_NOTE", "ghp_9876543210abcdefghijklmnopqrstuvwxyz"),
        ],
    );
    assert!(stderr.contains("LC_MESSAGES=C"), "{stderr}");
    assert!(stderr.contains("MY_REGION=eu"), "{stderr}");
    assert!(stderr.contains("MY_MODEL=sk-large-v2"), "{stderr}");
    assert!(!stderr.contains("ghp_"), "{stderr}");
    assert!(
        stderr.contains("not passed to the server") && stderr.contains("LC_GITHUB_TOKEN"),
        "{stderr}"
    );
}

/// A server with network behind a TLS-inspecting proxy connects only with the user's TLS trust
/// settings (`NODE_EXTRA_CA_CERTS`, ...), which a server does not get by default: airlock names
/// them with the flags that pass them (the file they name to read too), only when the server has
/// network, and says nothing once they are passed.
#[test]
fn tls_trust_settings_a_server_with_network_lacks_are_named_with_the_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(dir.path(), "[sandbox]\nrun_as = \"root\"\n");
    let bundle = "/etc/ssl/certs/ca-certificates.crt";
    let trust = [("NODE_EXTRA_CA_CERTS", bundle)];
    // This machine's own trust settings (a CI runner may set several) are not the test's.
    let start = |extra: &[&str]| {
        let unset = airlock::sandbox::TLS_TRUST;
        fixture_run_stderr_without(dir.path(), &policy, extra, &trust, unset)
    };
    let told = start(&["--allow-net=example.org"]);
    assert!(
        told.contains("TLS trust settings of your environment are not passed to the server: NODE_EXTRA_CA_CERTS;")
            && told.contains(&format!(
                "--allow-env=NODE_EXTRA_CA_CERTS --allow-read={bundle} before"
            )),
        "{told}"
    );
    let offline = start(&[]);
    assert!(!offline.contains("TLS trust"), "{offline}");
    let passed = start(&[
        "--allow-net=example.org",
        "--allow-env=NODE_EXTRA_CA_CERTS",
        &format!("--allow-read={bundle}"),
    ]);
    assert!(!passed.contains("TLS trust"), "{passed}");
}

/// A policy written for `fs` says nothing about a server `airlock run` named after its command
/// (`fixture_server`): its deny would silently fall away, so run says which name to give.
#[test]
fn a_policy_naming_only_other_servers_is_pointed_out_when_the_name_was_derived() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(
        dir.path(),
        "[sandbox]\nrun_as = \"root\"\n[tools]\ndeny = [\"mcp:fs__write_file\"]\n",
    );
    let start = |extra: &[&str]| fixture_run_stderr(dir.path(), &policy, extra, &[]);
    let derived = start(&[]);
    assert!(
        derived.contains("name server \"fs\" but none names this one")
            && derived.contains("called \"fixture_server\"")
            && derived.contains("--name"),
        "{derived}"
    );
    let named = start(&["--name", "fs"]);
    assert!(!named.contains("none names this one"), "{named}");
}

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
