use super::entry::{Shape, UninstallScope};
use super::*;

const AIRLOCK: &str = "/usr/local/bin/airlock";

fn host(id: &str) -> &'static Host {
    hosts::find(id).unwrap()
}

/// Install's options for a user file, without `--gateway`.
fn user_file_options() -> InstallOptions {
    InstallOptions {
        airlock: AIRLOCK.into(),
        gateway_config: None,
        gateway_existing: None,
        project: None,
    }
}

fn install(id: &str, text: &str) -> Rewrite {
    let host = host(id);
    let file = &host.files[0];
    plan_install(
        text,
        file.format,
        host,
        file.server_maps,
        &user_file_options(),
    )
    .unwrap()
    .rewrite
}

fn uninstall_all(id: &str, text: &str) -> Rewrite {
    let host = host(id);
    let file = &host.files[0];
    let scope = UninstallScope {
        wrapped: None,
        keys_with_maps: true,
        gateway: None,
        airlock: "/usr/local/bin/airlock",
    };
    plan_uninstall(text, file.format, host, file.server_maps, scope, &[]).unwrap()
}

/// The stdio command line of entry `name` in the rewritten text, as the host would read it.
fn argv(id: &str, text: &str, name: &str) -> (String, Vec<String>) {
    let host = host(id);
    let file = &host.files[0];
    let mut found = None;
    let mut look = |facts: &EntryFacts| {
        if facts.name == name
            && let Shape::Stdio { command, args, .. } = &facts.shape
        {
            found = Some((command.clone(), args.clone()));
        }
        Action::Keep(Kept::NotWrapped)
    };
    rewrite(text, file.format, host, file.server_maps, &mut look, &[]).unwrap();
    found.unwrap()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

const CLAUDE_CODE: &str = r#"{
  "numStartups": 12,
  "mcpServers": {
    "fs": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/home/me/notes"
      ],
      "env": {
        "LOG_LEVEL": "info"
      }
    },
    "linear": {
      "type": "http",
      "url": "https://mcp.linear.app/mcp"
    }
  },
  "projects": {
    "/home/me/app": {
      "allowedTools": [],
      "mcpServers": {
        "db": {"command": "uvx", "args": ["mcp-server-sqlite"]}
      }
    }
  }
}
"#;

