//! End to end, the install step is given nothing the server was given: a hostile runner (a fake
//! `npx` first on PATH, as a compromised package or a trojaned runner would be) runs as the
//! install step of `npx -y left-pad` and tries to write into the directory the server was granted,
//! to read a file there, and to print the secrets the server was given (a variable the policy
//! passes, and in serve an `env` entry of the server's config). All of that is refused or absent.
//! The positive side: the same runner, started as the server, has the grant and the secrets, and
//! answers `tools/list`. Through `run` (`--allow-write`, `--allow-env`) and `serve` (the policy's
//! `write` and `env`, the config's `env`), as root and as an ordinary user.
//!
//! The install step reads the registry from the user's npm configuration (at run time) and may
//! reach only that; this runner sends no traffic at all.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use sandbox_support::*;

#[derive(Debug, Clone, Copy)]
enum Mode {
    Run,
    Serve,
}

const SECRET: &str = "s3cr3t-passed-through";
const KEY: &str = "k3y-of-the-server-config";

/// The fake `npx`: as the install step (`--package=`) and as the server it reports on stderr what
/// it sees and whether it could write and read the grant; as the server it then becomes a real
/// MCP server (kept in the grant, so only a process with the grant can start it).
fn hostile_npx(granted: &Path) -> String {
    let granted = granted.display();
    format!(
        r#"#!/bin/sh
case " $* " in *" --package="*) step=install ;; *) step=server ;; esac
echo "$step sees SECRET_TOKEN=${{SECRET_TOKEN:-absent}} API_KEY=${{API_KEY:-absent}}" >&2
echo "$step registry=${{npm_config_registry:-unset}}" >&2
if echo "$step" > "{granted}/$step-wrote" 2>/dev/null; then echo "$step wrote the grant" >&2; fi
if cat "{granted}/readme.txt" >/dev/null 2>&1; then echo "$step read the grant" >&2; fi
[ "$step" = install ] && exit 0
exec /usr/bin/python3 "{granted}/server.py"
"#
    )
}

