//! End to end, the first use of a community server through the other package runners a user has:
//! `bunx PKG` and `deno run -A npm:PKG`, each with an EMPTY cache and a fresh airlock state,
//! driven by the official Python `mcp` SDK, through `run` and `serve`, as root from a 0700 working
//! directory and as an ordinary user (setpriv). The runtimes sit where their installers put them
//! (`~/.bun/bin/{bun,bunx}`, `~/.deno/bin/deno`).
//!
//! - airlock's install step fetches the package (its only network: the registry npm's
//!   configuration names, read at run time, as bun and deno read `.npmrc`), audited with the
//!   runner, version and integrity; the server then runs without network and answers a call;
//! - the user's real cache is never written;
//! - the next start uses what the install left (no second install) and still answers.
//!
//! These talk to the npm registry (as the user's configuration names it) and to loopback only.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use sandbox_support::*;

const PACKAGE: &str = "@modelcontextprotocol/server-everything";
const VERSION: &str = "2026.8.31";

#[derive(Debug, Clone, Copy)]
enum Runner {
    Bunx,
    Deno,
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    Run,
    Serve,
}

impl Runner {
    /// The server command line a user writes.
    fn command(self) -> Vec<String> {
        let spec = format!("{PACKAGE}@{VERSION}");
        match self {
            Runner::Bunx => vec!["bunx".into(), spec],
            Runner::Deno => vec![
                "deno".into(),
                "run".into(),
                "-A".into(),
                format!("npm:{spec}"),
            ],
        }
    }

    /// The runner's real cache in the user's home, which airlock must never write.
    fn real_cache(self, home: &Path) -> PathBuf {
        match self {
            Runner::Bunx => home.join(".bun/install"),
            Runner::Deno => home.join(".cache/deno"),
        }
    }
}

