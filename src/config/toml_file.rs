//! `airlock.toml`: `[servers.NAME]` blocks, strict (unknown keys are errors).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigFormat, Located, RawServer, ServerConfig, Validator, check_separator, collect};
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
    let (file, mut errors) = crate::diagnostic::parse_toml_partial::<ConfigFile>(path, text);
    let Some(file) = file else {
        return Err(SourceError::all(errors)
            .unwrap_or_else(|| SourceError::new(path, None, "invalid TOML")));
    };
    // A server with a key set aside above is not validated: its missing key would be reported
    // again as a knock-on error ("neither `command` nor `url`" for a misspelt `command`).
    let parse_errors: Vec<LineCol> = errors.iter().filter_map(|e| e.position).collect();
    let touched = |span: std::ops::Range<usize>| {
        let from = LineCol::from_offset(text, span.start);
        let to = LineCol::from_offset(text, span.end);
        parse_errors.iter().any(|at| {
            (from.line, from.column) <= (at.line, at.column)
                && (at.line, at.column) < (to.line, to.column)
        })
    };
    if let Some(version) = &file.version
        && *version.get_ref() != 1
    {
        errors.push(
            SourceError::at_span(
                path,
                text,
                version.span(),
                format!("unsupported config version {}", version.get_ref()),
            )
            .with_fix("set `version = 1` or remove the key"),
        );
    }
    let separator = match file.gateway.as_ref().and_then(|g| g.separator.as_ref()) {
        None => "__".to_string(),
        Some(separator) => {
            let checked = check_separator(separator.get_ref()).map_err(|err| {
                SourceError::at_span(path, text, separator.span(), err.to_string())
                    .with_fix("use \"__\" (the default) or \"_\"")
            });
            collect(&mut errors, checked);
            separator.get_ref().clone()
        }
    };

    let mut validator = Validator {
        json: false,
        path,
        separator: &separator,
        strict_env: file.strict_env,
        lookup,
        warnings: Vec::new(),
    };
    let mut declarations: Vec<_> = file.servers.into_iter().collect();
    declarations.sort_by_key(|(name, _)| name.span().start);
    let mut servers = Vec::with_capacity(declarations.len());
    // A declaration's text runs to the next one (the last one's to the end of the file).
    let ends: Vec<usize> = declarations
        .iter()
        .skip(1)
        .map(|(name, _)| name.span().start)
        .chain([text.len() + 1])
        .collect();
    for ((name, decl), end) in declarations.into_iter().zip(ends) {
        if touched(name.span().start..end) {
            continue;
        }
        let raw = raw_server(text, name, decl.into_inner());
        servers.extend(collect(&mut errors, validator.validate(raw)));
    }
    if let Some(err) = SourceError::all(errors) {
        return Err(err);
    }
    let warnings = validator.warnings;
    Ok((ConfigFormat::AirlockToml, servers, separator, warnings))
}

/// One `[servers.NAME]` table read into the shape the validator takes, with positions.
fn raw_server(text: &str, name: Spanned<String>, decl: ServerDecl) -> RawServer {
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
    RawServer {
        at: at(name.span()),
        name: name.into_inner(),
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
        grants: Vec::new(),
    }
}
