//! End to end: `uvx <pkg>` from the user's uv cache works under the default policy (network none,
//! no grants), as an ordinary user (the test's own uid, or uid 65533 via setpriv when the tests run
//! as root), and nothing the server does reaches the real cache.
//!
//! uv's tool environments link into `archive-v0` by the cache's absolute path, so the overlay is
//! mounted over the real cache path in the sandbox's own mount namespace (uv.toml,
//! `mount_at_real_path`), and read-write access beneath it is granted on the mounted overlay only.
//!
//! uv and a populated cache come from `.ci/install-peers` (`.peers/uv-venv`, `.peers/uv-cache`);
//! each test copies them into a throwaway home, re-pointing the cache's absolute links at the copy
//! (as a first `uvx` run with the cache at `~/.cache/uv` would have left them).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::collections::BTreeMap;

use sha2::Digest;

use std::io::Write;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use sandbox_support::{chmod, is_root, peers, snapshot, text};

const PACKAGE: &str = "mcp-server-time@2026.10.19";
/// The ordinary user the tests become when they run as root (no name needed: setpriv).
const USER_UID: u32 = 65533;

/// `.peers/uv-venv/bin` and `.peers/uv-cache`, or `None` (skip) outside CI.
fn uv_peers() -> Option<(PathBuf, PathBuf)> {
    let bin = peers().join("uv-venv/bin");
    let cache = peers().join("uv-cache");
    let populated = std::fs::read_dir(cache.join("archive-v0")).is_ok_and(|dir| {
        dir.flatten().any(|entry| {
            entry
                .path()
                .join("mcp_server_time-2026.10.19.dist-info")
                .is_dir()
        })
    });
    if bin.join("uvx").is_file() && bin.join("uv").is_file() && populated {
        return Some((bin, cache));
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "uv peers missing under CI: run .ci/install-peers"
    );
    eprintln!("SKIP: uv peers missing (run .ci/install-peers)");
    None
}

/// A throwaway world: `root/` (0755) with `tools/bin/{uv,uvx}` and `home/` (0700) holding
/// `.cache/uv`, a copy of the peers cache, owned by the user airlock runs as.
struct Home {
    root: PathBuf,
    home: PathBuf,
    cache: PathBuf,
    run_as: Option<u32>,
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Re-points every symlink under `dir` that leads into `from` at the same place under `to`.
fn repoint_links(dir: &Path, from: &Path, to: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            if let Ok(rest) = target.strip_prefix(from) {
                std::fs::remove_file(&path).unwrap();
                std::os::unix::fs::symlink(to.join(rest), &path).unwrap();
            }
        } else if kind.is_dir() {
            repoint_links(&path, from, to);
        }
    }
}

fn setup(tag: &str) -> Option<Home> {
    setup_as(tag, is_root().then_some(USER_UID))
}

