//! `airlock run [OPTIONS] CMD ARGS...`: one stdio server, confined, gated and audited, as a
//! drop-in replacement for the server's own command in a host's config. The first word that is
//! not one of airlock's options starts the server's command; `--` before it is accepted too (tools
//! that launch servers, such as the MCP Inspector CLI, drop a literal `--`).
//!
//! stdout carries only MCP; everything airlock says goes to stderr. Exit status: the server's
//! (its code, or 128 + signal) whenever it ends on its own; 0 when airlock had to stop it with a
//! signal; a confine-helper failure code is never masked; 2 for a refused launch or bad input; 1
//! for a failure.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::CliError;
use super::server_line::{ServerFlags, policy_for};
use super::session::{SessionOptions, host_stdio, open_audit, policy_event};
use crate::audit::Redactor;
use crate::config::ServerConfig;
use crate::gateway::control::ControlSocket;
use crate::gateway::remote::Launch;
use crate::pins::PinStore;
use crate::process::launch::{self as process_launch, LaunchContext, LaunchError};
use crate::session::exit::{run_status, sandbox_failure};
use crate::session::shell::{self, signals::host_output_closed};
use crate::session::stderr_queue::say;
use crate::session::{Core, ServerSpec, Session, Topology};
use anyhow::Context;
use clap::Args;

/// Says when an argument of the server's reads as one of `run`'s own flags: after the command it
/// is the server's (a server may well take a `--name`), which a user who meant it for airlock
/// would not otherwise learn (a new user's trial put `--allow-read` there and was told to
/// grant it with `--allow-read`).
fn warn_of_own_flags_after_the_command(server: &str, program: &str, server_args: &[String]) {
    use clap::Args as _;
    // Deno's own permission flags are spelt as airlock's (`deno run --allow-net ...`).
    let deno = std::path::Path::new(program).file_name() == Some(std::ffi::OsStr::new("deno"));
    let own = RunArgs::augment_args(clap::Command::new("run"));
    let flags: Vec<String> = own
        .get_arguments()
        .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
        .collect();
    for arg in server_args {
        let flag = arg.split_once('=').map_or(arg.as_str(), |(flag, _)| flag);
        if deno && flag.starts_with("--allow-") {
            continue;
        }
        if flags.iter().any(|own| own == flag) {
            tracing::warn!(
                server = %server,
                "{arg} comes after the server's command, so it goes to the server, not to airlock: airlock's own flags go before the command (`airlock run [FLAGS] -- CMD ARGS...`)"
            );
        }
    }
}

/// How long a refused `run` waits for the host's first request, to answer it with the refusal.
const HOST_FIRST_REQUEST_WAIT: Duration = Duration::from_secs(5);

/// The longest line a refused `run` reads while it waits for that request (a host's first
/// messages are small; a longer one is not read to its end).
const HOST_FIRST_LINE_AT_MOST: u64 = 1 << 20;

