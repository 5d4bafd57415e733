//! What `airlock run` tells the user and the host about a start it refuses or narrows: a withheld
//! variable, a refused launch, a flag given after the command, TLS settings, a policy naming other
//! servers.

use super::*;

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

/// A server that dies without a word is told by its exit code alone: the confine helper's note
/// that the server cannot use the working directory is airlock's remark on a start that went on,
/// neither the server's last words nor why its sandbox failed (a review found it quoted as the
/// crash's cause, and in the exit record as a confinement message).
#[test]
fn the_helpers_note_is_not_quoted_as_the_servers_last_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(dir.path(), "[sandbox]\nrun_as = \"root\"\n");
    let audit = dir.path().join("audit.jsonl");
    // A working directory no grant reaches: the helper notes it and starts the server in its
    // private home.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let mut child = airlock(dir.path())
        .arg("run")
        .arg("--policy")
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .args([
            "--",
            "/usr/bin/python3",
            "-c",
            "import sys; sys.stdin.readline(); sys.exit(7)",
        ])
        .current_dir(elsewhere.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("airlock run");
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    writeln!(child.stdin.as_mut().unwrap(), "{initialize}").unwrap();
    let out = child.wait_with_output().expect("airlock run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("airlock-confine: note:"),
        "the note is still shown: {stderr}"
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("an answer");
    let text = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(text.contains("exit code 7"), "{answer}");
    assert!(!text.contains("airlock-confine"), "{answer}");
    let exit = audit_events(&audit)
        .into_iter()
        .find(|event| event["event"] == "exit")
        .expect("an exit record");
    assert!(exit["detail"].get("confine_message").is_none(), "{exit}");
}