/// `run_as`: the uid airlock runs as (setpriv), `None`: the test process itself.
fn setup_as(tag: &str, run_as: Option<u32>) -> Option<Home> {
    let (bin, source) = uv_peers()?;
    let root = std::env::temp_dir().join(format!("airlock-uvx-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let home = root.join("home");
    for dir in [
        "",
        "home",
        "home/.cache",
        "config",
        "org",
        "tools",
        "tools/bin",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        chmod(&root.join(dir), 0o755);
    }
    // uvx finds uv next to itself; both are static binaries.
    for name in ["uv", "uvx"] {
        std::fs::copy(bin.join(name), root.join("tools/bin").join(name)).unwrap();
        chmod(&root.join("tools/bin").join(name), 0o755);
    }
    let cache = home.join(".cache/uv");
    let status = Command::new("cp")
        .arg("-a")
        .arg(&source)
        .arg(&cache)
        .status()
        .unwrap();
    assert!(status.success(), "copying the uv cache");
    let source = std::fs::canonicalize(&source).unwrap();
    repoint_links(&cache, &source, &cache);
    if let Some(uid) = run_as {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{uid}"))
            .arg(&home)
            .status()
            .unwrap();
        assert!(status.success(), "chown the test home");
    }
    chmod(&home, 0o700);
    Some(Home {
        root,
        home,
        cache,
        run_as,
    })
}

impl Home {
    fn state(&self) -> PathBuf {
        self.home.join(".local/state")
    }

    fn airlock(&self, args: &[&str]) -> Command {
        let mut cmd = sandbox_support::airlock_as(self.run_as);
        let path = format!("{}:/usr/bin:/bin", self.root.join("tools/bin").display());
        cmd.args(args)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.state())
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"))
            .current_dir(&self.root);
        // The user's TLS trust, as their shell has it (a machine whose package index is
        // reached through a proxy with its own CA names it here).
        for name in ["SSL_CERT_FILE", "SSL_CERT_DIR"] {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd
    }

    /// Where the server's private dirs would be on disk: nothing may be there (its layer of the
    /// cache view is on its scratch disk, gone with it).
    fn server_dir(&self, server: &str) -> PathBuf {
        self.state().join("airlock/servers").join(server)
    }
}

/// initialize → initialized → tools/call get_current_time through `airlock run -- uvx <pkg>`;
/// stdin stays open until the answer is in, then EOF stops the server.
fn time_through_airlock_run(home: &Home) -> (serde_json::Value, String) {
    time_through_airlock_run_with(home, &[])
}

/// The same, with more `airlock run` flags before the `--`.
fn time_through_airlock_run_with(home: &Home, flags: &[&str]) -> (serde_json::Value, String) {
    let mut args = vec!["run"];
    args.extend(flags);
    args.extend(["--", "uvx", PACKAGE]);
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_current_time","arguments":{"timezone":"UTC"}}}"#;
    call_through_airlock(home, &args, call)
}

/// initialize → initialized → `call` (id 2) through `airlock ARGS`; the call's answer and
/// airlock's stderr.
fn call_through_airlock(home: &Home, args: &[&str], call: &str) -> (serde_json::Value, String) {
    let mut child = home
        .airlock(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut answer = None;
    for msg in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"airlock-test","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        call,
    ] {
        if writeln!(stdin, "{msg}")
            .and_then(|()| stdin.flush())
            .is_err()
        {
            break;
        }
    }
    // Read until the call's answer (or EOF: airlock gave up; its stderr says why).
    let mut line = String::new();
    while {
        line.clear();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap_or(0) > 0
    } {
        if let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line)
            && msg["id"] == 2
        {
            answer = Some(msg);
            break;
        }
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let answer =
        answer.unwrap_or_else(|| panic!("no tools/call answer; airlock stderr:\n{stderr}"));
    (answer, stderr)
}

#[test]
fn uvx_from_the_uv_cache_works_as_an_ordinary_user() {
    let Some(home) = setup("user") else {
        return;
    };
    check_uvx_from_cache(&home);
}

/// A network allow list that does not name the package index (here one loopback address
/// nothing listens on; no traffic is sent): the cached package still starts, at once. uv runs
/// offline as with no network (the install step is what fetches); online it would re-check its
/// index, be refused the name, and exit after its retries.
#[test]
fn uvx_from_the_uv_cache_works_with_a_network_allow_list() {
    let Some(home) = setup("allow") else {
        return;
    };
    let (answer, stderr) = time_through_airlock_run_with(&home, &["--allow-net=127.0.0.1:9"]);
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}\n{stderr}"));
    assert!(text.contains("\"timezone\": \"UTC\""), "{text}\n{stderr}");
    // Nothing was looked up: no refused name in the audit log.
    let audit = std::fs::read_to_string(home.state().join("airlock/audit.jsonl")).unwrap();
    assert!(!audit.contains("\"net_connect\""), "{audit}");
}

/// The official Python quickstart's shape, `uv --directory PROJECT run weather.py`: a uv
/// project the user made beforehand (pyproject.toml, uv.lock, .venv) in their home, granted
/// nowhere. airlock reads uv's `--directory` as the project (read-only) and the interpreter its
/// `.venv` links to, and derives the server's name from the script's project; through `run` and
/// through `serve` (the same command as a gateway's server). The server here is the session
/// tests' fixture (no SDK, so nothing to fetch).
#[test]
fn the_uv_quickstart_shape_runs_from_its_project() {
    let Some(home) = setup("quickstart") else {
        return;
    };
    let project = home.home.join("projects/weather");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/serve/fixture_server.py"),
        project.join("weather.py"),
    )
    .unwrap();
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = \"weather\"\nversion = \"0.1.0\"\nrequires-python = \">=3.9\"\ndependencies = []\n",
    )
    .unwrap();
    // The user's own `uv sync`, as that user (no dependencies: nothing to fetch).
    let uv = home.root.join("tools/bin/uv");
    let mut sync = match home.run_as {
        Some(uid) => {
            let status = Command::new("chown")
                .arg("-R")
                .arg(format!("{uid}:{uid}"))
                .arg(home.home.join("projects"))
                .status()
                .unwrap();
            assert!(status.success());
            let mut cmd = Command::new("setpriv");
            cmd.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .arg(&uv);
            cmd
        }
        None => Command::new(&uv),
    };
    let synced = sync
        .args([
            "sync",
            "--offline",
            "--python",
            "/usr/bin/python3",
            "--directory",
        ])
        .arg(&project)
        .env_clear()
        .env("HOME", &home.home)
        .env("PATH", "/usr/bin:/bin")
        // uv leaves a lock file in the temp dir: the throwaway home's, not the machine's.
        .env("TMPDIR", &home.home)
        .output()
        .unwrap();
    assert!(
        synced.status.success(),
        "uv sync: {}",
        String::from_utf8_lossy(&synced.stderr)
    );
    let project_arg = project.display().to_string();
    // The same command as a host's drop-in wrapper (run) and as a gateway's server (serve).
    let config = home.root.join("airlock.toml");
    std::fs::write(
        &config,
        format!("[servers.weather]\ncommand = \"uv\"\nargs = [\"--directory\", {project_arg:?}, \"run\", \"weather.py\"]\n"),
    )
    .unwrap();
    let config_arg = config.display().to_string();
    let run: &[&str] = &[
        "run",
        "--",
        "uv",
        "--directory",
        &project_arg,
        "run",
        "weather.py",
    ];
    let serve: &[&str] = &["serve", "--config", &config_arg];
    for (args, tool) in [(run, "echo"), (serve, "weather__echo")] {
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"text":"hi"}}}}}}"#
        );
        let (answer, stderr) = call_through_airlock(&home, args, &call);
        assert_eq!(
            answer["result"]["content"][0]["text"], "fixture: hi",
            "{args:?}: {answer}\n{stderr}"
        );
    }
    let audit = std::fs::read_to_string(home.state().join("airlock/audit.jsonl")).unwrap();
    assert!(
        audit.contains(r#""event":"spawn","server":"weather""#),
        "{audit}"
    );
}

