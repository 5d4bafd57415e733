//! How check and explain read paths: the home behind a link, home prefixes, a declared server's
//! working directory, relative paths, bare directories.

use super::*;

#[test]
fn explain_reads_a_relative_path_against_the_directories_on_the_servers_command_line() {
    let scratch = Scratch::new();
    let given = scratch.path("given");
    std::fs::create_dir_all(given.join("secret")).unwrap();
    let given = given.display().to_string();
    scratch.write(
        "xdg/airlock/policy.toml",
        &format!("version = 1\n[[tools.rule]]\ntool = \"mcp:fs__read_file\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"{given}/secret/\"\n"),
    );
    scratch.write(
        "airlock.toml",
        &format!("[servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\", {given:?}]\n"),
    );
    let config = scratch.path("airlock.toml").display().to_string();
    let output = scratch.airlock(&[
        "explain",
        "mcp:fs__read_file",
        r#"{"path":"secret/key.txt"}"#,
        "--config",
        &config,
        "--cwd",
        "/data/notes",
    ]);
    let out = stdout(&output);
    assert!(out.contains("decision: deny"), "{out}\n{}", stderr(&output));
    assert!(out.contains(&format!("-> {given}/secret/key.txt")), "{out}");
    assert!(
        out.contains("a directory on the server's command line"),
        "{out}"
    );
}

/// A bare word on the server's command line that names an entry of its working directory
/// (`server-filesystem notes`, as `./notes`) is granted like any path; under an org lock of
/// `[sandbox]` with `grant_args = "none"` it is not, and the fix names the org, not the
/// `--allow-*` flags the lock refuses.
#[test]
fn a_bare_directory_argument_is_granted_and_an_org_lock_fix_names_the_org() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.path("project/notes")).unwrap();
    let notes = scratch.path("project/notes").display().to_string();
    let server = [
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "notes",
    ];
    let mut args = vec!["check"];
    args.extend(server);
    let output = scratch.airlock(&args);
    let out = stdout(&output);
    assert!(
        out.contains(&format!("write {notes}  (argument 3 of the server (notes)")),
        "{out}\n{}",
        stderr(&output)
    );
    let org = scratch.write(
        "org/policy.toml",
        "version = 1\n[sandbox]\nlocked = true\ngrant_args = \"none\"\n",
    );
    let output = scratch.airlock(&args);
    let (out, err) = (stdout(&output), stderr(&output));
    let told = format!("{out}\n{err}");
    assert!(!out.contains(&format!("write {notes}")), "{told}");
    assert!(
        out.contains(&format!(
            "NOT GRANTED from the server's command line: notes ({notes})"
        )),
        "{told}"
    );
    assert!(
        told.contains(&format!(
            "the org policy locks [sandbox] (org {}:3)",
            org.display()
        )),
        "{told}"
    );
    assert!(!told.contains("grant it with --allow"), "{told}");
    // The lock really refuses the flags the old fix named.
    let mut flagged = vec!["check", "--allow-write", &notes];
    flagged.extend(server);
    let output = scratch.airlock(&flagged);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("widens a section the org policy locks"),
        "{}",
        stderr(&output)
    );
}

