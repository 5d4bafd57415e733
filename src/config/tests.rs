//! Config parsing and every validation error, with the line and column it points at.

use std::path::{Path, PathBuf};

use crate::diagnostic::LineCol;
use crate::policy::{self, Layer};

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "GITHUB_TOKEN" => Some("ghp_0123456789abcdef".into()),
        "HOME" => Some("/home/me".into()),
        _ => None,
    }
}

fn parse_text(text: &str) -> Result<Config, SourceError> {
    parse(Path::new("airlock.toml"), text.to_string(), &env)
}

/// Asserts the error's position and that the message contains `needle`.
fn assert_error(text: &str, line: usize, column: usize, needle: &str) -> SourceError {
    let err = parse_text(text).expect_err("config should be rejected");
    assert_eq!(
        err.position,
        Some(LineCol { line, column }),
        "wrong position for: {err}"
    );
    assert!(
        err.to_string().contains(needle),
        "{err:?} should mention {needle:?}"
    );
    assert!(err.fix.is_some(), "every error carries a fix: {err}");
    err
}

#[test]
fn a_full_toml_config_loads() {
    let config = parse_text(
        r#"
strict_env = false
[gateway]
separator = "__"

[servers.fs]
transport = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"]
env = { GITHUB_TOKEN = "${env:GITHUB_TOKEN}", LOG_LEVEL = "info" }
cwd = "/tmp"
trust = false
startup_timeout = 10
tool_timeout = 60
idle_timeout = 0
enabled = true
start = "eager"

[servers.fs.sandbox]
write = ["~/notes"]

[servers.fs.tools]
deny = ["write_*"]

[servers.remote]
url = "https://example.com/mcp"
headers = { Authorization = "Bearer ${env:GITHUB_TOKEN}" }
"#,
    )
    .unwrap();
    assert_eq!(config.format, ConfigFormat::AirlockToml);
    assert_eq!(config.servers.len(), 2);
    let fs = &config.servers[0];
    assert_eq!(fs.name, "fs");
    assert_eq!(fs.args[2], "/home/me/notes");
    assert_eq!(fs.env["GITHUB_TOKEN"].value, "ghp_0123456789abcdef");
    assert_eq!(fs.env["GITHUB_TOKEN"].display(), "ghp****cdef");
    assert_eq!(fs.env["LOG_LEVEL"].display(), "info");
    assert_eq!(fs.idle_timeout, None);
    assert_eq!(fs.start, StartMode::Eager);
    assert!(fs.sandbox.is_some() && fs.tools.is_some());
    let remote = &config.servers[1];
    assert_eq!(remote.transport, Transport::Http);
    assert!(remote.headers["Authorization"].secret);
}

#[test]
fn servers_keep_file_order_and_defaults() {
    let config =
        parse_text("[servers.b]\ncommand = \"node\"\n[servers.a]\ncommand = \"node\"\n").unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    let b = &config.servers[0];
    assert_eq!(b.startup_timeout.as_secs(), 30);
    assert_eq!(b.tool_timeout.as_secs(), 180);
    assert_eq!(b.idle_timeout.map(|d| d.as_secs()), Some(300));
    assert_eq!(b.start, StartMode::Lazy);
    assert!(b.enabled);
}

#[test]
fn unknown_keys_are_errors_with_position() {
    assert_error(
        "[servers.fs]\ncommand = \"npx\"\ncomand = \"x\"\n",
        3,
        1,
        "unknown field `comand`",
    );
    assert_error("colour = 1\n", 1, 1, "unknown field `colour`");
}

#[test]
fn mixing_transports_is_rejected() {
    assert_error(
        "[servers.x]\ncommand = \"npx\"\nurl = \"https://e.com\"\n",
        3,
        7,
        "mixes transports",
    );
    assert_error(
        "[servers.x]\ntransport = \"http\"\nurl = \"https://e.com\"\ncommand = \"npx\"\n",
        4,
        11,
        "mixes transports",
    );
    assert_error(
        "[servers.x]\ntransport = \"stdio\"\ncommand = \"npx\"\nurl = \"https://e.com\"\n",
        4,
        7,
        "mixes transports",
    );
}