/// airlock as root: the server runs as nobody, the cache is root's, in a 0700 home. The overlay
/// is at the real cache path in the server's root (the directories leading to it are the root's
/// own), with an idmapped lower layer. (Not supported before the constructed root.)
#[test]
fn uvx_from_the_uv_cache_works_as_root() {
    if !is_root() {
        return; // needs root; the ordinary-user test covers this uid
    }
    let Some(home) = setup_as("root", None) else {
        return;
    };
    check_uvx_from_cache(&home);
}

fn check_uvx_from_cache(home: &Home) {
    let before = snapshot(&home.cache);
    let (answer, stderr) = time_through_airlock_run(home);
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}\n{stderr}"));
    assert!(text.contains("\"timezone\": \"UTC\""), "{text}\n{stderr}");
    // The user's cached environment was used as it is (through its absolute links into the
    // cache), not rebuilt in the upper layer as it is when the cache shows up at another path.
    assert!(
        !stderr.contains("Installed "),
        "uvx rebuilt the tool environment instead of using the cached one\n{stderr}"
    );
    assert!(
        before == snapshot(&home.cache),
        "the real uv cache changed\n{stderr}"
    );
    // uv writes lock files into its cache even when everything is cached: into its layer on the
    // scratch disk, not on the user's disk.
    assert!(
        !home.server_dir("mcp-server-time").exists(),
        "the server wrote to the disk\n{stderr}"
    );
}

/// Writes through the overlay mounted over the real cache path succeed in the server's view
/// (the grant on the mounted overlay works), land in the upper layer, and never reach the real
/// cache; the grant does not extend to the real directories around the cache.
const HOSTILE: &str = r#"
import os, sys
cache = os.environ["UV_CACHE_DIR"]
print("view:", cache)
def attempt(name, action):
    try:
        action()
        print(name + ": ok")
    except OSError as err:
        print(name + ": " + (os.strerror(err.errno) if err.errno else str(err)))
archive = os.path.join(cache, "archive-v0")
entry = sorted(os.listdir(archive))[0]
print("planted-before:", "yes" if os.path.exists(os.path.join(archive, entry, "planted.py")) else "no")
def plant():
    with open(os.path.join(archive, entry, "planted.py"), "w") as f:
        f.write("PLANTED\n")
attempt("plant", plant)
def overwrite():
    with open(os.path.join(cache, "CACHEDIR.TAG"), "w") as f:
        f.write("PLANTED\n")
