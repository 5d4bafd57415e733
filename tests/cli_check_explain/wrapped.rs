//! A host's own entries in `check`: a server started through `airlock run`, checked as its run line
//! runs it, and a remote server the host reaches directly.

use super::*;

/// A host's entry `airlock install` wrapped is checked as its run line runs it: the env names a
/// `--allow-env=PREFIX_*` family passes (no credential among them), and a run line with a flag twice (which `run` refuses)
/// is not read as the server it wraps.
#[test]
fn check_reads_a_wrapped_entrys_env_family_and_refuses_a_flag_given_twice() {
    let scratch = Scratch::new();
    let airlock = env!("CARGO_BIN_EXE_airlock");
    let host = scratch.write(
        "host.json",
        &format!(
            r#"{{"mcpServers": {{
  "fx": {{"command": {airlock:?}, "args": ["run", "--name", "fx", "--allow-env=FX_*", "--", "python3", "-c", "pass"],
          "env": {{"FX_REGION": "eu", "FX_TOKEN": "t", "OTHER_NAME": "o"}}}}
}}}}"#
        ),
    );
    let output = scratch.airlock(&["check", "--config", host.to_str().unwrap()]);
    let out = stdout(&output);
    let names = out
        .lines()
        .find(|l| l.contains("environment names:"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(names.contains("FX_REGION"), "{names}");
    // A family passes no credential: `FX_TOKEN` passes by its own name only.
    assert!(!names.contains("FX_TOKEN"), "{names}");
    assert!(!names.contains("OTHER_NAME"), "{names}");

    scratch.write(
        "host.json",
        &format!(
            r#"{{"mcpServers": {{
  "fx": {{"command": {airlock:?}, "args": ["run", "--name", "fx", "--trust", "--trust", "--", "/bin/sh", "-c", "true"]}}
}}}}"#
        ),
    );
    let output = scratch.airlock(&["check", "--config", host.to_str().unwrap()]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(2), "{out}");
    assert!(
        !out.contains("allowed: the server declares trust"),
        "read as the server it wraps: {out}"
    );
}

/// An entry a user wrote by hand as the README shows (`"command": "airlock"`, found on PATH)
/// with the grants airlock's hints name (`--allow-write`, `--allow-net`) is read as the server
/// it wraps, with those grants, as `run` would start it; a relative path there is refused with
/// the fix (`run` would take it from wherever the host starts it).
#[test]
fn check_reads_a_hand_written_wrapper_with_its_grants() {
    let scratch = Scratch::new();
    let bin = scratch.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_airlock"), bin.join("airlock")).unwrap();
    let data = scratch.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let entry = |write: &str| {
        format!(
            r#"{{"mcpServers": {{
  "fx": {{"command": "airlock", "args": ["run", "--name", "fx", "--allow-write={write}", "--allow-net", "example.org", "--", "python3", "-c", "pass"]}}
}}}}"#
        )
    };
    let host = scratch.write("host.json", &entry(&data.display().to_string()));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let check = || {
        Command::new(bin.join("airlock"))
            .args(["check", "--config", host.to_str().unwrap()])
            .current_dir(scratch.path("project"))
            .env_clear()
            .env("PATH", &path)
            .env("HOME", scratch.path("home"))
            .env("XDG_CONFIG_HOME", scratch.path("xdg"))
            .env("XDG_STATE_HOME", scratch.path("state"))
            .env("AIRLOCK_ORG_POLICY_DIR", scratch.path("org"))
            .output()
            .unwrap()
    };
    let output = check();
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}{}", stderr(&output));
    assert!(
        stderr(&output).contains("\"fx\" starts through `airlock run`"),
        "{}",
        stderr(&output)
    );
    assert!(out.contains("launch   allowed: \"python3\""), "{out}");
    assert!(
        out.contains(&format!("write {}  (policy grant (config ", data.display())),
        "{out}"
    );
    assert!(
        out.contains("reaches example.org on ports 80, 443 (config "),
        "{out}"
    );

    // The layers name the file and the server the grants came from.
    assert!(
        out.contains("(server \"fx\": `airlock run --allow-write`)"),
        "{out}"
    );

    // A relative path depends on where the host starts the server: not granted, with the fix,
    // and the rest of the file still loads.
    scratch.write("host.json", &entry("data"));
    let output = check();
    let (out, said) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{out}{said}");
    assert!(
        said.contains("grants the relative path \"data\" (--allow-write)")
            && said.contains("write it as an absolute path"),
        "{said}"
    );
    assert!(
        !out.contains("(server \"fx\": `airlock run --allow-write`)"),
        "{out}"
    );
}