#[test]
fn missing_command_or_url_is_rejected() {
    assert_error(
        "[servers.x]\ntrust = true\n",
        1,
        10,
        "neither `command` nor `url`",
    );
    assert_error(
        "[servers.x]\ntransport = \"stdio\"\n",
        1,
        10,
        "without a `command`",
    );
    assert_error(
        "[servers.x]\ntransport = \"sse\"\n",
        1,
        10,
        "without a `url`",
    );
    assert_error(
        "[servers.x]\nurl = \"ftp://e.com\"\n",
        2,
        7,
        "not an http(s) URL",
    );
    assert_error(
        "[servers.x]\ntransport = \"carrier-pigeon\"\n",
        2,
        13,
        "unknown transport",
    );
}

#[test]
fn bad_server_names_are_rejected() {
    assert_error(
        "[servers.\"my server\"]\ncommand = \"npx\"\n",
        1,
        10,
        "contains ' '",
    );
    assert_error("[servers.a__b]\ncommand = \"npx\"\n", 1, 10, "\"__\"");
    let long = "x".repeat(65);
    assert_error(
        &format!("[servers.{long}]\ncommand = \"npx\"\n"),
        1,
        10,
        "1 to 64",
    );
    assert_error("[gateway]\nseparator = \"::\"\n", 2, 13, "separator");
    // With `_` as the separator, server names may not contain `_` at all.
    assert_error(
        "[gateway]\nseparator = \"_\"\n[servers.my_fs]\ncommand = \"npx\"\n",
        3,
        10,
        "\"_\"",
    );
    // `a_` beside `a`: `a___t` would be split as server `a`, tool `_t`.
    let runs_in = assert_error("[servers.a_]\ncommand = \"npx\"\n", 1, 10, "runs into");
    assert!(
        runs_in.to_string().contains("drop the trailing \"_\""),
        "{runs_in}"
    );
    // The fix names a valid name close to the one given.
    assert_eq!(
        runs_in.fix.as_deref(),
        Some("rename the server, e.g. \"a\"")
    );
    let doubled = assert_error("[servers.a__b]\ncommand = \"npx\"\n", 1, 10, "\"__\"");
    assert_eq!(
        doubled.fix.as_deref(),
        Some("rename the server, e.g. \"a-b\"")
    );
    assert_eq!(suggest_server_name("my_srv", "_"), "my-srv");
    assert_eq!(suggest_server_name("___", "__"), "server");
    assert_error(
        "[gateway]\nseparator = \"_-_\"\n[servers.x_-]\ncommand = \"npx\"\n",
        3,
        10,
        "runs into the separator \"_-_\"",
    );
    assert!(check_server_name("a_b", "-").is_ok());
    for reserved in RESERVED_SERVER_NAMES {
        assert!(check_server_name(reserved, "__").is_err(), "{reserved}");
        assert_eq!(
            suggest_server_name(reserved, "__"),
            format!("{reserved}-server")
        );
    }
    assert!(
        check_server_name("a-", "-.").is_ok(),
        "a--.tool splits after a-"
    );
    assert!(check_server_name("a.", "..").is_err());
}

#[test]
fn timeouts_out_of_range_are_rejected() {
    assert_error(
        "[servers.x]\ncommand = \"npx\"\ntool_timeout = 601\n",
        3,
        16,
        "out of range",
    );
    assert_error(
        "[servers.x]\ncommand = \"npx\"\nstartup_timeout = 0\n",
        3,
        19,
        "out of range",
    );
    assert_error(
        "[servers.x]\ncommand = \"npx\"\nidle_timeout = -1\n",
        3,
        16,
        "out of range",
    );
}