/// A home reached through a symlink (`HOME=/x/link/u`, `link -> real`) is the home under its real
/// path too: a script in it (`python3 ~/srv.py`) is granted alone, never the real home around it,
/// and `check` says why. And a program that is not an interpreter gets no "script" grant from a
/// file on its command line: such a file is data, for `grant_args`.
#[test]
fn a_home_behind_a_link_is_never_granted_through_its_real_path() {
    let scratch = Scratch::new();
    let real = scratch.path("real/u");
    std::fs::create_dir_all(real.join(".ssh")).unwrap();
    std::os::unix::fs::symlink(scratch.path("real"), scratch.path("link")).unwrap();
    std::fs::write(real.join("srv.py"), "print('hi')\n").unwrap();
    let linked_home = scratch.path("link/u");
    let script = linked_home.join("srv.py");
    let python = which("python3");
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["check", "--", &python, script.to_str().unwrap()])
        .current_dir(scratch.path("project"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &linked_home)
        .env("XDG_CONFIG_HOME", scratch.path("xdg"))
        .env("XDG_STATE_HOME", scratch.path("state"))
        .env("AIRLOCK_ORG_POLICY_DIR", scratch.path("org"))
        .output()
        .unwrap();
    let text = stdout(&out);
    let real = std::fs::canonicalize(&real).unwrap();
    assert!(
        !text.lines().any(|line| line
            .trim_start()
            .starts_with(&format!("read  {}  ", real.display()))),
        "the real home is granted:\n{text}"
    );
    assert!(
        text.contains(&format!(
            "read  {}  (the script alone",
            real.join("srv.py").display()
        )),
        "{text}\n{}",
        stderr(&out)
    );
    assert!(
        text.contains("(the script's directory): it is or contains the home"),
        "{text}"
    );

    // `cat FILE` (trusted): the file is no script; with grant_args = "none" nothing grants it.
    let policy = scratch.write(
        "none.toml",
        "version = 1\n[sandbox]\ngrant_args = \"none\"\n",
    );
    let data = scratch.write("data/notes.txt", "x\n");
    let cat = which("cat");
    let out = scratch.airlock(&[
        "check",
        "--policy",
        policy.to_str().unwrap(),
        "--trust",
        "--",
        &cat,
        data.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert!(
        !text.contains(&format!("read  {}", data.display()))
            && !text.contains(&format!("read  {}", data.parent().unwrap().display())),
        "{text}\n{}",
        stderr(&out)
    );
}

pub(super) fn which(program: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A `prefix` under `~` means the user's real home (as a grant's `~` does), and a relative one,
/// which could never match, is refused with its position and the fix.
#[test]
fn a_home_prefix_denies_the_real_home_and_a_relative_prefix_is_refused() {
    let scratch = Scratch::new();
    let rule = |prefix: &str| {
        format!(
            "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__read_text_file\"\naction = \"deny\"\nargument = \"path\"\nprefix = {prefix:?}\n"
        )
    };
    let policy = scratch.write("home-rule.toml", &rule("~/.ssh"));
    let key = scratch.path("home/.ssh/id_rsa").display().to_string();
    let out = scratch.airlock(&[
        "explain",
        "--policy",
        policy.to_str().unwrap(),
        "mcp:fs__read_text_file",
        &format!("{{\"path\":{key:?}}}"),
    ]);
    let text = stdout(&out);
    assert!(text.contains("decision: deny"), "{text}{}", stderr(&out));

    let relative = scratch.write("relative-rule.toml", &rule("home/me"));
    let out = scratch.airlock(&["check", "--policy", relative.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("relative-rule.toml:6:10") && said.contains("is relative"),
        "{said}"
    );
}

/// Without --cwd, a declared server's relative path is read as its launch will have it: the
/// config's directory is not granted to it, so it starts in its private home, and explain reads
/// against that too (as the gate does).
#[test]
fn explain_reads_a_declared_servers_paths_against_the_directory_it_will_start_in() {
    let scratch = Scratch::new();
    scratch.write(
        "project/airlock.toml",
        "[servers.fs]\ncommand = \"python3\"\nargs = [\"-c\", \"pass\"]\n",
    );
    scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__read_file\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/etc\"\n",
    );
    let output = scratch.airlock(&[
        "explain",
        "mcp:fs__read_file",
        r#"{"path":"notes/a.txt"}"#,
        "--config",
        "airlock.toml",
    ]);
    let out = stdout(&output);
    assert!(output.status.success(), "{out}{}", stderr(&output));
    let home = scratch.path("state/airlock/servers/fs/home");
    assert!(
        out.contains(&format!(
            "-> {}/notes/a.txt (as written, relative to {} (its private home, where it starts if it cannot use its working directory))",
            home.display(),
            home.display()
        )),
        "{out}"
    );
}

/// The MCP hosts' own config files are never granted either: a server that rewrote
/// `~/.cursor/mcp.json` would be started by Cursor without airlock next time. Named as a grant
/// or on the server's command line (which grants a directory it names by default).
#[test]
fn a_hosts_own_config_is_never_granted() {
    let scratch = Scratch::new();
    let cursor = scratch.path("home/.cursor");
    std::fs::create_dir_all(&cursor).unwrap();
    std::fs::write(cursor.join("mcp.json"), "{\"mcpServers\": {}}").unwrap();
    let flag = scratch.airlock(&[
        "check",
        "--trust",
        "--allow-write",
        cursor.to_str().unwrap(),
        "/bin/true",
    ]);
    let out = stdout(&flag);
    assert_eq!(flag.status.code(), Some(2), "{out}\n{}", stderr(&flag));
    assert!(out.contains("would expose Cursor's MCP config"), "{out}");
    let argument = scratch.airlock(&["check", "--trust", "/bin/true", cursor.to_str().unwrap()]);
    let said = format!("{}{}", stdout(&argument), stderr(&argument));
    assert!(
        said.contains("NOT GRANTED") && said.contains("Cursor's MCP config"),
        "{said}"
    );
    assert!(
        !said.contains(&format!("write {}", cursor.display())),
        "{said}"
    );
}

/// A host config not written yet, behind a directory that is a link (dotfiles kept elsewhere):
/// a server granted where the link leads could create it, and the host would start what it
/// wrote there unconfined.
#[test]
fn a_hosts_config_not_there_yet_is_not_granted_through_a_linked_directory() {
    let scratch = Scratch::new();
    let dotfiles = scratch.path("dotfiles");
    std::fs::create_dir_all(dotfiles.join("cursor")).unwrap();
    std::fs::create_dir_all(scratch.path("home")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("cursor"), scratch.path("home/.cursor")).unwrap();
    for grant in [dotfiles.clone(), dotfiles.join("cursor")] {
        let output = scratch.airlock(&[
            "check",
            "--trust",
            "--allow-write",
            grant.to_str().unwrap(),
            "/bin/true",
        ]);
        let out = stdout(&output);
        assert_eq!(output.status.code(), Some(2), "{out}\n{}", stderr(&output));
        assert!(out.contains("would expose Cursor's MCP config"), "{out}");
    }
    // The same grant with the link gone is fine: the refusal is about the link, not the name.
    std::fs::remove_file(scratch.path("home/.cursor")).unwrap();
    let output = scratch.airlock(&[
        "check",
        "--trust",
        "--allow-write",
        dotfiles.to_str().unwrap(),
        "/bin/true",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}
