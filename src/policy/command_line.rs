//! Grants given on the command line, in Deno's spelling (`airlock run --allow-read=PATH
//! --allow-write=PATH --allow-env=NAME --allow-net=HOST[:PORT]`): they join the config layer,
//! exactly as a `[servers.NAME.sandbox]` block would, so the org's locks and every widening rule
//! apply to them unchanged. Each flag is written out as a small TOML document whose "file" is the
//! flag, so a refusal reads `--allow-write:2:10: ...` with the fix.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::ServerOverride;
use super::file::SandboxSection;
use crate::diagnostic::{SourceError, from_toml_error};

#[derive(Debug, Clone)]
pub struct CommandLineGrants {
    path: PathBuf,
    text: String,
    sandbox: Option<Spanned<SandboxSection>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    sandbox: Option<Spanned<SandboxSection>>,
}

/// A per-run grant flag and the sandbox key it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// `--allow-read=PATH`: `sandbox.read`.
    Read,
    /// `--allow-write=PATH`: `sandbox.write`.
    Write,
    /// `--allow-env=NAME`: `sandbox.env`.
    Env,
    /// `--allow-net=HOST[:PORT]`: `sandbox.network = { allow = [...] }`.
    Net,
}

impl Flag {
    pub fn name(self) -> &'static str {
        match self {
            Flag::Read => "--allow-read",
            Flag::Write => "--allow-write",
            Flag::Env => "--allow-env",
            Flag::Net => "--allow-net",
        }
    }

    /// The `[sandbox]` line holding `entries` (already TOML strings).
    fn line(self, entries: &str) -> String {
        match self {
            Flag::Read => format!("read = [{entries}]"),
            Flag::Write => format!("write = [{entries}]"),
            Flag::Env => format!("env = [{entries}]"),
            Flag::Net => format!("network = {{ allow = [{entries}] }}"),
        }
    }
}

impl CommandLineGrants {
    /// `allow_net`: the `--allow-net` values, each one entry or several separated by commas.
    pub fn new(allow_net: &[String]) -> Result<CommandLineGrants, SourceError> {
        CommandLineGrants::flag(Flag::Net, allow_net)
    }

    /// One flag's values, each one entry or several separated by commas.
    pub fn flag(flag: Flag, values: &[String]) -> Result<CommandLineGrants, SourceError> {
        CommandLineGrants::flag_from(flag, values, PathBuf::from(flag.name()))
    }

    /// [`CommandLineGrants::flag`] of a run line written elsewhere (a host's config), named
    /// `source` in the policy's layers and errors.
    pub fn flag_from(
        flag: Flag,
        values: &[String],
        path: PathBuf,
    ) -> Result<CommandLineGrants, SourceError> {
        let entries: Vec<String> = values
            .iter()
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| serde_json::Value::String(entry.to_string()).to_string())
            .collect();
        let text = if entries.is_empty() {
            String::new()
        } else {
            format!("[sandbox]\n{}\n", flag.line(&entries.join(", ")))
        };
        let document: Document =
            toml::from_str(&text).map_err(|err| from_toml_error(&path, &text, &err))?;
        Ok(CommandLineGrants {
            path,
            text,
            sandbox: document.sandbox,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.sandbox.is_none()
    }

    /// The config-layer block for `server`.
    pub fn as_override<'a>(&'a self, server: &'a str) -> ServerOverride<'a> {
        ServerOverride {
            server,
            path: &self.path,
            text: &self.text,
            tools: None,
            sandbox: self.sandbox.as_ref(),
            adds_only: true,
        }
    }
}
