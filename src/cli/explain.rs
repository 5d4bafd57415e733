//! `airlock explain`: the decision for one call, and the rule and layer that made it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::CliError;
use super::active_policy::load_active;
use crate::policy::Call;
use crate::policy::pattern::ToolPattern;

/// Show the decision for a tool call and the rule that made it.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  airlock explain mcp:fs__write_file '{\"path\":\"/etc/passwd\"}'\n  airlock explain mcp__github__create_issue --config airlock.toml"
)]
pub struct ExplainArgs {
    /// The call, as `mcp:<server>__<tool>` (or `mcp__<server>__<tool>`), without wildcards.
    pub call: String,
    /// The call's arguments as a JSON object.
    pub arguments: Option<String>,
    /// Server config whose per-server `tools` blocks take part.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// User policy file or preset (default: $XDG_CONFIG_HOME/airlock/policy.toml).
    #[arg(long)]
    pub policy: Option<String>,
}

pub fn run(args: ExplainArgs) -> Result<ExitCode, CliError> {
    let pattern = ToolPattern::parse(&args.call).map_err(|err| CliError::Refused(err.0))?;
    let names_tool = args.call.trim_start_matches("mcp__").contains("__");
    let (Some(server), Some(tool), true) =
        (pattern.server.literal(), pattern.tool.literal(), names_tool)
    else {
        return Err(CliError::Refused(format!(
            "{:?} is not one concrete call; write mcp:<server>__<tool> without wildcards, e.g. mcp:fs__read_file",
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
    let config = args
        .config
        .as_deref()
        .map(crate::config::load_file)
        .transpose()?;
    let policy = load_active(args.policy, config.as_ref())?;
    let decision = policy.decide(&Call {
        server,
        tool,
        arguments: arguments.as_ref(),
    });

    println!(
        "call:     mcp:{server}__{tool}{}",
        arguments.map(|a| format!(" {a}")).unwrap_or_default()
    );
    println!("decision: {}", decision.action);
    println!("rule:     {}", decision.rule);
    println!("layer:    {} ({})", decision.layer, decision.source);
    Ok(ExitCode::SUCCESS)
}