#[test]
fn claude_code_wraps_user_and_per_project_servers_and_leaves_the_rest_byte_for_byte() {
    let done = install("claude-code", CLAUDE_CODE);
    // A per-project entry is recorded with its map: uninstall undoes that entry only.
    assert_eq!(
        done.wrapped(),
        strings(&["fs", "projects./home/me/app.mcpServers\u{1f}db"])
    );
    let (command, args) = argv("claude-code", &done.text, "fs");
    assert_eq!(command, AIRLOCK);
    assert_eq!(
        args,
        strings(&[
            "run",
            "--name",
            "fs",
            "--allow-env=LOG_LEVEL",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/home/me/notes"
        ])
    );
    assert!(
        done.text
            .contains("        \"run\",\n        \"--name\",\n"),
        "multi-line arrays stay multi-line:\n{}",
        done.text
    );
    assert!(
        done.text
            .contains(r#""args": ["run", "--name", "db", "--", "uvx", "mcp-server-sqlite"]"#)
    );
    assert!(done.text.starts_with("{\n  \"numStartups\": 12,\n"));
    let lines = summary_lines(&done).join("\n");
    assert!(lines.contains("linear: remote server: left alone"));
    assert!(lines.contains("db (in projects./home/me/app.mcpServers): wrapped in `airlock run"));

    // A second install changes nothing.
    let again = install("claude-code", &done.text);
    assert_eq!(again.text, done.text);
    assert!(again.wrapped().is_empty());

    // Unwrapping gives back exactly the original text when args were there to begin with.
    let undone = uninstall_all("claude-code", &done.text);
    assert_eq!(undone.text, CLAUDE_CODE);
}

const ZED: &str = r#"// Zed settings
//
// For information on how to configure Zed, see the Zed documentation.
{
  "theme": "One Dark", // the default
  "context_servers": {
    "git": {
      "source": "custom",
      "command": "uvx",
      "args": ["mcp-server-git", "--repository", "/home/me/src"],
      "env": {},
    },
    // the old shape
    "time": {
      "command": {
        "path": "/usr/bin/python3",
        "args": ["-m", "mcp_server_time"],
        "env": {"TZ": "UTC"}
      },
      "settings": {}
    },
    "remote": { "url": "https://example.com/mcp" },
  },
}
"#;

#[test]
fn zed_jsonc_keeps_comments_trailing_commas_and_the_old_nested_shape() {
    let done = install("zed", ZED);
    assert_eq!(done.wrapped(), strings(&["git", "time"]));
    assert!(done.text.starts_with("// Zed settings\n//\n"));
    assert!(done.text.contains("// the old shape"));
    assert!(done.text.contains("\"env\": {},\n    },"));
    let (command, args) = argv("zed", &done.text, "time");
    assert_eq!(command, AIRLOCK);
    assert_eq!(
        args,
        strings(&[
            "run",
            "--name",
            "time",
            "--allow-env=TZ",
            "--",
            "/usr/bin/python3",
            "-m",
            "mcp_server_time"
        ])
    );
    assert_eq!(install("zed", &done.text).text, done.text);
    assert_eq!(uninstall_all("zed", &done.text).text, ZED);
}

const VSCODE: &str = r#"{
	"inputs": [{"type": "promptString", "id": "token", "password": true}],
	"servers": {
		"memory": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "cwd": "${workspaceFolder}"},
		"bare": {"type": "stdio", "command": "/opt/mcp/bare-server"},
		"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${input:token}"}}
	}
}
"#;

#[test]
fn vscode_servers_shape_gets_args_when_it_had_none() {
    let done = install("vscode", VSCODE);
    assert_eq!(done.wrapped(), strings(&["memory", "bare"]));
    assert!(done.text.contains(
        "\"command\": \"/usr/local/bin/airlock\", \"args\": [\"run\", \"--name\", \"bare\", \"--\", \"/opt/mcp/bare-server\"]"
    ), "{}", done.text);
    assert!(done.text.contains("\"cwd\": \"${workspaceFolder}\""));
    // Unwrapped again, `bare` keeps an empty `args` (the only difference from the original).
    let undone = uninstall_all("vscode", &done.text);
    assert_eq!(
        argv("vscode", &undone.text, "bare"),
        ("/opt/mcp/bare-server".into(), vec![])
    );
    assert_eq!(undone.text.replace(", \"args\": []", ""), VSCODE);
}

const CODEX: &str = r#"model = "o4-mini"

# Filesystem access for the notes folder.
[mcp_servers.fs]
command = "npx"   # from npm
args = [
    "-y",
    "@modelcontextprotocol/server-filesystem",
    "/home/me/notes",
]
env_vars = ["HOME_NOTES"]

[mcp_servers.fs.env]
LOG_LEVEL = "debug"

[mcp_servers.time]
command = "uvx"
args = ["mcp-server-time"]

[mcp_servers.docs]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "DOCS_TOKEN"
"#;

#[test]
fn codex_toml_keeps_comments_and_layout() {
    let done = install("codex", CODEX);
    assert_eq!(done.wrapped(), strings(&["fs", "time"]));
    assert!(
        done.text
            .contains("# Filesystem access for the notes folder.\n[mcp_servers.fs]\n")
    );
    assert!(
        done.text
            .contains(&format!("command = \"{AIRLOCK}\"   # from npm")),
        "{}",
        done.text
    );
    assert!(done.text.contains("args = [\n    \"run\",\n    \"--name\",\n    \"fs\",\n    \"--allow-env=LOG_LEVEL,HOME_NOTES\",\n    \"--\",\n    \"npx\",\n    \"-y\","), "{}", done.text);
    assert!(
        done.text.contains(
            "args = [\"run\", \"--name\", \"time\", \"--\", \"uvx\", \"mcp-server-time\"]"
        ),
        "{}",
        done.text
    );
    assert_eq!(install("codex", &done.text).text, done.text);
    assert_eq!(uninstall_all("codex", &done.text).text, CODEX);
}

