//! Footguns around server names, through the real binary: the one-underscore spelling
//! (`mcp:fixture_pid`) reaches the tool it means in both session modes; ambiguous spellings,
//! undeclared servers and misspelt keys are caught by `check` (asserted on its output), and
//! `explain` says how it read the call and when a server is not declared.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::process::Output;

use serde_json::json;
use support::{Client, Mode, Setup, start};

both_modes!(a_one_underscore_deny_reaches_the_tool_it_means);

/// `deny = ["mcp:fixture_pid"]` was a whole-server pattern for a server named `fixture_pid`,
/// which denied nothing. With the server named `fixture` (run: `--name`; serve: the config), it
/// is read as `mcp:fixture__pid`.
fn a_one_underscore_deny_reaches_the_tool_it_means(mode: Mode) {
    let setup = Setup::fixture("").policy("[tools]\ndeny = [\"mcp:fixture_pid\"]");
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let denied = client.call(7, &world.tool("pid"), json!({}));
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(
        Client::text(&denied).contains("mcp:fixture_pid"),
        "{denied}"
    );
    let allowed = client.call(8, &world.tool("echo"), json!({"text": "still here"}));
    assert!(Client::text(&allowed).contains("still here"), "{allowed}");
}

both_modes!(a_rule_for_a_misspelt_server_is_pointed_out_at_start);

/// `deny = ["mcp:fixtur__pid"]` beside a server named `fixture` does nothing: a deny the user
/// meant falls away and the call runs. Both modes say so at start, with the rule's place and the
/// name it was likely meant for (`run` with `--name` too, where rules naming only other servers
/// are not pointed out); a rule for a server whose name is nothing like any here stays quiet, as
/// a policy shared by many hosts names servers a session does not run.
fn a_rule_for_a_misspelt_server_is_pointed_out_at_start(mode: Mode) {
    let setup = Setup::fixture("")
        .policy("[tools]\ndeny = [\"mcp:fixtur__pid\", \"mcp:github__delete_repo\"]");
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let ran = client.call(7, &world.tool("pid"), json!({}));
    assert_ne!(ran["result"]["isError"], true, "{ran}");
    client.close_stdin();
    assert!(client.wait(std::time::Duration::from_secs(20)).is_some());
    let stderr = client.stderr();
    let policy = world.path("policy.toml").display().to_string();
    let said = stderr
        .lines()
        .find(|line| line.contains("names server \"fixtur\""))
        .unwrap_or_else(|| panic!("no warning: {stderr}"));
    assert!(
        said.contains(&format!("{policy}:"))
            && said.contains(":9: tools.deny \"mcp:fixtur__pid\" names server \"fixtur\", which is not one here: did you mean \"fixture\"? A rule for a server that is not here does nothing"),
        "{said}"
    );
    assert!(
        !stderr.contains("\"github\", which is not one here"),
        "{stderr}"
    );
}

/// A throwaway HOME with a config and a user policy.
struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new(config: &str, policy: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("servers.json"), config).unwrap();
        std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
        Case { dir }
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn airlock(&self, args: &[&str]) -> Output {
        std::process::Command::new(support::AIRLOCK)
            .args(args)
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.dir.path().join("org"))
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    fn check(&self) -> (Option<i32>, String, String) {
        let policy = self.file("policy.toml");
        let config = self.file("servers.json");
        let out = self.airlock(&["check", "--config", &config, "--policy", &policy]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn explain(&self, call: &str, with_config: bool) -> String {
        let policy = self.file("policy.toml");
        let config = self.file("servers.json");
        let mut args = vec!["explain", call, "--policy", &policy];
        if with_config {
            args.extend(["--config", &config]);
        }
        let out = self.airlock(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

const SERVERS: &str = r#"{"mcpServers": {
  "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
  "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]}
}}"#;

#[test]
fn check_shows_how_patterns_read_and_warns_about_undeclared_servers() {
    let case = Case::new(
        SERVERS,
        "version = 1\n[tools]\ndeny = [\"mcp:fs_write_file\", \"mcp:filesytem__delete\"]\nask = [\"mcp:github\"]\n",
    );
    let (code, stdout, stderr) = case.check();
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("covers tool \"write_file\" of server \"fs\" (read as mcp:fs__write_file: \"fs\" is a server here and none is named \"fs_write_file\")"),
        "{stdout}"
    );
    assert!(
        stdout.contains("covers every tool of server \"github\""),
        "{stdout}"
    );
    let policy = case.file("policy.toml");
    assert!(
        stderr.contains(&format!("{policy}:3:30: tools.deny \"mcp:filesytem__delete\" names server \"filesytem\", which no loaded config declares (did you mean \"filesystem\"?)")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{policy}:4:8: tools.ask \"mcp:github\" names server \"github\", which no loaded config declares (declared: \"fs\", \"filesystem\")")),
        "{stderr}"
    );
    assert!(
        !stderr.contains("fs_write_file\" names"),
        "the re-read pattern is declared: {stderr}"
    );
}

