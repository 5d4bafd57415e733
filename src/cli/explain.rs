//! `airlock explain`: the decision for one call, and the rule and layer that made it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::CliError;
use super::active_policy::load_active;
use crate::paths::EnvVars;
use crate::policy::Call;
use crate::policy::names::{self, Resolution};
use crate::policy::pattern::ToolPattern;
use crate::policy::reading::PathContext;
use crate::policy::rules::ArgumentTrace;
use crate::sandbox::{AirlockDirs, HostFacts};

/// Show the decision for a tool call and the rule that made it.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  airlock explain mcp:fs__write_file '{\"path\":\"/etc/passwd\"}'\n  airlock explain mcp__github__create_issue --config airlock.toml\n  airlock explain net:github api.github.com:443"
)]
pub struct ExplainArgs {
    /// The call, as `mcp:<server>__<tool>` (or `mcp__<server>__<tool>`), without wildcards; or
    /// `net:<server>` to ask whether that server may reach a host.
    pub call: String,
    /// The call's arguments as a JSON object; for `net:<server>`, the target `HOST:PORT`.
    pub arguments: Option<String>,
    /// Server config whose per-server `tools` blocks take part (default: the one `serve` would
    /// use, ./airlock.toml, else $XDG_CONFIG_HOME/airlock/airlock.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// User policy file or preset (default: $XDG_CONFIG_HOME/airlock/policy.toml).
    #[arg(long)]
    pub policy: Option<String>,
    /// The server's working directory, for relative path arguments (default: the server's `cwd`
    /// in --config, else the current directory, as `airlock run` starts it).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
}

/// `--config`, else the config `serve` would load (its servers read one-underscore names and
/// take part with their per-server blocks), else none.
fn load_config(args: &ExplainArgs) -> Result<Option<crate::config::Config>, CliError> {
    let file = match args.config.clone() {
        Some(file) => Some(file),
        None => super::serve::found_default_config()?,
    };
    Ok(file.as_deref().map(crate::config::load_file).transpose()?)
}