#[test]
fn gateway_moves_remote_servers_behind_airlock_serve_and_uninstall_puts_them_back() {
    let text = r#"{
  "mcpServers": {
    "local": {"command": "node", "args": ["server.js"]},
    "docs": {"url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer ${env:DOCS}"}}
  }
}
"#;
    let cursor = host("cursor");
    let file = &cursor.files[0];
    let options = InstallOptions {
        airlock: AIRLOCK.into(),
        gateway_config: Some(PathBuf::from("/home/me/.config/airlock/hosts/cursor.toml")),
        gateway_existing: None,
        project: None,
    };
    let plan = plan_install(text, file.format, cursor, file.server_maps, &options).unwrap();
    let after = &plan.rewrite.text;
    assert!(!after.contains("docs.example.com"), "{after}");
    assert!(after.contains("\"airlock\": {\"command\": \"/usr/local/bin/airlock\", \"args\": [\"serve\", \"--config\", \"/home/me/.config/airlock/hosts/cursor.toml\"]}"), "{after}");
    let gateway = plan.gateway.unwrap();
    assert!(gateway.path.ends_with("cursor.toml"));
    assert_eq!(
        (gateway.name.as_str(), gateway.added),
        (GATEWAY_ENTRY, true)
    );
    let config = gateway.text;
    let parsed: toml::Table = toml::from_str(&config).unwrap();
    assert_eq!(
        parsed["servers"]["docs"]["url"].as_str(),
        Some("https://docs.example.com/mcp")
    );
    assert_eq!(
        parsed["servers"]["docs"]["headers"]["Authorization"].as_str(),
        Some("Bearer ${env:DOCS}")
    );
    // The gateway config is a config airlock itself loads.
    let loaded = crate::config::parse(Path::new("cursor.toml"), config.clone(), &|_| {
        Some("t".into())
    })
    .unwrap();
    assert_eq!(loaded.servers[0].name, "docs");

    let scope = UninstallScope {
        wrapped: Some(&["local".to_string()]),
        keys_with_maps: true,
        gateway: Some(GATEWAY_ENTRY),
        airlock: "/usr/local/bin/airlock",
    };
    let undone = plan_uninstall(
        after,
        file.format,
        cursor,
        file.server_maps,
        scope,
        &plan.rewrite.removed,
    )
    .unwrap();
    assert!(undone.text.contains("\"docs\": {\"url\": \"https://docs.example.com/mcp\", \"headers\": {\"Authorization\": \"Bearer ${env:DOCS}\"}}"), "{}", undone.text);
    assert!(!undone.text.contains("\"airlock\""), "{}", undone.text);
    assert_eq!(
        argv("cursor", &undone.text, "local"),
        ("node".into(), strings(&["server.js"]))
    );
}

#[test]
fn hosts_paths_follow_the_environment() {
    let vars = crate::paths::EnvVars::from_pairs([
        ("HOME", "/home/me"),
        ("XDG_CONFIG_HOME", "relative/ignored"),
        ("CODEX_HOME", "/srv/codex"),
    ]);
    let env = HostEnv::from_env(&vars, Path::new("/work/app"));
    let path = |id: &str, index: usize| env.path_of(&host(id).files[index]).unwrap();
    assert_eq!(
        path("claude-desktop", 0),
        PathBuf::from("/home/me/.config/Claude/claude_desktop_config.json")
    );
    assert_eq!(
        path("claude-code", 0),
        PathBuf::from("/home/me/.claude.json")
    );
    assert_eq!(path("claude-code", 1), PathBuf::from("/work/app/.mcp.json"));
    assert_eq!(path("codex", 0), PathBuf::from("/srv/codex/config.toml"));
    assert_eq!(
        path("zed", 0),
        PathBuf::from("/home/me/.config/zed/settings.json")
    );
    assert_eq!(
        path("windsurf", 0),
        PathBuf::from("/home/me/.codeium/windsurf/mcp_config.json")
    );
}

