//! Files a server plants between starts (links, rewritten first lines, interpreters under ~/.local,
//! scripts beside the home) never steer what the next start grants.

use super::*;

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

pub(super) fn derived_through_planted_link(mode: Mode, who: Who) {
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

pub(super) fn named_by_a_rewritten_first_line(mode: Mode, who: Who) {
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

pub(super) fn interpreter_under_dot_local(mode: Mode, who: Who) {
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

pub(super) fn planted_link_through(mode: Mode, who: Who) {
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

pub(super) fn script_beside_the_home(mode: Mode, who: Who) {
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

/// A server with a write grant over a directory can leave an `airlock.toml` there. `airlock
/// serve` started from that directory without `--config` would load it as the user's own config
/// layer, which may widen the policy (a server of the planter's choosing, with its grants); it
/// refuses instead (exit 2), naming the grant, and so do `check` and `explain`, which show what
/// `serve` would load. Named with `--config`, it is loaded. As root and as an ordinary user.
#[test]
fn a_config_a_server_may_have_written_is_not_loaded_without_config() {
    for who in everyone() {
        let project = who.dir("planted-config", 0o755);
        let target = project.join("airlock.toml");
        let _ = std::fs::remove_file(&target);
        let source_dir = who.dir("planted-config-source", 0o755);
        let source = source_dir.join("airlock.toml");
        std::fs::write(&source, "[servers.planted]\ncommand = \"/bin/true\"\n").unwrap();
        chmod(&source, 0o644);
        let cwd = who.dir("planted-config-cwd", 0o755);
        let call = Call {
            tool: "copy_and_chmod",
            arguments: json!({"source": source, "target": target}),
            write: Some(&project),
            read: Some(&source_dir),
            also_write: None,
            server: None,
            program: None,
        };
        let planted = call_tool(Mode::Run, who, &cwd, &call);
        assert!(
            target.is_file(),
            "{who:?}: the server plants it\n{}\n{}",
            planted.answer,
            planted.stderr
        );
        let project_shown = std::fs::canonicalize(&project)
            .unwrap()
            .display()
            .to_string();
        for args in [&["serve"][..], &["check"], &["explain", "mcp:planted__x"]] {
            let out = who
                .airlock(args)
                .current_dir(&project)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{who:?} {args:?}: {stderr}");
            assert!(
                stderr.contains(&format!(
                    "and {project_shown} was granted writable to a server, which may have written it"
                )) && stderr.contains("pass --config"),
                "{who:?} {args:?}: {stderr}"
            );
        }
        let out = who
            .airlock(&["check", "--config", "airlock.toml"])
            .current_dir(&project)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("planted"),
            "{who:?}: named with --config it is loaded\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A ledger that cannot be read fails closed, even for a directory it would not name
        // (root reads it whatever its mode: an ordinary user only).
        if let Who::User(uid) = who {
            let ledger = world()
                .root
                .join(format!("state-{}/airlock/write-grants-{uid}", who.tag()));
            chmod(&ledger, 0o000);
            let elsewhere = who.dir("planted-config-elsewhere", 0o755);
            std::fs::copy(&source, elsewhere.join("airlock.toml")).unwrap();
            let out = who
                .airlock(&["check"])
                .current_dir(&elsewhere)
                .output()
                .unwrap();
            chmod(&ledger, 0o600);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{who:?}: {stderr}");
            assert!(stderr.contains("cannot be read"), "{who:?}: {stderr}");
        }
    }
}
