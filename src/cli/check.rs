//! `airlock check`: validate the server config and every policy layer, print the merged policy
//! with the origin of each value, and say for each server what would be launched and whether it
//! may be.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::CliError;
use super::active_policy::load_active;
use crate::config::{Config, ServerConfig, Transport};
use crate::policy::{Policy, Sourced};
use crate::process::launch::{self, LaunchContext};

/// Validate config and policies; print the merged policy and what each server would launch.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  airlock check\n  airlock check --config ~/.config/Claude/claude_desktop_config.json\n  airlock check --config airlock.toml --policy strict\n  airlock check --allow-read ~/docs npx -y @modelcontextprotocol/server-filesystem ~/notes\n\nExit status: 0 when everything is valid and every enabled server may launch; 2 otherwise."
)]
pub struct CheckArgs {
    /// Server config: airlock.toml, or an mcpServers/servers JSON file (default: the one
    /// `serve` would use, ./airlock.toml, else $XDG_CONFIG_HOME/airlock/airlock.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// User policy file or preset (default: $XDG_CONFIG_HOME/airlock/policy.toml).
    #[arg(long)]
    pub policy: Option<String>,
    #[command(flatten)]
    pub server: super::server_line::ServerFlags,
    /// List every path of each sandbox, the system paths every server gets alike included
    /// (by default they are counted on one line).
    #[arg(long)]
    pub full: bool,
    /// A server command line, as `airlock run` would start it: check what it would be granted
    /// (the paths on its own command line and the --allow-* flags, each with its source).
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn origin_note<T>(value: &Sourced<T>) -> String {
    format!("[{}]", value.origin)
}

/// Prints a list, one line per run of items that share an origin.
fn list_line<T: std::fmt::Display>(out: &mut String, key: &str, items: &[Sourced<T>]) {
    if items.is_empty() {
        let _ = writeln!(out, "  {key:<20} (none)");
    }
    for group in items.chunk_by(|a, b| a.origin == b.origin) {
        let values: Vec<String> = group.iter().map(|item| item.value.to_string()).collect();
        let _ = writeln!(
            out,
            "  {key:<20} {:<40} {}",
            values.join(", "),
            origin_note(&group[0])
        );
    }
}

/// One `key  value  [origin]` line. The value is formatted through its own `Display`, so the
/// column padding is whatever that type gives it.
fn value_line(out: &mut String, key: &str, value: &dyn std::fmt::Display, origin: &str) {
    let _ = writeln!(out, "  {key:<20} {value:<40} {origin}");
}

/// The merged policy, one value a line with where it came from.
pub fn render_policy(policy: &Policy) -> String {
    let mut out = String::new();
    render_layers(&mut out, policy);
    render_launch(&mut out, policy);
    render_tools(&mut out, policy);
    render_sandbox(&mut out, &policy.sandbox);
    render_audit(&mut out, policy);
    render_pins(&mut out, policy);
    out
}

/// The layers the policy was merged from, and its digest.
fn render_layers(out: &mut String, policy: &Policy) {
    let _ = writeln!(out, "Policy layers (highest authority first):");
    for name in policy.source_names() {
        let (layer, what) = name.split_once(' ').unwrap_or((&name, ""));
        let _ = writeln!(out, "  {layer:<8} {what}");
    }
    let _ = writeln!(out, "  digest   sha256:{}", policy.digest);
}

fn render_launch(out: &mut String, policy: &Policy) {
    let _ = writeln!(out, "\nLaunch");
    list_line(out, "allow_commands", &policy.launch.allow_commands);
    let trust = &policy.launch.allow_trust;
    value_line(out, "allow_trust", &trust.value, &origin_note(trust));
}

fn render_tools(out: &mut String, policy: &Policy) {
    let _ = writeln!(
        out,
        "\nTools (deny beats ask beats allow; no match: default)"
    );
    let default = policy.tools.default_action();
    value_line(
        out,
        "default",
        &default.value.to_string(),
        &origin_note(default),
    );
    for entry in policy.tools.summaries() {
        let _ = writeln!(
            out,
            "  {:<20} {:<40} [{}]",
            entry.action.to_string(),
            entry.rule,
            entry.origin
        );
        // How the pattern was read: what it covers, and why when that differs from the text.
        let why = entry
            .reading
            .map(|reading| format!(" ({reading})"))
            .unwrap_or_default();
        let _ = writeln!(out, "  {:<20} covers {}{why}", "", entry.reads_as);
    }
}

fn render_sandbox(out: &mut String, sandbox: &crate::policy::SandboxPolicy) {
    let _ = writeln!(out, "\nSandbox (all servers; per-server additions below)");
    match &sandbox.network.value {
        crate::policy::Network::Allow(entries) => list_line(out, "network allow", entries),
        other => value_line(
            out,
            "network",
            &other.to_string(),
            &origin_note(&sandbox.network),
        ),
    }
    list_line(out, "read", &sandbox.read);
    list_line(out, "write", &sandbox.write);
    list_line(out, "env", &sandbox.env);
    value_line(
        out,
        "run_as",
        &sandbox.run_as.value.to_string(),
        &origin_note(&sandbox.run_as),
    );
    value_line(
        out,
        "grant_args",
        &sandbox.grant_args.value.to_string(),
        &origin_note(&sandbox.grant_args),
    );
    let requirements: Vec<Sourced<String>> = sandbox
        .require
        .iter()
        .map(|r| Sourced {
            value: r.value.text.clone(),
            origin: r.origin.clone(),
        })
        .collect();
    list_line(out, "require", &requirements);
    value_line(
        out,
        "kill_timeout",
        &format!("{} s", sandbox.kill_timeout.value),
        &origin_note(&sandbox.kill_timeout),
    );
    render_limits(out, &sandbox.limits);
}

fn render_limits(out: &mut String, limits: &crate::policy::Limits) {
    for (key, value) in [
        ("processes", &limits.processes),
        ("memory_mb", &limits.memory_mb),
        ("open_files", &limits.open_files),
        ("file_size_mb", &limits.file_size_mb),
        ("disk_mb", &limits.disk_mb),
    ] {
        value_line(
            out,
            &format!("limits.{key}"),
            &value.value,
            &origin_note(value),
        );
    }
    if let Some(cpu) = &limits.cpu_seconds {
        value_line(out, "limits.cpu_seconds", &cpu.value, &origin_note(cpu));
    }
}

fn render_audit(out: &mut String, policy: &Policy) {
    let _ = writeln!(out, "\nAudit");
    match &policy.audit.path {
        Some(path) => value_line(out, "path", &path.value, &origin_note(path)),
        None => {
            // Where `run` and `serve` would write now (the same rule: `$XDG_STATE_HOME`, else
            // `~/.local/state`), not the template.
            let env = crate::paths::EnvVars::from_process();
            let default = crate::paths::UserDirs::from_env(&env)
                .default_audit_log()
                .map_or_else(
                    || "$XDG_STATE_HOME/airlock/audit.jsonl".to_string(),
                    |path| path.display().to_string(),
                );
            let _ = writeln!(out, "  {:<20} {default} (default)", "path");
        }
    }
    list_line(out, "redact", &policy.audit.redact);
    let (rotate, keep) = (&policy.audit.rotate_mb, &policy.audit.keep_rotated);
    let rotate_text = match rotate.value {
        0 => "never".to_string(),
        mb => format!("at {mb} MiB"),
    };
    value_line(out, "rotate", &rotate_text, &origin_note(rotate));
    let keep_text = match keep.value {
        0 => "all rotated files".to_string(),
        n => format!("{n} rotated files"),
    };
    value_line(out, "keep", &keep_text, &origin_note(keep));
}

fn render_pins(out: &mut String, policy: &Policy) {
    let _ = writeln!(out, "\nPins");
    for (key, value, origin) in [
        (
            "pinning",
            policy.pins.pinning.value.to_string(),
            origin_note(&policy.pins.pinning),
        ),
        (
            "new_servers",
            policy.pins.new_servers.value.to_string(),
            origin_note(&policy.pins.new_servers),
        ),
    ] {
        let _ = writeln!(out, "  {key:<20} {value:<40} {origin}");
    }
}

/// What `check` says about one server; `ok` is false when it may not launch.
struct ServerReport {
    text: String,
    ok: bool,
}

fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// What the first start's install step does and may reach (`crate::fetch`).
pub fn install_line(fetch: &crate::fetch::FetchPlan) -> String {
    let package = fetch.runner.package();
    let runner = fetch.runner.name();
    if fetch.is_cached() {
        return format!("{package} is in the server's cache view: no install step");
    }
    match crate::fetch::step::reaches(fetch) {
        Ok(hosts) => format!(
            "the first start installs {package} with {runner} in its own sandbox, which may reach {} (the registry your {} configuration names) and nothing else",
            hosts.join(", "),
            fetch.runner.cache()
        ),
        Err(err) => {
            format!("the first start installs {package} with {runner}, and will fail: {err}")
        }
    }
}

/// `host_file`: the config is a host's own (JSON), whose remote servers the host reaches
/// directly, not through a gateway.
fn report_server(
    server: &ServerConfig,
    policy: &Policy,
    context: &LaunchContext,
    full: bool,
    host_file: bool,
) -> ServerReport {
    let mut text = String::new();
    let mut ok = true;
    let state = if server.enabled { "" } else { " (disabled)" };
    let _ = writeln!(text, "  {} [{}]{state}", server.name, server.transport);
    match server.transport {
        Transport::Stdio => {
            for (key, value) in &server.env {
                let _ = writeln!(text, "    env      {key}={}", value.display());
            }
            // The same resolution, allowlist check and sandbox plan that `run`/`serve` use.
            match launch::prepare(server, policy, context) {
                Ok(mut prepared) => {
                    crate::sandbox::host::observe_host(&mut prepared.plan);
                    let argv: Vec<String> =
                        prepared.plan.argv.iter().map(|w| shell_quote(w)).collect();
                    let _ = writeln!(text, "    argv     {}", argv.join(" "));
                    let _ = writeln!(text, "    launch   allowed: {}", prepared.allowed_because);
                    let _ = writeln!(text, "    sandbox");
                    let plan = if full {
                        format!("{:#}", prepared.plan)
                    } else {
                        prepared.plan.to_string()
                    };
                    for line in plan.lines() {
                        let _ = writeln!(text, "      {line}");
                    }
                    // A disabled server never starts: its registry is not worth asking npm for.
                    if let Some(fetch) = prepared.fetch.as_ref().filter(|_| server.enabled) {
                        let _ = writeln!(text, "    install  {}", install_line(fetch));
                    }
                }
                Err(err) => {
                    ok = !server.enabled;
                    let _ = writeln!(text, "    launch   REFUSED: {err}");
                }
            }
        }
        Transport::Http | Transport::Sse => {
            let _ = writeln!(
                text,
                "    url      {}",
                crate::secret::display_url(server.url.as_deref().unwrap_or_default())
            );
            for (key, value) in &server.headers {
                let _ = writeln!(text, "    header   {key}: {}", value.display());
            }
            let gated = if host_file {
                "gated and audited only through `airlock serve`: the host reaches it directly (`airlock install HOST --gateway` puts it behind the gateway)"
            } else {
                "calls are still gated and audited"
            };
            let _ = writeln!(text, "    launch   remote: no process, no sandbox; {gated}");
        }
    }
    let _ = writeln!(
        text,
        "    timeouts startup {} s, tool {} s, idle {}",
        server.startup_timeout.as_secs(),
        server.tool_timeout.as_secs(),
        server
            .idle_timeout
            .map(|d| format!("{} s", d.as_secs()))
            .unwrap_or_else(|| "never".into())
    );
    ServerReport { text, ok }
}

/// `airlock check [--allow-*] CMD ARGS...`: the policy and the plan `airlock run` would use.
fn run_command_line(args: CheckArgs) -> Result<ExitCode, CliError> {
    let name = args.server.server_name(&args.command)?;
    let cwd = std::env::current_dir().map_err(|err| CliError::Failure(err.into()))?;
    let grants = args.server.grants(&cwd)?;
    let policy = super::server_line::policy_for(args.policy, &name, &grants)?;
    let mut out = render_policy(&policy);
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| CliError::Refused("no server command".into()))?;
    let server = ServerConfig::stdio(&name, program, rest, args.server.trust);
    let audit_path = super::session::policy_audit_path(&policy)?;
    let context = LaunchContext::for_command_line(&policy, audit_path.as_deref());
    let _ = writeln!(out, "\nServer (the command line)");
    let report = report_server(&server, &policy, &context, args.full, false);
    out.push_str(&report.text);
    print!("{out}");
    if report.ok {
        println!("\nOK");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("\nThis server may not launch (see REFUSED above).");
        Ok(ExitCode::from(super::EXIT_BAD_INPUT))
    }
}

