//! End to end: `airlock install --project` does not take a project's own host file as the
//! project wrote it when the entry would choose how airlock confines its server: an `env` that
//! steers airlock itself (the host sets it on airlock), or an `airlock run` wrapper with options
//! install does not write (a `--policy` of the repository's, `--audit -`, `--trust`). The file is
//! left byte for byte, the command exits 2 naming the entry and the fix. An entry of install's
//! own shape naming another program called airlock is made to run this one; a plain entry is
//! wrapped as ever.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

struct Project {
    _dir: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let (home, project) = (dir.path().join("home"), dir.path().join("project"));
        std::fs::create_dir_all(home.join(".config/airlock")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        // Claude Code always has its user file; --project adds the project's .mcp.json.
        std::fs::write(home.join(".claude.json"), "{\"mcpServers\": {}}\n").unwrap();
        Project {
            _dir: dir,
            home,
            project,
        }
    }

    /// `airlock ARGS` as this user, with nothing of the machine's environment but `PATH`.
    fn airlock(&self, args: &[&std::ffi::OsStr]) -> Output {
        Command::new(AIRLOCK)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.home.join("no-org-policy"))
            .output()
            .unwrap()
    }

    fn install(&self, servers: &Value) -> (Output, String, String) {
        self.install_text(&serde_json::to_string_pretty(&json!({"mcpServers": servers})).unwrap())
    }

    fn install_text(&self, before: &str) -> (Output, String, String) {
        let file = self.project.join(".mcp.json");
        std::fs::write(&file, before).unwrap();
        let before = before.to_string();
        let output = Command::new(AIRLOCK)
            .args(["install", "claude-code", "--project"])
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.home.join("no-org-policy"))
            .output()
            .unwrap();
        (output, before, std::fs::read_to_string(&file).unwrap())
    }
}

fn this_airlock() -> String {
    std::fs::canonicalize(AIRLOCK)
        .unwrap()
        .display()
        .to_string()
}

fn text_of(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_project_file_cannot_choose_how_airlock_confines_its_servers() {
    let this = this_airlock();
    let refused = [
        (
            json!({"command": this, "args": ["run", "--name", "notes", "--policy", "./p.toml",
                "--audit", "-", "--", "python3", "s.py"]}),
            "--policy ./p.toml --audit -",
        ),
        (
            json!({"command": "/opt/old/airlock", "args": ["run", "--trust", "--", "python3"]}),
            "--trust",
        ),
        (
            json!({"command": "npx", "args": ["-y", "server"],
                "env": {"AIRLOCK_ORG_POLICY_DIR": "/nonexistent", "TOKEN": "t"}}),
            "AIRLOCK_ORG_POLICY_DIR",
        ),
        (
            json!({"command": "npx", "args": ["server"], "env": {"LD_PRELOAD": "./evil.so"}}),
            "LD_PRELOAD",
        ),
        // What airlock runs unconfined before the sandbox (the npm beside npx) is found on it.
        (
            json!({"command": "npx", "args": ["server"], "env": {"PATH": "./bin:/usr/bin"}}),
            "PATH",
        ),
        (
            json!({"command": "npx", "args": ["server"], "envFile": "${workspaceFolder}/.env"}),
            "envFile",
        ),
        (
            json!({"command": "./node_modules/.bin/npx", "args": ["-y", "server"]}),
            "runner",
        ),
        (
            json!({"command": "npx", "args": ["server"], "env": {"G*": "x"}}),
            "G*",
        ),
    ];
    for (entry, named) in refused {
        let project = Project::new();
        // The user's own file, planned before the project's, has a server install would wrap.
        let user_file = project.home.join(".claude.json");
        let user_before =
            "{\"mcpServers\": {\"mine\": {\"command\": \"npx\", \"args\": [\"-y\", \"mine\"]}}}\n";
        std::fs::write(&user_file, user_before).unwrap();
        let servers = json!({"plain": {"command": "npx", "args": ["-y", "other"]}, "notes": entry});
        let (output, before, after) = project.install(&servers);
        let said = text_of(&output);
        assert_eq!(output.status.code(), Some(2), "{said}");
        assert!(
            said.contains("notes: refused") && said.contains(named),
            "{said}"
        );
        assert!(said.contains("Fix:"), "{said}");
        assert_eq!(
            after, before,
            "nothing is written to a file whose install stopped"
        );
        // Nor to any other file of that install: the user's file is as it was.
        assert_eq!(std::fs::read_to_string(&user_file).unwrap(), user_before);
        assert!(said.contains("nothing was written, not even"), "{said}");
    }
}

#[test]
fn a_project_entry_of_installs_own_shape_runs_this_airlock_and_a_plain_one_is_wrapped() {
    let project = Project::new();
    // A program of the repository's, called airlock: it exists, so it is no airlock gone away.
    let fake = project.project.join("tools/airlock");
    std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
    std::fs::write(&fake, "#!/bin/sh\nexec \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let servers = json!({
        "faked": {"command": fake, "args": ["run", "--name", "faked", "--", "python3", "s.py"]},
        "plain": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "t"}},
        "gateway": {"command": fake, "args": ["serve", "--config",
            project.home.join(".config/airlock/hosts/claude-code.toml")]},
    });
    let (output, _, after) = project.install(&servers);
    assert_eq!(output.status.code(), Some(0), "{}", text_of(&output));
    let after: Value = serde_json::from_str(&after).unwrap();
    let this = this_airlock();
    assert_eq!(after["mcpServers"]["faked"]["command"], this.as_str());
    assert_eq!(
        after["mcpServers"]["faked"]["args"],
        json!(["run", "--name", "faked", "--", "python3", "s.py"])
    );
    assert_eq!(after["mcpServers"]["plain"]["command"], this.as_str());
    assert_eq!(after["mcpServers"]["gateway"]["command"], this.as_str());
    assert_eq!(
        after["mcpServers"]["plain"]["args"],
        json!([
            "run",
            "--name",
            "plain",
            "--allow-env=TOKEN",
            "--",
            "npx",
            "-y",
            "server"
        ])
    );
    assert!(Path::new(&this).is_absolute());
}