#[test]
fn a_broken_file_is_an_error_with_its_position() {
    let err = plan_install(
        "{\n  \"mcpServers\": {,}\n}",
        Format::Json,
        host("cursor"),
        &[&["mcpServers"]],
        &InstallOptions {
            airlock: AIRLOCK.into(),
            gateway_config: None,
            gateway_existing: None,
            project: None,
        },
    )
    .unwrap_err();
    assert_eq!(err.offset, Some(19));
}

fn gateway_options(existing: Option<&str>) -> InstallOptions {
    InstallOptions {
        airlock: AIRLOCK.into(),
        gateway_config: Some(PathBuf::from("/home/me/.config/airlock/hosts/cursor.toml")),
        gateway_existing: existing.map(str::to_string),
        project: None,
    }
}

fn plan_cursor(text: &str, options: &InstallOptions) -> InstallPlan {
    let cursor = host("cursor");
    let file = &cursor.files[0];
    plan_install(text, file.format, cursor, file.server_maps, options).unwrap()
}

#[test]
fn a_second_gateway_install_adds_to_the_servers_the_first_one_moved() {
    let first = plan_cursor(
        r#"{"mcpServers": {"local": {"command": "node"}, "docs": {"url": "https://docs.example.com/mcp"}}}"#,
        &gateway_options(None),
    );
    let first_gateway = first.gateway.unwrap();
    // The user adds a second remote server to the installed file.
    let edited = first.rewrite.text.replacen(
        "{\"local\"",
        r#"{"docs2": {"url": "https://docs2.example.com/mcp"}, "local""#,
        1,
    );
    let second = plan_cursor(&edited, &gateway_options(Some(&first_gateway.text)));
    let gateway = second.gateway.unwrap();
    assert_eq!(
        (gateway.name.as_str(), gateway.added),
        (GATEWAY_ENTRY, false)
    );
    let parsed: toml::Table = toml::from_str(&gateway.text).unwrap();
    let servers = parsed["servers"].as_table().unwrap();
    assert_eq!(
        servers.keys().collect::<Vec<_>>(),
        ["docs", "docs2"],
        "{}",
        gateway.text
    );
    assert_eq!(second.rewrite.text.matches("\"serve\"").count(), 1);
    assert!(!second.rewrite.text.contains("docs2"));
}

#[test]
fn a_stale_gateway_config_no_entry_serves_is_not_merged() {
    let stale = "[servers.old]\nurl = \"https://old.example.com/mcp\"\n";
    let plan = plan_cursor(
        r#"{"mcpServers": {"docs": {"url": "https://docs.example.com/mcp"}}}"#,
        &gateway_options(Some(stale)),
    );
    let gateway = plan.gateway.unwrap();
    assert!(gateway.added);
    assert!(
        !gateway.text.contains("old.example.com"),
        "{}",
        gateway.text
    );
}

#[test]
fn a_broken_gateway_config_is_an_error_that_names_it() {
    let first = plan_cursor(
        r#"{"mcpServers": {"docs": {"url": "https://docs.example.com/mcp"}}}"#,
        &gateway_options(None),
    );
    let edited = first.rewrite.text.replacen(
        "{ \"airlock\"",
        r#"{ "more": {"url": "https://more.example.com/mcp"}, "airlock""#,
        1,
    );
    let cursor = host("cursor");
    let file = &cursor.files[0];
    let err = plan_install(
        &edited,
        file.format,
        cursor,
        file.server_maps,
        &gateway_options(Some("[servers\n")),
    )
    .unwrap_err();
    assert!(
        err.message.contains("hosts/cursor.toml is not valid TOML"),
        "{err:?}"
    );
}