struct Place {
    root: PathBuf,
    granted: PathBuf,
    who: Who,
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn place(mode: Mode, who: Who) -> Place {
    let root = std::env::temp_dir().join(format!(
        "airlock-hostile-install-{mode:?}-{}-{}",
        who.tag(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    for dir in [
        "home", "cwd", "state", "config", "org", "fakebin", "granted",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let granted = root.join("granted");
    std::fs::write(granted.join("readme.txt"), "granted to the server\n").unwrap();
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/mcp/echo_server.py"
        ),
        granted.join("server.py"),
    )
    .unwrap();
    let npx = root.join("fakebin/npx");
    std::fs::write(&npx, hostile_npx(&granted)).unwrap();
    who.own_tree(&root);
    chmod(&root, 0o755);
    chmod(&npx, 0o755);
    for private in ["home", "cwd", "state", "granted"] {
        chmod(&root.join(private), 0o700);
    }
    Place { root, granted, who }
}

impl Place {
    fn audit(&self) -> PathBuf {
        self.root.join("state/audit.jsonl")
    }

    /// `airlock run --allow-write=G --allow-env=SECRET_TOKEN npx -y left-pad`, or `serve` with
    /// the same grants in the policy and `API_KEY` in the server's config.
    fn airlock_args(&self, mode: Mode) -> Vec<String> {
        self.airlock_args_for(mode, &["npx", "-y", "left-pad"])
    }

    /// The same for another server command. In serve the server starts in the directory airlock
    /// starts in, as in run.
    fn airlock_args_for(&self, mode: Mode, server: &[&str]) -> Vec<String> {
        let audit = self.audit().display().to_string();
        let granted = self.granted.display().to_string();
        match mode {
            Mode::Run => {
                let mut args = vec![
                    "run".into(),
                    "--audit".into(),
                    audit,
                    format!("--allow-write={granted}"),
                    "--allow-env=SECRET_TOKEN".into(),
                ];
                args.extend(server.iter().map(|word| word.to_string()));
                args
            }
            Mode::Serve => {
                let policy = self.root.join("config/policy.toml");
                std::fs::write(
                    &policy,
                    format!(
                        "version = 1\n[sandbox]\nwrite = [{granted:?}]\nenv = [\"PATH\", \"LANG\", \"SECRET_TOKEN\"]\n"
                    ),
                )
                .unwrap();
                let config = self.root.join("config/airlock.toml");
                std::fs::write(
                    &config,
                    format!(
                        "[servers.pad]\ncommand = {:?}\nargs = {:?}\nenv = {{ API_KEY = {KEY:?} }}\ncwd = {:?}\n",
                        server[0],
                        &server[1..],
                        self.root.join("cwd")
                    ),
                )
                .unwrap();
                for file in [&policy, &config] {
                    self.who.own(file);
                }
                vec![
                    "serve".into(),
                    "--config".into(),
                    config.display().to_string(),
                    "--policy".into(),
                    policy.display().to_string(),
                    "--audit".into(),
                    audit,
                ]
            }
        }
    }

    /// Starts airlock as the host would, lists the tools, closes its stdin; the `tools/list`
    /// answer and airlock's stderr.
    fn converse(&self, mode: Mode) -> (String, String) {
        self.converse_with(self.airlock_args(mode))
    }

    fn converse_with(&self, args: Vec<String>) -> (String, String) {
        self.converse_within(args, Duration::from_secs(300))
    }

    /// [`Place::converse_with`], airlock killed when `tools/list` is not answered within `limit`.
    fn converse_within(&self, args: Vec<String>, limit: Duration) -> (String, String) {
        let mut cmd = airlock_as(match self.who {
            Who::Me => None,
            Who::User(uid) => Some(uid),
        });
        cmd.args(args)
            .env_clear()
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/bin:/usr/bin:/bin",
                    self.root.join("fakebin").display()
                ),
            )
            .env("HOME", self.root.join("home"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"))
            .env("SECRET_TOKEN", SECRET)
            .current_dir(self.root.join("cwd"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for message in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ] {
            writeln!(stdin, "{message}").unwrap();
        }
        let stdout = child.stdout.take().unwrap();
        let (answers, listed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains(r#""id":2"#) {
                    let _ = answers.send(line);
                    return;
                }
            }
        });
        let listed = listed.recv_timeout(limit).unwrap_or_default();
        if listed.is_empty() {
            let _ = child.kill();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        (listed, String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn the_install_step_gets_nothing_the_server_was_given(mode: Mode) {
    for who in everyone() {
        let place = place(mode, who);
        let (listed, stderr) = place.converse(mode);
        let shown = format!("{mode:?} as {}:\n{listed}\n{stderr}", who.tag());
        // The install step ran (its report is relayed with the `[... install]` label) and saw
        // neither secret, and could neither write nor read the grant.
        assert!(
            stderr.contains("install sees SECRET_TOKEN=absent API_KEY=absent"),
            "{shown}"
        );
        assert!(!stderr.contains("install wrote the grant"), "{shown}");
        assert!(!stderr.contains("install read the grant"), "{shown}");
        assert!(!place.granted.join("install-wrote").exists(), "{shown}");
        // The server has what it was given, and works.
        let expected_key = match mode {
            Mode::Run => "absent",
            Mode::Serve => KEY,
        };
        assert!(
            stderr.contains(&format!(
                "server sees SECRET_TOKEN={SECRET} API_KEY={expected_key}"
            )),
            "{shown}"
        );
        assert!(stderr.contains("server wrote the grant"), "{shown}");
        assert!(stderr.contains("server read the grant"), "{shown}");
        assert!(place.granted.join("server-wrote").is_file(), "{shown}");
        assert!(listed.contains("echo\""), "{shown}");
        // The secret never reaches the audit log through the install either.
        let audit = std::fs::read_to_string(place.audit()).unwrap_or_default();
        assert!(audit.contains("\"install\""), "{shown}\n{audit}");
        assert!(!audit.contains(SECRET), "{audit}");
    }
}

#[test]
fn the_install_step_gets_nothing_the_server_was_given_run() {
    the_install_step_gets_nothing_the_server_was_given(Mode::Run);
}

#[test]
fn the_install_step_gets_nothing_the_server_was_given_serve() {
    the_install_step_gets_nothing_the_server_was_given(Mode::Serve);
}

/// What a server granted its project could have left there for the next start: an `.npmrc`
/// naming a registry of its own (on the host's loopback), and a `pip` package that Python imports
/// from its working directory before the real one, which leaves a mark when it runs.
fn plant_in_the_project(place: &Place) -> PathBuf {
    let cwd = place.root.join("cwd");
    std::fs::write(
        cwd.join(".npmrc"),
        "registry=http://127.0.0.1:9/planted-registry/\n",
    )
    .unwrap();
    let mark = cwd.join("planted-code-ran");
    let models = cwd.join("pip/_internal/models");
    std::fs::create_dir_all(&models).unwrap();
    for init in ["pip", "pip/_internal", "pip/_internal/models"] {
        std::fs::write(cwd.join(init).join("__init__.py"), "").unwrap();
    }
    std::fs::write(
        models.join("index.py"),
        format!(
            "open({:?}, 'w').write('ran outside the sandbox')\n\
             class PyPI:\n    simple_url = 'http://127.0.0.1:9/planted-index/'\n    \
             file_storage_domain = '127.0.0.1'\n",
            mark.display().to_string()
        ),
    )
    .unwrap();
    // A `uvx` whose package is not cached: its install step is where the index is chosen.
    let uvx = place.root.join("fakebin/uvx");
    std::fs::write(&uvx, "#!/bin/sh\necho \"uvx $*\" >&2\nexit 1\n").unwrap();
    chmod(&uvx, 0o755);
    place.who.own_tree(&place.root);
    mark
}

fn files_a_server_wrote_in_its_project_steer_nothing(mode: Mode) {
    for who in everyone() {
        let place = place(mode, who);
        let mark = plant_in_the_project(&place);
        // npx: the install step is pointed at the user's registry, not the project's.
        let (listed, stderr) = place.converse(mode);
        let shown = format!("{mode:?} as {}:\n{listed}\n{stderr}", who.tag());
        assert!(stderr.contains("install registry=http"), "{shown}");
        assert!(!stderr.contains("planted-registry"), "{shown}");
        assert!(listed.contains("echo\""), "{shown}");
        // uvx: airlock asks pip for its default index outside the project.
        let args = place.airlock_args_for(mode, &["uvx", "some-uncached-server"]);
        let (_, stderr) = place.converse_with(args);
        let shown = format!("{mode:?} as {} with uvx:\n{stderr}", who.tag());
        assert!(!mark.exists(), "code planted in the project ran:\n{shown}");
        assert!(!stderr.contains("planted-index"), "{shown}");
    }
}

#[test]
fn files_a_server_wrote_in_its_project_steer_nothing_run() {
    files_a_server_wrote_in_its_project_steer_nothing(Mode::Run);
}

#[test]
fn files_a_server_wrote_in_its_project_steer_nothing_serve() {
    files_a_server_wrote_in_its_project_steer_nothing(Mode::Serve);
}

/// A registry URL with a user name and password in it (uv's `index-url`, `UV_INDEX_URL`): the
/// install step runs the package's own build code, so it is given the URL without them, and the
/// password reaches neither the audit log, nor airlock's messages, nor the host (found by a
/// review: all four had it).
fn a_registry_password_stays_out_of_the_install_step(mode: Mode) {
    let place = place(mode, Who::Me);
    let uv_config = place.root.join("config/uv/uv.toml");
    std::fs::create_dir_all(uv_config.parent().unwrap()).unwrap();
    std::fs::write(
        &uv_config,
        "index-url = \"https://alice:S3CRET-INDEX-PW@pypi.example/simple\"\n",
    )
    .unwrap();
    let uvx = place.root.join("fakebin/uvx");
    std::fs::write(&uvx, "#!/bin/sh\nenv | grep '^UV_' >&2\nexit 1\n").unwrap();
    chmod(&uvx, 0o755);
    let args = place.airlock_args_for(mode, &["uvx", "some-uncached-server"]);
    let (listed, stderr) = place.converse_with(args);
    let audit = std::fs::read_to_string(place.audit()).unwrap_or_default();
    let shown = format!("{mode:?}:\n{listed}\n{stderr}\n{audit}");
    assert!(
        stderr.contains("UV_DEFAULT_INDEX=https://pypi.example/simple")
            && stderr.contains("user name and password are not passed to the install step"),
        "{shown}"
    );
    assert!(!shown.contains("S3CRET-INDEX-PW"), "{shown}");
    assert!(audit.contains("https://pypi.example/simple"), "{shown}");
}

#[test]
fn a_registry_password_stays_out_of_the_install_step_run() {
    a_registry_password_stays_out_of_the_install_step(Mode::Run);
}

#[test]
fn a_registry_password_stays_out_of_the_install_step_serve() {
    a_registry_password_stays_out_of_the_install_step(Mode::Serve);
}

/// An install whose script reaches for a host that is not the registry (as a package fetching a
/// binary from GitHub does) and then fails: airlock names the host it tried, and never offers
/// running the package outside the sandbox without saying that this runs its scripts with the
/// user's full rights. (A hostile package can fail on purpose to steer the user there.)
fn a_failed_install_names_what_it_reached_for(mode: Mode) {
    let place = place(mode, Who::Me);
    std::fs::write(
        place.root.join("fakebin/npx"),
        "#!/bin/sh\ncase \" $* \" in *\" --package=\"*) ;; *) exit 3 ;; esac\n/usr/bin/python3 -c \"import socket; socket.getaddrinfo('github.com', 443)\" 2>/dev/null\nexit 1\n",
    )
    .unwrap();
    let (_, stderr) = place.converse(mode);
    assert!(
        stderr.contains("after it tried to reach github.com, which the install step may not"),
        "{mode:?}: {stderr}"
    );
    assert!(stderr.contains("only for a package you trust"), "{stderr}");
    assert!(
        !stderr.contains("is reachable from this machine"),
        "{stderr}"
    );
    let audit = std::fs::read_to_string(place.audit()).unwrap_or_default();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("github.com") && l.contains("\"deny\"")),
        "{audit}"
    );
}

#[test]
fn a_failed_install_names_what_it_reached_for_run() {
    a_failed_install_names_what_it_reached_for(Mode::Run);
}

#[test]
fn a_failed_install_names_what_it_reached_for_serve() {
    a_failed_install_names_what_it_reached_for(Mode::Serve);
}

/// A server granted its working directory leaves a project policy there for the next start: a
/// FIFO (reading it would wait without end), a link to `/dev/zero` (reading it would fill
/// memory: airlock reads policies before any sandbox exists), and a file of 2 MiB. The next
/// start from that directory refuses at once, exit 2, naming the file and why.
fn a_policy_a_server_planted_in_its_project_stops_the_next_start_at_once(mode: Mode) {
    let plants = [
        ("os.mkfifo(target)", "not a regular file"),
        ("os.symlink('/dev/zero', target)", "not a regular file"),
        (
            "open(target, 'w').write('#' * (2 << 20))",
            "larger than 1048576 bytes",
        ),
    ];
    for who in everyone() {
        for (plant, why) in plants {
            let place = place(mode, who);
            let cwd = place.root.join("cwd");
            let planter = place.granted.join("planter.py");
            std::fs::write(
                &planter,
                format!(
                    "import os\nos.makedirs('.airlock', exist_ok=True)\n\
                     target = '.airlock/policy.toml'\n{plant}\n"
                ),
            )
            .unwrap();
            place.who.own(&planter);
            let args = match mode {
                Mode::Run => vec![
                    "run".to_string(),
                    "--audit".into(),
                    place.audit().display().to_string(),
                    format!("--allow-write={}", cwd.display()),
                    format!("--allow-read={}", place.granted.display()),
                    "/usr/bin/python3".into(),
                    planter.display().to_string(),
                ],
                Mode::Serve => {
                    let mut args = place.airlock_args_for(mode, &["/usr/bin/python3"]);
                    let policy = place.root.join("config/policy.toml");
                    std::fs::write(
                        &policy,
                        format!(
                            "version = 1\n[sandbox]\nwrite = [{:?}]\nread = [{:?}]\n",
                            cwd.display().to_string(),
                            place.granted.display().to_string()
                        ),
                    )
                    .unwrap();
                    let config = place.root.join("config/airlock.toml");
                    std::fs::write(
                        &config,
                        format!(
                            "[servers.planter]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\ncwd = {:?}\n",
                            planter.display().to_string(),
                            cwd.display().to_string()
                        ),
                    )
                    .unwrap();
                    for file in [&policy, &config] {
                        place.who.own(file);
                    }
                    args.truncate(1);
                    args.extend([
                        "--config".into(),
                        config.display().to_string(),
                        "--policy".into(),
                        policy.display().to_string(),
                        "--audit".into(),
                        place.audit().display().to_string(),
                    ]);
                    args
                }
            };
            let (_, stderr) = place.converse_with(args.clone());
            let planted = cwd.join(".airlock/policy.toml");
            let shown = format!("{mode:?} as {}, {plant}:\n{stderr}", who.tag());
            assert!(
                planted.symlink_metadata().is_ok(),
                "nothing planted: {shown}"
            );

            // The next start, from the same directory.
            let started = std::time::Instant::now();
            let mut cmd = airlock_as(match who {
                Who::Me => None,
                Who::User(uid) => Some(uid),
            });
            let mut child = cmd
                .args(&args)
                .env_clear()
                .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                .env("HOME", place.root.join("home"))
                .env("XDG_STATE_HOME", place.root.join("state"))
                .env("XDG_CONFIG_HOME", place.root.join("config"))
                .env("AIRLOCK_ORG_POLICY_DIR", place.root.join("org"))
                .current_dir(&cwd)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if started.elapsed() > Duration::from_secs(30) {
                    let _ = child.kill();
                    panic!("the next start still waits after 30 s: {shown}");
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let shown = format!("{shown}\nnext start:\n{stderr}");
            assert_eq!(status.code(), Some(2), "{shown}");
            assert!(out.stdout.is_empty(), "{shown}");
            assert!(stderr.contains(".airlock/policy.toml"), "{shown}");
            assert!(stderr.contains(why), "{shown}");
        }
    }
}

#[test]
fn a_policy_a_server_planted_in_its_project_stops_the_next_start_at_once_run() {
    a_policy_a_server_planted_in_its_project_stops_the_next_start_at_once(Mode::Run);
}

#[test]
fn a_policy_a_server_planted_in_its_project_stops_the_next_start_at_once_serve() {
    a_policy_a_server_planted_in_its_project_stops_the_next_start_at_once(Mode::Serve);
}

/// What a hostile install leaves for airlock to read as its lock file: a FIFO (airlock, reading
/// it unconfined on the session's one thread, waited forever: `run` never answered, a whole
/// gateway stopped answering), or a link to a file only airlock may read (its text went into the
/// audit record as the installed version). The install is recorded without them and the server
/// starts.
fn a_lock_file_an_install_left_steers_nothing(mode: Mode) {
    for planted in [
        "mkfifo \"$d/package-lock.json\"",
        "ln -s /etc/shadow \"$d/package-lock.json\"",
    ] {
        let place = place(mode, Who::Me);
        let npx = place.root.join("fakebin/npx");
        let script = std::fs::read_to_string(&npx).unwrap().replace(
            "[ \"$step\" = install ] && exit 0",
            &format!(
                "if [ \"$step\" = install ]; then d=\"$npm_config_cache/_npx/$(printf %s left-pad | sha512sum | cut -c1-16)\"; mkdir -p \"$d\"; {planted}; exit 0; fi"
            ),
        );
        std::fs::write(&npx, script).unwrap();
        let args = place.airlock_args(mode);
        let (listed, stderr) = place.converse_within(args, Duration::from_secs(30));
        let shown = format!("{mode:?} ({planted}):\n{listed}\n{stderr}");
        assert!(listed.contains("echo\""), "{shown}");
        let audit = std::fs::read_to_string(place.audit()).unwrap_or_default();
        assert!(audit.contains("\"install\""), "{shown}\n{audit}");
        assert!(!audit.contains("root:"), "{audit}");
    }
}

#[test]
fn a_lock_file_an_install_left_steers_nothing_run() {
    a_lock_file_an_install_left_steers_nothing(Mode::Run);
}

#[test]
fn a_lock_file_an_install_left_steers_nothing_serve() {
    a_lock_file_an_install_left_steers_nothing(Mode::Serve);
}

/// Two packages one server name does not tell apart (`run` names `@evil/pad` and `@good/pad`
/// both `pad`; a gateway's config may reuse a name): the first one's install (its install
/// scripts run, confined, and may write anything into the cache view) plants what npx would run
/// for the second. Each spec has a store of its own, so the second is installed for itself and
/// never sees the plant. Before, its start found the plant "cached", ran it, and recorded no
/// install.
fn one_packages_install_never_plants_what_another_runs(mode: Mode) {
    let place = place(mode, Who::Me);
    let npx = place.root.join("fakebin/npx");
    let good = "d=\"$npm_config_cache/_npx/$(printf %s @good/pad | sha512sum | cut -c1-16)\"";
    let script = std::fs::read_to_string(&npx).unwrap().replace(
        "[ \"$step\" = install ] && exit 0",
        &format!(
            "{good}\n\
             case \" $* \" in *\"--package=@evil/pad\"*) mkdir -p \"$d/node_modules/@good/pad\"; echo '{{\"name\":\"@good/pad\"}}' > \"$d/node_modules/@good/pad/package.json\"; echo planted > \"$d/planted\" ;; esac\n\
             [ -e \"$d/planted\" ] && echo \"$step saw the plant\" >&2\n\
             [ \"$step\" = install ] && exit 0"
        ),
    );
    std::fs::write(&npx, script).unwrap();
    let (listed, stderr) =
        place.converse_with(place.airlock_args_for(mode, &["npx", "-y", "@evil/pad"]));
    assert!(
        listed.contains("echo\""),
        "{mode:?} evil:\n{listed}\n{stderr}"
    );
    let (listed, stderr) =
        place.converse_with(place.airlock_args_for(mode, &["npx", "-y", "@good/pad"]));
    let shown = format!("{mode:?} good:\n{listed}\n{stderr}");
    assert!(listed.contains("echo\""), "{shown}");
    assert!(!stderr.contains("saw the plant"), "{shown}");
    let audit = std::fs::read_to_string(place.audit()).unwrap_or_default();
    let installs: Vec<&str> = audit
        .lines()
        .filter(|line| line.contains("\"event\":\"install\""))
        .collect();
    assert!(
        installs.iter().any(|line| line.contains("@good/pad")),
        "{shown}\n{audit}"
    );
}

#[test]
fn one_packages_install_never_plants_what_another_runs_run() {
    one_packages_install_never_plants_what_another_runs(Mode::Run);
}

#[test]
fn one_packages_install_never_plants_what_another_runs_serve() {
    one_packages_install_never_plants_what_another_runs(Mode::Serve);
}
