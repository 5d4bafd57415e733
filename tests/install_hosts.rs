//! `airlock install` / `uninstall` end to end, on a fixture config of every host, each in its own
//! throwaway HOME: the wrapped entry, started exactly as the host starts it (its command, args,
//! env and cwd) by the official MCP Python SDK client, still reaches the server with its env and
//! cwd, now through `airlock run`; a second install changes nothing; `--dry-run` writes nothing;
//! uninstall gives the original bytes back.
//!
//! Needs the Python SDK from `.ci/install-peers`: skipped locally without it, failed under CI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use airlock::install::jsonc;
use serde_json::{Value, json};

mod support;

use support::{AIRLOCK, real_python, root, sdk_python};

#[path = "install_hosts/gateway_files.rs"]
mod gateway_files;
#[path = "install_hosts/on_path.rs"]
mod on_path;

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/hosts")
}

/// One throwaway user: HOME, its XDG dirs, a project directory, and a user policy that lets the
/// fixture server read its own script (the tests run as root; the server runs as nobody).
struct User {
    _dir: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl User {
    fn new() -> User {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(home.join(".config/airlock")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            home.join(".config/airlock/policy.toml"),
            format!(
                "version = 1\n[sandbox]\nrun_as = \"root\"\nread = [\"{}\"]\n",
                fixtures().display()
            ),
        )
        .unwrap();
        User {
            _dir: dir,
            home,
            project,
        }
    }

    fn airlock(&self, args: &[&str]) -> Output {
        self.airlock_in(&self.project, args)
    }

    fn airlock_in(&self, cwd: &Path, args: &[&str]) -> Output {
        self.own_env(Command::new(AIRLOCK).args(args).current_dir(cwd))
            .output()
            .unwrap()
    }

    /// This user's environment only: their home and airlock dirs, the test's `PATH`.
    fn own_env<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.home.join("no-org-policy"))
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.airlock(args);
        assert!(
            out.status.success(),
            "airlock {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Writes a fixture with its placeholders filled in; returns the text.
    fn place(&self, fixture: &str, destination: &Path) -> String {
        let text = std::fs::read_to_string(fixtures().join(fixture))
            .unwrap()
            .replace("@PYTHON@", &real_python())
            .replace(
                "@SERVER@",
                &fixtures().join("report_server.py").display().to_string(),
            )
            .replace("@DIR@", &fixtures().display().to_string());
        std::fs::create_dir_all(destination.parent().unwrap()).unwrap();
        std::fs::write(destination, &text).unwrap();
        text
    }
}

/// A host's file as the host reads it: JSON(C) or TOML, as a JSON value.
fn read_config(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "toml") {
        let table: toml::Table = toml::from_str(&text).unwrap();
        return serde_json::to_value(table).unwrap();
    }
    to_json(&text, &jsonc::parse(&text).unwrap())
}

fn to_json(text: &str, node: &jsonc::Node) -> Value {
    match &node.value {
        jsonc::Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|m| (m.key.clone(), to_json(text, &m.value)))
                .collect(),
        ),
        jsonc::Value::Array(items) => {
            Value::Array(items.iter().map(|i| to_json(text, i)).collect())
        }
        jsonc::Value::String(s) => Value::String(s.clone()),
        jsonc::Value::Bool(flag) => Value::Bool(*flag),
        jsonc::Value::Scalar => serde_json::from_str(&text[node.span.clone()]).unwrap(),
    }
}

