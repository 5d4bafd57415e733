//! airlock's own log: no escape codes when stderr is a file (colour only on a terminal, never with
//! NO_COLOR), one JSON object a line with `--log-format json`, and every warning about a file
//! names its line and column.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self) -> Command {
        let mut command = Command::new(AIRLOCK);
        command
            .current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("XDG_STATE_HOME", self.path().join("state"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.path().join("org"));
        command
    }

    /// A Claude-style config with a misspelt key and an unset variable: two warnings.
    fn config_with_warnings(&self) -> PathBuf {
        let path = self.path().join("claude.json");
        std::fs::write(
            &path,
            "{\n  \"mcpServers\": {\n    \"x\": {\n      \"comand\": \"y\",\n      \"command\": \"npx\",\n      \"env\": {\"T\": \"${env:UNSET_FOR_TEST}\"}\n    }\n  }\n}\n",
        )
        .unwrap();
        path
    }
}

#[test]
fn warnings_written_to_a_file_have_no_escape_codes_and_say_where() {
    let home = Home::new();
    let config = home.config_with_warnings();
    let log = home.path().join("stderr.log");
    let status = home
        .command()
        .args(["check", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    assert!(status.code().is_some());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains('\u{1b}'),
        "escape codes in a log file: {text:?}"
    );
    let at = config.display().to_string();
    assert!(
        text.contains(&format!("{at}:4:7: server \"x\": key \"comand\" is not used by airlock (ignored); did you mean \"command\"?")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{at}:6:7: server \"x\"")) && text.contains("UNSET_FOR_TEST"),
        "{text}"
    );
}

fn on_a_terminal(home: &Home, config: &Path, no_color: Option<&str>) -> String {
    // `script` gives airlock a pseudo-terminal as stderr, as an interactive shell would.
    let line = format!("{AIRLOCK} check --config {} >/dev/null", config.display());
    let mut script = Command::new("script");
    script
        .args(["-qec", &line, "/dev/null"])
        .current_dir(home.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("AIRLOCK_ORG_POLICY_DIR", home.path().join("org"))
        .env("TERM", "xterm");
    if let Some(value) = no_color {
        script.env("NO_COLOR", value);
    }
    let out = script.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let installed = Command::new("sh")
        .args(["-c", "command -v script"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        assert!(
            std::env::var_os("CI").is_none(),
            "script (util-linux) is needed"
        );
        eprintln!("skipped: no `script` to make a terminal");
        return;
    }
    let home = Home::new();
    let config = home.config_with_warnings();
    let coloured = on_a_terminal(&home, &config, None);
    assert!(
        coloured.contains("WARN") && coloured.contains('\u{1b}'),
        "{coloured:?}"
    );
    let plain = on_a_terminal(&home, &config, Some("1"));
    assert!(
        plain.contains("WARN") && !plain.contains('\u{1b}'),
        "{plain:?}"
    );
    // An empty NO_COLOR does not count (no-color.org).
    let empty = on_a_terminal(&home, &config, Some(""));
    assert!(empty.contains('\u{1b}'), "{empty:?}");
}

#[test]
fn json_log_format_is_one_object_a_line_with_the_position() {
    let home = Home::new();
    let config = home.config_with_warnings();
    let out = home
        .command()
        .args(["--log-format", "json", "check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let events: Vec<Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line:?}")))
        .collect();
    assert_eq!(events.len(), 2, "{stderr}");
    for event in &events {
        assert_eq!(event["level"], "WARN");
        assert!(event["timestamp"].is_string());
        assert!(
            event["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{}:", config.display()))
        );
    }
    // The final error of a failed command is one more JSON line, with the exit code.
    let out = home
        .command()
        .args(["check", "--log-format", "json", "--config"])
        .arg(home.path().join("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let line: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(line["level"], "ERROR");
    assert_eq!(line["exit_code"], 2);
    assert!(line["message"].as_str().unwrap().contains("missing.toml"));
}

#[test]
fn a_run_session_logged_to_a_file_has_no_escape_codes() {
    let home = Home::new();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp");
    let policy = home.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
            fixtures.display()
        ),
    )
    .unwrap();
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap().trim().to_string();
    let log = home.path().join("run.log");
    let status = home
        .command()
        .env("AIRLOCK_LOG", "info")
        .args(["run", "--name", "echo", "--policy"])
        .arg(&policy)
        .arg("--")
        .arg(python)
        .arg(fixtures.join("echo_server.py"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    assert!(status.code().is_some());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("INFO"), "info logs were written: {text}");
    assert!(
        !text.contains('\u{1b}'),
        "escape codes in a log file: {text:?}"
    );
}
