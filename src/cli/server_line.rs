//! A server given on the command line (`airlock run` and `airlock check`): its name, the trust
//! opt-in, and the per-run grants in Deno's spelling (`--allow-read`, `--allow-write`,
//! `--allow-env`, `--allow-net`), which join the policy's config layer for that server.

use std::path::Path;

use clap::Args;

use super::CliError;
use crate::policy::command_line::{CommandLineGrants, Flag};
use crate::policy::{Policy, ServerOverride};

#[derive(Debug, Args)]
pub struct ServerFlags {
    /// Server name used in tool patterns (`mcp:<name>__<tool>`); default: derived from the command.
    #[arg(long)]
    pub name: Option<String>,
    /// Launch the command although it is not on `launch.allow_commands` (the command-line form
    /// of a server's `trust = true`; refused when the policy sets `allow_trust = false`). The
    /// server is exactly as confined as any other.
    #[arg(long)]
    pub trust: bool,
    /// Let the server read PATH (a file or a directory; comma-separated or repeated). Adds to the
    /// config layer: an org lock still wins.
    #[arg(long = "allow-read", value_name = "PATH", value_delimiter = ',')]
    pub allow_read: Vec<String>,
    /// Let the server read and write PATH (comma-separated or repeated). Adds to the config
    /// layer: an org lock still wins.
    #[arg(long = "allow-write", value_name = "PATH", value_delimiter = ',')]
    pub allow_write: Vec<String>,
    /// Pass these variables of airlock's own environment on to the server (comma-separated or
    /// repeated; `PREFIX_*` for a family). Adds to the config layer's `sandbox.env`: an org lock
    /// still wins. `airlock install` adds it for the keys of a host entry's `env`.
    #[arg(long = "allow-env", value_name = "NAME", value_delimiter = ',')]
    pub allow_env: Vec<String>,
    /// Let the server reach HOST (ports 443 and 80), HOST:PORT, `*.DOMAIN`, `*:PORT` (any name on
    /// that port) or an address (`10.1.2.3:5432`); repeatable and comma-separated. Adds to the
    /// config layer: an org lock still wins, and names never lead to private addresses.
    #[arg(long = "allow-net", value_name = "HOST[:PORT]")]
    pub allow_net: Vec<String>,
}

/// The per-run grants, one config-layer block per flag.
pub struct Grants(Vec<CommandLineGrants>);

impl ServerFlags {
    /// `--name`, checked, or the name derived from the command.
    pub fn server_name(&self, command: &[String]) -> Result<String, CliError> {
        match &self.name {
            Some(name) => {
                crate::config::check_server_name(name, "__")
                    .map_err(|err| CliError::Refused(err.to_string()))?;
                Ok(name.clone())
            }
            None => Ok(super::run::derive_server_name(command)),
        }
    }

    /// The grants of the `--allow-*` flags. A relative path is taken from `cwd` (as the server,
    /// started there, would read it); `~` stays for the policy's own expansion.
    pub fn grants(&self, cwd: &Path) -> Result<Grants, CliError> {
        let absolute = |values: &[String]| -> Vec<String> {
            values
                .iter()
                .flat_map(|value| value.split(','))
                .map(str::trim)
                .filter(|value| !value.is_empty())
                .map(|value| {
                    let relative = !value.starts_with(['/', '~', '$']);
                    if relative {
                        crate::paths::normalize_path(&cwd.join(value))
                            .to_string_lossy()
                            .into_owned()
                    } else {
                        value.to_string()
                    }
                })
                .collect()
        };
        let blocks = [
            (Flag::Read, absolute(&self.allow_read)),
            (Flag::Write, absolute(&self.allow_write)),
            (Flag::Env, self.allow_env.clone()),
            (Flag::Net, self.allow_net.clone()),
        ];
        let mut out = Vec::new();
        for (flag, values) in blocks {
            let grants = CommandLineGrants::flag(flag, &values)?;
            if !grants.is_empty() {
                out.push(grants);
            }
        }
        Ok(Grants(out))
    }
}

impl Grants {
    /// The config-layer blocks for `server`.
    pub fn overrides<'a>(&'a self, server: &'a str) -> Vec<ServerOverride<'a>> {
        self.0
            .iter()
            .map(|grants| grants.as_override(server))
            .collect()
    }
}

/// The merged policy for a server given on the command line, its grants included.
pub fn policy_for(
    user_policy: Option<String>,
    server: &str,
    grants: &Grants,
) -> Result<Policy, CliError> {
    Ok(super::active_policy::load_active_for_server(
        user_policy,
        server,
        &grants.overrides(server),
    )?)
}