/// Starts `entry` the way a host does and returns what the SDK client saw.
fn start_as_host(python: &Path, user: &User, entry: &Value) -> Value {
    let mut env = json!({"HOME": user.home.display().to_string()});
    for (key, value) in entry["env"].as_object().into_iter().flatten() {
        env[key] = value.clone();
    }
    let spec = json!({
        "command": entry["command"],
        "args": entry["args"],
        "env": env,
        "cwd": entry.get("cwd"),
    });
    let out = Command::new(python)
        .arg(fixtures().join("host_client.py"))
        .arg(spec.to_string())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &user.home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the host could not start {entry}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The whole cycle for one host file.
fn cycle(
    host: &str,
    fixture: &str,
    place: &dyn Fn(&User) -> PathBuf,
    entry_at: &[&str],
    extra: &[&str],
) {
    let Some(python) = sdk_python() else { return };
    let user = User::new();
    let path = place(&user);
    let original = user.place(fixture, &path);
    let token = read_config(&path);
    let token = entry_at.iter().fold(&token, |v, key| &v[*key])["env"]["FIXTURE_TOKEN"]
        .as_str()
        .map(str::to_string);

    // A host file `check` reads (an mcpServers or servers JSON file) stays one it passes.
    let path_text = path.display().to_string();
    let checked_before = user.airlock(&["check", "--config", &path_text]);

    // --dry-run prints the diff and writes nothing, not even airlock's own state.
    let mut args = vec!["install", host, "--dry-run"];
    args.extend_from_slice(extra);
    let dry = user.ok(&args);
    assert!(
        dry.contains("(after airlock)") && dry.contains("+"),
        "{dry}"
    );
    assert!(
        dry.contains("report: would be wrapped in `airlock run --name report`"),
        "{dry}"
    );
    // The diff quotes the host's file, whose env holds a token: never shown in clear (masked
    // where its line is within the diff's context).
    if let Some(token) = &token {
        assert!(!dry.contains(token.as_str()), "the token is shown: {dry}");
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    assert!(!user.home.join(".local/state/airlock/installs").exists());

    let mut args = vec!["install", host];
    args.extend_from_slice(extra);
    let out = user.ok(&args);
    assert!(
        out.contains("wrapped in `airlock run --name report`"),
        "{out}"
    );
    // A project file may be committed: install says it now names this machine's airlock.
    assert_eq!(
        out.contains("note: this project file now names this machine's airlock"),
        extra.contains(&"--project"),
        "{out}"
    );
    let installed = std::fs::read_to_string(&path).unwrap();
    assert_ne!(installed, original);
    if checked_before.status.success() {
        // The wrapped entry is checked as the command it wraps, not as airlock in airlock.
        let checked = user.airlock(&["check", "--config", &path_text]);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr)
        );
        assert!(checked.status.success(), "{said}");
        assert!(
            said.contains("\"report\" starts through `airlock run`")
                && said.contains("report_server.py"),
            "{said}"
        );
    }

    let config = read_config(&path);
    let entry = entry_at.iter().fold(&config, |v, key| &v[*key]);
    let airlock = std::fs::canonicalize(AIRLOCK).unwrap();
    assert_eq!(entry["command"], airlock.display().to_string());
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[..3], ["run", "--name", "report"]);
    assert_eq!(args.last(), Some(&"--flag"));

    // Started as the host starts it: through airlock, with the entry's env and cwd.
    let seen = start_as_host(&python, &user, entry);
    assert_eq!(seen["tools"], json!(["report"]), "{seen}");
    assert_eq!(
        seen["report"]["token"].as_str().map(str::to_string),
        token,
        "{seen}"
    );
    assert_eq!(seen["report"]["argv"], json!(["--flag"]));
    if let Some(cwd) = entry.get("cwd").and_then(Value::as_str) {
        assert_eq!(seen["report"]["cwd"], cwd, "{seen}");
    }
    let audit =
        std::fs::read_to_string(user.home.join(".local/state/airlock/audit.jsonl")).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"event\":\"decision\"") && l.contains("\"server\":\"report\"")),
        "the call went through airlock's gate: {audit}"
    );

    // A second install changes nothing.
    let mut args = vec!["install", host];
    args.extend_from_slice(extra);
    let again = user.ok(&args);
    assert!(
        again.contains("already wrapped") && again.contains("nothing to change"),
        "{again}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), installed);

    // Uninstall gives the bytes back.
    let mut args = vec!["uninstall", host];
    args.extend_from_slice(extra);
    let undone = user.ok(&args);
    assert!(undone.contains("restored byte for byte"), "{undone}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
}

#[test]
fn claude_desktop() {
    cycle(
        "claude-desktop",
        "claude-desktop/claude_desktop_config.json",
        &|u| u.home.join(".config/Claude/claude_desktop_config.json"),
        &["mcpServers", "report"],
        &[],
    );
}

#[test]
fn claude_code_user() {
    cycle(
        "claude-code",
        "claude-code/.claude.json",
        &|u| u.home.join(".claude.json"),
        &["mcpServers", "report"],
        &[],
    );
}

#[test]
fn claude_code_project() {
    cycle(
        "claude-code",
        "claude-code/.mcp.json",
        &|u| {
            // The user file must exist too (Claude Code always has one); --project adds .mcp.json.
            std::fs::write(u.home.join(".claude.json"), "{\"numStartups\": 1}\n").unwrap();
            u.project.join(".mcp.json")
        },
        &["mcpServers", "report"],
        &["--project"],
    );
}

#[test]
fn cursor() {
    cycle(
        "cursor",
        "cursor/mcp.json",
        &|u| u.home.join(".cursor/mcp.json"),
        &["mcpServers", "report"],
        &[],
    );
}

#[test]
fn vscode() {
    cycle(
        "vscode",
        "vscode/mcp.json",
        &|u| u.home.join(".config/Code/User/mcp.json"),
        &["servers", "report"],
        &[],
    );
}

#[test]
fn windsurf() {
    cycle(
        "windsurf",
        "windsurf/mcp_config.json",
        &|u| u.home.join(".codeium/windsurf/mcp_config.json"),
        &["mcpServers", "report"],
        &[],
    );
}

#[test]
fn gemini() {
    cycle(
        "gemini",
        "gemini/settings.json",
        &|u| u.home.join(".gemini/settings.json"),
        &["mcpServers", "report"],
        &[],
    );
}

#[test]
fn codex() {
    cycle(
        "codex",
        "codex/config.toml",
        &|u| u.home.join(".codex/config.toml"),
        &["mcp_servers", "report"],
        &[],
    );
}

#[test]
fn zed() {
    cycle(
        "zed",
        "zed/settings.json",
        &|u| u.home.join(".config/zed/settings.json"),
        &["context_servers", "report"],
        &[],
    );
}

#[test]
fn uninstall_after_the_host_changed_the_file_unwraps_only_airlocks_part() {
    let user = User::new();
    let path = user.home.join(".claude.json");
    let original = user.place("claude-code/.claude.json", &path);
    user.ok(&["install", "claude-code"]);
    // Claude Code rewrites its file all the time: here it bumps a counter.
    let installed = std::fs::read_to_string(&path).unwrap();
    let touched = installed.replace("\"numStartups\": 42", "\"numStartups\": 43");
    assert_ne!(touched, installed);
    std::fs::write(&path, &touched).unwrap();

    let out = user.ok(&["uninstall", "claude-code"]);
    assert!(!out.contains("restored byte for byte"), "{out}");
    assert!(out.contains("report: unwrapped"), "{out}");
    assert!(out.contains("local-report (in projects."), "{out}");
    let after = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        after,
        original.replace("\"numStartups\": 42", "\"numStartups\": 43")
    );
}

