//! End to end, the first use of a community server as a new user tries it: the README's own
//! example with EMPTY npm caches and a fresh airlock state, driven by the official Python `mcp`
//! SDK, as root from a 0700 working directory and as an ordinary user (setpriv).
//!
//! - the package is fetched by airlock's install step (network: the registry the user's npm
//!   configuration names, read at run time), then the server runs without network and works on
//!   the directory on its own command line: reads a file, writes one that then exists on the host;
//!   `/etc/shadow` and the home directory are refused by the sandbox (the server itself allows
//!   them: `/etc` and the home are on its command line too, and airlock does not grant them);
//!   the install is audited (package, version, integrity). One case through `run` and `serve`.
//! - a failed install leaves nothing that hides the cache the user fills by hand afterwards;
//! - the MCP Inspector CLI, which drops `--`, starts `airlock run node SERVER`.
//!
//! These talk to the npm registry (as the user's configuration names it) and to loopback only.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use sandbox_support::*;

const PACKAGE: &str = "@modelcontextprotocol/server-filesystem";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Run,
    Serve,
}

/// A new user's machine: an empty home (no npm cache), a fresh state dir, a 0700 working dir.
struct Home {
    root: PathBuf,
    home: PathBuf,
    notes: PathBuf,
    cwd: PathBuf,
    who: Who,
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn setup(tag: &str, who: Who) -> Home {
    let root = std::env::temp_dir().join(format!(
        "airlock-first-{tag}-{}-{}",
        who.tag(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    chmod(&root, 0o755);
    let home = root.join("home");
    let notes = home.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("a.txt"), "in the notes\n").unwrap();
    std::fs::write(home.join("secret.txt"), "TOP SECRET\n").unwrap();
    let cwd = root.join("cwd");
    for dir in ["cwd", "state", "config", "org"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    who.own_tree(&root);
    chmod(&home, 0o700);
    chmod(&cwd, 0o700);
    chmod(&root.join("state"), 0o700);
    Home {
        root,
        home,
        notes,
        cwd,
        who,
    }
}

impl Home {
    fn audit(&self) -> PathBuf {
        self.root.join("state/audit.jsonl")
    }

    /// The environment a host gives airlock: the user's own, and nothing of the machine's state.
    fn env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"))
            .current_dir(&self.cwd);
    }

    /// `airlock ARGS` as the host starts it (through setpriv for the ordinary user).
    fn airlock_argv(&self, args: &[String]) -> Vec<String> {
        self.who.airlock_argv(args)
    }

    /// The server command line: the directory it works on, and `/etc` and the home, which the
    /// server then allows itself but airlock never grants.
    fn server_args(&self) -> Vec<String> {
        vec![
            "-y".into(),
            PACKAGE.into(),
            self.notes.display().to_string(),
            "/etc".into(),
            self.home.display().to_string(),
        ]
    }

    /// An airlock.toml with the server as `fs`, owned by the user.
    fn fs_config(&self) -> PathBuf {
        let config = self.root.join("config/airlock.toml");
        let quoted: Vec<String> = self
            .server_args()
            .iter()
            .map(|a| format!("{a:?}"))
            .collect();
        std::fs::write(
            &config,
            format!(
                "[servers.fs]\ncommand = \"npx\"\nargs = [{}]\n",
                quoted.join(", ")
            ),
        )
        .unwrap();
        self.who.own(&config);
        config
    }

    /// The host's command line for `mode` (no `--` before the server command).
    fn host_command(&self, mode: Mode) -> (Vec<String>, &'static str) {
        let audit = self.audit().display().to_string();
        match mode {
            Mode::Run => {
                let mut args = vec!["run".to_string(), "--audit".into(), audit, "npx".into()];
                args.extend(self.server_args());
                (self.airlock_argv(&args), "")
            }
            Mode::Serve => {
                let config = self.fs_config();
                let args = [
                    "serve".to_string(),
                    "--config".into(),
                    config.display().to_string(),
                    "--audit".into(),
                    audit,
                ];
                (self.airlock_argv(&args), "fs__")
            }
        }
    }

    /// The Python SDK client's report of the scenario (first_use_client.py).
    fn drive(&self, mode: Mode) -> (Value, Output) {
        let (argv, prefix) = self.host_command(mode);
        let python = peers().join("sandbox-venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run `bash .ci/install-peers`",
            python.display()
        );
        let mut cmd = Command::new(python);
        cmd.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/mcp/first_use_client.py"
        ))
        .arg(prefix)
        .arg(&self.notes)
        .arg(self.home.join("secret.txt"))
        .arg("--")
        .args(&argv);
        self.env(&mut cmd);
        if mode == Mode::Serve {
            let reload = self.airlock_argv(&["reload".to_string()]);
            cmd.env("FIRST_USE_RELOAD", serde_json::to_string(&reload).unwrap());
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let report = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
            panic!("{mode:?} as {}: no report\n{}", self.who.tag(), text(&out))
        });
        (report, out)
    }