/// A remote server in a host's own file is reached by the host directly: `check` says it is
/// gated only through `airlock serve`; the same server in a gateway's config is gated.
#[test]
fn check_says_a_remote_server_of_a_host_file_is_not_gated_by_itself() {
    let scratch = Scratch::new();
    let host = scratch.write(
        "host.json",
        r#"{"mcpServers": {"docs": {"type": "http", "url": "https://example.org/mcp"}}}"#,
    );
    let gateway = scratch.write(
        "airlock.toml",
        "[servers.docs]\ntransport = \"http\"\nurl = \"https://example.org/mcp\"\n",
    );
    let out = stdout(&scratch.airlock(&["check", "--config", host.to_str().unwrap()]));
    assert!(
        out.contains("gated and audited only through `airlock serve`"),
        "{out}"
    );
    let out = stdout(&scratch.airlock(&["check", "--config", gateway.to_str().unwrap()]));
    assert!(out.contains("calls are still gated and audited"), "{out}");
}

/// The config a gateway starts from decides what starts next time and how confined: no grant
/// may hold it, from a run line's `--allow-write` or from a directory on a server's command line.
#[test]
fn no_grant_may_hold_the_config_airlock_was_started_from() {
    let scratch = Scratch::new();
    let dir = scratch.path("hostcfg");
    let script = scratch.write("srv/s.py", "pass\n");
    let airlock = env!("CARGO_BIN_EXE_airlock");
    let host = scratch.write(
        "hostcfg/host.json",
        &format!(
            r#"{{"mcpServers": {{
  "t": {{"command": {airlock:?}, "args": ["run", "--name", "t", "--allow-write={dir}", "--", "python3", {script:?}]}},
  "u": {{"command": "python3", "args": [{script:?}, {dir:?}]}}
}}}}"#,
            dir = dir.display(),
            script = script.display().to_string()
        ),
    );
    let output = scratch.airlock(&["check", "--config", host.to_str().unwrap()]);
    let out = stdout(&output);
    let held = format!(
        "the server config airlock was started from ({})",
        host.display()
    );
    assert!(
        out.contains("launch   REFUSED: server `t`")
            && out.contains(&format!("would expose {held}")),
        "{out}"
    );
    assert!(
        out.contains(&format!("not granted: it is or contains {held}")),
        "{out}"
    );

    // Named through a link: the link is protected too (a server that could write its
    // directory would point it at a config of its own for the next start).
    let links = scratch.path("links");
    std::fs::create_dir_all(&links).unwrap();
    let real = scratch.write(
        "real/airlock.toml",
        &format!(
            "[servers.u]\ncommand = \"python3\"\nargs = [{:?}, {:?}]\n",
            script.display().to_string(),
            links.display().to_string()
        ),
    );
    let link = links.join("airlock.toml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = stdout(&scratch.airlock(&["check", "--config", link.to_str().unwrap()]));
    assert!(
        out.contains(&format!(
            "not granted: it is or contains the server config airlock was started from ({})",
            link.display()
        )),
        "{out}"
    );
}

/// A VS Code `mcp.json` is JSON with comments and trailing commas (as VS Code writes and reads
/// it): `check` reads it, and still points at the right line for a mistake in it; the same in a
/// file of `mcpServers` (strict JSON to Claude Desktop) loads with a warning saying so (a new
/// user's trial found both refused as invalid JSON).
#[test]
fn check_reads_json_with_comments_and_trailing_commas() {
    let scratch = Scratch::new();
    let vscode = scratch.write(
        "mcp.json",
        "// my servers\n{\n  \"servers\": {\n    /* files */\n    \"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\",],},\n  },\n}\n",
    );
    let output = scratch.airlock(&["check", "--config", vscode.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(stdout(&output).contains("fs"), "{}", stdout(&output));
    assert!(
        !stderr(&output).contains("strict JSON"),
        "{}",
        stderr(&output)
    );

    let broken = scratch.write(
        "mcp.json",
        "// my servers\n{\n  \"servers\": {\n    /* files */\n    \"fs\": {\"command\": npx},\n  },\n}\n",
    );
    let output = scratch.airlock(&["check", "--config", broken.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("mcp.json:5:"),
        "{}",
        stderr(&output)
    );

    let claude = scratch.write(
        "claude_desktop_config.json",
        "{\n  // mine\n  \"mcpServers\": {\"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"]},},\n}\n",
    );
    let output = scratch.airlock(&["check", "--config", claude.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("strict JSON"),
        "{}",
        stderr(&output)
    );

    // A byte order mark, as an editor may save one.
    let marked = scratch.write(
        "mcp.json",
        "\u{feff}{\"servers\": {\"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"]}}}\n",
    );
    let output = scratch.airlock(&["check", "--config", marked.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}