#[test]
fn wrong_types_point_at_the_value() {
    assert_error("[servers.x]\ncommand = 5\n", 2, 11, "invalid type");
}

#[test]
fn unset_variables_warn_unless_strict() {
    let config =
        parse_text("[servers.x]\ncommand = \"npx\"\nenv = { A = \"${env:NOPE}\" }\n").unwrap();
    assert_eq!(config.servers[0].env["A"].value, "");
    assert!(config.warnings[0].message.contains("NOPE"));
    assert_eq!(config.warnings[0].position.map(|p| p.line), Some(3));
    // An `args` element is named by its index, in the spelling the user wrote it.
    let config =
        parse_text("[servers.x]\ncommand = \"npx\"\nargs = [\"-y\", \"pkg\", \"${NOPE_DIR}\"]\n")
            .unwrap();
    let warning = &config.warnings[0].message;
    assert!(
        warning.contains("`args[2]` uses the variable NOPE_DIR, which is not set"),
        "{warning}"
    );
    assert_error(
        "strict_env = true\n[servers.x]\ncommand = \"npx\"\nenv = { A = \"${env:NOPE}\" }\n",
        4,
        7,
        "not set",
    );
    assert_error(
        "[servers.x]\ncommand = \"npx\"\nenv = { A = \"${env:\" }\n",
        3,
        7,
        "unterminated",
    );
}

#[test]
fn http_only_and_stdio_only_keys_are_enforced() {
    assert_error(
        "[servers.x]\ncommand = \"npx\"\nheaders = { A = \"b\" }\n",
        3,
        11,
        "http/sse servers only",
    );
    assert_error(
        "[servers.x]\nurl = \"https://e.com\"\nenv = { A = \"b\" }\n",
        3,
        7,
        "stdio servers only",
    );
}

#[test]
fn mcp_servers_json_is_detected_and_loaded() {
    let text = r#"{
  "globalShortcut": "x",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
      "env": { "GITHUB_TOKEN": "${GITHUB_TOKEN}" },
      "autoApprove": []
    },
    "linear": { "type": "sse", "url": "https://mcp.linear.app/sse" },
    "off": { "command": "node", "disabled": true }
  }
}"#;
    let config = parse(Path::new("claude.json"), text.to_string(), &env).unwrap();
    assert_eq!(config.format, ConfigFormat::McpServersJson);
    assert_eq!(
        config.servers[0].env["GITHUB_TOKEN"].value,
        "ghp_0123456789abcdef"
    );
    assert_eq!(config.servers[1].transport, Transport::Sse);
    assert!(!config.servers[2].enabled);
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.message.contains("autoApprove") && w.position.is_some())
    );
}

/// `~/.claude.json` keeps servers per directory too; a config reads the top-level ones and says
/// how many others it did not read, so `check` never passes them silently.
#[test]
fn claude_codes_per_directory_servers_are_named_as_not_read() {
    let text = r#"{
  "mcpServers": { "top": { "command": "npx", "args": ["-y", "pkg"] } },
  "projects": {
    "/home/me/a": { "mcpServers": { "mem": { "command": "npx" }, "git": { "command": "uvx" } } },
    "/home/me/b": { "mcpServers": {} },
    "/home/me/c": { "mcpServers": { "fs": { "command": "npx" } } }
  }
}"#;
    let config = parse(Path::new(".claude.json"), text.to_string(), &env).unwrap();
    assert_eq!(config.servers.len(), 1);
    let warning = config
        .warnings
        .iter()
        .find(|w| w.message.contains("projects.<dir>.mcpServers"))
        .expect("a warning");
    assert!(
        warning.message.starts_with("3 server(s)") && warning.message.contains("2 directories"),
        "{}",
        warning.message
    );
    assert_eq!(warning.position.map(|p| p.line), Some(3));
}

