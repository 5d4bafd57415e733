//! End to end, one case through both `airlock run` and `airlock serve`, as root and as an ordinary
//! user: a real Python `mcp` server started from a 0700 working directory it cannot use answers
//! `tools/call` (it starts in its private home, with one notice on stderr; never a helper
//! failure), and the spawn audit event names the memory mechanism in force, exactly as
//! `airlock doctor` does; and a server cannot leave a setuid program in its write grant.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use sandbox_support::*;

#[path = "sandbox_run_serve/planted_files.rs"]
mod planted_files;

#[derive(Debug, Clone, Copy)]
enum Mode {
    Run,
    Serve,
}

fn python() -> PathBuf {
    let python = peers().join("sandbox-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `bash .ci/install-peers`",
        python.display()
    );
    python
}

/// The Python fixture server, copied where every test user may read it.
fn server_script() -> PathBuf {
    let tools = world().root.join("py-tools");
    std::fs::create_dir_all(&tools).unwrap();
    chmod(&tools, 0o755);
    let script = tools.join("py_server.py");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/sandbox/py_server.py"
        ),
        &script,
    )
    .unwrap();
    chmod(&script, 0o644);
    script
}

struct Outcome {
    answer: Value,
    stderr: String,
    audit: Vec<Value>,
}

/// What to call: the tool, its arguments, and a write grant for the server (`--allow-write` in
/// `run`, the server's `sandbox.write` in `serve`).
struct Call<'a> {
    tool: &'a str,
    arguments: Value,
    write: Option<&'a Path>,
    /// A read grant (`--allow-read` / the server's `sandbox.read`).
    read: Option<&'a Path>,
    /// A second write grant.
    also_write: Option<&'a Path>,
    /// The script the Python server runs (else the fixture in the test world).
    server: Option<&'a Path>,
    /// The program, run without a script argument (else the Python of the test peers).
    program: Option<&'a Path>,
}