/// `err`, after answering the host's first request with it: a host shows its servers' errors, not
/// their stderr, so a refused launch (a command off the allowlist, a policy that does not load,
/// an audit log that cannot be opened) would otherwise show as a server that disconnected, with
/// the fix out of sight. Notifications before it are passed over; a batch gets an answer for each
/// of its requests. Only when stdin is not a terminal (a host, not a person), for at most
/// [`HOST_FIRST_REQUEST_WAIT`], and only MCP goes to stdout.
fn tell_the_host(server: &str, err: CliError) -> CliError {
    use std::io::{BufRead, IsTerminal, Read, Write};
    if std::io::stdin().is_terminal() {
        return err;
    }
    let (sender, lines) = std::sync::mpsc::channel::<Vec<u8>>();
    // A thread, so a host that sends nothing costs the wait, not a hang; it ends with airlock.
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match (&mut stdin)
                .take(HOST_FIRST_LINE_AT_MOST)
                .read_until(b'\n', &mut line)
            {
                Ok(1..) if sender.send(line).is_ok() => {}
                _ => break,
            }
        }
    });
    let text = format!("airlock did not start server {server:?}: {err}");
    let refusal = |id: &serde_json::Value| {
        crate::mcp::error_response(
            id.clone(),
            crate::mcp::message::code::SERVER_EXITED,
            &text,
            None,
        )
    };
    // Only a request a host could match an answer to: an id that is a string or a number.
    let request_id = |message: &serde_json::Value| {
        message.get("method")?;
        message
            .get("id")
            .filter(|id| id.is_string() || id.is_number())
            .cloned()
    };
    let deadline = Instant::now() + HOST_FIRST_REQUEST_WAIT;
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if !line.ends_with(b"\n") {
            break;
        }
        let answer = match serde_json::from_slice::<serde_json::Value>(&line) {
            Ok(serde_json::Value::Array(batch)) => {
                let answers: Vec<serde_json::Value> = batch
                    .iter()
                    .filter_map(request_id)
                    .map(|id| refusal(&id))
                    .collect();
                (!answers.is_empty()).then(|| serde_json::Value::Array(answers))
            }
            Ok(message) => request_id(&message).map(|id| refusal(&id)),
            Err(_) => None,
        };
        if let Some(answer) = answer {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{answer}").and_then(|()| stdout.flush());
            break;
        }
    }
    err
}

/// Default `--tool-timeout`, matching the server config's `tool_timeout` default.
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 180;
/// How long starting the confined server may take (there is no handshake of airlock's own).
const SPAWN_TIMEOUT: Duration = Duration::from_secs(60);

/// Run one stdio MCP server confined, gating and auditing every tool call.
#[derive(Debug, Args)]
#[command(
    override_usage = "airlock run [OPTIONS] [--] <CMD>...",
    after_help = "Example (in a host's MCP config):\n  \"command\": \"airlock\",\n  \"args\": [\"run\", \"npx\", \"-y\", \"@modelcontextprotocol/server-filesystem\", \"/home/me/notes\"]\n\nThe first word that is not an airlock option starts the server's command; everything after it\nis the server's own. `airlock run -- CMD ...` works too."
)]
pub struct RunArgs {
    #[command(flatten)]
    pub session: SessionOptions,
    #[command(flatten)]
    pub server: ServerFlags,
    /// Seconds a tool call may take before the host gets an error and the server a cancellation
    /// (at most 600, as a config's `tool_timeout`); 0 disables the limit.
    #[arg(long, default_value_t = DEFAULT_TOOL_TIMEOUT_SECS, value_parser = clap::value_parser!(u64).range(0..=600))]
    pub tool_timeout: u64,
    /// The server's command and its arguments: the first word that is not one of airlock's
    /// options starts it, and every word after it is the server's (`--` before it is accepted).
    #[arg(trailing_var_arg = true, required = true, num_args = 1.., value_name = "CMD")]
    pub command: Vec<String>,
}

/// File names too generic to name a server; the enclosing package directory is used instead.
const GENERIC_STEMS: [&str; 6] = ["index", "main", "cli", "__main__", "server", "app"];
const BUILD_DIRS: [&str; 6] = ["dist", "build", "lib", "src", "bin", "out"];