/// An entry `airlock install` wrapped (with this airlock, under its own name) reads as the
/// command it wraps, with only the env `--allow-env` passes; anything else stays as written.
#[test]
fn an_entry_wrapped_by_airlock_install_reads_as_its_own_command() {
    let this = std::env::current_exe().unwrap().display().to_string();
    let text = format!(
        r#"{{
  "mcpServers": {{
    "fs": {{
      "command": {this:?},
      "args": ["run", "--name", "fs", "--allow-env=GITHUB_TOKEN", "--", "npx", "-y", "pkg", "/tmp"],
      "env": {{ "GITHUB_TOKEN": "t", "OTHER": "o" }}
    }},
    "flags": {{ "command": {this:?}, "args": ["run", "--name", "flags", "--allow-read=/srv", "--", "node", "s.js"] }},
    "renamed": {{ "command": {this:?}, "args": ["run", "--name", "github", "--", "node", "s.js"] }},
    "other": {{ "command": "/usr/local/bin/airlock", "args": ["run", "--name", "other", "--", "node", "s.js"] }},
    "trusted": {{ "command": {this:?}, "args": ["run", "--name", "trusted", "--trust", "--allow-env=FX_*", "--", "/opt/own/server"], "env": {{ "FX_REGION": "eu", "FX_TOKEN": "t", "OTHER": "o" }} }},
    "keyed": {{ "command": {this:?}, "args": ["run", "--name", "keyed", "--", "/opt/own/server"], "trust": true }},
    "twice": {{ "command": {this:?}, "args": ["run", "--name", "twice", "--trust", "--trust", "--", "/opt/own/server"] }}
  }}
}}"#
    );
    let config = parse(Path::new("claude.json"), text, &env).unwrap();
    let fs = &config.servers[0];
    assert!(!fs.trust);
    // The run line decides trust: its `--trust`, not a key beside it that reaches no airlock.
    let trusted = &config.servers[4];
    assert_eq!(trusted.command.as_deref(), Some("/opt/own/server"));
    assert!(trusted.trust, "--trust on the run line");
    assert!(
        trusted.env.contains_key("FX_REGION"),
        "a PREFIX_* family, as run passes it"
    );
    assert!(
        !trusted.env.contains_key("FX_TOKEN"),
        "a family passes no credential, as in run"
    );
    assert!(!trusted.env.contains_key("OTHER"));
    let keyed = &config.servers[5];
    assert_eq!(keyed.command.as_deref(), Some("/opt/own/server"));
    assert!(
        !keyed.trust,
        "a \"trust\" key beside a run line reaches no airlock"
    );
    // `run` refuses a flag given twice: the line starts nothing, and is read as written.
    assert_ne!(
        config.servers[6].command.as_deref(),
        Some("/opt/own/server")
    );
    assert_eq!(fs.command.as_deref(), Some("npx"));
    assert_eq!(fs.args, ["-y", "pkg", "/tmp"]);
    assert_eq!(fs.env["GITHUB_TOKEN"].value, "t");
    assert!(!fs.env.contains_key("OTHER"), "run passes only --allow-env");
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.message.contains("\"fs\" starts through `airlock run`"))
    );
    // Its grants are kept, as `run` merges them: the config layer's `--allow-read`.
    let flags = &config.servers[1];
    assert_eq!(flags.command.as_deref(), Some("node"));
    assert_eq!(flags.grants.len(), 1);
    assert_eq!(config.policy_overrides().len(), config.servers.len() + 1);
    for (index, name) in [(2, "renamed"), (3, "other")] {
        let server = &config.servers[index];
        assert_eq!(server.name, name);
        assert_ne!(
            server.command.as_deref(),
            Some("node"),
            "{name} is read as written"
        );
    }
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.message.contains("\"other\" starts airlock itself"))
    );
}

#[test]
fn vscode_servers_json_is_detected() {
    let text = r#"{"servers": {"gh": {"type": "http", "url": "https://api.example.com/mcp"}}, "inputs": []}"#;
    let config = parse(Path::new("mcp.json"), text.to_string(), &env).unwrap();
    assert_eq!(config.format, ConfigFormat::VsCodeJson);
    assert_eq!(config.servers[0].transport, Transport::Http);
}