/// `[http]`, checked as `serve` loads it: a key or value `serve` would refuse is refused here
/// with the same error, and a listener that would be exposed without authentication too.
fn render_http(out: &mut String, config: &Config) -> Result<(), CliError> {
    let http = super::serve::http_config(config)?;
    let Some(listen) = http.listen.clone() else {
        if let Some(store) = http.token_store() {
            let _ = writeln!(
                out,
                "\nHTTP ([http]): no `listen`; `serve --listen ADDR` would use it"
            );
            token_store_line(out, store);
        }
        return Ok(());
    };
    let settings = super::serve::checked_settings(&http, listen)?;
    let _ = writeln!(out, "\nHTTP ([http])");
    let _ = writeln!(out, "  {:<20} {}", "listen", settings.listen);
    let _ = writeln!(out, "  {:<20} {}", "url", settings.resource());
    if let Some(store) = &settings.auth.tokens {
        token_store_line(out, store);
    }
    if let Some(jwt) = &settings.auth.jwt {
        let _ = writeln!(out, "  {:<20} JWTs from {}", "auth", jwt.issuer);
    }
    if !settings.auth.enabled() {
        let _ = writeln!(out, "  {:<20} none (loopback only)", "auth");
    }
    Ok(())
}

fn token_store_line(out: &mut String, store: &std::path::Path) {
    let state = match crate::http::auth::tokens::list(store) {
        Ok(tokens) if store.exists() => format!("{} tokens", tokens.len()),
        Ok(_) => {
            "does not exist yet: every token is refused until `airlock token create` makes one"
                .into()
        }
        Err(err) => format!("cannot be read: {err}"),
    };
    let _ = writeln!(
        out,
        "  {:<20} tokens from {} ({state})",
        "auth",
        store.display()
    );
}

