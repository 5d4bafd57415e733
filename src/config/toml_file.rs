//! `airlock.toml`: `[servers.NAME]` blocks, strict (unknown keys are errors).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigFormat, Located, RawServer, ServerConfig, Validator, check_separator};
use crate::diagnostic::{LineCol, SourceError};
use crate::policy::file::{SandboxSection, ToolsSection};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    version: Option<Spanned<i64>>,
    #[serde(default)]
    strict_env: bool,
    gateway: Option<GatewaySection>,
    /// `[http]`: the listener's settings, validated by `crate::http::config` (serve --listen).
    #[allow(dead_code)]
    http: Option<toml::Value>,
    #[serde(default)]
    servers: BTreeMap<Spanned<String>, Spanned<ServerDecl>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewaySection {
    separator: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerDecl {
    transport: Option<Spanned<String>>,
    command: Option<Spanned<String>>,
    #[serde(default)]
    args: Vec<String>,
    env: Option<Spanned<BTreeMap<String, String>>>,
    cwd: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
    headers: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    trust: bool,
    startup_timeout: Option<Spanned<i64>>,
    tool_timeout: Option<Spanned<i64>>,
    idle_timeout: Option<Spanned<i64>>,
    enabled: Option<bool>,
    start: Option<Spanned<String>>,
    sandbox: Option<Spanned<SandboxSection>>,
    tools: Option<Spanned<ToolsSection>>,
}

type Parsed = (
    ConfigFormat,
    Vec<ServerConfig>,
    String,
    Vec<crate::diagnostic::SourceWarning>,
);

pub(super) fn parse(
    path: &Path,
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Parsed, SourceError> {
    let file: ConfigFile = crate::diagnostic::parse_toml_all(path, text)?;
    let at = |span: std::ops::Range<usize>| Some(LineCol::from_offset(text, span.start));
    let located = |value: &Option<Spanned<String>>| {
        value.as_ref().map(|v| Located {
            value: v.get_ref().clone(),
            at: at(v.span()),
        })
    };
    let located_int = |value: &Option<Spanned<i64>>| {
        value.as_ref().map(|v| Located {
            value: *v.get_ref(),
            at: at(v.span()),
        })
    };

    if let Some(version) = &file.version
        && *version.get_ref() != 1
    {
        return Err(SourceError::at_span(
            path,
            text,
            version.span(),
            format!("unsupported config version {}", version.get_ref()),
        )
        .with_fix("set `version = 1` or remove the key"));
    }
    let separator = match file.gateway.as_ref().and_then(|g| g.separator.as_ref()) {
        None => "__".to_string(),
        Some(separator) => {
            check_separator(separator.get_ref()).map_err(|err| {
                SourceError::at_span(path, text, separator.span(), err.to_string())
                    .with_fix("use \"__\" (the default) or \"_\"")
            })?;
            separator.get_ref().clone()
        }
    };

    let mut validator = Validator {
        path,
        separator: &separator,
        strict_env: file.strict_env,
        lookup,
        warnings: Vec::new(),
    };
    let mut declarations: Vec<_> = file.servers.into_iter().collect();
    declarations.sort_by_key(|(name, _)| name.span().start);
    let mut servers = Vec::with_capacity(declarations.len());
    for (name, decl) in declarations {
        let server_at = at(name.span());
        let decl = decl.into_inner();
        let raw = RawServer {
            name: name.into_inner(),
            at: server_at,
            transport: located(&decl.transport),
            command: located(&decl.command),
            args: decl.args,
            env_at: decl.env.as_ref().and_then(|e| at(e.span())),
            env: decl.env.map(Spanned::into_inner).unwrap_or_default(),
            cwd: located(&decl.cwd),
            url: located(&decl.url),
            headers_at: decl.headers.as_ref().and_then(|h| at(h.span())),
            headers: decl.headers.map(Spanned::into_inner).unwrap_or_default(),
            trust: decl.trust,
            startup_timeout: located_int(&decl.startup_timeout),
            tool_timeout: located_int(&decl.tool_timeout),
            idle_timeout: located_int(&decl.idle_timeout),
            enabled: decl.enabled.unwrap_or(true),
            start: located(&decl.start),
            sandbox: decl.sandbox,
            tools: decl.tools,
        };
        servers.push(validator.validate(raw)?);
    }
    let warnings = validator.warnings;
    Ok((ConfigFormat::AirlockToml, servers, separator, warnings))
}