#[test]
fn json_errors_point_at_the_server_or_the_syntax() {
    let text = "{\n  \"mcpServers\": {\n    \"bad name\": { \"command\": \"npx\" }\n  }\n}";
    let err = parse(Path::new("c.json"), text.to_string(), &env).unwrap_err();
    assert_eq!(err.position, Some(LineCol { line: 3, column: 5 }));
    let text = "{\n  \"mcpServers\": {\n    \"x\": { \"command\": \"npx\", \"url\": \"https://e.com\" }\n  }\n}";
    let err = parse(Path::new("c.json"), text.to_string(), &env).unwrap_err();
    assert!(err.message.contains("mixes transports"));
    assert_eq!(err.position.map(|p| p.line), Some(3));
    let err = parse(
        Path::new("c.json"),
        "{\n \"mcpServers\": {,}\n}".to_string(),
        &env,
    )
    .unwrap_err();
    assert_eq!(
        err.position,
        Some(LineCol {
            line: 2,
            column: 17
        })
    );
    let err = parse(Path::new("c.json"), "{\"other\": 1}".to_string(), &env).unwrap_err();
    assert!(err.message.contains("no `mcpServers`"));
}

/// The `[servers.NAME.tools]` / `[servers.NAME.sandbox]` blocks become the policy's config layer.
#[test]
fn per_server_config_blocks_form_the_config_layer() {
    let config_text = "[servers.fs]\ncommand = \"npx\"\n[servers.fs.tools]\ndeny = [\"write_*\"]\n[servers.fs.sandbox]\nwrite = [\"/data\"]\n";
    let config = parse_text(config_text).unwrap();
    let policy = policy::load(&[], &config.policy_overrides()).unwrap();
    let decide = |server, tool| {
        policy.decide(&policy::Call {
            server,
            tool,
            arguments: None,
            identity: None,
        })
    };
    let decision = decide("fs", "write_file");
    assert_eq!(
        (decision.action, decision.layer),
        (policy::Action::Deny, Layer::Config)
    );
    assert_eq!(decide("other", "write_file").action, policy::Action::Allow);
    assert_eq!(policy.sandbox_for("fs").write[0].value, "/data");
    assert!(policy.sandbox_for("other").write.is_empty());

    // A locked org sandbox stops a config block from widening it.
    let locked = policy::LayerSource {
        layer: Layer::Org,
        path: PathBuf::from("/etc/airlock/policy.toml"),
        text: "version = 1\n[sandbox]\nlocked = true\n".to_string(),
    };
    let err = policy::load(&[locked], &config.policy_overrides()).unwrap_err();
    assert_eq!(err.file, PathBuf::from("airlock.toml"));
    assert_eq!(
        err.position,
        Some(LineCol {
            line: 6,
            column: 10
        })
    );
}

#[test]
fn a_tilde_cwd_is_refused_with_the_home_written_through_the_environment() {
    let text = "[servers.w]\ncommand = \"/usr/bin/python3\"\ncwd = \"~/projects/w\"\n";
    let err = assert_error(text, 3, 7, "is not absolute");
    assert_eq!(
        err.fix.as_deref(),
        Some("write the home as ${env:HOME}: cwd = \"${env:HOME}/projects/w\"")
    );
    // The fix works.
    let fixed = text.replace("~/projects/w", "${env:HOME}/projects/w");
    let config = parse_text(&fixed).unwrap();
    assert_eq!(
        config.servers[0].cwd.as_deref(),
        Some(Path::new("/home/me/projects/w"))
    );
}

/// The example config the README points to loads as written.
#[test]
fn the_example_config_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/airlock.toml");
    let config = crate::config::load_file(&path).unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fs", "everything"]);
}
