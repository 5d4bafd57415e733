//! The real `airlock check` and `airlock explain` binaries on fixture files: output and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "cli_check_explain/paths.rs"]
mod paths;
#[path = "cli_check_explain/wrapped.rs"]
mod wrapped;

/// A scratch home with org, user and project policy locations under it.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("org")).unwrap();
        std::fs::create_dir_all(dir.path().join("xdg/airlock")).unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        Scratch { dir }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn airlock(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(args)
            .current_dir(self.path("project"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("xdg"))
            .env("XDG_STATE_HOME", self.path("state"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.path("org"))
            .env("SECRET_TOKEN", "sk-live-0123456789abcdef")
            .output()
            .unwrap()
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn check_prints_the_merged_policy_with_origins_and_each_servers_argv() {
    let scratch = Scratch::new();
    scratch.write(
        "org/policy.toml",
        "version = 1\n[tools]\ndeny = [\"mcp:*__exec\"]\n",
    );
    scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[tools]\nask = [\"mcp:fs__write_*\"]\n",
    );
    let output = scratch.airlock(&["check", "--config", &fixture("airlock.toml")]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}\n{}", stderr(&output));
    let org_file = scratch.path("org/policy.toml").display().to_string();
    assert!(out.contains("tools.deny \"mcp:*__exec\""), "{out}");
    assert!(out.contains(&format!("[org {org_file}:3]")), "{out}");
    assert!(out.contains("tools.ask \"mcp:fs__write_*\""), "{out}");
    assert!(out.contains("[builtin builtin:default.toml]"), "{out}");
    // Resolved absolute argv, and the launch verdict.
    assert!(out.contains("argv     /"), "{out}");
    assert!(
        out.contains("launch   allowed: \"python3\" is on launch.allow_commands"),
        "{out}"
    );
    // The secret from the environment is masked, never printed.
    assert!(out.contains("API_TOKEN=sk-****cdef"), "{out}");
    assert!(!out.contains("sk-live-0123456789abcdef"), "{out}");
    let notes = format!("NOTES={}", scratch.path("home/notes").display());
    assert!(out.contains(&notes), "a path from HOME is no secret: {out}");
    // Each stdio server's sandbox plan is shown, with the server's own grant from its block.
    assert!(out.contains("sandbox for `fs`: landlock"), "{out}");
    assert!(out.contains("write /tmp/airlock-fixture"), "{out}");
    assert!(out.contains("network: none"), "{out}");
    assert!(
        !out.contains("read  /home"),
        "the real home is never granted: {out}"
    );
    // The per-server config layer shows up with its origin.
    assert!(out.contains("tools.deny \"delete_*\""), "{out}");
    assert!(out.trim_end().ends_with("OK"), "{out}");
    // The system paths every server gets alike are on one line; `--full` lists each of them.
    assert!(
        out.contains(" paths every server gets alike, where this host has them ("),
        "{out}"
    );
    assert!(!out.contains("(HOME); missing"), "made at start: {out}");
    assert!(out.contains("the devices /dev/null (read-write)"), "{out}");
    assert!(!out.contains("/etc/ld.so.cache"), "{out}");
    let full = scratch.airlock(&["check", "--full", "--config", &fixture("airlock.toml")]);
    let full = stdout(&full);
    assert!(
        full.contains("read  /etc/ld.so.cache  (dynamic linker cache;"),
        "{full}"
    );
    assert!(full.contains("write /dev/null  (device;"), "{full}");
    assert!(!full.contains("every server gets alike"), "{full}");
    assert!(full.contains("write /tmp/airlock-fixture"), "{full}");
}

#[test]
fn check_refuses_a_server_outside_the_allowlist_with_the_fix() {
    let scratch = Scratch::new();
    let config = scratch.write(
        "airlock.toml",
        "[servers.shell]\ncommand = \"sh\"\nargs = [\"-c\", \"echo hi\"]\n",
    );
    let output = scratch.airlock(&["check", "--config", config.to_str().unwrap()]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(2), "{out}");
    assert!(out.contains("REFUSED: server \"shell\": /"), "{out}");
    assert!(
        out.contains("add `trust = true` to [servers.shell]"),
        "{out}"
    );

    // With trust = true it may launch, unless the org forbids trust.
    scratch.write(
        "airlock.toml",
        "[servers.shell]\ncommand = \"sh\"\ntrust = true\n",
    );
    assert_eq!(
        scratch
            .airlock(&["check", "--config", config.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    scratch.write(
        "org/policy.toml",
        "version = 1\n[launch]\nallow_trust = false\n",
    );
    let output = scratch.airlock(&["check", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stdout(&output).contains("forbids trust"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn check_exits_2_with_file_line_column_and_fix_for_a_bad_config() {
    let scratch = Scratch::new();
    let config = scratch.write(
        "airlock.toml",
        "[servers.fs]\ncommand = \"npx\"\ntool_timeout = 9000\n",
    );
    let output = scratch.airlock(&["check", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&format!("{}:3:16:", config.display())),
        "{err}"
    );
    assert!(
        err.contains("fix: use whole seconds from 1 to 600"),
        "{err}"
    );
    assert!(
        stdout(&output).is_empty(),
        "nothing on stdout for a load error"
    );
}

#[test]
fn check_exits_2_when_a_project_policy_tries_to_widen() {
    let scratch = Scratch::new();
    let project = scratch.write(
        "project/.airlock/policy.toml",
        "version = 1\n[sandbox]\nnetwork = \"host\"\n",
    );
    let output = scratch.airlock(&["check"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&format!("{}:3:11:", project.display())),
        "{err}"
    );
    assert!(err.contains("may only narrow"), "{err}");
}

#[test]
fn check_names_both_files_when_a_lock_is_violated() {
    let scratch = Scratch::new();
    let org = scratch.write(
        "org/policy.d/10-net.toml",
        "version = 1\n[sandbox]\nlocked = true\nnetwork = \"none\"\n",
    );
    let user = scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[sandbox]\nnetwork = [443]\n",
    );
    let output = scratch.airlock(&["check"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&user.display().to_string()) && err.contains(&org.display().to_string()),
        "{err}"
    );
}

#[test]
fn check_loads_an_mcp_servers_json_file() {
    let scratch = Scratch::new();
    let output = scratch.airlock(&["check", "--config", &fixture("claude_desktop_config.json")]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}\n{}", stderr(&output));
    assert!(out.contains("filesystem [stdio]"), "{out}");
    assert!(out.contains("remote [sse]"), "{out}");
    assert!(
        stderr(&output).contains("autoApprove"),
        "unknown host keys are warned about"
    );
}

#[test]
fn explain_prints_decision_rule_and_layer() {
    let scratch = Scratch::new();
    let user = scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__write_file\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/tmp/\"\nnegate = true\n",
    );
    let output = scratch.airlock(&[
        "explain",
        "mcp:fs__write_file",
        r#"{"path":"/tmp/../etc/passwd"}"#,
    ]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(out.contains("decision: deny"), "{out}");
    assert!(!out.contains("sandbox:"), "{out}");
    assert!(
        out.contains("tools.rule deny \"mcp:fs__write_file\" when path not prefix \"/tmp/\""),
        "{out}"
    );
    assert!(
        out.contains(&format!("layer:    user ({}:2)", user.display())),
        "{out}"
    );

    let output = scratch.airlock(&[
        "explain",
        "mcp__fs__write_file",
        r#"{"path":"/tmp/notes.md"}"#,
    ]);
    let out = stdout(&output);
    assert!(
        out.contains("decision: allow") && out.contains("tools.default"),
        "{out}"
    );
    assert!(out.contains("layer:    builtin"), "{out}");
    // An allow is the policy's word on the call, not on what the server may touch.
    assert!(
        out.contains("sandbox:  this is the policy's decision"),
        "{out}"
    );
}

#[test]
fn explain_uses_presets_and_per_server_config_blocks() {
    let scratch = Scratch::new();
    let output = scratch.airlock(&["explain", "--policy", "strict", "mcp:web__fetch"]);
    assert!(
        stdout(&output).contains("decision: ask"),
        "{}",
        stdout(&output)
    );
    let output = scratch.airlock(&[
        "explain",
        "--config",
        &fixture("airlock.toml"),
        "mcp:fs__delete_file",
    ]);
    let out = stdout(&output);
    assert!(
        out.contains("decision: deny") && out.contains("layer:    config"),
        "{out}"
    );
}

/// `explain` reads a path argument the way the server will (relative to its working directory,
/// `~` as its HOME, `file:` URLs, percent-encoding, any case of the key) and shows each reading.
#[test]
fn explain_shows_how_each_path_argument_was_read() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.path("project")).unwrap();
    scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__read_file\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/etc/\"\n",
    );
    let cases = [
        (
            r#"{"Path":"../../../../../../etc/passwd"}"#,
            "-> /etc/passwd (as written, relative to the server's working directory): meets the rule",
        ),
        (
            r#"{"path":"file:///etc%2Fpasswd"}"#,
            "-> /etc/passwd (file: URL, percent-decoded): meets the rule",
        ),
        (
            // Deeper than any temp HOME: `..` at `/` stays at `/`.
            r#"{"path":"~/../../../../../../../../../../../../../../etc/passwd"}"#,
            "~ = the server's HOME): meets the rule",
        ),
        (
            r#"{"path":"/tmp/a","PATH":"/etc/passwd"}"#,
            "ambiguous: 2 keys read as `path`",
        ),
    ];
    for (arguments, shown) in cases {
        let output = scratch.airlock(&[
            "explain",
            "mcp:fs__read_file",
            arguments,
            "--cwd",
            "/data/notes",
        ]);
        let out = stdout(&output);
        assert_eq!(output.status.code(), Some(0), "{out}\n{}", stderr(&output));
        assert!(out.contains("decision: deny"), "{arguments}: {out}");
        assert!(out.contains(shown), "{arguments}: {out}");
    }
    let fine = scratch.airlock(&[
        "explain",
        "mcp:fs__read_file",
        r#"{"path":"todo.md"}"#,
        "--cwd",
        "/data/notes",
    ]);
    let out = stdout(&fine);
    assert!(out.contains("decision: allow"), "{out}");
    assert!(out.contains("\"todo.md\" -> /data/notes/todo.md"), "{out}");
}

/// Several rules condition one argument: explain shows the reading of the rule that decided,
/// and beside it how each other rule read the value, each under its own rule. And it says that a
/// call is forwarded only for a name the server listed byte for byte.
#[test]
fn explain_shows_the_deciding_rules_reading_and_that_names_must_be_listed() {
    let scratch = Scratch::new();
    scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[tools]\ndefault = \"deny\"\n[[tools.rule]]\ntool = \"mcp:fs__read_file\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/etc/\"\n[[tools.rule]]\ntool = \"mcp:fs__read_file\"\naction = \"allow\"\nargument = \"path\"\nprefix = \"/tmp/\"\n",
    );
    let allow = "tools.rule allow \"mcp:fs__read_file\" when path prefix \"/tmp/\"";
    let deny = "tools.rule deny \"mcp:fs__read_file\" when path prefix \"/etc/\"";
    for (arguments, decision, first, second) in [
        (r#"{"path":"/tmp/x"}"#, "allow", allow, deny),
        (r#"{"path":"/tmp/../etc/x"}"#, "deny", deny, allow),
    ] {
        let output = scratch.airlock(&["explain", "mcp:fs__read_file", arguments]);
        let out = stdout(&output);
        assert_eq!(output.status.code(), Some(0), "{out}\n{}", stderr(&output));
        assert!(
            out.contains(&format!("decision: {decision}\nrule:     {first}\n")),
            "{out}"
        );
        let decided = out
            .find(&format!("  decided by {first}:\n"))
            .unwrap_or_else(|| panic!("no deciding reading: {out}"));
        let also = out
            .find(&format!("  also {second}:\n"))
            .unwrap_or_else(|| panic!("no other reading: {out}"));
        assert!(decided < also, "{out}");
        // The deciding rule's reading meets it; the other rule's does not.
        let deciding_part = &out[decided..also];
        assert!(deciding_part.contains(": meets the rule"), "{out}");
        assert!(!deciding_part.contains("does not meet"), "{out}");
        assert!(out[also..].contains(": does not meet the rule"), "{out}");
    }
    let output = scratch.airlock(&["explain", "mcp:lax__WRITE_FILE"]);
    let out = stdout(&output);
    assert!(
        out.contains(
            "listing:  at run time a call is forwarded only when the server listed the name \"WRITE_FILE\" byte for byte"
        ),
        "{out}"
    );
}

#[test]
fn explain_rejects_bad_input_with_exit_2() {
    let scratch = Scratch::new();
    for args in [
        vec!["explain", "fs__read"],
        vec!["explain", "mcp:fs"],
        vec!["explain", "mcp:fs__*"],
        vec!["explain", "mcp:fs__read", "{not json"],
        vec!["explain", "mcp:fs__read", "[1]"],
    ] {
        let output = scratch.airlock(&args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).is_empty());
    }
}

#[test]
fn every_command_has_an_example_in_its_help() {
    let scratch = Scratch::new();
    for command in ["check", "explain"] {
        let output = scratch.airlock(&[command, "--help"]);
        assert!(
            stdout(&output).contains("Example"),
            "{command} --help lacks an example"
        );
    }
}

/// npm's registry as npm's configuration names it (`host:443`), read at test time.
fn npm_registry(scratch: &Scratch) -> String {
    let out = Command::new("npm")
        .args(["config", "get", "registry"])
        .env("HOME", scratch.path("home"))
        .env("npm_config_cache", scratch.path("npm-scratch"))
        .output()
        .unwrap();
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let host = url
        .split("://")
        .nth(1)
        .unwrap()
        .split(['/', ':'])
        .next()
        .unwrap();
    format!("{host}:443")
}

/// A first start's install step reaches the registry whatever the server's own network rule:
/// check, doctor and `explain net:` say so, with the registry read from npm's configuration.
#[test]
fn check_doctor_and_explain_net_name_what_the_install_step_reaches() {
    let scratch = Scratch::new();
    let config = scratch.write(
        "project/airlock.toml",
        "[servers.mem]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory\"]\n",
    );
    let config = config.display().to_string();
    let registry = npm_registry(&scratch);
    let expected = format!(
        "installs @modelcontextprotocol/server-memory with npx in its own sandbox, which may reach {registry} "
    );
    let check = scratch.airlock(&["check", "--config", &config]);
    let text = stdout(&check);
    assert!(check.status.success(), "{text}{}", stderr(&check));
    assert!(
        text.contains(&format!("install  the first start {expected}")),
        "{text}"
    );
    let doctor = scratch.airlock(&["doctor", "--config", &config]);
    let text = stdout(&doctor);
    assert!(
        text.contains(&format!("install: the first start {expected}")),
        "{text}"
    );
    let explain = scratch.airlock(&["explain", "net:mem", &registry, "--config", &config]);
    let text = stdout(&explain);
    assert!(
        text.contains("decision: deny") && text.contains(&expected),
        "the server itself is refused, its install step is not: {text}"
    );
    assert!(
        !scratch.path("home/.npm").exists(),
        "reading the configuration wrote npm's cache"
    );
}

#[test]
fn explain_net_and_check_say_what_each_server_can_reach() {
    let scratch = Scratch::new();
    scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[sandbox]\nnetwork = { allow = [\"api.github.com\", \"10.1.2.3:5432\"] }\n",
    );
    let config = scratch.write(
        "project/airlock.toml",
        "[servers.gh]\ncommand = \"node\"\nargs = [\"server.js\"]\n[servers.gh.sandbox]\nnetwork = { allow = [\"*.githubusercontent.com\"] }\n",
    );
    let config = config.display().to_string();
    let ask = |server: &str, target: &str| {
        let out = scratch.airlock(&[
            "explain",
            &format!("net:{server}"),
            target,
            "--config",
            &config,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let allowed = ask("gh", "api.github.com:443");
    assert!(allowed.contains("decision: allow"), "{allowed}");
    assert!(
        allowed.contains("sandbox.network allow \"api.github.com\" (user"),
        "{allowed}"
    );
    let below = ask("gh", "raw.githubusercontent.com");
    assert!(
        below.contains("decision: allow") && below.contains("airlock.toml"),
        "{below}"
    );
    let other = ask("other", "raw.githubusercontent.com:443");
    assert!(
        other.contains("decision: deny") && other.contains("does not resolve"),
        "{other}"
    );
    let port = ask("gh", "api.github.com:22");
    assert!(
        port.contains("decision: deny") && port.contains("port 22"),
        "{port}"
    );
    let address = ask("gh", "10.1.2.3:5432");
    assert!(
        address.contains("decision: allow") && address.contains("private"),
        "{address}"
    );
    let bad = scratch.airlock(&["explain", "net:gh", "x:0"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));

    let check = scratch.airlock(&["check", "--config", &config]);
    let text = stdout(&check);
    assert!(text.contains("network allow"), "{text}");
    assert!(
        text.contains("reaches every name below githubusercontent.com on ports 80, 443"),
        "{text}"
    );
    assert!(
        text.contains("reaches address 10.1.2.3 on port 5432"),
        "{text}"
    );

    let doctor = scratch.airlock(&["doctor", "--config", &config]);
    let text = stdout(&doctor);
    assert!(doctor.status.success(), "{text}{}", stderr(&doctor));
    let section = text
        .split("what each server can reach")
        .nth(1)
        .unwrap_or_else(|| panic!("no reach section: {text}"));
    assert!(section.contains("gh: only its allow list"), "{section}");
    assert!(
        section.contains("reaches every name below githubusercontent.com on ports 80, 443"),
        "{section}"
    );
    assert!(
        section.contains("reaches api.github.com on ports 80, 443"),
        "{section}"
    );
}

/// Without `--config`, `check` checks the config `serve` would load (`./airlock.toml`), so a
/// checked setup is one the gateway starts; with none there, it says so.
#[test]
fn check_without_config_checks_what_serve_would_load() {
    let scratch = Scratch::new();
    let none = scratch.airlock(&["check"]);
    assert_eq!(none.status.code(), Some(0), "{}", stderr(&none));
    assert!(
        stdout(&none).contains("no server config checked (none at airlock.toml"),
        "{}",
        stdout(&none)
    );
    let config = scratch.write(
        "project/airlock.toml",
        "[servers.fs]\ncommand = \"npx\"\ntimout = 5\n",
    );
    let output = scratch.airlock(&["check"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(err.contains("airlock.toml:3:1:"), "{err}");
    assert!(err.contains("did you mean"), "{err}");
    std::fs::write(&config, "[servers.fs]\ncommand = \"npx\"\n").unwrap();
    let fixed = scratch.airlock(&["check"]);
    assert!(
        stdout(&fixed).contains("/project/airlock.toml: 1)"),
        "{}",
        stdout(&fixed)
    );
}

/// A policy path naming an unset variable is an error with the file and line, in `check` as at
/// launch: a grant is not silently dropped, and the audit log does not land somewhere else.
#[test]
fn check_refuses_policy_paths_that_name_an_unset_variable() {
    let scratch = Scratch::new();
    let policy = scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[audit]\npath = \"${env:AIRLOCK_TEST_UNSET}/audit.jsonl\"\n",
    );
    let output = scratch.airlock(&["check"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(
        err.contains(&format!("{}:3", policy.display()))
            && err.contains("AIRLOCK_TEST_UNSET is not set")
            && err.contains("fix:"),
        "{err}"
    );
    scratch.write(
        "xdg/airlock/policy.toml",
        "version = 1\n[sandbox]\nread = [\"${env:AIRLOCK_TEST_UNSET}/docs\"]\n",
    );
    let output = scratch.airlock(&["check", "--trust", "/bin/true"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(2), "{out}");
    assert!(
        out.contains("names a variable that is not set") && out.contains("policy.toml:3"),
        "{out}"
    );
}

/// The organisation's policy directory is never granted, even while it holds no policy: a file a
/// server wrote there would be the org policy of every later start.
#[test]
fn the_org_policy_directory_is_never_granted_even_empty() {
    let scratch = Scratch::new();
    let org = scratch.path("org");
    let output = scratch.airlock(&[
        "check",
        "--trust",
        "--allow-write",
        org.to_str().unwrap(),
        "/bin/true",
    ]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(2), "{out}\n{}", stderr(&output));
    assert!(
        out.contains("would expose the organisation's policy directory"),
        "{out}\n{}",
        stderr(&output)
    );
}

/// A one-underscore name is read against the servers of the config `serve` would load; without
/// one, explain says what is missing instead of calling the name a wildcard. `explain net:` names
/// a server the config does not declare.
#[test]
fn explain_reads_one_underscore_names_against_serves_config() {
    let scratch = Scratch::new();
    let lost = scratch.airlock(&["explain", "mcp:fs_write_file"]);
    assert_eq!(lost.status.code(), Some(2));
    assert!(
        stderr(&lost).contains("does not say where the server's name ends")
            && stderr(&lost).contains("pass --config FILE"),
        "{}",
        stderr(&lost)
    );
    scratch.write("project/airlock.toml", "[servers.fs]\ncommand = \"npx\"\n");
    let found = scratch.airlock(&["explain", "mcp:fs_write_file"]);
    assert_eq!(found.status.code(), Some(0), "{}", stderr(&found));
    assert!(stdout(&found).contains("decision"), "{}", stdout(&found));
    let net = scratch.airlock(&["explain", "net:nosuch", "example.org"]);
    let declared = format!("in {};", scratch.path("project/airlock.toml").display());
    assert!(stdout(&net).contains(&declared), "{}", stdout(&net));
}

/// A host's JSON config gets its fixes in JSON (`"command": "npx"`), a TOML one in TOML.
#[test]
fn fixes_are_written_in_the_config_files_own_syntax() {
    let scratch = Scratch::new();
    let json = scratch.write(
        "host.json",
        "{\"mcpServers\": {\"a\": {\"comand\": \"npx\", \"args\": [\"x\"]}}}\n",
    );
    let output = scratch.airlock(&["check", "--config", json.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("add `\"command\": \"npx\"`"),
        "{}",
        stderr(&output)
    );
    let toml = scratch.write("airlock.toml", "[servers.a]\nargs = [\"x\"]\n");
    let output = scratch.airlock(&["check", "--config", toml.to_str().unwrap()]);
    assert!(
        stderr(&output).contains("add `command = \"npx\"`"),
        "{}",
        stderr(&output)
    );
}

/// `check` loads `[http]` as `serve` does: what `serve` would refuse, `check` refuses, with the
/// same position; a listener exposed without authentication too.
#[test]
fn check_refuses_the_http_section_serve_would_refuse() {
    let server = "[servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"]\n";
    for (http, line, column, says) in [
        ("[http.auth]\ntoken = true\n", 6, 1, "unknown field `token`"),
        ("[http]\nrate_limit = \"100/s\"\n", 6, 14, "invalid type"),
        ("[http]\nlisten = \"0.0.0.0\"\n", 6, 10, "0.0.0.0"),
    ] {
        let scratch = Scratch::new();
        let config = scratch.write("airlock.toml", &format!("{server}\n{http}"));
        let output = scratch.airlock(&["check", "--config", config.to_str().unwrap()]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{http}: {err}");
        let at = format!("{}:{line}:{column}:", config.display());
        assert!(err.contains(&at), "{http}: {at} in {err}");
        assert!(err.contains(says), "{http}: {err}");
    }
    let scratch = Scratch::new();
    let config = scratch.write(
        "airlock.toml",
        &format!("{server}\n[http]\nlisten = \"0.0.0.0:8080\"\n"),
    );
    let output = scratch.airlock(&["check", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("fix:"), "{}", stderr(&output));
    let config = scratch.write(
        "airlock.toml",
        &format!("{server}\n[http]\nlisten = \"127.0.0.1:8080\"\n[http.auth]\ntokens = true\n"),
    );
    let output = scratch.airlock(&["check", "--config", config.to_str().unwrap()]);
    let out = stdout(&output);
    assert!(out.contains("listen               127.0.0.1:8080"), "{out}");
    assert!(out.contains("does not exist yet"), "{out}");
}

/// A misspelt preset is told what was meant, not only that no such file exists.
#[test]
fn a_misspelt_preset_gets_a_did_you_mean() {
    let scratch = Scratch::new();
    let output = scratch.airlock(&["check", "--policy", "strictt"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("policy file not found"), "{err}");
    assert!(err.contains("did you mean `strict`?"), "{err}");
}