#[test]
fn install_without_a_host_lists_what_is_here_and_writes_nothing() {
    let user = User::new();
    let cursor = user.home.join(".cursor/mcp.json");
    let codex = user.home.join(".codex/config.toml");
    let cursor_text = user.place("cursor/mcp.json", &cursor);
    let codex_text = user.place("codex/config.toml", &codex);
    let project_file = user.project.join(".mcp.json");
    user.place("claude-code/.mcp.json", &project_file);
    let out = user.ok(&["install"]);
    assert!(
        out.contains(&format!(
            "Cursor [cursor] {} (user scope): `airlock install cursor`",
            cursor.display()
        )),
        "{out}"
    );
    // A project file is edited only with --project: the listing names the command that does.
    assert!(
        out.contains(&format!(
            "Claude Code [claude-code] {} (project scope): `airlock install claude-code --project`",
            project_file.display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("Codex CLI [codex] {}", codex.display())),
        "{out}"
    );
    assert!(
        out.contains("report: would be wrapped in `airlock run --name report`"),
        "{out}"
    );
    assert!(out.contains("docs: remote server: left alone"), "{out}");
    assert!(!out.contains("Zed"), "only hosts that are here: {out}");
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), cursor_text);
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), codex_text);
}

/// Run from the home directory, Cursor's project file (`./.cursor/mcp.json`) is its user file:
/// listed once, not once per scope.
#[test]
fn install_from_the_home_directory_lists_a_file_once() {
    let user = User::new();
    let cursor = user.home.join(".cursor/mcp.json");
    user.place("cursor/mcp.json", &cursor);
    let out = user.airlock_in(&user.home, &["install"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert_eq!(
        said.matches(&format!("Cursor [cursor] {}", cursor.display()))
            .count(),
        1,
        "{said}"
    );
}

#[test]
fn gateway_routes_remote_servers_through_airlock_serve_and_uninstall_brings_them_back() {
    let user = User::new();
    let path = user.home.join(".cursor/mcp.json");
    let original = user.place("cursor/mcp.json", &path);
    let out = user.ok(&["install", "cursor", "--gateway"]);
    assert!(
        out.contains("docs: moved behind the airlock gateway"),
        "{out}"
    );
    let config = read_config(&path);
    let gateway = &config["mcpServers"]["airlock"];
    assert_eq!(gateway["args"][0], "serve");
    assert!(config["mcpServers"].get("docs").is_none());
    let gateway_config = gateway["args"][2].as_str().unwrap();
    let served = std::fs::read_to_string(gateway_config).unwrap();
    assert!(
        served.contains("url = \"https://docs.example.com/mcp\""),
        "{served}"
    );
    // airlock itself accepts the gateway config it wrote.
    let checked = user.airlock(&["check", "--config", gateway_config]);
    let text = String::from_utf8_lossy(&checked.stdout);
    assert!(
        text.contains("docs [http]"),
        "{text}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    // And the host's own file, which now holds the gateway entry: the gateway is named, not
    // checked as a server (it is airlock itself), and its own config is pointed at.
    let host_file = path.display().to_string();
    let checked = user.airlock(&["check", "--config", &host_file]);
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("is the airlock gateway"), "{stderr}");
    assert!(stderr.contains(gateway_config), "{stderr}");

    user.ok(&["uninstall", "cursor"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    assert!(!Path::new(gateway_config).exists());
}

#[test]
fn a_second_gateway_install_keeps_the_servers_the_first_one_moved() {
    let user = User::new();
    let path = user.home.join(".cursor/mcp.json");
    user.place("cursor/mcp.json", &path);
    user.ok(&["install", "cursor", "--gateway"]);
    // The user adds another remote server to the installed file, and installs again.
    let installed = std::fs::read_to_string(&path).unwrap();
    let added = installed.replacen(
        "\"mcpServers\": {",
        "\"mcpServers\": {\n        \"docs2\": {\"url\": \"https://docs2.example.com/mcp\"},",
        1,
    );
    assert_ne!(added, installed);
    std::fs::write(&path, &added).unwrap();
    let out = user.ok(&["install", "cursor", "--gateway"]);
    assert!(
        out.contains("docs2: moved behind the airlock gateway"),
        "{out}"
    );
    assert!(
        out.contains("airlock: kept, serves the moved servers"),
        "{out}"
    );

    let config = read_config(&path);
    assert!(config["mcpServers"].get("docs2").is_none(), "{config}");
    let gateway_config = config["mcpServers"]["airlock"]["args"][2].as_str().unwrap();
    let checked = user.ok(&["check", "--config", gateway_config]);
    assert!(checked.contains("docs [http]"), "{checked}");
    assert!(checked.contains("docs2 [http]"), "{checked}");

    // Uninstall brings back both, each as it was written.
    user.ok(&["uninstall", "cursor"]);
    let config = read_config(&path);
    assert_eq!(
        config["mcpServers"]["docs"]["url"],
        "https://docs.example.com/mcp"
    );
    assert_eq!(
        config["mcpServers"]["docs2"]["url"],
        "https://docs2.example.com/mcp"
    );
    assert!(config["mcpServers"].get("airlock").is_none(), "{config}");
    assert!(!Path::new(gateway_config).exists());
}

#[test]
fn a_server_named_airlock_keeps_its_name_and_the_gateway_takes_a_free_one() {
    let user = User::new();
    let path = user.home.join(".cursor/mcp.json");
    let original = r#"{"mcpServers": {"airlock": {"command": "node", "args": ["mine.js"]}, "s": {"url": "https://x.example.com/sse", "transport": "sse"}}}"#;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, original).unwrap();
    let out = user.ok(&["install", "cursor", "--gateway"]);
    assert!(out.contains("s: moved behind the airlock gateway"), "{out}");
    assert!(out.contains("airlock-gateway: added"), "{out}");

    let config = read_config(&path);
    assert_eq!(config["mcpServers"]["airlock"]["args"][2], "airlock");
    let gateway = &config["mcpServers"]["airlock-gateway"];
    assert_eq!(gateway["args"][0], "serve", "{config}");
    let gateway_config = gateway["args"][2].as_str().unwrap();
    let checked = user.ok(&["check", "--config", gateway_config]);
    assert!(checked.contains("s [sse]"), "{checked}");

    user.ok(&["uninstall", "cursor"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
}

#[test]
fn unknown_hosts_and_broken_files_are_bad_input() {
    let user = User::new();
    let out = user.airlock(&["install", "emacs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("airlock knows claude-desktop, claude-code")
    );
    let path = user.home.join(".gemini/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"a\",, }\n  }\n}\n",
    )
    .unwrap();
    let out = user.airlock(&["install", "gemini"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:3:", path.display())),
        "{stderr}"
    );
}

/// An entry wrapped by an airlock that has since moved or gone is broken (the host cannot start
/// it): installing again points it at this airlock, its arguments kept, and uninstall still
/// brings the original back. One wrapped by another airlock that is still there is left alone.
#[test]
fn a_wrapper_whose_airlock_is_gone_is_pointed_at_this_one() {
    let user = User::new();
    let path = user.home.join(".cursor/mcp.json");
    let original = user.place("cursor/mcp.json", &path);
    user.ok(&["install", "cursor"]);
    let wrapped = std::fs::read_to_string(&path).unwrap();
    let this = read_config(&path)["mcpServers"]["report"]["command"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(&path, wrapped.replace(&this, "/opt/gone/airlock")).unwrap();
    let out = user.ok(&["install", "cursor"]);
    assert!(out.contains("no longer there"), "{out}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), wrapped);

    let other = user.home.join("other/airlock");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::copy(AIRLOCK, &other).unwrap();
    std::fs::write(&path, wrapped.replace(&this, other.to_str().unwrap())).unwrap();
    let out = user.ok(&["install", "cursor"]);
    assert!(out.contains("by another airlock"), "{out}");
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains(other.to_str().unwrap())
    );

    std::fs::write(&path, &wrapped).unwrap();
    user.ok(&["uninstall", "cursor"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
}

/// A server whose command is not on the launch allowlist would vanish from the host after
/// `install` (its `airlock run` line refuses to start it): install says so with the fix, and
/// the fix (`--trust` on the run line) is what `check` and the run line itself then honour.
#[test]
fn install_warns_of_a_command_the_policy_will_not_launch_and_trust_on_the_run_line_fixes_it() {
    let user = User::new();
    let own = user.home.join("own");
    std::fs::create_dir_all(&own).unwrap();
    let script = own.join("own-server");
    // The fixture server as a program of its own, outside every runtime on the allowlist.
    let server = std::fs::read_to_string(fixtures().join("report_server.py")).unwrap();
    let body = server.split_once('\n').unwrap().1;
    std::fs::write(&script, format!("#!{}\n{body}", real_python())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let policy = user.home.join(".config/airlock/policy.toml");
    let text = std::fs::read_to_string(&policy)
        .unwrap()
        .replace("read = [", &format!("read = [\"{}\", ", own.display()));
    std::fs::write(&policy, text).unwrap();
    let cursor = user.home.join(".cursor/mcp.json");
    user.place("cursor/mcp.json", &cursor);
    let mut config = read_config(&cursor);
    config["mcpServers"]["own"] = json!({"command": script.display().to_string(), "args": []});
    std::fs::write(&cursor, serde_json::to_string_pretty(&config).unwrap()).unwrap();

    let out = user.ok(&["install", "cursor"]);
    let warning = out
        .lines()
        .find(|l| l.contains("warning:"))
        .unwrap_or_else(|| panic!("no warning: {out}"));
    assert!(
        warning.contains("server \"own\"")
            && warning.contains("not on the launch allowlist")
            && warning.contains("\"--trust\" before \"--\""),
        "{warning}"
    );
    assert_eq!(out.matches("warning:").count(), 1, "only own: {out}");
    let check = user.airlock(&["check", "--config", cursor.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(2), "own may not launch yet");

    // The fix as the warning says: `--trust` before `--` on own's run line.
    let mut config = read_config(&cursor);
    let args = config["mcpServers"]["own"]["args"].as_array_mut().unwrap();
    let dashes = args.iter().position(|a| a == "--").unwrap();
    args.insert(dashes, json!("--trust"));
    std::fs::write(&cursor, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    let check = user.airlock(&["check", "--config", cursor.to_str().unwrap()]);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let entry = &config["mcpServers"]["own"];
    let mut command = Command::new(entry["command"].as_str().unwrap());
    let args = entry["args"].as_array().unwrap().iter();
    command
        .args(args.map(|a| a.as_str().unwrap()))
        .current_dir(&user.project);
    let mut child = user
        .own_env(&mut command)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::{BufRead, Write};
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n")
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    let _ = child.wait();
    assert!(
        line.contains("\"serverInfo\""),
        "the trusted run line starts it: {line}"
    );
}

/// With no host file here, `install` says where it looked, and how to name a file elsewhere.
#[test]
fn install_without_any_host_file_says_where_it_looked() {
    let user = User::new();
    let out = user.ok(&["install"]);
    assert!(out.starts_with("No MCP host configuration found"), "{out}");
    let cursor = user.home.join(".cursor/mcp.json");
    assert!(
        out.contains(&format!("Cursor [cursor] {}", cursor.display())),
        "{out}"
    );
    assert!(out.contains("--config PATH"), "{out}");
}

/// A binary not called `airlock` (a release asset named for its platform) knows its own
/// wrappers: installing twice wraps nothing twice, and after the host edited the file,
/// uninstall still unwraps what it wrapped.
#[test]
fn an_airlock_under_another_name_installs_once_and_uninstalls() {
    let user = User::new();
    let path = user.home.join(".cursor/mcp.json");
    let original = user.place("cursor/mcp.json", &path);
    let renamed = user.home.join("bin/airlock-x86_64-linux");
    std::fs::create_dir_all(renamed.parent().unwrap()).unwrap();
    std::fs::copy(AIRLOCK, &renamed).unwrap();
    let run = |args: &[&str]| {
        let out = user
            .own_env(Command::new(&renamed).args(args).current_dir(&user.project))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&["install", "cursor"]);
    let wrapped = std::fs::read_to_string(&path).unwrap();
    let again = run(&["install", "cursor"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), wrapped, "{again}");
    let report = read_config(&path)["mcpServers"]["report"].clone();
    assert_eq!(report["command"], renamed.to_str().unwrap(), "{wrapped}");
    assert_eq!(report["args"][0], "run", "{wrapped}");

    // The host rewrites the file (one more server): no byte-for-byte restore, the unwrap path.
    let mut edited = read_config(&path);
    edited["mcpServers"]["added"] = json!({"command": "true"});
    std::fs::write(&path, serde_json::to_string_pretty(&edited).unwrap()).unwrap();
    run(&["uninstall", "cursor"]);
    let mut restored = read_config(&path);
    restored["mcpServers"]
        .as_object_mut()
        .unwrap()
        .remove("added");
    assert_eq!(
        restored,
        to_json(&original, &jsonc::parse(&original).unwrap())
    );
}