#[test]
fn a_server_of_the_users_called_airlock_leaves_the_gateway_another_name() {
    let plan = plan_cursor(
        r#"{"mcpServers": {"airlock": {"command": "node", "args": ["mine.js"]}, "airlock-gateway": {"command": "x"}, "docs": {"url": "https://docs.example.com/mcp"}}}"#,
        &gateway_options(None),
    );
    let gateway = plan.gateway.unwrap();
    assert_eq!(gateway.name, "airlock-gateway-2");
    assert!(
        plan.rewrite.text.contains(
            "\"airlock-gateway-2\": {\"command\": \"/usr/local/bin/airlock\", \"args\": [\"serve\""
        ),
        "{}",
        plan.rewrite.text
    );
    assert_eq!(
        argv("cursor", &plan.rewrite.text, "airlock").1[..3],
        strings(&["run", "--name", "airlock"])
    );
}

#[test]
fn a_remote_declared_with_transport_sse_keeps_it_behind_the_gateway() {
    let plan = plan_cursor(
        r#"{"mcpServers": {"s": {"url": "https://x.example.com/sse", "transport": "sse"}}}"#,
        &gateway_options(None),
    );
    let parsed: toml::Table = toml::from_str(&plan.gateway.unwrap().text).unwrap();
    assert_eq!(parsed["servers"]["s"]["transport"].as_str(), Some("sse"));
}

/// An env variable whose value is a path is named in the report with how to grant it; no value
/// is shown (one that starts with `/` may be a secret). JSON and TOML hosts alike.
#[test]
fn an_env_path_is_reported_as_not_granted_with_the_flag_that_grants_it() {
    let json = r#"{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"],
        "env": {"MEMORY_FILE_PATH": "/data/mem/m.jsonl", "API_TOKEN": "/k3Jd8+secret=="}}}}"#;
    let lines = summary_lines(&install("claude-desktop", json)).join("\n");
    assert!(
        lines.contains("MEMORY_FILE_PATH, API_TOKEN: `--allow-read=FILE`, or `--allow-write=DIR`"),
        "{lines}"
    );
    assert!(
        !lines.contains("secret") && !lines.contains("/data/mem"),
        "{lines}"
    );
    let toml = "[mcp_servers.memory]\ncommand = \"npx\"\nargs = [\"x\"]\nenv = { MEMORY_FILE_PATH = \"~/mem/m.jsonl\" }\n";
    let lines = summary_lines(&install("codex", toml)).join("\n");
    assert!(
        lines.contains("MEMORY_FILE_PATH: `--allow-read=FILE`"),
        "{lines}"
    );
    // A value that is plainly a path here (in an existing directory, under a name that is no
    // credential's) is named with the exact flags; a credential's name never shows its value.
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("memory.jsonl");
    let json = format!(
        r#"{{"mcpServers": {{"memory": {{"command": "npx", "args": ["-y", "x"],
        "env": {{"MEMORY_FILE_PATH": {file:?}, "SECRET_FILE": {file:?}}}}}}}}}"#,
        file = file.display().to_string()
    );
    let lines = summary_lines(&install("claude-desktop", &json)).join("\n");
    assert!(
        lines.contains(&format!(
            "MEMORY_FILE_PATH: `--allow-write={}` if the server writes there, else `--allow-read={}`",
            data.path().display(),
            file.display()
        )) && lines.contains("SECRET_FILE: `--allow-read=FILE`"),
        "{lines}"
    );
    // The search list and other lists of paths are no one file a grant covers: not flagged.
    let plain = r#"{"mcpServers": {"a": {"command": "npx", "args": [], "env": {"LEVEL": "debug",
        "PATH": "/usr/local/bin:/usr/bin", "PYTHONPATH": "/opt/a:/opt/b"}}}}"#;
    let lines = summary_lines(&install("claude-desktop", plain)).join("\n");
    assert!(!lines.contains("does not grant"), "{lines}");
}