/// The server name derived from its command (see `docs/run.md`):
/// - package runners (`npx`, `uvx`, `bunx`, `pipx run`, ...): the package, without scope or
///   version: `npx -y @modelcontextprotocol/server-filesystem@1.0 /d` → `server-filesystem`;
/// - a package spec run by an interpreter (`deno run npm:@scope/name@1.2`): as a package;
/// - interpreters (`node`, `python3`, `uv run`, `deno run`, ...): the script's file stem
///   (`python server.py` → `server`), or the module of `-m` (`python -m mcp_server_git` →
///   `mcp_server_git`); a generic stem (`index`, `main`, ...) inside a package directory gives the
///   package directory's name (`node .../server-everything/dist/index.js` → `server-everything`);
/// - anything else: the command's basename.
///
/// The result is sanitised to `[A-Za-z0-9_.-]` with no `__`, at most 64 characters.
pub fn derive_server_name(command: &[String]) -> String {
    use crate::paths::{Launcher, anatomy};
    let Some((program, args)) = command.split_first() else {
        return "server".into();
    };
    let base = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    let reading = anatomy(program, args);
    let Some(word) = reading.server_word.map(|index| args[index].as_str()) else {
        return sanitize(base);
    };
    let registry_spec = word
        .strip_prefix("npm:")
        .or_else(|| word.strip_prefix("jsr:"))
        .map(crate::fetch::deno::sub_path_removed);
    match (reading.launcher, reading.module) {
        (_, true) => sanitize(word.rsplit('.').next().unwrap_or(word).trim()),
        // `deno run npm:@scope/name@1.2/sub/path.js`: a package, whatever runs it.
        _ if registry_spec.is_some() => sanitize(&package_name(registry_spec.unwrap_or(word))),
        (Launcher::PackageRunner, false) => sanitize(&package_name(word)),
        _ => sanitize(&script_name(word)),
    }
}

/// `@scope/name@1.2` → `name`; `pkg==1.0` / `pkg[extra]` → `pkg`.
fn package_name(spec: &str) -> String {
    let unversioned = match spec.rfind('@') {
        Some(at) if at > 0 => &spec[..at],
        _ => spec,
    };
    let name = unversioned.rsplit('/').next().unwrap_or(unversioned);
    name.split(['=', '[', '<', '>', '~', '!'])
        .next()
        .unwrap_or(name)
        .to_string()
}

fn script_name(script: &str) -> String {
    let path = Path::new(script);
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or(script);
    if GENERIC_STEMS.contains(&stem) {
        let package_dir = path
            .ancestors()
            .skip(1)
            .filter_map(|dir| dir.file_name().and_then(|n| n.to_str()))
            .find(|name| !BUILD_DIRS.contains(name));
        if let Some(dir) = package_dir {
            return dir.to_string();
        }
    }
    stem.to_string()
}

fn sanitize(raw: &str) -> String {
    crate::config::sanitize_server_name(raw)
}

