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
    let echo = Call {
        tool: "echo",
        arguments: json!({"text": "hi"}),
        write: None,
        read: None,
        also_write: None,
        server: None,
        program: None,
    };
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
            let call = Call {
                tool: "status_line",
                arguments: json!({"prefix": "THP_enabled:"}),
                write: None,
                read: None,
                also_write: None,
                server: None,
                program: None,
            };
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

/// A server plants a symlink in its write grant where a nested grant of the next start lies
/// (`--allow-write P --allow-read P/docs`, or `P P/docs` on its command line): the next start
/// would bind whatever the link points at (`~/.ssh`, an organisation's `policy.d`). Through both
/// commands, as root and as an ordinary user: the plant works (it is the server's own grant),
/// and the next start refuses to follow it (also one that grants only the link's path: the grant
/// ledger remembers the write grant), with a sentence naming the link, and the secret it points
/// at never reaches the host.
#[test]
fn a_symlink_planted_in_a_write_grant_is_not_followed_by_the_next_start() {
    for who in everyone() {
        for mode in [Mode::Run, Mode::Serve] {
            planted_link_through(mode, who);
        }
    }
}

/// A grant derived from the disk is not steered by a link a server planted either: the server's
/// script lies in its own write grant, the server copies itself into another write grant inside
/// a project (`package.json` above it, a `.env` beside), then replaces its script with a link to
/// that copy. The next start would derive the script's package root from the link's target and
/// grant the whole project read-only, `.env` included; it refuses instead, naming the link. Run
/// and serve, as root and as an ordinary user.
#[test]
fn a_script_replaced_by_a_link_does_not_steer_what_the_next_start_grants() {
    for who in everyone() {
        for mode in [Mode::Run, Mode::Serve] {
            derived_through_planted_link(mode, who);
        }
    }
}

fn derived_through_planted_link(mode: Mode, who: Who) {
    let cwd = who.dir(&format!("derive-cwd-{mode:?}"), 0o755);
    let own = who.dir(&format!("derive-own-{mode:?}"), 0o755);
    let script = own.join("server.py");
    std::fs::copy(server_script(), &script).unwrap();
    who.own(&script);
    let project = who.dir(&format!("derive-project-{mode:?}"), 0o700);
    std::fs::write(project.join("package.json"), "{}\n").unwrap();
    std::fs::write(project.join(".env"), "TOKEN=CANARY-DERIVED-ROOT\n").unwrap();
    let data = project.join("data");
    std::fs::create_dir_all(&data).unwrap();
    for path in [
        project.join("package.json"),
        project.join(".env"),
        data.clone(),
    ] {
        who.own(&path);
    }
    let copy = data.join("copy.py");
    let call = |tool: &'static str, arguments: Value| Call {
        tool,
        arguments,
        write: Some(&own),
        read: None,
        also_write: Some(&data),
        server: Some(&script),
        program: None,
    };
    let text = |outcome: &Outcome| outcome.answer["result"]["content"][0]["text"].to_string();
    let copied = call_tool(
        mode,
        who,
        &cwd,
        &call("copy_and_chmod", json!({"source": script, "target": copy})),
    );
    assert!(
        text(&copied).contains("755 ok"),
        "{mode:?} as {who:?}: {}\n{}",
        copied.answer,
        copied.stderr
    );
    let planted = call_tool(
        mode,
        who,
        &cwd,
        &call("plant_link", json!({"link": script, "target": copy})),
    );
    assert!(
        text(&planted).contains("planted"),
        "{mode:?} as {who:?}: {}\n{}",
        planted.answer,
        planted.stderr
    );
    let next = call_tool(mode, who, &cwd, &call("list_dir", json!({"path": project})));
    let everything = format!("{}\n{}\n{:?}", next.answer, next.stderr, next.audit);
    assert!(
        !everything.contains("CANARY"),
        "{mode:?} as {who:?}: the planted link steered the script's package root:\n{everything}"
    );
    let refusal = format!(
        "through the symlink {}, which lies in {}, granted writable to a server",
        script.display(),
        own.display()
    );
    assert!(
        next.stderr.contains(&refusal),
        "{mode:?} as {who:?}:\n{everything}"
    );
}