#[test]
fn different_servers_whose_keys_make_one_name_get_names_apart() {
    let text = r#"{
  "mcpServers": {
    "my server": {"command": "npx", "args": ["pkg-one"]},
    "my-server": {"command": "npx", "args": ["pkg-two"]},
    "my_server": {"command": "npx", "args": ["pkg-one"]}
  }
}"#;
    let rewritten = install("cursor", text).text;
    let name_of = |key: &str| {
        let (_, args) = argv("cursor", &rewritten, key);
        entry::run_name(&args).unwrap().to_string()
    };
    assert_eq!(name_of("my server"), "my-server");
    assert_eq!(name_of("my-server"), "my-server-2");
    // A third key of its own name: unique already.
    assert_eq!(name_of("my_server"), "my_server");
    // Installing again changes nothing (every entry is wrapped; names stay).
    assert_eq!(install("cursor", &rewritten).text, rewritten);
    let summary = summary_lines(&install("cursor", text)).join("\n");
    assert!(
        summary.contains("`airlock run --name my-server-2`"),
        "{summary}"
    );
}

#[test]
fn one_server_in_two_projects_keeps_one_name() {
    let text = r#"{
  "projects": {
    "/a": {"mcpServers": {"gh": {"command": "npx", "args": ["gh-mcp"]}}},
    "/b": {"mcpServers": {"gh": {"command": "npx", "args": ["gh-mcp"]}}},
    "/c": {"mcpServers": {"gh": {"command": "npx", "args": ["other-gh"]}}}
  }
}"#;
    let names: Vec<String> = install("claude-code", text)
        .entries
        .iter()
        .filter_map(|(_, action)| match action {
            Action::Wrap { prepend, .. } => entry::run_name(prepend).map(str::to_string),
            _ => None,
        })
        .collect();
    assert_eq!(names, vec!["gh", "gh", "gh-2"]);
}

#[test]
fn a_new_entry_never_takes_the_name_of_one_wrapped_before() {
    let text = r#"{
  "mcpServers": {
    "my server": {"command": "npx", "args": ["pkg-one"]},
    "gh": {"command": "npx", "args": ["other-gh"]},
    "my-server": {"command": "/usr/local/bin/airlock", "args": ["run", "--name", "my-server", "--", "npx", "pkg-two"]},
    "github": {"command": "/opt/old/airlock-v2", "args": ["run", "--name=gh", "--", "npx", "gh-mcp"]}
  }
}"#;
    let rewritten = install("cursor", text).text;
    let name_of = |key: &str| {
        let (_, args) = argv("cursor", &rewritten, key);
        entry::run_name(&args).unwrap().to_string()
    };
    assert_eq!(name_of("my server"), "my-server-2");
    assert_eq!(name_of("my-server"), "my-server");
    assert_eq!(name_of("gh"), "gh-2");
    // Wrapped by an airlock under another name (gone now): recognised, pointed at this one,
    // not wrapped again.
    let (command, args) = argv("cursor", &rewritten, "github");
    assert_eq!(command, AIRLOCK);
    assert_eq!(args, strings(&["run", "--name=gh", "--", "npx", "gh-mcp"]));
    assert_eq!(install("cursor", &rewritten).text, rewritten);
}