/// A new user's machine: the runtime in its installer's place, nothing cached, a fresh state.
struct Home {
    root: PathBuf,
    home: PathBuf,
    cwd: PathBuf,
    who: Who,
    /// A machine with the runtime and no npm: the search path holds only the runtime and
    /// `setpriv`, and the registry is named by `NPM_CONFIG_REGISTRY` (as npm's configuration
    /// names it, read by the test).
    without_npm: Option<String>,
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Links (or, across file systems, copies) a pinned runtime binary into the home.
fn place(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

fn setup(runner: Runner, mode: Mode, who: Who) -> Option<Home> {
    let (bun, deno) = (
        peer("runtimes/node_modules/bun/bin/bun.exe")?,
        peer("runtimes/node_modules/deno/deno")?,
    );
    let root = std::env::temp_dir().join(format!(
        "airlock-runner-{runner:?}-{mode:?}-{}-{}",
        who.tag(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    for dir in ["home", "cwd", "state", "config", "org"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    chmod(&root, 0o755);
    who.own_tree(&root);
    let home = root.join("home");
    // After the chown: a hard link shares its owner with the pinned peer.
    match runner {
        Runner::Bunx => {
            place(&bun, &home.join(".bun/bin/bun"));
            std::os::unix::fs::symlink("bun", home.join(".bun/bin/bunx")).unwrap();
        }
        Runner::Deno => place(&deno, &home.join(".deno/bin/deno")),
    }
    for dir in [".bun", ".bun/bin", ".deno", ".deno/bin"] {
        if home.join(dir).exists() {
            who.own(&home.join(dir));
        }
    }
    chmod(&home, 0o700);
    chmod(&root.join("cwd"), 0o700);
    chmod(&root.join("state"), 0o700);
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink("/usr/bin/setpriv", bin.join("setpriv")).unwrap();
    Some(Home {
        cwd: root.join("cwd"),
        root,
        home,
        who,
        without_npm: None,
    })
}

/// The TLS trust settings of the test's own environment: a user behind a TLS-inspecting proxy
/// has them set for their runtimes (deno reads `NODE_EXTRA_CA_CERTS`, `DENO_CERT`), and airlock
/// hands them to the install step.
const TLS_TRUST: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "DENO_CERT",
    "DENO_TLS_CA_STORE",
];

impl Home {
    fn audit(&self) -> PathBuf {
        self.root.join("state/audit.jsonl")
    }

    fn env(&self, cmd: &mut Command) {
        let system = match self.without_npm {
            Some(_) => self.root.join("bin").display().to_string(),
            None => "/usr/local/bin:/usr/bin:/bin".to_string(),
        };
        let path = format!("{0}/.bun/bin:{0}/.deno/bin:{system}", self.home.display());
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"))
            .current_dir(&self.cwd);
        for name in TLS_TRUST {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        if let Some(registry) = &self.without_npm {
            cmd.env("NPM_CONFIG_REGISTRY", registry);
        }
    }

    /// The host's command line for `mode` (no `--` before the server command) and the tool's
    /// name as the host sees it.
    fn host_command(&self, runner: Runner, mode: Mode) -> (Vec<String>, &'static str) {
        let audit = self.audit().display().to_string();
        let command = runner.command();
        match mode {
            Mode::Run => {
                let mut args = vec!["run".to_string(), "--audit".into(), audit];
                args.extend(command);
                (self.who.airlock_argv(&args), "echo")
            }
            Mode::Serve => {
                let config = self.root.join("config/airlock.toml");
                let quoted: Vec<String> = command[1..].iter().map(|a| format!("{a:?}")).collect();
                std::fs::write(
                    &config,
                    format!(
                        "[servers.ev]\ncommand = {:?}\nargs = [{}]\n",
                        command[0],
                        quoted.join(", ")
                    ),
                )
                .unwrap();
                self.who.own(&config);
                let args = [
                    "serve".to_string(),
                    "--config".into(),
                    config.display().to_string(),
                    "--audit".into(),
                    audit,
                ];
                (self.who.airlock_argv(&args), "ev__echo")
            }
        }
    }

    /// Starts the server as a host does, lists its tools and calls echo: the client's report.
    fn drive(&self, runner: Runner, mode: Mode) -> Value {
        let (argv, tool) = self.host_command(runner, mode);
        let python = peers().join("sandbox-venv/bin/python");
        let mut cmd = Command::new(python);
        cmd.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/mcp/call_client.py"
        ))
        .arg(tool)
        .arg(r#"{"message": "through airlock"}"#)
        .arg("--")
        .args(&argv);
        self.env(&mut cmd);
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
            panic!(
                "{runner:?} {mode:?} as {}: no report\n{}",
                self.who.tag(),
                text(&out)
            )
        })
    }

    fn audit_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.audit())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// npm's registry URL as the user's configuration names it (never written in the tests).
    fn npm_registry(&self) -> String {
        let mut npm = Command::new("/usr/bin/npm");
        npm.args(["config", "get", "registry"]);
        self.env(&mut npm);
        npm.env("PATH", "/usr/local/bin:/usr/bin:/bin");
        let scratch = tempfile::tempdir().unwrap();
        npm.env("npm_config_cache", scratch.path());
        String::from_utf8_lossy(&npm.output().unwrap().stdout)
            .trim()
            .to_string()
    }

    fn npm_registry_host(&self) -> String {
        let url = self.npm_registry();
        let host = url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split(['/', ':']).next())
            .unwrap_or_default()
            .to_string();
        assert!(!host.is_empty(), "npm config get registry gave {url:?}");
        host
    }
}

fn first_use(runner: Runner, mode: Mode) {
    first_use_on(runner, mode, false);
}

fn first_use_on(runner: Runner, mode: Mode, without_npm: bool) {
    for who in everyone() {
        let Some(mut home) = setup(runner, mode, who) else {
            return;
        };
        if without_npm {
            home.without_npm = Some(home.npm_registry());
        }
        let shown = |report: &Value| format!("{runner:?} {mode:?} as {}: {report:#}", who.tag());
        let report = home.drive(runner, mode);
        assert_eq!(report["call"]["isError"], false, "{}", shown(&report));
        assert_eq!(
            report["call"]["text"],
            "Echo: through airlock",
            "{}",
            shown(&report)
        );
        let events = home.audit_events();
        let installs: Vec<&Value> = events.iter().filter(|e| e["event"] == "install").collect();
        assert_eq!(installs.len(), 1, "{events:#?}");
        let install = installs[0];
        assert_eq!(install["outcome"], "ok", "{install}");
        // In the order things happened: the install, then the server's start.
        let at = |kind: &str| events.iter().position(|e| e["event"] == kind).unwrap();
        assert!(at("install") < at("spawn"), "{events:#?}");
        let detail = &install["detail"];
        let name = match runner {
            Runner::Bunx => "bunx",
            Runner::Deno => "deno",
        };
        assert_eq!(detail["runner"], name, "{install}");
        assert_eq!(detail["package"], PACKAGE, "{install}");
        assert_eq!(detail["version"], VERSION, "{install}");
        assert!(
            detail["integrity"].as_str().unwrap().starts_with("sha512-"),
            "{install}"
        );
        // The install's connections went to the registry npm's configuration names; after it,
        // nothing is allowed out (the server has no network).
        let registry = home.npm_registry_host();
        let install_at = events.iter().position(|e| e["event"] == "install").unwrap();
        assert!(
            events[..install_at]
                .iter()
                .any(|e| e["event"] == "net_connect"
                    && e["decision"] == "allow"
                    && e["detail"]["host"] == registry.as_str()),
            "no net_connect to {registry} before the install: {events:#?}"
        );
        assert!(
            !events[install_at..]
                .iter()
                .any(|e| e["event"] == "net_connect" && e["decision"] == "allow"),
            "{events:#?}"
        );
        assert!(
            !runner.real_cache(&home.home).exists(),
            "the real cache was written"
        );
        // The next start runs from what the install left, without a second install.
        let again = home.drive(runner, mode);
        assert_eq!(
            again["call"]["text"],
            "Echo: through airlock",
            "{}",
            shown(&again)
        );
        let installs = home
            .audit_events()
            .iter()
            .filter(|e| e["event"] == "install")
            .count();
        assert_eq!(installs, 1, "the second start installed again");
    }
}

#[test]
fn bunx_fetches_then_runs_confined_run() {
    first_use(Runner::Bunx, Mode::Run);
}

#[test]
fn bunx_fetches_then_runs_confined_serve() {
    first_use(Runner::Bunx, Mode::Serve);
}

#[test]
fn deno_npm_fetches_then_runs_confined_run() {
    first_use(Runner::Deno, Mode::Run);
}

#[test]
fn deno_npm_fetches_then_runs_confined_serve() {
    first_use(Runner::Deno, Mode::Serve);
}

/// A machine with deno and no npm: the registry comes from `NPM_CONFIG_REGISTRY`, which deno
/// reads too (there is no npm to ask).
#[test]
fn deno_npm_fetches_without_npm_on_the_machine() {
    first_use_on(Runner::Deno, Mode::Run, true);
}