/// A grant derived from a file's content is not chosen by a server either: its program lies in
/// its own write grant, and it rewrites the program's first line to name an interpreter in a
/// private directory (`#!SECRET/bin/python`, a link to a working Python). The next start would
/// grant that interpreter's install prefix, the private directory, read-only; it refuses
/// instead, naming the program. Run and serve, as root and as an ordinary user.
#[test]
fn a_rewritten_first_line_does_not_choose_what_the_next_start_grants() {
    for who in everyone() {
        for mode in [Mode::Run, Mode::Serve] {
            named_by_a_rewritten_first_line(mode, who);
        }
    }
}

fn named_by_a_rewritten_first_line(mode: Mode, who: Who) {
    let cwd = who.dir(&format!("named-cwd-{mode:?}"), 0o755);
    let own = who.dir(&format!("named-own-{mode:?}"), 0o755);
    let secret = who.dir(&format!("named-secret-{mode:?}"), 0o700);
    std::fs::write(secret.join("id_canary"), "CANARY-FIRST-LINE\n").unwrap();
    std::fs::create_dir_all(secret.join("bin")).unwrap();
    std::os::unix::fs::symlink(python(), secret.join("bin/python")).unwrap();
    let code = std::fs::read_to_string(server_script()).unwrap();
    let program = own.join("server.py");
    let rewritten = own.join("rewritten.py");
    std::fs::write(&program, format!("#!{}\n{code}", python().display())).unwrap();
    std::fs::write(
        &rewritten,
        format!("#!{}/bin/python\n{code}", secret.display()),
    )
    .unwrap();
    for path in [
        &program,
        &rewritten,
        &secret.join("id_canary"),
        &secret.join("bin"),
    ] {
        chmod(path, 0o755);
        who.own(path);
    }
    // The peers' virtualenv is granted by its own path: the first start's interpreter is trusted.
    let venv = peers().join("sandbox-venv");
    let call = |tool: &'static str, arguments: Value| Call {
        tool,
        arguments,
        write: Some(&own),
        read: Some(&venv),
        also_write: None,
        server: None,
        program: Some(&program),
    };
    let text = |outcome: &Outcome| outcome.answer["result"]["content"][0]["text"].to_string();
    let replaced = call_tool(
        mode,
        who,
        &cwd,
        &call(
            "copy_and_chmod",
            json!({"source": rewritten, "target": program}),
        ),
    );
    assert!(
        text(&replaced).contains("755 ok"),
        "{mode:?} as {who:?}: {}\n{}",
        replaced.answer,
        replaced.stderr
    );
    let next = call_tool(mode, who, &cwd, &call("list_dir", json!({"path": secret})));
    let everything = format!("{}\n{}\n{:?}", next.answer, next.stderr, next.audit);
    assert!(
        !everything.contains("CANARY"),
        "{mode:?} as {who:?}: the rewritten first line chose a grant:\n{everything}"
    );
    let refusal = format!(
        "through the program whose first line names it, {}, which lies in {}, granted writable to a server",
        program.display(),
        own.display()
    );
    assert!(
        next.stderr.contains(&refusal),
        "{mode:?} as {who:?}:\n{everything}"
    );
}

/// A program whose first line names an interpreter in the home's hidden directories starts (the
/// entry points `uv tool` and pipx put in ~/.local/bin name ~/.local/share/...): what a first
/// line names is judged by the planted-link rule only when the program lies where a server could
/// write, never by the hidden-home rule, which is for links a grant follows. Run and serve, root
/// and user.
#[test]
fn a_program_naming_an_interpreter_under_dot_local_starts() {
    for who in everyone() {
        for mode in [Mode::Run, Mode::Serve] {
            interpreter_under_dot_local(mode, who);
        }
    }
}