attempt("overwrite", overwrite)
attempt("delete", lambda: os.remove(os.path.join(cache, "CACHEDIR.TAG")))
attempt("mkdir", lambda: os.mkdir(os.path.join(cache, "planted-dir")))
attempt("beside", lambda: open(os.path.join(os.path.dirname(cache), "beside.txt"), "w").close())
with open("/proc/self/mountinfo") as f:
    print("mountinfo:", "overlay" if any((" " + cache + " ") in l and "overlay" in l for l in f) else "none")
"#;

#[test]
fn a_hostile_server_cannot_write_the_real_uv_cache() {
    let Some(home) = setup("hostile") else {
        return;
    };
    let before = snapshot(&home.cache);
    let parent_before = snapshot(home.cache.parent().unwrap());
    let run = || -> (Output, BTreeMap<String, String>) {
        let mut child = home
            .airlock(&[
                "__sandbox-exec",
                "--server",
                "hostile-uv",
                "--",
                "/usr/bin/python3",
                "-c",
                HOSTILE,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Held open until the script is done: EOF on stdin starts airlock's kill sequence.
        let stdin = child.stdin.take();
        let out = child.wait_with_output().unwrap();
        drop(stdin);
        let results = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_once(": "))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (out, results)
    };
    let (out, results) = run();
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(
        results.get("view").map(PathBuf::from),
        Some(home.cache.clone()),
        "{report}"
    );
    for (name, expected) in [
        ("plant", "ok"),
        ("overwrite", "ok"),
        ("delete", "ok"),
        ("mkdir", "ok"),
        // The directory holding the cache is the server's read-only root (landlock refused this
        // with EACCES before the constructed root).
        ("beside", "Read-only file system"),
        ("mountinfo", "overlay"),
    ] {
        assert_eq!(
            results.get(name).map(String::as_str),
            Some(expected),
            "{name}\n{report}"
        );
    }
    assert!(
        before == snapshot(&home.cache),
        "the real uv cache changed\n{report}"
    );
    assert!(
        parent_before == snapshot(home.cache.parent().unwrap()),
        "the real ~/.cache changed\n{report}"
    );
    assert!(
        !home.server_dir("hostile-uv").exists(),
        "the server wrote to the disk\n{report}"
    );
    // A second run starts from the real cache again: the first run's layer went with it.
    let (out, again) = run();
    assert_eq!(
        again.get("planted-before").map(String::as_str),
        Some("no"),
        "{}",
        text(&out)
    );
    assert_eq!(
        again.get("plant").map(String::as_str),
        Some("ok"),
        "{}",
        text(&out)
    );
    assert!(before == snapshot(&home.cache), "the real uv cache changed");
}

/// pip's index host: `pip config list` (index-url), else PIP_INDEX_URL, else pip's own default
/// (uv's default index is the same; the install step reaches it, read at run time).
fn pip_index_host() -> String {
    let output = |args: &[&str]| {
        Command::new("python3")
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let configured = output(&["-m", "pip", "config", "list"])
        .lines()
        .find(|line| line.contains("index-url"))
        .and_then(|line| line.split_once('='))
        .map(|(_, value)| value.trim().trim_matches('\'').to_string());
    let url = configured
        .or_else(|| std::env::var("PIP_INDEX_URL").ok())
        .unwrap_or_else(|| {
            output(&[
                "-c",
                "from pip._internal.models.index import PyPI; print(PyPI.simple_url)",
            ])
        });
    let host = url
        .trim()
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split(['/', ':']).next())
        .unwrap_or_default()
        .to_string();
    assert!(!host.is_empty(), "no pip index host");
    host
}

/// The first file under `dir` whose path ends with `suffix`.
fn find_files(dir: &Path, suffix: &str, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_file() && path.ends_with(suffix) {
            found.push(path);
        } else if kind.is_dir() {
            find_files(&path, suffix, found);
        }
    }
}