pub fn run(args: CheckArgs) -> Result<ExitCode, CliError> {
    if !args.command.is_empty() {
        if args.config.is_some() {
            return Err(CliError::Refused(
                "give either --config FILE or a server command line, not both".into(),
            ));
        }
        return run_command_line(args);
    }
    // Without --config, check what `serve` would load: a user who checks and then starts the
    // gateway must not meet errors the check never looked at.
    let config_file = match args.config.clone() {
        Some(file) => Some(file),
        None => super::serve::found_default_config()?,
    };
    let config: Option<Config> = config_file
        .as_deref()
        .map(crate::config::load_file)
        .transpose()?;
    let policy = load_active(args.policy, config.as_ref())?;
    let audit_path = super::session::policy_audit_path(&policy)?;
    let mut out = render_policy(&policy);
    let mut all_ok = true;
    if let Some(config) = &config {
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        let known = super::active_policy::server_names(config);
        for warning in crate::policy::names::undeclared_warnings(&policy, &known) {
            tracing::warn!("{warning}");
        }
        let _ = writeln!(
            out,
            "\nServers ({}: {})",
            config.path.display(),
            config.servers.len()
        );
        let context = LaunchContext::detect_for(&policy, audit_path.as_deref(), config);
        for server in &config.servers {
            let host_file = config.format != crate::config::ConfigFormat::AirlockToml;
            let report = report_server(server, &policy, &context, args.full, host_file);
            all_ok &= report.ok;
            out.push_str(&report.text);
        }
        render_http(&mut out, config)?;
    }
    if config.is_none() {
        let places: Vec<String> = super::serve::default_config_places()
            .iter()
            .map(|place| place.display().to_string())
            .collect();
        let _ = writeln!(
            out,
            "\nServers: no server config checked (none at {}); give --config FILE to check one",
            places.join(", ")
        );
    }
    print!("{out}");
    if all_ok {
        println!("\nOK");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("\nSome servers may not launch (see REFUSED above).");
        Ok(ExitCode::from(super::EXIT_BAD_INPUT))
    }
}