pub fn run(args: RunArgs) -> Result<ExitCode, CliError> {
    // From here on nothing waits for the host to read airlock's stderr.
    crate::session::stderr_queue::start();
    let name = args.server.server_name(&args.command)?;
    let cwd = std::env::current_dir().context("the current directory")?;
    let grants = args.server.grants(&cwd)?;
    let policy = Arc::new(
        policy_for(args.session.policy.clone(), &name, &grants)
            .map_err(|err| tell_the_host(&name, err))?,
    );
    if args.server.name.is_none()
        && let Some(others) = crate::policy::names::rules_name_only_others(&policy, &name)
    {
        tracing::warn!(
            server = %name,
            "the policy's tool rules name server {} but none names this one, which is called {name:?} after its command: if they are meant for it, give it that name with --name before the `--`",
            others.iter().map(|o| format!("{o:?}")).collect::<Vec<_>>().join(", ")
        );
    }
    for warning in crate::policy::names::misspelt_warnings(&policy, &[name.as_str()]) {
        tracing::warn!(server = %name, "{warning}");
    }
    let redactor = Redactor::new(policy.audit.redact.iter().map(|r| r.value.as_str()))
        .map_err(|err| CliError::Refused(err.to_string()))?;
    let (audit, audit_path) = open_audit(args.session.audit.as_deref(), &policy)
        .map_err(|err| tell_the_host(&name, err))?;
    let (program, program_args) = args.command.split_first().ok_or_else(|| {
        CliError::Refused("no server command: write `airlock run CMD ARGS...`".into())
    })?;
    warn_of_own_flags_after_the_command(&name, program, program_args);
    let server = ServerConfig::stdio(&name, program, program_args, args.server.trust);
    let context = LaunchContext::for_command_line(&policy, audit_path.as_deref());
    let launch = process_launch::prepare(&server, &policy, &context).map_err(|err| match err {
        LaunchError::Refused(reason) => tell_the_host(&name, CliError::Refused(reason)),
        other => CliError::Failure(other.into()),
    })?;
    tracing::info!(server = %name, "starting {}", launch.summary());
    // A host passes a server's secrets in airlock's environment (its config's `env`); airlock
    // passes only what the policy names. Say which credentials stayed behind, by name.
    let withheld = crate::sandbox::withheld_credentials(&context.parent_env, &launch.plan.env);
    if !withheld.is_empty() {
        tracing::warn!(
            server = %name,
            "not passed to the server (airlock's environment reaches it only by name): {}; to pass one, add --allow-env={} before the `--`",
            withheld.join(", "),
            withheld.join(",")
        );
    }
    if !matches!(launch.plan.network, crate::sandbox::NetMode::None) {
        let trust = crate::sandbox::withheld_tls_trust(&context.parent_env, &launch.plan.env);
        if !trust.is_empty() {
            let names: Vec<&str> = trust.iter().map(|(name, _)| name.as_str()).collect();
            let mut files: Vec<&str> = Vec::new();
            for (_, value) in &trust {
                if value.starts_with('/') && !files.contains(&value.as_str()) {
                    files.push(value);
                }
            }
            let read = if files.is_empty() {
                String::new()
            } else {
                format!(" --allow-read={}", files.join(","))
            };
            tracing::warn!(
                server = %name,
                "the TLS trust settings of your environment are not passed to the server: {}; behind a TLS-inspecting proxy its connections fail without them: to pass them, add --allow-env={}{read} before the `--`",
                names.join(", "),
                names.join(",")
            );
        }
    }

    // A package that is not cached yet is installed first (crate::fetch), inside the start.
    let launch_needed_fetch = launch.needs_fetch();
    let install_allowance = if launch_needed_fetch {
        crate::fetch::step::FETCH_TIMEOUT
    } else {
        Duration::ZERO
    };
    let spec = ServerSpec {
        name: name.clone(),
        startup_timeout: SPAWN_TIMEOUT,
        install_allowance,
        tool_timeout: (args.tool_timeout > 0).then(|| Duration::from_secs(args.tool_timeout)),
        idle_timeout: None,
        eager: true,
        refused: None,
        paths: launch.path_context(),
        shown_paths: Some(launch.shown_paths()),
    };
    let mut core = Core::new(
        Topology::Single,
        vec![spec],
        policy.clone(),
        Arc::new(redactor),
        args.session.show_denied,
        Instant::now(),
    );
    core.enable_pins(PinStore::in_state_dir(&context.dirs.state_dir));
    let session = Session {
        core,
        kill_timeout: Duration::from_secs(launch.plan.kill_timeout_secs),
        launches: vec![Some(Launch::Local(launch))],
        audit,
        policy_event: policy_event(&name, &policy),
        max_line_bytes: args.session.max_line_bytes(),
        // The same owner-only control socket as a gateway's: `airlock status` lists this run.
        control: match ControlSocket::bind(&context.dirs.state_dir) {
            Ok(control) => Some(control),
            Err(err) => {
                tracing::warn!("no control socket (airlock status will not see this run): {err}");
                None
            }
        },
        config_path: PathBuf::from("(command line)"),
        reloader: None,
        host_output_closed: None,
        status_extra: None,
        outside_audit: None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let ended = runtime.block_on(async {
        let (host_in, host_out) = host_stdio();
        let session = Session {
            host_output_closed: host_output_closed(),
            ..session
        };
        shell::run(session, host_in, host_out).await
    });
    drop(runtime);
    let ended = ended.map_err(|err| CliError::Failure(err.into()))?;
    let Some(summary) = ended.exits.first().cloned().flatten() else {
        // Said with why the session ended first: a host that closes while the server's package
        // is still being installed (the first start) left only "could not be started".
        let install = if launch_needed_fetch {
            " (its package was still being installed, which a first start takes a while for)"
        } else {
            ""
        };
        say(format_args!(
            "airlock: server `{name}` was not started: {} before it was ready{install}",
            ended.reason.text()
        ));
        return Ok(ExitCode::from(1));
    };
    let code = run_status(&summary);
    match (summary.helper_step, summary.code) {
        (Some(_), Some(helper_code)) => say(format_args!(
            "airlock: server `{name}` could not start: {} (exit status {code})",
            sandbox_failure(helper_code, summary.helper_message.as_deref())
        )),
        _ if code != 0 => say(format_args!(
            "airlock: server `{name}` exited with status {code}"
        )),
        _ => {}
    }
    Ok(ExitCode::from(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(command: &str) -> String {
        derive_server_name(
            &command
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn derives_names_from_packages_scripts_and_commands() {
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-filesystem /home/me"),
            "server-filesystem"
        );
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-everything@2025.9.25"),
            "server-everything"
        );
        assert_eq!(name("uvx mcp-server-git --repository ."), "mcp-server-git");
        assert_eq!(
            name("uvx --from mcp-server-fetch==1.0 mcp-server-fetch"),
            "mcp-server-fetch"
        );
        assert_eq!(name("python server.py"), "server");
        assert_eq!(
            name("/usr/bin/python3.11 -m mcp_server_time --tz UTC"),
            "mcp_server_time"
        );
        assert_eq!(name("uv run --with mcp weather.py"), "weather");
        assert_eq!(
            name("node node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio"),
            "server-everything"
        );
        assert_eq!(name("deno run -A jsr:@x/my-server"), "my-server");
        assert_eq!(
            name("deno run -A npm:@modelcontextprotocol/server-everything@2026.8.31"),
            "server-everything"
        );
        assert_eq!(name("deno run -A npm:pkg@1.2/bin/cli.js"), "pkg");
        assert_eq!(
            name("/opt/tools/github-mcp-server stdio"),
            "github-mcp-server"
        );
        assert_eq!(name("./my__odd server"), "my_odd");
        assert_eq!(name("npx"), "npx");
    }

    fn parse(line: &str) -> RunArgs {
        use clap::Parser;
        let argv = std::iter::once("airlock").chain(line.split_whitespace());
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Run(args) => args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_first_word_that_is_not_an_option_starts_the_server_command() {
        // What the MCP Inspector CLI passes on: it drops a literal `--`.
        let args = parse("run --name fs node server.js --method tools/list -- --x");
        assert_eq!(args.server.name.as_deref(), Some("fs"));
        assert_eq!(
            args.command,
            ["node", "server.js", "--method", "tools/list", "--", "--x"]
        );
        // `--` before the command stays accepted, and options after it are the server's.
        let args = parse("run --trust -- npx -y pkg --name x --log-format json");
        assert!(args.server.trust && args.server.name.is_none());
        assert_eq!(
            args.command,
            ["npx", "-y", "pkg", "--name", "x", "--log-format", "json"]
        );
        let args = parse(
            "run --allow-env A,B --allow-read=/a,~/b --allow-write /c uvx mcp-server-time --trust",
        );
        assert_eq!(args.server.allow_env, ["A", "B"]);
        assert_eq!(args.server.allow_read, ["/a", "~/b"]);
        assert_eq!(args.server.allow_write, ["/c"]);
        assert!(!args.server.trust);
        assert_eq!(args.command, ["uvx", "mcp-server-time", "--trust"]);
        use clap::Parser;
        assert!(crate::cli::Cli::try_parse_from(["airlock", "run", "--name", "x"]).is_err());
    }

    #[test]
    fn derived_names_are_always_valid_server_names() {
        for command in ["npx -y @a/b__c", "python ___.py", "node ../..", "x!@#$%"] {
            let derived = name(command);
            assert!(
                crate::config::check_server_name(&derived, "__").is_ok(),
                "{command} → {derived}"
            );
        }
    }
}