#[test]
fn a_key_written_twice_stops_the_install_only_where_install_reads() {
    let host = host("vscode");
    let settings = &host.files[1];
    let options = user_file_options();
    let plan =
        |text: &str| plan_install(text, settings.format, host, settings.server_maps, &options);
    // A setting of the editor's own written twice is the editor's business.
    let elsewhere = r#"{"editor.fontSize": 12, "editor.fontSize": 14,
        "mcp": {"servers": {"notes": {"command": "npx", "args": ["s"]}}}}"#;
    let planned = plan(elsewhere).expect("installed");
    assert!(planned.rewrite.text.contains(AIRLOCK));
    // On the way to the map, among its entries, or inside one: refused, at the second key.
    for (text, key) in [
        (
            r#"{"mcp": {"servers": {}}, "mcp": {"servers": {"n": {"command": "x"}}}}"#,
            "\"mcp\"",
        ),
        (
            r#"{"mcp": {"servers": {"n": {"command": "a"}, "n": {"command": "b"}}}}"#,
            "\"n\"",
        ),
        (
            r#"{"mcp": {"servers": {"n": {"command": "a", "command": "b"}}}}"#,
            "\"command\"",
        ),
        (
            r#"{"mcp": {"servers": {"n": {"command": "a", "env": {"K": "1", "K": "2"}}}}}"#,
            "\"K\"",
        ),
    ] {
        let err = plan(text).expect_err(text);
        assert!(err.message.contains("appears twice"), "{err:?}");
        assert_eq!(&text[err.offset.unwrap()..][..key.len()], key, "{text}");
    }
}

/// A remote server switched off, or with settings no gateway config carries, stays where it is
/// with `--gateway`: moved, it would be connected, or its settings dropped, without a word (a
/// review found Cursor's `disabled` and Codex's `enabled = false` and tool filters dropped).
#[test]
fn gateway_leaves_a_switched_off_remote_server_where_it_is() {
    let options = |name: &str| InstallOptions {
        airlock: AIRLOCK.into(),
        gateway_config: Some(PathBuf::from(format!(
            "/home/me/.config/airlock/hosts/{name}.toml"
        ))),
        gateway_existing: None,
        project: None,
    };
    let cursor = host("cursor");
    let text = r#"{"mcpServers": {"off": {"url": "https://off.example.com/mcp", "disabled": true}, "on": {"url": "https://on.example.com/mcp"}}}"#;
    let file = &cursor.files[0];
    let plan = plan_install(
        text,
        file.format,
        cursor,
        file.server_maps,
        &options("cursor"),
    )
    .unwrap();
    assert!(
        plan.rewrite.text.contains("off.example.com"),
        "{}",
        plan.rewrite.text
    );
    assert!(
        !plan.rewrite.text.contains("on.example.com"),
        "{}",
        plan.rewrite.text
    );
    let codex = host("codex");
    let text = "[mcp_servers.figma]\nurl = \"https://mcp.figma.com/mcp\"\nenabled = false\n\n[mcp_servers.docs]\nurl = \"https://docs.example.com/mcp\"\ndisabled_tools = [\"delete\"]\n";
    let file = &codex.files[0];
    let plan = plan_install(
        text,
        file.format,
        codex,
        file.server_maps,
        &options("codex"),
    )
    .unwrap();
    assert!(
        plan.rewrite.text.contains("mcp.figma.com"),
        "{}",
        plan.rewrite.text
    );
    assert!(
        plan.rewrite.text.contains("docs.example.com"),
        "{}",
        plan.rewrite.text
    );
}

/// An entry with an `envFile` (VS Code) is wrapped with a word that the file's variables reach
/// airlock, and the server only by name (a review found the server left without its tokens).
#[test]
fn an_entry_with_an_env_file_is_told_how_its_variables_reach_the_server() {
    let text = r#"{"servers": {"ef": {"type": "stdio", "command": "python3", "args": ["-m", "x"], "envFile": "${userHome}/.secrets.env"}}}"#;
    let done = install("vscode", text);
    let lines = summary_lines(&done);
    assert!(
        lines
            .iter()
            .any(|line| line.contains("envFile") && line.contains("--allow-env=NAME")),
        "{lines:?}"
    );
}