    fn audit_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.audit())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    fn npm_cache(&self) -> PathBuf {
        self.home.join(".npm")
    }
}

/// npm's registry host, from `npm config get registry` in the user's environment (never written
/// in the tests).
fn npm_registry_host(home: &Home) -> String {
    let mut npm = Command::new("npm");
    npm.args(["config", "get", "registry"]);
    home.env(&mut npm);
    // A throwaway cache for npm's own logs: the user's `~/.npm` must stay absent.
    let scratch = tempfile::tempdir().unwrap();
    npm.env("npm_config_cache", scratch.path());
    let out = npm.output().unwrap();
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let host = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split(['/', ':']).next())
        .unwrap_or_default()
        .to_string();
    assert!(
        !host.is_empty(),
        "npm config get registry gave no host: {url:?}"
    );
    host
}

fn first_use(mode: Mode) {
    for who in everyone() {
        let home = setup(&format!("{mode:?}"), who);
        assert!(!home.npm_cache().exists());
        let (report, out) = home.drive(mode);
        let shown = format!("{mode:?} as {}: {report:#}\n{}", who.tag(), text(&out));
        let tools = report["tools"].as_array().unwrap();
        assert!(tools.len() > 5, "{shown}");
        assert_eq!(report["read"]["isError"], false, "{shown}");
        assert!(
            report["read"]["text"]
                .as_str()
                .unwrap()
                .contains("in the notes"),
            "{shown}"
        );
        assert_eq!(report["write"]["isError"], false, "{shown}");
        assert_eq!(
            std::fs::read_to_string(home.notes.join("written.txt")).unwrap(),
            "from the server",
            "{shown}"
        );
        // The server allows /etc and the home (they are on its command line); the sandbox
        // refuses them.
        assert_eq!(report["shadow"]["isError"], true, "{shown}");
        assert_eq!(report["secret"]["isError"], true, "{shown}");
        for refused in ["shadow", "secret"] {
            assert!(
                !report[refused]["text"]
                    .as_str()
                    .unwrap()
                    .contains("TOP SECRET"),
                "{shown}"
            );
        }
        // The install is audited with what it fetched; the user's real cache is never written.
        let events = home.audit_events();
        let install = events
            .iter()
            .find(|e| e["event"] == "install")
            .unwrap_or_else(|| panic!("no install event: {events:#?}\n{shown}"));
        assert_eq!(install["outcome"], "ok", "{install}");
        assert_eq!(install["detail"]["package"], PACKAGE, "{install}");
        assert!(
            install["detail"]["integrity"]
                .as_str()
                .unwrap()
                .starts_with("sha512-"),
            "{install}"
        );
        assert!(
            install["detail"]["version"].as_str().unwrap().contains('.'),
            "{install}"
        );
        assert!(
            install["detail"]["integrity_of"]
                .as_str()
                .unwrap()
                .contains("package tarball"),
            "{install}"
        );
        // The install step's connections: to the registry npm's configuration names (read here
        // at test time, as airlock reads it), allowed, before the install finished; none is
        // allowed after it (the server has no network).
        let registry = npm_registry_host(&home);
        let install_at = events.iter().position(|e| e["event"] == "install").unwrap();
        assert!(
            events[..install_at]
                .iter()
                .any(|e| e["event"] == "net_connect"
                    && e["decision"] == "allow"
                    && e["detail"]["host"] == registry.as_str()
                    && e["detail"]["port"] == 443
                    && e["detail"]["step"] == "install"),
            "no net_connect to {registry} before the install event: {events:#?}\n{shown}"
        );
        assert!(
            !events[install_at..]
                .iter()
                .any(|e| e["event"] == "net_connect" && e["decision"] == "allow"),
            "{events:#?}"
        );
        assert!(!home.npm_cache().exists(), "the real cache was written");
        // `airlock audit summary` counts them apart from the server's own connections.
        let summary = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["audit", "summary"])
            .arg(home.audit())
            .output()
            .unwrap();
        let table = String::from_utf8_lossy(&summary.stdout);
        let server = events.iter().find(|e| e["event"] == "spawn").unwrap()["server"]
            .as_str()
            .unwrap()
            .to_string();
        let row: Vec<&str> = table
            .lines()
            .find(|line| line.starts_with(&format!("{server} ")))
            .unwrap_or_else(|| panic!("{table}"))
            .split_whitespace()
            .collect();
        assert!(
            table.lines().next().unwrap().ends_with("install"),
            "{table}"
        );
        assert_eq!(row[7], "0/0", "{table}");
        assert!(row[8].parse::<u64>().unwrap() >= 1, "{table}");
        let spawn = events.iter().find(|e| e["event"] == "spawn").unwrap();
        assert!(spawn.to_string().contains("notes"), "{spawn}");
        if mode == Mode::Serve {
            // A reload once the package is cached changes nothing the user declared: the server
            // keeps running (one spawn) and still answers.
            let reload = &report["reload"];
            assert_eq!(reload["code"], 0, "{shown}");
            assert!(
                reload["out"]
                    .as_str()
                    .unwrap()
                    .contains(r#"started [], retiring [], unchanged ["fs"]"#),
                "{shown}"
            );
            assert_eq!(report["reread"]["isError"], false, "{shown}");
            let spawns = events.iter().filter(|e| e["event"] == "spawn").count();
            assert_eq!(spawns, 1, "the reload restarted the server: {events:#?}");
        }
    }
}