impl<'a> Call<'a> {
    /// A call of `tool` with no grants, to the fixture server.
    fn plain(tool: &'a str, arguments: Value) -> Call<'a> {
        Call {
            tool,
            arguments,
            write: None,
            read: None,
            also_write: None,
            server: None,
            program: None,
        }
    }
}

/// The server's command line: the program alone, or the peers' Python and the script.
fn server_command(call: &Call, script: &Path) -> Vec<String> {
    match call.program {
        Some(program) => vec![program.display().to_string()],
        None => vec![python().display().to_string(), script.display().to_string()],
    }
}

/// The airlock command line for `mode`, and the tool's name as the host calls it.
fn command_line(
    mode: Mode,
    who: Who,
    cwd: &Path,
    call: &Call,
    audit: &Path,
) -> (Vec<String>, String) {
    let script = call.server.map_or_else(server_script, Path::to_path_buf);
    let work = who.dir(&format!("mode-{mode:?}"), 0o755);
    match mode {
        Mode::Run => {
            let mut args: Vec<String> = vec![
                "run".into(),
                "--name".into(),
                "py".into(),
                "--audit".into(),
                audit.display().to_string(),
            ];
            for write in [call.write, call.also_write].into_iter().flatten() {
                args.extend(["--allow-write".into(), write.display().to_string()]);
            }
            if let Some(read) = call.read {
                args.extend(["--allow-read".into(), read.display().to_string()]);
            }
            if call.program.is_some() {
                // Not one of the default launch allowlist's runtimes.
                args.push("--trust".into());
            }
            args.push("--".into());
            args.extend(server_command(call, &script));
            (args, call.tool.to_string())
        }
        Mode::Serve => {
            let config = work.join("airlock.toml");
            let command = server_command(call, &script);
            let args: Vec<String> = command[1..].iter().map(|a| format!("{a:?}")).collect();
            let mut text = format!(
                "[servers.py]\ncommand = {:?}\nargs = [{}]\ncwd = {:?}\n",
                command[0],
                args.join(", "),
                cwd.display().to_string()
            );
            if call.program.is_some() {
                text.push_str("trust = true\n");
            }
            let quoted = |paths: &[Option<&Path>]| -> Vec<String> {
                paths
                    .iter()
                    .flatten()
                    .map(|path| format!("{:?}", path.display().to_string()))
                    .collect()
            };
            let grants = [
                ("write", quoted(&[call.write, call.also_write])),
                ("read", quoted(&[call.read])),
            ];
            if grants.iter().any(|(_, paths)| !paths.is_empty()) {
                text.push_str("[servers.py.sandbox]\n");
            }
            for (key, paths) in grants {
                if !paths.is_empty() {
                    text.push_str(&format!("{key} = [{}]\n", paths.join(", ")));
                }
            }
            std::fs::write(&config, text).unwrap();
            who.own(&config);
            (
                vec![
                    "serve".into(),
                    "--config".into(),
                    config.display().to_string(),
                    "--audit".into(),
                    audit.display().to_string(),
                ],
                format!("py__{}", call.tool),
            )
        }
    }
}

/// initialize, initialized, tools/call; then EOF.
fn call_tool(mode: Mode, who: Who, cwd: &Path, call: &Call) -> Outcome {
    let audit = who
        .dir(&format!("audit-{mode:?}"), 0o755)
        .join("audit.jsonl");
    let (args, tool) = command_line(mode, who, cwd, call, &audit);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = who.airlock(&args);
    // `run` takes the server's working directory from its own.
    cmd.current_dir(cwd);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // airlock may already have exited (a start it refused): what it said is asserted below.
    let mut send = move |msg: Value| {
        let _ = writeln!(stdin, "{msg}").and_then(|()| stdin.flush());
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut read = |id: i64| -> Option<Value> {
        while Instant::now() < deadline {
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                return None;
            }
            let msg: Value = serde_json::from_str(&line).expect("stdout is only MCP");
            if msg["id"] == id {
                return Some(msg);
            }
        }
        None
    };
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let init = read(1);
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    send(
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":tool,"arguments":call.arguments}}),
    );
    let answer = init.and_then(|_| read(2)).unwrap_or(Value::Null);
    drop(send);
    let output = child.wait_with_output().unwrap();
    let audit = std::fs::read_to_string(&audit)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    Outcome {
        answer,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        audit,
    }
}

/// `airlock doctor`'s memory line, as this user. Where the mechanism bounds less than asked
/// (`RLIMIT_DATA`: per process), doctor lists it as less confined, and never claims otherwise.
fn doctor_memory(who: Who) -> String {
    let out = who.airlock(&["doctor"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.lines().any(|line| line
            == "  network ..................... none: private network namespace + landlock TCP + seccomp UDP"),
        "{text}"
    );
    if text.contains("RLIMIT_DATA") {
        assert!(
            !text.contains("nothing runs less confined")
                && text.contains("less confined than asked:\n  - memory: no memory cgroup"),
            "{text}"
        );
    }
    text.lines()
        .find_map(|line| {
            line.trim_start()
                .strip_prefix("memory ......................")
        })
        .unwrap_or_else(|| panic!("no memory line:\n{text}"))
        .trim()
        .to_string()
}

fn check(mode: Mode, who: Who) {
    let cwd = who.dir(&format!("start-{mode:?}"), 0o700);
    let echo = Call::plain("echo", json!({"text": "hi"}));
    let outcome = call_tool(mode, who, &cwd, &echo);
    let context = format!(
        "{mode:?} as {who:?}:\n{}\n{}",
        outcome.answer, outcome.stderr
    );
    let expected_uid = if who.is_root() { 65534 } else { who.uid() };
    assert_eq!(
        outcome.answer["result"]["content"][0]["text"],
        format!("hi (uid {expected_uid})"),
        "{context}"
    );
    assert_eq!(
        outcome
            .stderr
            .matches("the server cannot use the working directory")
            .count(),
        1,
        "{context}"
    );
    assert!(
        !outcome.stderr.contains("airlock-confine: prepare"),
        "{context}"
    );
    // Why, in the sandbox's terms: the directory exists on the host, it is only not granted.
    assert!(
        outcome.stderr.contains(&format!(
            "{} (it is not granted to the server)",
            cwd.display()
        )),
        "{context}"
    );
    let spawn = outcome
        .audit
        .iter()
        .find(|event| event["event"] == "spawn")
        .unwrap_or_else(|| panic!("no spawn event: {:?}\n{context}", outcome.audit));
    let sandbox = &spawn["detail"]["sandbox"];
    assert_eq!(sandbox["memory"], doctor_memory(who), "{context}");
    if sandbox["memory"]
        .as_str()
        .unwrap_or("")
        .contains("RLIMIT_DATA")
    {
        assert!(
            sandbox["memory"]
                .as_str()
                .unwrap_or("")
                .contains("shared anonymous memory, memfd and SysV shm refused"),
            "{context}"
        );
        let weaker = spawn["detail"]["weaker_than_asked"].to_string();
        assert!(
            weaker.contains("memory: no memory cgroup"),
            "{weaker}\n{context}"
        );
    }
    assert_eq!(sandbox["root"], "constructed root", "{context}");
    assert!(
        sandbox["disk"].as_str().unwrap_or("").contains("MiB tmpfs"),
        "{context}"
    );
}

#[test]
fn a_server_started_from_a_0700_directory_answers_and_the_audit_names_the_memory_mechanism() {
    for who in everyone() {
        for mode in [Mode::Run, Mode::Serve] {
            check(mode, who);
        }
    }
}

/// airlock turns transparent huge pages off for its own process (its allocator's arenas would
/// get 2 MiB pages); a server started through `run` or `serve` still gets the setting airlock
/// inherited, here the test's own, not airlock's opt-out. (Started with THP disabled, the server
/// gets it disabled: `sandbox_root the_server_gets_the_huge_page_setting_airlock_inherited`.)
#[test]
fn a_server_keeps_the_huge_page_setting_airlock_inherited_through_run_or_serve() {
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    let inherited = own
        .lines()
        .find(|line| line.starts_with("THP_enabled:"))
        .expect("this kernel reports THP_enabled")
        .to_string();
    for who in everyone() {
        for mode in [Mode::Run, Mode::Serve] {
            let cwd = who.dir(&format!("thp-{mode:?}"), 0o755);
            let call = Call::plain("status_line", json!({"prefix": "THP_enabled:"}));
            let outcome = call_tool(mode, who, &cwd, &call);
            assert_eq!(
                outcome.answer["result"]["content"][0]["text"],
                inherited.as_str(),
                "{mode:?} as {who:?}:\n{}\n{}",
                outcome.answer,
                outcome.stderr
            );
        }
    }
}

/// The setuid rule through both commands, as root and as an ordinary user: a real server copies
/// a program into its write grant and tries `chmod 6755`; the sandbox refuses it (EPERM), a plain
/// `chmod 0755` works, and on the host the copy is the grant owner's without either bit. As root
/// also with a 0700 grant owned by another user (`/home/u/proj`): its bind maps that owner to
/// the server, so the server writes there and the copy is that user's on disk.
#[test]
fn a_server_cannot_leave_a_setuid_program_in_its_write_grant_through_run_or_serve() {
    const OTHER_USER: u32 = 65532;
    for who in everyone() {
        let owners = if who.is_root() {
            vec![who.uid(), OTHER_USER]
        } else {
            vec![who.uid()]
        };
        for owner in owners {
            for mode in [Mode::Run, Mode::Serve] {
                setid_through(mode, who, owner);
            }
        }
    }
}

fn setid_through(mode: Mode, who: Who, owner: u32) {
    let cwd = who.dir(&format!("setid-cwd-{mode:?}"), 0o755);
    let grant = who.dir(&format!("setid-grant-{mode:?}-{owner}"), 0o755);
    if owner != who.uid() {
        std::os::unix::fs::chown(&grant, Some(owner), Some(owner)).unwrap();
        chmod(&grant, 0o700);
    }
    let copy = grant.join("myid");
    let call = Call {
        tool: "copy_and_chmod",
        arguments: json!({"source": "/usr/bin/id", "target": copy.display().to_string()}),
        write: Some(&grant),
        read: None,
        also_write: None,
        server: None,
        program: None,
    };
    let outcome = call_tool(mode, who, &cwd, &call);
    let context = format!(
        "{mode:?} as {who:?}, grant owned by {owner}:\n{}\n{}",
        outcome.answer, outcome.stderr
    );
    let said = outcome.answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        said.contains("6755 refused: [Errno 1] Operation not permitted")
            && said.contains("; 755 ok"),
        "{context}"
    );
    let meta = std::fs::metadata(&copy).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o755, "{context}");
    assert_eq!((meta.uid(), meta.gid()), (owner, owner), "{context}");
}

/// A server with a network of its own (the default: none) reads a hosts file of its own, naming
/// only its loopback and its host name, not the host's (which names machines of the user's
/// network). `sandbox_root the_hosts_file_is_the_servers_own_unless_it_has_the_hosts_network`
/// has the other networks and the grant that shows the host's file.
#[test]
fn a_server_reads_its_own_hosts_file_through_run_or_serve() {
    let host_hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    let own =
        "127.0.0.1\tlocalhost\n127.0.1.1\tairlock\n::1\tlocalhost ip6-localhost ip6-loopback\n";
    assert_ne!(
        host_hosts, own,
        "the host's file must differ for the test to tell them apart"
    );
    for who in everyone() {
        for mode in [Mode::Run, Mode::Serve] {
            let cwd = who.dir(&format!("hosts-{mode:?}"), 0o755);
            let call = Call::plain("read_text", json!({"path": "/etc/hosts"}));
            let outcome = call_tool(mode, who, &cwd, &call);
            assert_eq!(
                outcome.answer["result"]["content"][0]["text"], own,
                "{mode:?} as {who:?}:\n{}\n{}",
                outcome.answer, outcome.stderr
            );
        }
    }
}
