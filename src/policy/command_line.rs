//! Grants given on the command line (`airlock run --allow-net=HOST[:PORT]`): they join the
//! config layer, exactly as a `[servers.NAME.sandbox]` block would, so the org's locks and every
//! widening rule apply to them unchanged. They are written out as a small TOML document whose
//! "file" is the flag, so a refusal reads `--allow-net:2:11: ...` with the fix.

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

impl CommandLineGrants {
    /// `allow_net`: the `--allow-net` values, each one entry or several separated by commas.
    pub fn new(allow_net: &[String]) -> Result<CommandLineGrants, SourceError> {
        let path = PathBuf::from("--allow-net");
        let entries: Vec<String> = allow_net
            .iter()
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| serde_json::Value::String(entry.to_string()).to_string())
            .collect();
        let text = if entries.is_empty() {
            String::new()
        } else {
            format!(
                "[sandbox]\nnetwork = {{ allow = [{}] }}\n",
                entries.join(", ")
            )
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
        }
    }
}
