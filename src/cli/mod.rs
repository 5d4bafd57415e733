//! Command-line interface: argument parsing (clap), one file per subcommand, exit codes.
//!
//! Exit codes: 0 success; 1 a runtime failure; 2 bad input (config or policy, with
//! file:line:col and the fix, or a refused launch). stdout belongs to MCP in `run` and `serve`:
//! logs always go to stderr.

mod active_policy;
mod audit;
mod check;
mod completions;
mod confine;
mod doctor;
mod explain;
mod install;
mod listen;
mod logging;
mod pins;
mod reload;
pub mod run;
pub mod serve;
mod server_line;
mod session;
mod status;
mod test;
mod test_url;
mod token;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::diagnostic::SourceError;
use crate::session::stderr_queue::say;

/// Exit code for bad input: a config or policy error, or a refused launch.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code for a runtime failure.
pub const EXIT_FAILURE: u8 = 1;

/// How long airlock's exit waits for its queued stderr to be read: enough for any reader that
/// reads at all, short enough that a host that never reads it does not keep airlock alive.
const STDERR_DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug, Parser)]
#[command(
    name = "airlock",
    version,
    about = "Run MCP servers you did not write: sandboxed, gated, audited."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// How airlock writes its own log on stderr: text (coloured only on a terminal, never with
    /// NO_COLOR) or json (one object a line).
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    pub log_format: logging::LogFormat,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Audit(Box<audit::AuditArgs>),
    Check(check::CheckArgs),
    Explain(explain::ExplainArgs),
    Pins(pins::PinsArgs),
    Run(run::RunArgs),
    Serve(serve::ServeArgs),
    Test(test::TestArgs),
    Status(status::StatusArgs),
    Token(token::TokenArgs),
    /// Make every running `airlock serve` re-read its config and policies (like SIGHUP).
    Reload(reload::ReloadArgs),
    /// Report kernel sandbox features and what the active policy will enforce.
    Doctor(doctor::DoctorArgs),
    Install(install::InstallArgs),
    Uninstall(install::UninstallArgs),
    Completions(completions::CompletionsArgs),
    Man(completions::ManArgs),
    /// The confine helper (internal).
    #[command(name = "__confine", hide = true)]
    Confine(confine::ConfineArgs),
    /// Run one command confined under the active policy (tests and benchmarks).
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec(confine::SandboxExecArgs),
}

/// An error the CLI reports: bad input (exit 2) or a failure (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    BadInput(#[from] SourceError),
    #[error("{0}")]
    Refused(String),
    #[error("{}", causes_once(.0))]
    Failure(#[from] anyhow::Error),
}

/// The error and each of its causes, `: `-separated, leaving out a cause whose text is already
/// there: many errors name their cause in their own message as well as give it as their source
/// (`cannot open the audit log X: No such file or directory`), which `{:#}` would print twice.
fn causes_once(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::BadInput(_) | CliError::Refused(_) => EXIT_BAD_INPUT,
            CliError::Failure(_) => EXIT_FAILURE,
        }
    }
}

pub fn main() -> ExitCode {
    crate::process::huge_pages::opt_out();
    let cli = Cli::parse();
    let log_format = cli.log_format;
    logging::init(log_format);
    let result = match cli.command {
        Command::Audit(args) => audit::run(*args),
        Command::Check(args) => check::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Pins(args) => pins::run(args),
        Command::Run(args) => run::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Test(args) => test::run(args),
        Command::Status(args) => status::run(args),
        Command::Token(args) => token::run(args),
        Command::Reload(args) => reload::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Install(args) => install::install(args),
        Command::Uninstall(args) => install::uninstall(args),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => completions::man(args),
        Command::Confine(args) => confine::confine(args),
        Command::SandboxExec(args) => confine::sandbox_exec(args),
    };
    let code = match result {
        Ok(code) => code,
        Err(err) => {
            match log_format {
                logging::LogFormat::Text => say(format_args!("airlock: {err}")),
                // Machines get the final error as one more JSON line.
                logging::LogFormat::Json => tracing::error!(exit_code = err.exit_code(), "{err}"),
            }
            ExitCode::from(err.exit_code())
        }
    };
    // What `run` and `serve` queued for stderr, unless nobody reads it (then it is not waited for).
    crate::session::stderr_queue::finish(STDERR_DRAIN_WAIT);
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_the_message_already_names_is_printed_once() {
        let open = crate::audit::AuditError::Open {
            path: "/nowhere/audit.jsonl".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let err = CliError::Failure(anyhow::Error::new(open).context("starting the session"));
        let text = err.to_string();
        assert_eq!(
            text.matches("entity not found").count(),
            1,
            "the cause once: {text}"
        );
        assert!(
            text.starts_with(
                "starting the session: cannot open the audit log /nowhere/audit.jsonl"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_cause_the_message_does_not_name_is_kept() {
        let err = CliError::Failure(anyhow::anyhow!("disk full").context("writing the config"));
        assert_eq!(err.to_string(), "writing the config: disk full");
    }
}