fn interpreter_under_dot_local(mode: Mode, who: Who) {
    let cwd = who.dir(&format!("dotlocal-cwd-{mode:?}"), 0o755);
    let home = world().root.join("home");
    let tool = home.join(format!(".local/share/tools-{mode:?}-{}", who.tag()));
    let bin = tool.join("bin");
    let _ = std::fs::remove_dir_all(&tool);
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", bin.join("python")).unwrap();
    let program = home.join(format!(".local/bin/mcp-x-{mode:?}-{}", who.tag()));
    let code = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mcp/echo_server.py"
    ))
    .unwrap();
    std::fs::write(&program, format!("#!{}/python\n{code}", bin.display())).unwrap();
    for dir in [
        home.join(".local"),
        home.join(".local/share"),
        home.join(".local/bin"),
        tool.clone(),
        bin.clone(),
        program.clone(),
    ] {
        chmod(&dir, 0o755);
    }
    let echo = Call {
        tool: "echo",
        arguments: json!({"text": "named under .local"}),
        write: None,
        read: None,
        also_write: None,
        server: None,
        program: Some(&program),
    };
    let outcome = call_tool(mode, who, &cwd, &echo);
    assert_eq!(
        outcome.answer["result"]["content"][0]["text"], "named under .local",
        "{mode:?} as {who:?}: {}\n{}",
        outcome.answer, outcome.stderr
    );
}

fn planted_link_through(mode: Mode, who: Who) {
    let cwd = who.dir(&format!("plant-cwd-{mode:?}"), 0o755);
    let project = who.dir(&format!("plant-proj-{mode:?}"), 0o755);
    let docs = project.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("readme"), "public\n").unwrap();
    who.own(&docs);
    who.own(&docs.join("readme"));
    let secret = who.dir(&format!("plant-secret-{mode:?}"), 0o700);
    std::fs::write(secret.join("id_canary"), "CANARY-PLANTED-LINK\n").unwrap();
    who.own(&secret.join("id_canary"));
    let call = |tool: &'static str, arguments: Value| Call {
        tool,
        arguments,
        write: Some(&project),
        read: Some(&docs),
        also_write: None,
        server: None,
        program: None,
    };
    let listed = call_tool(mode, who, &cwd, &call("list_dir", json!({"path": docs})));
    let text = |outcome: &Outcome| outcome.answer["result"]["content"][0]["text"].to_string();
    assert!(
        text(&listed).contains("readme: public"),
        "{mode:?} as {who:?}: {}\n{}",
        listed.answer,
        listed.stderr
    );
    let planted = call_tool(
        mode,
        who,
        &cwd,
        &call("plant_link", json!({"link": docs, "target": secret})),
    );
    assert!(
        text(&planted).contains("planted"),
        "{mode:?} as {who:?}: {}\n{}",
        planted.answer,
        planted.stderr
    );
    let next = call_tool(mode, who, &cwd, &call("list_dir", json!({"path": docs})));
    let everything = format!("{}\n{}\n{:?}", next.answer, next.stderr, next.audit);
    assert!(
        !everything.contains("CANARY") && !everything.contains("id_canary"),
        "{mode:?} as {who:?}: the planted link was followed:\n{everything}"
    );
    let refusal = format!(
        "through the symlink {}, which lies in {}, granted writable to a server",
        docs.display(),
        project.display()
    );
    assert!(
        next.stderr.contains(&refusal),
        "{mode:?} as {who:?}:\n{everything}"
    );
    // A later start that grants only the link's path, read-only, with no write grant around
    // it: the grant ledger remembers that a server could write there.
    let alone = Call {
        tool: "list_dir",
        arguments: json!({"path": docs}),
        write: None,
        read: Some(&docs),
        also_write: None,
        server: None,
        program: None,
    };
    let later = call_tool(mode, who, &cwd, &alone);
    let everything = format!("{}\n{}\n{:?}", later.answer, later.stderr, later.audit);
    assert!(
        !everything.contains("CANARY") && later.stderr.contains(&refusal),
        "{mode:?} as {who:?}: the planted link was followed by a later start:\n{everything}"
    );
    std::fs::remove_file(&docs).unwrap();
    std::fs::rename(project.join("docs.moved"), &docs).unwrap();

    // A later start that grants only the planted path (no write grant around it, so the link
    // is not in one): a link into the user's credential store is not followed either.
    let store = world().root.join("home/.ssh");
    std::fs::create_dir_all(&store).unwrap();
    chmod(&store, 0o755);
    std::fs::write(store.join("id_canary"), "CANARY-CREDENTIAL\n").unwrap();
    chmod(&store.join("id_canary"), 0o644);
    let key = project.join("key");
    let planted = call_tool(
        mode,
        who,
        &cwd,
        &call("plant_link", json!({"link": key, "target": store})),
    );
    assert!(text(&planted).contains("planted"), "{}", planted.stderr);
    let only_the_link = Call {
        tool: "list_dir",
        arguments: json!({"path": key}),
        write: None,
        read: Some(&key),
        also_write: None,
        server: None,
        program: None,
    };
    let next = call_tool(mode, who, &cwd, &only_the_link);
    let everything = format!("{}\n{}\n{:?}", next.answer, next.stderr, next.audit);
    assert!(
        !everything.contains("CANARY") && !everything.contains("id_canary"),
        "{mode:?} as {who:?}: the link into the credential store was followed:\n{everything}"
    );
    assert!(
        next.stderr.contains(&format!(
            "leads through a symlink to {}, in the home's hidden {}",
            store.display(),
            store.display()
        )),
        "{mode:?} as {who:?}:\n{everything}"
    );
    std::fs::remove_file(&key).unwrap();

    // The organisation's policy directory, reached through a planted link granted alone and
    // writable: a file written there would be every later start's org policy.
    let drop_in = world().root.join("org/policy.d");
    std::fs::create_dir_all(&drop_in).unwrap();
    let pol = project.join("pol");
    let planted = call_tool(
        mode,
        who,
        &cwd,
        &call("plant_link", json!({"link": pol, "target": drop_in})),
    );
    assert!(text(&planted).contains("planted"), "{}", planted.stderr);
    let into_org = Call {
        tool: "copy_and_chmod",
        arguments: json!({"source": "/etc/hostname", "target": pol.join("00-evil.toml")}),
        write: Some(&pol),
        read: None,
        also_write: None,
        server: None,
        program: None,
    };
    let next = call_tool(mode, who, &cwd, &into_org);
    assert!(
        std::fs::read_dir(&drop_in).unwrap().next().is_none(),
        "{mode:?} as {who:?}: a file landed in the org policy directory:\n{}",
        next.stderr
    );
    assert!(
        next.stderr.contains(&format!(
            "resolves to {}, inside {}",
            drop_in.display(),
            world().root.join("org").display()
        )),
        "{mode:?} as {who:?}:\n{}\n{}",
        next.answer,
        next.stderr
    );
    std::fs::remove_file(&pol).unwrap();
}