#[test]
fn an_ambiguous_deny_is_a_load_error_naming_both_readings() {
    let servers = r#"{"mcpServers": {"fs": {"command": "npx"}, "fs_write": {"command": "npx"}}}"#;
    let case = Case::new(
        servers,
        "version = 1\n[tools]\ndeny = [\"mcp:fs_write_file\"]\n",
    );
    let (code, _, stderr) = case.check();
    assert_eq!(code, Some(2), "{stderr}");
    let policy = case.file("policy.toml");
    assert!(stderr.contains(&format!("{policy}:3:9: tools.deny \"mcp:fs_write_file\" can be read as mcp:fs__write_file (tool \"write_file\" of server \"fs\") or mcp:fs_write__file (tool \"file\" of server \"fs_write\")")), "{stderr}");
    assert!(stderr.contains("fix: write the one you mean, with `__` between server and tool: mcp:fs__write_file or mcp:fs_write__file"), "{stderr}");
}

#[test]
fn every_error_of_a_file_is_reported_with_a_did_you_mean_for_typos() {
    let case = Case::new(
        SERVERS,
        "version = 1\n[tools]\nalow = [\"mcp:fs\"]\ndeny = [\"fs__read\"]\n[sandbx]\nread = []\n",
    );
    let (code, _, stderr) = case.check();
    assert_eq!(code, Some(2), "{stderr}");
    let policy = case.file("policy.toml");
    assert!(
        stderr.contains(&format!("{policy}:3:1: unknown field `alow`")),
        "{stderr}"
    );
    assert!(stderr.contains("fix: did you mean `allow`?"), "{stderr}");
    assert!(
        stderr.contains(&format!("{policy}:5:2: unknown field `sandbx`")),
        "{stderr}"
    );
    assert!(stderr.contains("fix: did you mean `sandbox`?"), "{stderr}");

    // Once the keys are right, every bad value of the file is reported, not only the first.
    std::fs::write(
        case.dir.path().join("policy.toml"),
        "version = 1\n[tools]\ndeny = [\"fs__read\", \"mcp:a b\"]\n[sandbox]\nread = [\"relative\"]\n",
    )
    .unwrap();
    let (code, _, stderr) = case.check();
    assert_eq!(code, Some(2));
    for at in [":3:9:", ":3:21:", ":5:9:"] {
        assert!(
            stderr.contains(&format!("{policy}{at}")),
            "{at} missing: {stderr}"
        );
    }
}

/// A bad rule of `[[tools.rule]]` does not hide the checks of the others: each rule's problem is
/// reported in the same run, whether it is a bad key or value or a bad combination.
#[test]
fn every_bad_rule_of_an_array_of_rules_is_reported_at_once() {
    let rule = |body: &str| format!("[[tools.rule]]\ntool = \"mcp:fs__read\"\n{body}\n");
    let text = [
        "version = 1\n".to_string(),
        rule("action = \"forbid\"\nargument = \"path\"\nprefix = \"/x\""),
        rule("action = \"deny\"\nargument = \"path\"\nprefix = \"rel/\""),
        rule("action = \"deny\"\nargument = \"path\"\nprefix = \"/x\"\nregex = \"^a\""),
        rule("action = \"deny\"\nargument = \"path\"\nprefx = \"/x\""),
    ]
    .concat();
    let case = Case::new(SERVERS, &text);
    let (code, _, stderr) = case.check();
    assert_eq!(code, Some(2), "{stderr}");
    let policy = case.file("policy.toml");
    assert_reported(
        &stderr,
        &policy,
        &[
            ("4:10", "unknown variant `forbid`"),
            ("11:10", "`prefix` \"rel/\" is relative"),
            ("12:1", "needs exactly one of `glob`, `regex`, `prefix`"),
            ("22:1", "unknown field `prefx`"),
        ],
    );
    assert!(
        !stderr.contains("missing field `prefix`"),
        "a knock-on of the typo: {stderr}"
    );
}

/// Asserts `stderr` reports each of `(position, text)` as `file:position: ...text...`.
fn assert_reported(stderr: &str, file: &str, expected: &[(&str, &str)]) {
    for (at, text) in expected {
        let line = stderr.lines().find(|line| {
            line.starts_with(&format!("{file}:{at}:")) || line.contains(&format!(" {file}:{at}:"))
        });
        assert!(
            line.is_some_and(|line| line.contains(text)),
            "{file}:{at}: {text} missing: {stderr}"
        );
    }
}

