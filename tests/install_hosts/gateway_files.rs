//! `--gateway` on a host with more than one file: each file's moved servers keep a config of
//! their own.

use super::*;

/// VS Code reads servers from `mcp.json` and from `settings.json`; a `--config` file sits beside
/// Cursor's usual one. Each file's gateway serves that file's servers: one config for both had
/// the second file's install write over the first's, and its servers were gone from the host.
#[test]
fn every_host_file_keeps_its_own_gateway_config() {
    let user = User::new();
    let vscode = user.home.join(".config/Code/User");
    std::fs::create_dir_all(&vscode).unwrap();
    let mcp = vscode.join("mcp.json");
    let settings = vscode.join("settings.json");
    std::fs::write(
        &mcp,
        r#"{"servers": {"alpha": {"type": "http", "url": "https://alpha.example.com/mcp"}}}"#,
    )
    .unwrap();
    std::fs::write(
        &settings,
        r#"{"editor.fontSize": 12, "mcp": {"servers": {"beta": {"type": "http", "url": "https://beta.example.com/mcp"}}}}"#,
    )
    .unwrap();
    user.ok(&["install", "vscode", "--gateway"]);
    let served_by = |config: &Value| -> String {
        let entry = config["airlock"].clone();
        assert_eq!(entry["args"][0], "serve", "{config}");
        entry["args"][2].as_str().unwrap().to_string()
    };
    let from_mcp = served_by(&read_config(&mcp)["servers"]);
    let from_settings = served_by(&read_config(&settings)["mcp"]["servers"]);
    assert_ne!(from_mcp, from_settings);
    for (config, has, lacks) in [
        (&from_mcp, "alpha [http]", "beta"),
        (&from_settings, "beta [http]", "alpha"),
    ] {
        let checked = user.ok(&["check", "--config", config]);
        assert!(checked.contains(has), "{config}: {checked}");
        assert!(!checked.contains(lacks), "{config}: {checked}");
    }

    // Cursor's usual file and another one named with --config: two configs as well.
    let usual = user.home.join(".cursor/mcp.json");
    let other = user.home.join("other/mcp.json");
    for (path, name) in [(&usual, "one"), (&other, "two")] {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            path,
            format!(
                r#"{{"mcpServers": {{"{name}": {{"url": "https://{name}.example.com/mcp"}}}}}}"#
            ),
        )
        .unwrap();
    }
    user.ok(&["install", "cursor", "--gateway"]);
    user.ok(&[
        "install",
        "cursor",
        "--gateway",
        "--config",
        other.to_str().unwrap(),
    ]);
    let usual_config = served_by(&read_config(&usual)["mcpServers"]);
    let other_config = served_by(&read_config(&other)["mcpServers"]);
    assert_ne!(usual_config, other_config);
    assert!(
        user.ok(&["check", "--config", &usual_config])
            .contains("one [http]")
    );
    assert!(
        user.ok(&["check", "--config", &other_config])
            .contains("two [http]")
    );

    // Uninstall puts every server back where it was, and takes the configs away.
    user.ok(&["uninstall", "vscode"]);
    assert_eq!(
        read_config(&mcp)["servers"]["alpha"]["url"],
        "https://alpha.example.com/mcp"
    );
    assert_eq!(
        read_config(&settings)["mcp"]["servers"]["beta"]["url"],
        "https://beta.example.com/mcp"
    );
    assert!(!Path::new(&from_mcp).exists());
    assert!(!Path::new(&from_settings).exists());
}

/// Two Codex profiles (`CODEX_HOME`): each file's gateway config is its own, and uninstalling
/// one leaves the other's alone. They were both "Codex's main file" and shared `codex.toml`: the
/// second install wrote over the first one's servers (and headers), and its uninstall deleted
/// the config the first still named. And `--project` run in the home directory, where the
/// project file is the user file itself, edits it once.
#[test]
fn codex_profiles_keep_their_own_gateway_config() {
    let user = User::new();
    let profiles: Vec<PathBuf> = ["work", "personal"]
        .iter()
        .map(|name| {
            let home = user.home.join(format!("codex-{name}"));
            std::fs::create_dir_all(&home).unwrap();
            std::fs::write(
                home.join("config.toml"),
                format!("[mcp_servers.{name}]\nurl = \"https://{name}.example.com/mcp\"\n"),
            )
            .unwrap();
            home
        })
        .collect();
    let in_profile = |home: &Path, args: &[&str]| {
        let out = user
            .own_env(Command::new(AIRLOCK).args(args).current_dir(&user.project))
            .env("CODEX_HOME", home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for home in &profiles {
        in_profile(home, &["install", "codex", "--gateway"]);
    }
    let served: Vec<String> = profiles
        .iter()
        .map(|home| {
            let config = read_config(&home.join("config.toml"));
            config["mcp_servers"]["airlock"]["args"][2]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_ne!(served[0], served[1]);
    assert!(
        user.ok(&["check", "--config", &served[0]])
            .contains("work [http]")
    );
    in_profile(&profiles[1], &["uninstall", "codex"]);
    assert!(Path::new(&served[0]).exists());
    assert!(
        user.ok(&["check", "--config", &served[0]])
            .contains("work [http]")
    );

    // --project in the home directory: Cursor's project file is its user file.
    let cursor = user.home.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(
        &cursor,
        r#"{"mcpServers": {"r": {"url": "https://r.example.com/mcp"}}}"#,
    )
    .unwrap();
    let out = user.airlock_in(&user.home, &["install", "cursor", "--project", "--gateway"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = read_config(&cursor);
    assert!(config["mcpServers"].get("r").is_none(), "{config}");
    assert_eq!(config["mcpServers"]["airlock"]["args"][0], "serve");
}