#[test]
fn first_use_fetches_then_runs_confined_run() {
    first_use(Mode::Run);
}

#[test]
fn first_use_fetches_then_runs_confined_serve() {
    first_use(Mode::Serve);
}

/// The issue's sequence: the first run cannot fetch (its registry refuses), the user fills the
/// npm cache by hand, and the same server name then starts at once, from that cache, without
/// fetching: nothing the failed run left hides it.
#[test]
fn a_failed_install_leaves_nothing_that_hides_the_cache_filled_afterwards() {
    for who in everyone() {
        let home = setup("primed", who);
        let unreachable = |cmd: &mut Command| {
            // A registry on loopback that refuses: the install fails at once, without retries.
            cmd.env("npm_config_registry", "http://127.0.0.1:9/")
                .env("npm_config_fetch_retries", "0");
        };
        let (argv, _) = home.host_command(Mode::Run);
        let run_once = |timeout_secs: u64| {
            let mut cmd = Command::new("timeout");
            cmd.arg(timeout_secs.to_string()).args(&argv);
            home.env(&mut cmd);
            unreachable(&mut cmd);
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            writeln!(
                stdin,
                r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
            )
            .unwrap();
            let out = child.wait_with_output().unwrap();
            drop(stdin);
            out
        };
        let failed = run_once(120);
        let stderr = String::from_utf8_lossy(&failed.stderr).into_owned();
        assert!(
            stderr.contains(
                "installing @modelcontextprotocol/server-filesystem from http://127.0.0.1:9/ failed"
            ) && stderr.contains("Fix: ")
                && stderr.contains(
                    "npx -y @modelcontextprotocol/server-filesystem` once outside airlock"
                ),
            "{}",
            text(&failed)
        );
        let answer = String::from_utf8_lossy(&failed.stdout);
        assert!(answer.contains("installing"), "the host is told: {answer}");
        // The user primes the cache by hand, as the fix says.
        let mut prime = Command::new("setpriv");
        prime
            .args([
                format!("--reuid={}", who.uid()),
                format!("--regid={}", who.uid()),
                "--clear-groups".into(),
            ])
            .args([
                "npx",
                "--yes",
                &format!("--package={PACKAGE}"),
                "--",
                "true",
            ]);
        home.env(&mut prime);
        let primed = prime.output().unwrap();
        assert!(primed.status.success(), "{}", text(&primed));
        assert!(home.npm_cache().join("_npx").is_dir());
        // The same server, the same unreachable registry: it starts from the user's cache.
        let (report, out) = drive_with(&home, &[("npm_config_registry", "http://127.0.0.1:9/")]);
        assert_eq!(
            report["read"]["isError"],
            false,
            "{report:#}\n{}",
            text(&out)
        );
        let installs: Vec<Value> = home
            .audit_events()
            .into_iter()
            .filter(|e| e["event"] == "install")
            .collect();
        assert_eq!(installs.len(), 1, "only the failed one: {installs:#?}");
        assert_eq!(installs[0]["outcome"], "error");
    }
}

/// [`Home::drive`] in `run` mode with extra variables in the user's environment.
fn drive_with(home: &Home, extra: &[(&str, &str)]) -> (Value, Output) {
    let (argv, prefix) = home.host_command(Mode::Run);
    let mut cmd = Command::new(peers().join("sandbox-venv/bin/python"));
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mcp/first_use_client.py"
    ))
    .arg(prefix)
    .arg(&home.notes)
    .arg(home.home.join("secret.txt"))
    .arg("--")
    .args(&argv);
    home.env(&mut cmd);
    for (key, value) in extra {
        cmd.env(key, value);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let report =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("no report\n{}", text(&out)));
    (report, out)
}