/// `python3 ~/server.py`, or a script in a directory that holds the home: that directory cannot
/// be granted (it would expose the home), so the script alone is, and airlock says so. The server
/// answers; the directory beside it stays out of reach.
#[test]
fn a_script_beside_the_home_is_granted_alone_through_run_or_serve() {
    for who in everyone() {
        for mode in [Mode::Run, Mode::Serve] {
            script_beside_the_home(mode, who);
        }
    }
}

fn script_beside_the_home(mode: Mode, who: Who) {
    // The test world's root holds the home (`HOME` is `<root>/home`).
    let root = world().root.clone();
    let script = root.join(format!("beside-home-{mode:?}-{}.py", who.tag()));
    std::fs::copy(server_script(), &script).unwrap();
    who.own(&script);
    chmod(&script, 0o644);
    let cwd = who.dir(&format!("beside-cwd-{mode:?}"), 0o755);
    let call = |tool: &'static str, arguments: Value| Call {
        tool,
        arguments,
        write: None,
        read: None,
        also_write: None,
        server: Some(&script),
        program: None,
    };
    let echoed = call_tool(mode, who, &cwd, &call("echo", json!({"text": "alone"})));
    let context = format!("{mode:?} as {who:?}:\n{}\n{}", echoed.answer, echoed.stderr);
    let text = echoed.answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(text.starts_with("alone (uid"), "{context}");
    assert!(
        echoed.stderr.contains(&format!(
            "not granted: {} (the script's directory): it is or contains the home; the script alone is granted",
            root.display()
        )),
        "{context}"
    );
    let listed = call_tool(
        mode,
        who,
        &cwd,
        &call("list_dir", json!({"path": root.display().to_string()})),
    );
    assert_eq!(
        listed.answer["result"]["isError"],
        json!(true),
        "the script's directory must stay out of reach ({mode:?} as {who:?}): {}",
        listed.answer
    );
}