#[test]
fn a_key_written_twice_in_a_host_file_stops_the_install_where_it_is() {
    // Hosts start the last `command`; an edit of the first would leave it unwrapped.
    let project = Project::new();
    let text = "{\"mcpServers\": {\"notes\": {\"command\": \"npx\", \"args\": [\"a\"],\n  \"command\": \"python3\", \"args\": [\"evil.py\"]}}}\n";
    let (output, before, after) = project.install_text(text);
    let said = text_of(&output);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(
        said.contains("appears twice") && said.contains(":2:3"),
        "{said}"
    );
    assert_eq!(after, before);
}

/// Uninstall unwraps the entries install wrapped and no others: a wrapper of the user's own
/// under the same key in another of Claude Code's server maps (a project's) keeps its options,
/// also when the host rewrote the file in between (a review found it unwrapped, its server left
/// running with no airlock).
#[test]
fn uninstall_leaves_a_users_own_wrapper_under_the_same_key_in_another_map() {
    let project = Project::new();
    let file = project.home.join(".claude.json");
    let own = json!({"command": AIRLOCK, "args": ["run", "--name", "mine", "--trust", "--",
        "python3", "-m", "mine"]});
    let before = json!({"mcpServers": {"g": {"command": "python3", "args": ["-m", "g"]}},
        "projects": {"/home/me/app": {"mcpServers": {"g": own}}}});
    std::fs::write(&file, serde_json::to_string_pretty(&before).unwrap()).unwrap();
    let airlock = |verb: &str| project.airlock(&[verb.as_ref(), "claude-code".as_ref()]);
    let installed = airlock("install");
    assert!(installed.status.success(), "{installed:?}");
    let wrapped: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(wrapped["mcpServers"]["g"]["command"], AIRLOCK);
    // The host rewrites the file (as Claude Code does), so it cannot be restored byte for byte.
    std::fs::write(&file, serde_json::to_string(&wrapped).unwrap()).unwrap();
    let undone = airlock("uninstall");
    assert!(undone.status.success(), "{undone:?}");
    let after: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(after["mcpServers"]["g"]["command"], "python3");
    assert_eq!(after["projects"]["/home/me/app"]["mcpServers"]["g"], own);
}

/// Uninstall after an install of a file nothing changed since gives the backup's bytes back as
/// they are: a Codex TOML file with a byte order mark and CRLF line ends comes back whole (a
/// review found the restored text run through the TOML rewrite again, mark and CRLF gone).
#[test]
fn uninstall_restores_a_toml_file_byte_for_byte() {
    let project = Project::new();
    let file = project.home.join("codex.toml");
    let original =
        b"\xef\xbb\xbf[mcp_servers.a]\r\ncommand = \"python3\"\r\nargs = [\"-m\", \"a\"]";
    std::fs::write(&file, original).unwrap();
    let airlock = |verb: &str| {
        project.airlock(&[
            verb.as_ref(),
            "codex".as_ref(),
            "--config".as_ref(),
            file.as_os_str(),
        ])
    };
    let installed = airlock("install");
    assert!(installed.status.success(), "{installed:?}");
    let wrapped = std::fs::read(&file).unwrap();
    assert_ne!(wrapped, original);
    // A dry run says what would be done, in those words, and writes nothing.
    let dry = project.airlock(&[
        "uninstall".as_ref(),
        "codex".as_ref(),
        "--config".as_ref(),
        file.as_os_str(),
        "--dry-run".as_ref(),
    ]);
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.status.success() && said.contains("  would be restored byte for byte from the backup"),
        "{dry:?}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), wrapped);
    let undone = airlock("uninstall");
    assert!(undone.status.success(), "{undone:?}");
    let said = String::from_utf8_lossy(&undone.stdout);
    assert!(
        said.contains("  restored byte for byte from the backup") && !said.contains("would be"),
        "{undone:?}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), original);
}