/// `airlock run uvx PKG` (no `--`) started by the official MCP Python SDK client from a 0700
/// working directory: its report (tools, the `get_current_time` call) and its stderr.
fn time_through_the_sdk(home: &Home) -> (serde_json::Value, String) {
    let cwd = home.root.join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    if let Some(uid) = home.run_as {
        std::os::unix::fs::chown(&cwd, Some(uid), Some(uid)).unwrap();
    }
    chmod(&cwd, 0o700);
    let python = peers().join("sandbox-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `bash .ci/install-peers`",
        python.display()
    );
    let airlock = home.airlock(&["run", "uvx", PACKAGE]);
    let mut cmd = Command::new(python);
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mcp/call_client.py"
    ))
    .args(["get_current_time", r#"{"timezone": "UTC"}"#, "--"])
    .arg(airlock.get_program())
    .args(airlock.get_args())
    .env_clear()
    .envs(
        airlock
            .get_envs()
            .filter_map(|(key, value)| Some((key, value?))),
    )
    .current_dir(&cwd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("no report from the SDK client\n{}", text(&out)));
    (report, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `uvx <pkg>` with an EMPTY uv cache, as a host starts it (the Python SDK, `airlock run uvx PKG`
/// without `--`, a 0700 working directory): airlock's install step fetches the package (network
/// to the index the user's configuration names only: its connections are audited as
/// `net_connect` to that host before the `install` event), then the server runs confined. uv
/// moves each unpacked wheel into place with rename(2) across directories, which needs
/// landlock's REFER inside the cache's private layer (see `init_ruleset` in the confine helper).
/// As root and as an ordinary user.
///
/// The package is pinned: unpinned, uv resolves the newest release at test time, whose Python
/// requirement and dependency set may change under the test (a release needing a newer Python
/// than the machine's fails for reasons that are not airlock's); the pinned one is the release
/// the cached cases above use.
#[test]
fn uvx_with_an_empty_cache_is_installed_then_runs() {
    let mut runs = vec![("empty-user", is_root().then_some(USER_UID))];
    if is_root() {
        runs.push(("empty-root", None));
    }
    let index = pip_index_host();
    for (tag, run_as) in runs {
        let Some(home) = setup_as(tag, run_as) else {
            return;
        };
        std::fs::remove_dir_all(&home.cache).unwrap();
        let (report, stderr) = time_through_the_sdk(&home);
        let shown = format!("{tag}: {report:#}\n{stderr}");
        assert!(
            report["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| t == "get_current_time")),
            "{shown}"
        );
        assert_eq!(report["call"]["isError"], false, "{shown}");
        assert!(
            report["call"]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("\"timezone\": \"UTC\""),
            "{shown}"
        );
        let audit = home.state().join("airlock/audit.jsonl");
        let events: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let install_at = events
            .iter()
            .position(|e| e["event"] == "install")
            .unwrap_or_else(|| panic!("no install event: {events:#?}\n{shown}"));
        let install = &events[install_at];
        assert_eq!(install["outcome"], "ok", "{install}");
        assert_eq!(install["detail"]["runner"], "uvx", "{install}");
        assert_eq!(install["detail"]["package"], "mcp-server-time", "{install}");
        assert_eq!(install["detail"]["version"], "2026.10.19", "{install}");
        // `integrity` is what `integrity_of` says: the SHA-256 of the installed distribution's
        // RECORD, as it lies in the install's layer.
        assert!(
            install["detail"]["integrity_of"]
                .as_str()
                .unwrap_or_default()
                .contains(".dist-info/RECORD"),
            "{install}"
        );
        // uv's cache holds the unpacked wheel's RECORD too (as the wheel shipped it); the one
        // the installed distribution reads is the environment's, under site-packages.
        let mut records = Vec::new();
        find_files(
            &home.server_dir("mcp-server-time").join("packages/uv"),
            "mcp_server_time-2026.10.19.dist-info/RECORD",
            &mut records,
        );
        let record = records
            .iter()
            .find(|path| path.components().any(|c| c.as_os_str() == "site-packages"))
            .unwrap_or_else(|| panic!("no installed RECORD in the install's layer: {records:?}"));
        let digest = sha2::Sha256::digest(std::fs::read(record).unwrap());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            install["detail"]["integrity"],
            format!("sha256:{hex}"),
            "{install}"
        );
        // The install step's connections: to the index, allowed, before the install finished.
        let to_index: Vec<&serde_json::Value> = events[..install_at]
            .iter()
            .filter(|e| {
                e["event"] == "net_connect"
                    && e["server"] == "mcp-server-time"
                    && e["decision"] == "allow"
                    && e["detail"]["host"] == index.as_str()
                    && e["detail"]["port"] == 443
            })
            .collect();
        assert!(
            !to_index.is_empty(),
            "no net_connect to {index} before the install event: {events:#?}"
        );
        // The server itself has no network: no connection is allowed once the install is done.
        assert!(
            !events[install_at..]
                .iter()
                .any(|e| e["event"] == "net_connect" && e["decision"] == "allow"),
            "{events:#?}"
        );
    }
}
