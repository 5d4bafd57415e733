//! `airlock token create|list|revoke`: bearer tokens for `airlock serve --listen`. A token is
//! printed once, on create; the store keeps only its SHA-256 (see `crate::http::auth::tokens`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Args, Subcommand};

use super::CliError;
use crate::http::auth::tokens::{self, TokenError};
use crate::paths::{EnvVars, UserDirs};

/// Manage the bearer tokens `airlock serve --listen` accepts (`[http.auth] tokens = true`).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  airlock token create alice        # prints the token once: give it to alice\n  airlock token list\n  airlock token revoke alice        # refused from alice's next request on"
)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub action: TokenAction,
    /// The token store (default: the one `[http.auth] tokens` names in the config `serve`
    /// would load, else $XDG_CONFIG_HOME/airlock/tokens.json).
    #[arg(long, global = true)]
    pub file: Option<PathBuf>,
    /// The gateway's config, whose `[http.auth] tokens` names the store (default: the one
    /// `serve` would load, ./airlock.toml, else $XDG_CONFIG_HOME/airlock/airlock.toml).
    #[arg(long, global = true, conflicts_with = "file")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TokenAction {
    /// Make a token for NAME (the identity policies and the audit log see) and print it once.
    Create { name: String },
    /// The names and creation times of the tokens in the store.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove NAME's token: a gateway refuses it from its next request on.
    Revoke { name: String },
}

/// The store the gateway reads: `--file`, else the config's `[http.auth] tokens`, else the
/// default. A token written anywhere else would be refused by the gateway as unknown.
fn store(args: &TokenArgs) -> Result<PathBuf, CliError> {
    if let Some(file) = &args.file {
        return Ok(file.clone());
    }
    let implicit = args.config.is_none();
    let config_file = match args.config.clone() {
        Some(file) => Some(file),
        None => super::serve::found_default_config()?,
    };
    if let Some(path) = config_file {
        let store = crate::config::load_file(&path)
            .map_err(CliError::from)
            .and_then(|config| super::serve::http_config(&config))
            .map(|http| http.token_store().map(Path::to_path_buf));
        match store {
            Ok(Some(store)) => return Ok(store),
            Ok(None) => {}
            // Found, not named: say where the store question came from and the way around it.
            Err(err) if implicit => {
                return Err(CliError::Refused(format!(
                    "{err}\n  (airlock token takes the store from the config `serve` would load, {}; name the store with --file PATH instead)",
                    path.display()
                )));
            }
            Err(err) => return Err(err),
        }
    }
    UserDirs::from_env(&EnvVars::from_process())
        .token_store()
        .ok_or_else(|| {
            CliError::Refused(
                "neither XDG_CONFIG_HOME nor HOME is set: give the store with --file PATH".into(),
            )
        })
}

fn failed(err: TokenError) -> CliError {
    match err {
        TokenError::Io { .. } => CliError::Failure(err.into()),
        _ => CliError::Refused(err.to_string()),
    }
}

pub fn run(args: TokenArgs) -> Result<ExitCode, CliError> {
    let path = store(&args)?;
    match &args.action {
        TokenAction::Create { name } => {
            let token = tokens::create(&path, name, SystemTime::now()).map_err(failed)?;
            println!("{token}");
            eprintln!(
                "airlock: token for `{name}` stored as a hash in {}; this is the only time it is shown",
                path.display()
            );
        }
        TokenAction::List { json } => {
            let records = tokens::list(&path).map_err(failed)?;
            eprintln!("airlock: the token store is {}", path.display());
            if *json {
                let text = serde_json::to_string_pretty(&records)
                    .map_err(|err| CliError::Failure(err.into()))?;
                println!("{text}");
            } else if records.is_empty() {
                println!("no tokens in {}", path.display());
            } else {
                println!("{:<32} CREATED", "NAME");
                for record in records {
                    println!("{:<32} {}", record.name, record.created);
                }
            }
        }
        TokenAction::Revoke { name } => {
            tokens::revoke(&path, name).map_err(failed)?;
            eprintln!(
                "airlock: revoked the token of `{name}` in {}",
                path.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