#[test]
fn every_error_of_a_config_file_is_reported_toml_and_json_alike() {
    let toml = "[servers.a]\nargs = [\"x\"]\n[servers.b]\nurl = \"notaurl\"\ncommand = \"npx\"\n\
                [servers.c]\ncommand = \"npx\"\ntransport = \"grpc\"\n[servers.d]\ncommand = \"npx\"\ntimout = 3\n";
    let case = Case::new(toml, "version = 1\n");
    let config = case.file("servers.json");
    let (code, stdout, stderr) = case.check();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_reported(
        &stderr,
        &config,
        &[
            ("1:10", "server \"a\" has neither `command` nor `url`"),
            ("4:7", "server \"b\" mixes transports"),
            ("8:13", "server \"c\": unknown transport \"grpc\""),
            ("11:1", "unknown field `timout`"),
        ],
    );
    assert!(
        stderr.contains("fix: did you mean `startup_timeout`, `tool_timeout` or `idle_timeout`?"),
        "{stderr}"
    );

    let json = r#"{"mcpServers": {"a": {"comand": "npx"}, "b": {"command": 5}, "c": {"command": "npx", "args": "x"}}}"#;
    std::fs::write(case.dir.path().join("servers.json"), json).unwrap();
    let (code, _, stderr) = case.check();
    assert_eq!(code, Some(2), "{stderr}");
    assert_reported(
        &stderr,
        &config,
        &[
            ("1:17", "server \"a\" has neither `command` nor `url`"),
            ("1:41", "server \"b\": `command` must be a string"),
            ("1:62", "server \"c\": `args` must be an array of strings"),
        ],
    );
    assert!(
        stderr.contains("the entry's key \"comand\": did you mean \"command\"?"),
        "{stderr}"
    );
}

#[test]
fn a_bad_key_or_value_of_a_policy_hides_none_of_the_others() {
    let case = Case::new(
        SERVERS,
        "version = 1\n[sandbox]\nnetwork = \"sometimes\"\nread = [\"relative/path\"]\n\
         write = [\"rel2\"]\nkill_timeout = -1\n[tools]\ndeny = [\"nope\"]\n",
    );
    let policy = case.file("policy.toml");
    let (code, _, stderr) = case.check();
    assert_eq!(code, Some(2), "{stderr}");
    assert_reported(
        &stderr,
        &policy,
        &[
            ("3:11", "`network` must be"),
            ("4:9", "`sandbox.read` path \"relative/path\" is relative"),
            ("5:10", "`sandbox.write` path \"rel2\" is relative"),
            ("6:16", "`sandbox.kill_timeout` = -1 is out of range"),
            ("8:9", "tool pattern \"nope\""),
        ],
    );

    // An unknown key does not hide a bad value.
    std::fs::write(
        case.dir.path().join("policy.toml"),
        "version = 1\n[tools]\nalow = [\"mcp:fs\"]\ndeny = [\"nope\"]\n",
    )
    .unwrap();
    let (code, _, stderr) = case.check();
    assert_eq!(code, Some(2), "{stderr}");
    assert_reported(
        &stderr,
        &policy,
        &[
            ("3:1", "unknown field `alow`"),
            ("4:9", "tool pattern \"nope\""),
        ],
    );
}

#[test]
fn explain_reads_the_call_like_the_policy_and_names_undeclared_servers() {
    let case = Case::new(
        SERVERS,
        "version = 1\n[tools]\ndeny = [\"mcp:fs_write_file\"]\n",
    );
    // The issue's example: this said allow.
    let out = case.explain("mcp:fs__write_file", true);
    assert!(out.contains("decision: deny"), "{out}");
    assert!(out.contains("read as mcp:fs__write_file"), "{out}");
    // The spelling people write is read the same way.
    let out = case.explain("mcp:fs_write_file", true);
    assert!(
        out.contains("reading:  mcp:fs_write_file read as mcp:fs__write_file"),
        "{out}"
    );
    assert!(out.contains("decision: deny"), "{out}");
    // Without a config, as `airlock run --name fs` would read it.
    let out = case.explain("mcp:fs__write_file", false);
    assert!(
        out.contains("decision: deny") && out.contains("airlock run --name fs"),
        "{out}"
    );
    // A server no config declares.
    let out = case.explain("mcp:filesytem__write_file", true);
    assert!(
        out.contains("note:     no server \"filesytem\" is declared in")
            && out.contains("did you mean \"filesystem\"?"),
        "{out}"
    );
}