/// The MCP Inspector CLI drops `--`: `mcp-inspector --cli airlock run node SERVER --method
/// tools/list` starts the server through airlock and lists its tools. The Inspector (the host)
/// and airlock run as root and as an ordinary user.
#[test]
fn the_inspector_cli_starts_airlock_run_without_dashes() {
    let inspector = peers().join("http-npm/node_modules/.bin/mcp-inspector");
    let node22 = peers().join("node22/bin");
    let server = peers()
        .join("sandbox-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    for path in [&inspector, &node22, &server] {
        assert!(
            path.exists(),
            "{} is missing: run `bash .ci/install-peers`",
            path.display()
        );
    }
    for who in everyone() {
        let home = setup("inspector", who);
        let state = |name: &str| format!("{name}={}", home.root.join(name_dir(name)).display());
        let mut cmd = match who {
            Who::Me => Command::new(&inspector),
            Who::User(uid) => {
                let mut cmd = Command::new("setpriv");
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={uid}"))
                    .arg("--clear-groups")
                    .arg(&inspector);
                cmd
            }
        };
        home.env(&mut cmd);
        cmd.env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", node22.display()),
        )
        .arg("--cli");
        // The Inspector gives the server only HOME and PATH unless told: airlock's own dirs go
        // with -e.
        for name in [
            "XDG_STATE_HOME",
            "XDG_CONFIG_HOME",
            "AIRLOCK_ORG_POLICY_DIR",
        ] {
            cmd.arg("-e").arg(state(name));
        }
        cmd.args([AIRLOCK, "run", "node"])
            .arg(&server)
            .args(["--method", "tools/list"]);
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let shown = format!("as {}: {}", who.tag(), text(&out));
        assert!(out.status.success(), "{shown}");
        let listed: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {shown}"));
        let names: Vec<&str> = listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(names.contains(&"echo"), "{listed}\n{shown}");
        // airlock ran as that user: its audit log is in that user's state dir, owned by them.
        let audit = home.root.join("state/airlock/audit.jsonl");
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&audit).unwrap());
        assert_eq!(owner, who.uid(), "{shown}");
    }
}

fn name_dir(name: &str) -> &'static str {
    match name {
        "XDG_STATE_HOME" => "state",
        "XDG_CONFIG_HOME" => "config",
        _ => "org",
    }
}

/// `airlock test NAME` of a server whose package is not cached yet fetches it first, as `run`
/// and `serve` do, and then reports the handshake (it once failed with npm's `ENOTCACHED`); as
/// root and as an ordinary user.
#[test]
fn airlock_test_fetches_an_uncached_package_first() {
    for who in everyone() {
        let home = setup("test", who);
        assert!(!home.npm_cache().exists());
        let config = home.fs_config();
        let argv = home.airlock_argv(&[
            "test".to_string(),
            "fs".into(),
            "--config".into(),
            config.display().to_string(),
        ]);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        home.env(&mut cmd);
        let out = cmd.output().unwrap();
        let shown = format!("as {}: {}", who.tag(), text(&out));
        assert!(out.status.success(), "{shown}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("not cached yet: the install step fetches it first"),
            "{shown}"
        );
        assert!(stdout.contains("read_file"), "the server's tools: {shown}");
        // The install step's connections are on record in the audit log a session keeps (as
        // that user's), not only shown once on stderr.
        let audit = home.root.join("state/airlock/audit.jsonl");
        assert!(
            stdout.contains(&format!("record(s) in {}", audit.display())),
            "{shown}"
        );
        let text = std::fs::read_to_string(&audit).unwrap();
        let connections = text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|record| record["server"] == "fs" && record["event"] == "net_connect")
            .count();
        assert!(connections > 0, "{shown}\n{text}");
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&audit).unwrap());
        assert_eq!(owner, who.uid(), "{shown}");
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("network: "),
            "{shown}"
        );
    }
}

/// A host that closes while the server's package is still being installed (its first start)
/// is told why the server was not started, not only that it could not be (a new user's trial:
/// "server y1 could not be started", exit 1, nothing else).
#[test]
fn a_host_gone_during_the_install_step_is_named_as_why_the_server_did_not_start() {
    let home = setup("gone", everyone()[0]);
    assert!(!home.npm_cache().exists());
    let (argv, _) = home.host_command(Mode::Run);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(std::process::Stdio::null());
    home.env(&mut cmd);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("was not started: the host closed the connection before it was ready")
            && stderr.contains("still being installed"),
        "{stderr}"
    );
}