pub fn run(args: ExplainArgs) -> Result<ExitCode, CliError> {
    if let Some(server) = args.call.strip_prefix("net:") {
        return explain_net(server, &args);
    }
    let config = load_config(&args)?;
    let known: Vec<&str> = config
        .as_ref()
        .map(super::active_policy::server_names)
        .unwrap_or_default();
    let (pattern, reading) = read_call(&args.call, &known)?;
    let names_tool = reading.is_some() || args.call.trim_start_matches("mcp__").contains("__");
    let (Some(server), Some(tool), true) =
        (pattern.server.literal(), pattern.tool.literal(), names_tool)
    else {
        let why = if !names_tool && !args.call.contains('*') && config.is_none() {
            "does not say where the server's name ends (no `__`, and no server config to read a \
             one-underscore name against); write mcp:<server>__<tool>, or pass --config FILE"
        } else {
            "is not one concrete call; write mcp:<server>__<tool> without wildcards"
        };
        return Err(CliError::Refused(format!(
            "{:?} {why}, e.g. mcp:fs__read_file",
            args.call
        )));
    };
    let arguments = match &args.arguments {
        None => None,
        Some(text) => {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|err| CliError::Refused(format!("arguments are not valid JSON: {err}")))?;
            if !value.is_object() {
                return Err(CliError::Refused(
                    "arguments must be a JSON object, e.g. '{\"path\":\"/tmp/x\"}'".into(),
                ));
            }
            Some(value)
        }
    };
    // Without a config, patterns are read as `airlock run --name SERVER` reads them.
    let policy = match &config {
        Some(config) => load_active(args.policy, Some(config))?,
        None => super::active_policy::load_active_for_server(args.policy, server, &[])?,
    };
    let declared = config
        .as_ref()
        .and_then(|config| config.servers.iter().find(|s| s.name == server));
    // A declared server: the very HOME, working directory and argument directories its launch
    // gives it (a working directory it is not granted becomes its private home). Otherwise,
    // or with --cwd, what can be told from here.
    let launched = declared
        .filter(|_| args.cwd.is_none())
        .zip(config.as_ref())
        .and_then(|(declared, config)| {
            let context = crate::process::launch::LaunchContext::detect_for(&policy, None, config);
            crate::process::launch::prepare(declared, &policy, &context).ok()
        });
    let context = match launched {
        Some(prepared) => prepared.path_context(),
        None => {
            let declared_cwd = declared.and_then(|declared| declared.cwd.clone());
            let mut context = server_path_context(server, args.cwd.clone().or(declared_cwd));
            if let Some(declared) = declared {
                context.bases = directories_in(&declared.args, context.cwd.as_deref());
            }
            context
        }
    };
    let call = Call {
        server,
        tool,
        arguments: arguments.as_ref(),
        identity: None,
    };
    let decision = policy.decide_in(&call, &context);

    println!(
        "call:     mcp:{server}__{tool}{}",
        arguments
            .as_ref()
            .map(|a| format!(" {a}"))
            .unwrap_or_default()
    );
    if let Some(reading) = &reading {
        println!("reading:  {reading}");
    }
    println!("decision: {}", decision.action);
    println!("rule:     {}", decision.rule);
    let rule_reading = policy
        .tools
        .entries()
        .iter()
        .find(|entry| entry.rule == decision.rule && entry.reading.is_some())
        .and_then(|entry| entry.reading.as_deref());
    if let Some(rule_reading) = rule_reading {
        println!("          {rule_reading}");
    }
    println!("layer:    {} ({})", decision.layer, decision.source);
    print_server_note(config.as_ref(), server, &known);
    println!(
        "listing:  at run time a call is forwarded only when the server listed the name {tool:?} \
         byte for byte; any other spelling (case, spaces, look-alike characters) is answered as an \
         unknown tool, whatever the rules say"
    );
    print_readings(&policy, &call, &context, &decision);
    if decision.action != crate::policy::Action::Deny {
        // "allow" is the gate's word on the call, not on what the server may touch.
        println!(
            "sandbox:  this is the policy's decision on the call; what the server can then read, \
             write or reach is its sandbox's, whatever the arguments name (`airlock check` shows \
             each server's grants)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// How the rules on the tool's arguments read them: the deciding rule's reading first, then how
/// each other rule read them (each judged for its own action).
fn print_readings(
    policy: &crate::policy::Policy,
    call: &Call<'_>,
    context: &PathContext,
    decision: &crate::policy::Decision,
) {
    let traces = policy.tools.argument_traces(call, context);
    if !traces.is_empty() {
        println!(
            "reading:  paths as the server reads them (HOME {}, working directory {})",
            shown(context.home.as_deref()),
            shown(context.cwd.as_deref())
        );
    }
    if let Some(trace) = &decision.argument {
        println!("  decided by {}:", decision.rule);
        print_trace(trace);
    }
    let mut deciding_skipped = decision.argument.is_none();
    for other in &traces {
        if !deciding_skipped
            && other.rule == decision.rule
            && Some(&other.trace) == decision.argument.as_ref()
        {
            deciding_skipped = true;
            continue;
        }
        println!("  also {}:", other.rule);
        print_trace(&other.trace);
    }
}

/// The call as a pattern: `mcp:fs_write_file` is read against the declared names, as policy
/// patterns are. Returns the pattern and, when it was re-read, how.
fn read_call(call: &str, known: &[&str]) -> Result<(ToolPattern, Option<String>), CliError> {
    let written = ToolPattern::parse(call).map_err(|err| CliError::Refused(err.0))?;
    match names::resolve(call, &written, known) {
        Resolution::AsWritten => Ok((written, None)),
        Resolution::Split(pattern) => {
            let note = format!("{call} read as {pattern}");
            Ok((pattern, Some(note)))
        }
        Resolution::Ambiguous(readings) => {
            let all: Vec<String> = readings.iter().map(ToString::to_string).collect();
            Err(CliError::Refused(format!(
                "{call:?} can be read as {}; write the one you mean",
                all.join(" or ")
            )))
        }
    }
}

/// Says how server names were checked: against `--config`, or as `airlock run` would.
fn print_server_note(config: Option<&crate::config::Config>, server: &str, known: &[&str]) {
    match config {
        None => println!(
            "note:     no --config: patterns are read as `airlock run --name {server}` reads them"
        ),
        Some(config) if !known.contains(&server) => println!(
            "note:     no server {server:?} is declared in {} ({}); this is the decision a \
             server of that name would get",
            config.path.display(),
            names::closest_hint(server, known)
        ),
        Some(_) => {}
    }
}

/// The HOME and working directory the server will have: its private home, and `cwd`.
fn server_path_context(server: &str, cwd: Option<PathBuf>) -> PathContext {
    let env = EnvVars::from_process();
    let dirs = AirlockDirs::from_env(&env, HostFacts::detect().is_root);
    PathContext {
        home: Some(dirs.servers_dir().join(server).join("home")),
        cwd: cwd.or_else(|| std::env::current_dir().ok()),
        bases: Vec::new(),
        fallback_cwd: None,
        user_homes: crate::process::launch::user_homes(dirs.home.as_deref()),
    }
}

/// The directories named on a server's command line: the gate reads a relative path against
/// them too (as `airlock run` and `serve` do with the launched server's arguments).
fn directories_in(args: &[String], cwd: Option<&std::path::Path>) -> Vec<PathBuf> {
    args.iter()
        .filter_map(|word| crate::sandbox::arguments::path_in_word(word))
        // `~` here is the user's home, which explain does not resolve: the gate reads the
        // launched server's arguments, already expanded.
        .filter(|(_, path)| !path.starts_with('~'))
        .map(|(_, path)| match cwd {
            Some(cwd) => cwd.join(path),
            None => PathBuf::from(path),
        })
        .filter(|path| path.is_absolute() && path.is_dir())
        .collect()
}

fn shown(path: Option<&std::path::Path>) -> String {
    path.map_or_else(|| "unknown".to_string(), |p| p.display().to_string())
}

fn print_trace(trace: &ArgumentTrace) {
    let keys = match trace.keys.as_slice() {
        [] => "absent".to_string(),
        keys => keys
            .iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    println!(
        "    argument {:?} (keys in the call: {keys})",
        trace.argument
    );
    if let Some(note) = &trace.note {
        println!("      {note}");
    }
    for value in &trace.values {
        if value.readings.is_empty() {
            println!("      {:?} compared as written", value.raw);
        }
        for reading in &value.readings {
            let verdict = match reading.holds {
                Some(true) => ": meets the rule",
                Some(false) => ": does not meet the rule",
                None => "",
            };
            match &reading.resolved {
                Some(path) => {
                    println!("      {:?} -> {path} ({}){verdict}", value.raw, reading.how)
                }
                None => println!(
                    "      {:?} -> unreadable: {} (fails closed: triggers deny/ask, never allows)",
                    value.raw, reading.how
                ),
            }
        }
    }
}

/// `explain net:SERVER HOST:PORT`: the server's merged network policy, asked about one target.
fn explain_net(server: &str, args: &ExplainArgs) -> Result<ExitCode, CliError> {
    use crate::net::explain::{Answer, explain, parse_target};
    use crate::policy::Network;
    let target = args.arguments.as_deref().ok_or_else(|| {
        CliError::Refused("name the target: airlock explain net:SERVER HOST:PORT".into())
    })?;
    let (host, port) = parse_target(target).map_err(|err| CliError::Refused(err.to_string()))?;
    let config = load_config(args)?;
    let policy = load_active(args.policy.clone(), config.as_ref())?;
    let network = &policy.sandbox_for(server).network;
    println!("server:   {server}");
    if let Some(config) = &config
        && !super::active_policy::server_names(config).contains(&server)
    {
        println!(
            "note:     no server {server:?} is declared in {}; this is the policy for all servers",
            config.path.display()
        );
    }
    println!("target:   {host} port {port}");
    let (decision, rule, note) = match &network.value {
        Network::None => ("deny", "sandbox.network = \"none\"".to_string(), None),
        Network::Host => (
            "allow",
            "sandbox.network = \"host\"".to_string(),
            Some("the host's network, unconfined: anything the host reaches".to_string()),
        ),
        Network::Allow(_) => {
            let allow = network.value.allow_list().unwrap_or_default();
            match explain(&allow, &host, port) {
                Answer::Allowed { entry, note } => (
                    "allow",
                    format!(
                        "sandbox.network allow {:?} ({})",
                        entry.rule.to_string(),
                        entry.origin
                    ),
                    Some(note),
                ),
                Answer::Refused { why } => (
                    "deny",
                    format!("{} ({})", network.value, network.origin),
                    Some(why),
                ),
            }
        }
    };
    println!("decision: {decision}");
    println!("rule:     {rule}");
    if !matches!(network.value, Network::Allow(_)) {
        println!("layer:    {}", network.origin);
    }
    if let Some(note) = note {
        println!("why:      {note}");
    }
    // The install step of a first start reaches the registry, whatever the server's own rule.
    if let Some(config) = &config
        && let Some(declared) = config.servers.iter().find(|s| s.name == server)
    {
        let context = crate::process::launch::LaunchContext::detect_for(&policy, None, config);
        if let Ok(prepared) = crate::process::launch::prepare(declared, &policy, &context)
            && let Some(fetch) = &prepared.fetch
        {
            println!("install:  {}", super::check::install_line(fetch));
        }
    }
    Ok(ExitCode::SUCCESS)
}
