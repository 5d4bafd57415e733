//! Layering: turns the built-in default, org, user, config and project layers into one
//! [`Policy`], refusing any widening the layer is not entitled to.
//!
//! Semantics, per key (written down in README "Policy layering"):
//! - The built-in `policies/default.toml` supplies every key no other layer sets.
//! - Lists that grant (commands, paths, env names, allow rules) are the union of every layer that
//!   sets them; lists that restrict (ask, deny, require, redact) are always unioned.
//! - Scalars (network, limits, run_as, allow_trust, kill_timeout, audit path): the last layer that
//!   sets them wins, except `tools.default`, where the org's value stands if it set one (a lower
//!   layer may only make it stricter).
//! - A layer may not widen: the project layer ever; the user and config layers in a section an org
//!   file marked `locked = true`. Trying is a load error that names both files.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use toml::Spanned;

use super::file::{
    AuditSection, LaunchSection, LimitsSection, PolicyFile, RuleDecl, SandboxSection, ToolsSection,
};
use super::pattern::{Glob, ToolPattern};
use super::presets;
use super::rules::{ArgMatcher, Condition, ToolEntry, ToolRules};
use super::{
    Action, AuditPolicy, Feature, LaunchPolicy, Layer, Limits, Network, Origin, Policy,
    Requirement, RunAs, SandboxPolicy, Sourced,
};
use crate::diagnostic::{LineCol, SourceError, from_toml_error};

/// One policy file to merge, with its text (kept for error positions and the digest).
#[derive(Debug, Clone)]
pub struct LayerSource {
    pub layer: Layer,
    pub path: PathBuf,
    pub text: String,
}

/// A server's own `tools` / `sandbox` blocks from the server config (the config layer).
#[derive(Debug, Clone, Copy)]
pub struct ServerOverride<'a> {
    pub server: &'a str,
    pub path: &'a Path,
    pub text: &'a str,
    pub tools: Option<&'a Spanned<ToolsSection>>,
    pub sandbox: Option<&'a Spanned<SandboxSection>>,
}

/// The file a layer's value is read from, for origins and error positions.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    layer: Layer,
    path: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn origin(&self, span: &Range<usize>) -> Origin {
        let line = if self.layer == Layer::Builtin {
            None
        } else {
            Some(LineCol::from_offset(self.text, span.start).line)
        };
        Origin {
            layer: self.layer,
            file: self.path.to_path_buf(),
            line,
        }
    }

    fn error(&self, span: &Range<usize>, message: impl Into<String>) -> SourceError {
        SourceError::at_span(self.path, self.text, span.clone(), message)
    }

    fn sourced<T>(&self, value: T, span: &Range<usize>) -> Sourced<T> {
        Sourced {
            value,
            origin: self.origin(span),
        }
    }
}

/// May this layer widen the section it is writing to?
#[derive(Clone)]
enum Widening {
    Allowed,
    /// Locked by this org file.
    LockedBy(Origin),
    /// The project layer, which may only narrow.
    ProjectOnlyNarrows,
}

impl Widening {
    fn only_narrows(&self) -> bool {
        !matches!(self, Widening::Allowed)
    }

    fn check(
        &self,
        ctx: &Ctx<'_>,
        span: &Range<usize>,
        what: &str,
        widens: bool,
    ) -> Result<(), SourceError> {
        if !widens {
            return Ok(());
        }
        match self {
            Widening::Allowed => Ok(()),
            Widening::LockedBy(lock) => Err(ctx
                .error(
                    span,
                    format!("{what} widens a section the org policy locks ({lock})"),
                )
                .with_fix(format!(
                    "remove it from {}; only the org policy {} can change a locked section",
                    ctx.path.display(),
                    lock.file.display()
                ))),
            Widening::ProjectOnlyNarrows => Err(ctx
                .error(
                    span,
                    format!(
                        "{what} would widen the policy, and a project policy may only narrow it"
                    ),
                )
                .with_fix(
                    "remove it here; if you trust this project, put the grant in your user policy \
                     ($XDG_CONFIG_HOME/airlock/policy.toml)",
                )),
        }
    }
}

/// Org locks collected from org files, per section.
#[derive(Default, Clone)]
struct Locks {
    launch: Option<Origin>,
    tools: Option<Origin>,
    sandbox: Option<Origin>,
    audit: Option<Origin>,
}

fn widening_for(layer: Layer, lock: &Option<Origin>) -> Widening {
    match (layer, lock) {
        (Layer::Org | Layer::Builtin, _) => Widening::Allowed,
        (Layer::Project, _) => Widening::ProjectOnlyNarrows,
        (_, Some(origin)) => Widening::LockedBy(origin.clone()),
        (_, None) => Widening::Allowed,
    }
}

/// `locked` in a server's config block: only org files may lock.
fn reject_lock_outside_org(
    ctx: &Ctx<'_>,
    locked: &Option<Spanned<bool>>,
) -> Result<(), SourceError> {
    match locked {
        Some(flag) => Err(ctx
            .error(
                &flag.span(),
                "`locked` only has an effect in the org policy",
            )
            .with_fix("remove `locked` here")),
        None => Ok(()),
    }
}

/// Reads a `locked = true` flag: only org files may carry it.
fn read_lock(
    ctx: &Ctx<'_>,
    locked: &Option<Spanned<bool>>,
    slot: &mut Option<Origin>,
) -> Result<(), SourceError> {
    let Some(flag) = locked else { return Ok(()) };
    if !matches!(ctx.layer, Layer::Org | Layer::Builtin) {
        return Err(ctx
            .error(
                &flag.span(),
                "`locked` only has an effect in the org policy",
            )
            .with_fix("remove `locked` from this file"));
    }
    if *flag.get_ref() && slot.is_none() {
        *slot = Some(ctx.origin(&flag.span()));
    }
    Ok(())
}

/// Merges a granting list. Entries replace the built-in default's list the first time a real
/// layer sets the key, and are unioned after that.
fn merge_grants(
    current: &mut Vec<Sourced<String>>,
    new: &[Spanned<String>],
    ctx: &Ctx<'_>,
    widening: &Widening,
    key: &str,
) -> Result<(), SourceError> {
    for entry in new {
        let known = current.iter().any(|have| &have.value == entry.get_ref());
        widening.check(
            ctx,
            &entry.span(),
            &format!("`{key}` entry {:?}", entry.get_ref()),
            !known,
        )?;
    }
    if current
        .iter()
        .all(|have| have.origin.layer == Layer::Builtin)
    {
        current.clear();
    }
    for entry in new {
        if !current.iter().any(|have| &have.value == entry.get_ref()) {
            current.push(ctx.sourced(entry.get_ref().clone(), &entry.span()));
        }
    }
    Ok(())
}

fn parse_version(ctx: &Ctx<'_>, file: &PolicyFile) -> Result<(), SourceError> {
    match &file.version {
        Some(version) if *version.get_ref() == 1 => Ok(()),
        Some(version) => Err(ctx
            .error(
                &version.span(),
                format!("unsupported policy version {}", version.get_ref()),
            )
            .with_fix("set `version = 1`")),
        None => Err(SourceError::new(
            ctx.path,
            Some(LineCol { line: 1, column: 1 }),
            "missing `version`",
        )
        .with_fix("add `version = 1` as the first line")),
    }
}

fn parse_network(ctx: &Ctx<'_>, value: &Spanned<toml::Value>) -> Result<Network, SourceError> {
    let bad = || {
        ctx.error(
            &value.span(),
            "`network` must be \"none\", \"host\" or a list of TCP ports",
        )
        .with_fix("write network = \"none\", network = \"host\" or network = [443]")
    };
    match value.get_ref() {
        toml::Value::String(mode) if mode == "none" => Ok(Network::None),
        toml::Value::String(mode) if mode == "host" => Ok(Network::Host),
        toml::Value::Array(items) => {
            let mut ports = Vec::new();
            for item in items {
                let port = item
                    .as_integer()
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|&p| p > 0);
                match port {
                    Some(port) if !ports.contains(&port) => ports.push(port),
                    Some(_) => {}
                    None => return Err(bad()),
                }
            }
            ports.sort_unstable();
            Ok(Network::TcpConnect(ports))
        }
        _ => Err(bad()),
    }
}

fn parse_run_as(ctx: &Ctx<'_>, value: &Spanned<toml::Value>) -> Result<RunAs, SourceError> {
    match value.get_ref() {
        toml::Value::String(name) if name == "nobody" => Ok(RunAs::Nobody),
        toml::Value::String(name) if name == "root" => Ok(RunAs::Root),
        toml::Value::Integer(0) => Ok(RunAs::Root),
        toml::Value::Integer(65534) => Ok(RunAs::Nobody),
        toml::Value::Integer(uid) => u32::try_from(*uid)
            .map(RunAs::Uid)
            .map_err(|_| ctx.error(&value.span(), "`run_as` uid is out of range")),
        _ => Err(ctx
            .error(
                &value.span(),
                "`run_as` must be \"nobody\", \"root\" or a numeric uid",
            )
            .with_fix("write run_as = \"nobody\"")),
    }
}

fn parse_requirement(ctx: &Ctx<'_>, text: &Spanned<String>) -> Result<Requirement, SourceError> {
    let raw = text.get_ref().trim();
    let (name, min_version) = match raw.split_once(">=") {
        Some((name, version)) => {
            let version = version.trim().parse::<u32>().map_err(|_| {
                ctx.error(
                    &text.span(),
                    format!("requirement {raw:?} has a bad version"),
                )
                .with_fix("write for example \"landlock>=6\"")
            })?;
            (name.trim(), Some(version))
        }
        None => (raw, None),
    };
    let feature = match name {
        "landlock" => Feature::Landlock,
        "seccomp" => Feature::Seccomp,
        "userns" | "user_namespaces" => Feature::UserNamespaces,
        _ => {
            return Err(ctx
                .error(&text.span(), format!("unknown requirement {raw:?}"))
                .with_fix("use \"landlock\", \"landlock>=N\", \"seccomp\" or \"userns\""));
        }
    };
    if min_version.is_some() && feature != Feature::Landlock {
        return Err(ctx
            .error(
                &text.span(),
                format!("only landlock takes a version (in {raw:?})"),
            )
            .with_fix(format!("write \"{name}\"")));
    }
    Ok(Requirement {
        feature,
        min_version,
        text: raw.to_string(),
    })
}

fn check_path_template(
    ctx: &Ctx<'_>,
    key: &str,
    path: &Spanned<String>,
) -> Result<(), SourceError> {
    let raw = path.get_ref();
    if raw.starts_with('/') || raw.starts_with('~') || raw.starts_with("${") {
        Ok(())
    } else {
        Err(ctx
            .error(&path.span(), format!("`{key}` path {raw:?} is relative"))
            .with_fix("write an absolute path, or one starting with `~` or `${env:NAME}`"))
    }
}

fn check_env_name(ctx: &Ctx<'_>, name: &Spanned<String>) -> Result<(), SourceError> {
    let raw = name.get_ref();
    let stem = raw.strip_suffix('*').unwrap_or(raw);
    let valid = !stem.is_empty()
        && stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !stem.starts_with(|c: char| c.is_ascii_digit());
    if valid {
        Ok(())
    } else {
        Err(ctx
            .error(
                &name.span(),
                format!("`env` entry {raw:?} is not a variable name"),
            )
            .with_fix("write a name like \"LANG\", or a prefix glob like \"LC_*\""))
    }
}

/// Reads a positive integer within `range`.
fn bounded(
    ctx: &Ctx<'_>,
    key: &str,
    value: &Spanned<i64>,
    range: Range<u64>,
) -> Result<u64, SourceError> {
    let raw = *value.get_ref();
    u64::try_from(raw)
        .ok()
        .filter(|v| range.contains(v))
        .ok_or_else(|| {
            ctx.error(&value.span(), format!("`{key}` = {raw} is out of range"))
                .with_fix(format!(
                    "use a value from {} to {}",
                    range.start,
                    range.end - 1
                ))
        })
}

fn merge_limit(
    slot: &mut Sourced<u64>,
    ctx: &Ctx<'_>,
    widening: &Widening,
    key: &str,
    value: &Option<Spanned<i64>>,
    range: Range<u64>,
) -> Result<(), SourceError> {
    let Some(value) = value else { return Ok(()) };
    let parsed = bounded(ctx, key, value, range)?;
    widening.check(
        ctx,
        &value.span(),
        &format!("`{key} = {parsed}`"),
        parsed > slot.value,
    )?;
    *slot = ctx.sourced(parsed, &value.span());
    Ok(())
}

fn merge_limits(
    limits: &mut Limits,
    ctx: &Ctx<'_>,
    widening: &Widening,
    section: &LimitsSection,
) -> Result<(), SourceError> {
    const MAX: u64 = 1 << 40;
    merge_limit(
        &mut limits.processes,
        ctx,
        widening,
        "sandbox.limits.processes",
        &section.processes,
        1..1_000_001,
    )?;
    merge_limit(
        &mut limits.memory_mb,
        ctx,
        widening,
        "sandbox.limits.memory_mb",
        &section.memory_mb,
        16..MAX,
    )?;
    merge_limit(
        &mut limits.open_files,
        ctx,
        widening,
        "sandbox.limits.open_files",
        &section.open_files,
        16..1_048_577,
    )?;
    merge_limit(
        &mut limits.file_size_mb,
        ctx,
        widening,
        "sandbox.limits.file_size_mb",
        &section.file_size_mb,
        1..MAX,
    )?;
    if let Some(value) = &section.cpu_seconds {
        let parsed = bounded(ctx, "sandbox.limits.cpu_seconds", value, 1..MAX)?;
        let widens = limits
            .cpu_seconds
            .as_ref()
            .is_some_and(|have| parsed > have.value);
        widening.check(
            ctx,
            &value.span(),
            &format!("`sandbox.limits.cpu_seconds = {parsed}`"),
            widens,
        )?;
        limits.cpu_seconds = Some(ctx.sourced(parsed, &value.span()));
    }
    Ok(())
}

fn merge_sandbox(
    sandbox: &mut SandboxPolicy,
    ctx: &Ctx<'_>,
    widening: &Widening,
    section: &SandboxSection,
) -> Result<(), SourceError> {
    if let Some(value) = &section.network {
        let network = parse_network(ctx, value)?;
        let widens = network.is_wider_than(&sandbox.network.value);
        widening.check(
            ctx,
            &value.span(),
            &format!("`sandbox.network = {network}`"),
            widens,
        )?;
        sandbox.network = ctx.sourced(network, &value.span());
    }
    for (key, new, current) in [
        ("sandbox.read", &section.read, &mut sandbox.read),
        ("sandbox.write", &section.write, &mut sandbox.write),
    ] {
        if let Some(paths) = new {
            for path in paths {
                check_path_template(ctx, key, path)?;
            }
            merge_grants(current, paths, ctx, widening, key)?;
        }
    }
    if let Some(names) = &section.env {
        for name in names {
            check_env_name(ctx, name)?;
        }
        merge_grants(&mut sandbox.env, names, ctx, widening, "sandbox.env")?;
    }
    if let Some(value) = &section.run_as {
        let run_as = parse_run_as(ctx, value)?;
        let widens = run_as != sandbox.run_as.value && run_as != RunAs::Nobody;
        widening.check(
            ctx,
            &value.span(),
            &format!("`sandbox.run_as = {run_as}`"),
            widens,
        )?;
        sandbox.run_as = ctx.sourced(run_as, &value.span());
    }
    if let Some(requirements) = &section.require {
        for text in requirements {
            let requirement = parse_requirement(ctx, text)?;
            if !sandbox.require.iter().any(|have| have.value == requirement) {
                sandbox.require.push(ctx.sourced(requirement, &text.span()));
            }
        }
    }
    if let Some(value) = &section.kill_timeout {
        let seconds = bounded(ctx, "sandbox.kill_timeout", value, 1..61)?;
        sandbox.kill_timeout = ctx.sourced(seconds, &value.span());
    }
    if let Some(limits) = &section.limits {
        merge_limits(&mut sandbox.limits, ctx, widening, limits.get_ref())?;
    }
    Ok(())
}

fn merge_launch(
    launch: &mut LaunchPolicy,
    ctx: &Ctx<'_>,
    widening: &Widening,
    section: &LaunchSection,
) -> Result<(), SourceError> {
    if let Some(commands) = &section.allow_commands {
        for command in commands {
            let raw = command.get_ref();
            let plain_name =
                !raw.is_empty() && !raw.contains('/') && !raw.contains(char::is_whitespace);
            if !(plain_name || raw.starts_with('/')) {
                return Err(ctx
                    .error(&command.span(), format!("`allow_commands` entry {raw:?} is neither a command name nor an absolute path"))
                    .with_fix("write a basename such as \"node\" or an absolute path such as \"/usr/bin/node\""));
            }
        }
        merge_grants(
            &mut launch.allow_commands,
            commands,
            ctx,
            widening,
            "launch.allow_commands",
        )?;
    }
    if let Some(value) = &section.allow_trust {
        let widens = *value.get_ref() && !launch.allow_trust.value;
        widening.check(ctx, &value.span(), "`launch.allow_trust = true`", widens)?;
        launch.allow_trust = ctx.sourced(*value.get_ref(), &value.span());
    }
    Ok(())
}

fn merge_audit(
    audit: &mut AuditPolicy,
    ctx: &Ctx<'_>,
    widening: &Widening,
    section: &AuditSection,
) -> Result<(), SourceError> {
    if let Some(path) = &section.path {
        check_path_template(ctx, "audit.path", path)?;
        // Moving the audit log away is loosening: whoever pinned it wants to read it there.
        let moves = audit
            .path
            .as_ref()
            .is_none_or(|have| &have.value != path.get_ref());
        widening.check(ctx, &path.span(), "`audit.path`", moves)?;
        audit.path = Some(ctx.sourced(path.get_ref().clone(), &path.span()));
    }
    if let Some(patterns) = &section.redact {
        for pattern in patterns {
            regex::Regex::new(pattern.get_ref()).map_err(|err| {
                ctx.error(
                    &pattern.span(),
                    format!("`audit.redact` regex does not compile: {err}"),
                )
                .with_fix("correct the regular expression (Rust regex syntax)")
            })?;
            if !audit
                .redact
                .iter()
                .any(|have| &have.value == pattern.get_ref())
            {
                audit
                    .redact
                    .push(ctx.sourced(pattern.get_ref().clone(), &pattern.span()));
            }
        }
    }
    Ok(())
}

/// How tool patterns are written in a section: globally (`mcp:server__tool`) or inside one
/// server's config block (just the tool glob).
#[derive(Clone, Copy)]
enum PatternScope<'a> {
    Global,
    Server(&'a str),
}

fn parse_pattern(
    ctx: &Ctx<'_>,
    scope: PatternScope<'_>,
    text: &Spanned<String>,
) -> Result<ToolPattern, SourceError> {
    let parsed = match scope {
        PatternScope::Global => ToolPattern::parse(text.get_ref()),
        PatternScope::Server(server) => ToolPattern::for_server(server, text.get_ref()),
    };
    parsed.map_err(|err| {
        ctx.error(&text.span(), err.0)
            .with_fix("write patterns as mcp:<server>__<tool>, with * and ? as wildcards")
    })
}

fn compile_condition(ctx: &Ctx<'_>, rule: &Spanned<RuleDecl>) -> Result<Condition, SourceError> {
    let decl = rule.get_ref();
    let argument = decl.argument.get_ref().trim();
    if argument.is_empty() {
        return Err(ctx
            .error(&decl.argument.span(), "`argument` is empty")
            .with_fix("name the argument, e.g. argument = \"path\""));
    }
    let chosen: Vec<&str> = [
        ("glob", &decl.glob),
        ("regex", &decl.regex),
        ("prefix", &decl.prefix),
    ]
    .iter()
    .filter(|(_, value)| value.is_some())
    .map(|(name, _)| *name)
    .collect();
    let (matcher, path_like) = match (&decl.glob, &decl.regex, &decl.prefix, chosen.len()) {
        (Some(glob), None, None, 1) => (ArgMatcher::Glob(Glob::parse(glob.get_ref())), true),
        (None, Some(regex), None, 1) => {
            let compiled = regex::Regex::new(regex.get_ref()).map_err(|err| {
                ctx.error(&regex.span(), format!("`regex` does not compile: {err}"))
                    .with_fix("correct the regular expression (Rust regex syntax)")
            })?;
            (ArgMatcher::Regex(compiled), false)
        }
        (None, None, Some(prefix), 1) => (ArgMatcher::Prefix(prefix.get_ref().clone()), true),
        _ => {
            return Err(ctx
                .error(
                    &rule.span(),
                    format!(
                        "a tools.rule needs exactly one of `glob`, `regex`, `prefix` (found {})",
                        if chosen.is_empty() {
                            "none".to_string()
                        } else {
                            chosen.join(", ")
                        }
                    ),
                )
                .with_fix(
                    "keep one matcher per rule; write several rules for several conditions",
                ));
        }
    };
    Ok(Condition {
        argument: argument.to_string(),
        matcher,
        negate: decl.negate,
        normalize_path: decl.normalize_path.unwrap_or(path_like),
    })
}

fn merge_tools(
    entries: &mut Vec<ToolEntry>,
    default: &mut Sourced<Action>,
    ctx: &Ctx<'_>,
    widening: &Widening,
    scope: PatternScope<'_>,
    section: &ToolsSection,
) -> Result<(), SourceError> {
    if let Some(value) = &section.default {
        if let PatternScope::Server(_) = scope {
            return Err(ctx
                .error(&value.span(), "a server's `tools` block cannot set `default`")
                .with_fix("set tools.default in a policy file, or list this server's tools in allow/ask/deny"));
        }
        let proposed = *value.get_ref();
        let looser = proposed < default.value;
        widening.check(
            ctx,
            &value.span(),
            &format!("`tools.default = \"{proposed}\"`"),
            looser,
        )?;
        let org_set_it = default.origin.layer == Layer::Org && ctx.layer != Layer::Org;
        if !org_set_it || !looser {
            *default = ctx.sourced(proposed, &value.span());
        } else {
            tracing::warn!(
                "{}: tools.default = \"{proposed}\" is ignored: the org policy sets \"{}\" ({})",
                ctx.path.display(),
                default.value,
                default.origin
            );
        }
    }
    for (action, list) in [
        (Action::Allow, &section.allow),
        (Action::Ask, &section.ask),
        (Action::Deny, &section.deny),
    ] {
        for text in list {
            let pattern = parse_pattern(ctx, scope, text)?;
            widening.check(
                ctx,
                &text.span(),
                &format!("`tools.allow` entry {:?}", text.get_ref()),
                action == Action::Allow,
            )?;
            entries.push(ToolEntry {
                action,
                rule: format!("tools.{action} {:?}", text.get_ref()),
                pattern,
                condition: None,
                origin: ctx.origin(&text.span()),
                only_narrows: widening.only_narrows(),
            });
        }
    }
    for rule in &section.rule {
        let decl = rule.get_ref();
        let pattern = parse_pattern(ctx, scope, &decl.tool)?;
        let action = *decl.action.get_ref();
        widening.check(
            ctx,
            &decl.action.span(),
            "a tools.rule with action = \"allow\"",
            action == Action::Allow,
        )?;
        let condition = compile_condition(ctx, rule)?;
        entries.push(ToolEntry {
            action,
            rule: format!(
                "tools.rule {action} {:?} when {}",
                decl.tool.get_ref(),
                condition.summary()
            ),
            pattern,
            condition: Some(condition),
            origin: ctx.origin(&rule.span()),
            only_narrows: widening.only_narrows(),
        });
    }
    Ok(())
}

/// Everything merged so far, before compilation.
struct Draft {
    launch: LaunchPolicy,
    tool_entries: Vec<ToolEntry>,
    tools_default: Sourced<Action>,
    sandbox: SandboxPolicy,
    audit: AuditPolicy,
    locks: Locks,
}

impl Draft {
    fn apply(&mut self, ctx: &Ctx<'_>, file: &PolicyFile) -> Result<(), SourceError> {
        if let Some(section) = &file.launch {
            read_lock(ctx, &section.get_ref().locked, &mut self.locks.launch)?;
            let widening = widening_for(ctx.layer, &self.locks.launch);
            merge_launch(&mut self.launch, ctx, &widening, section.get_ref())?;
        }
        if let Some(section) = &file.tools {
            read_lock(ctx, &section.get_ref().locked, &mut self.locks.tools)?;
            let widening = widening_for(ctx.layer, &self.locks.tools);
            merge_tools(
                &mut self.tool_entries,
                &mut self.tools_default,
                ctx,
                &widening,
                PatternScope::Global,
                section.get_ref(),
            )?;
        }
        if let Some(section) = &file.sandbox {
            read_lock(ctx, &section.get_ref().locked, &mut self.locks.sandbox)?;
            let widening = widening_for(ctx.layer, &self.locks.sandbox);
            merge_sandbox(&mut self.sandbox, ctx, &widening, section.get_ref())?;
        }
        if let Some(section) = &file.audit {
            read_lock(ctx, &section.get_ref().locked, &mut self.locks.audit)?;
            let widening = widening_for(ctx.layer, &self.locks.audit);
            merge_audit(&mut self.audit, ctx, &widening, section.get_ref())?;
        }
        Ok(())
    }
}

fn parse_policy_file(path: &Path, text: &str) -> Result<PolicyFile, SourceError> {
    toml::from_str::<PolicyFile>(text).map_err(|err| from_toml_error(path, text, &err))
}

/// The built-in default, parsed into a draft every key of which has `Layer::Builtin`.
fn builtin_draft() -> Result<Draft, SourceError> {
    let path = Path::new(presets::DEFAULT_NAME);
    let text = presets::DEFAULT;
    let ctx = Ctx {
        layer: Layer::Builtin,
        path,
        text,
    };
    let file = parse_policy_file(path, text)?;
    let missing =
        |key: &str| SourceError::new(path, None, format!("built-in default policy lacks `{key}`"));
    let origin = Origin {
        layer: Layer::Builtin,
        file: path.to_path_buf(),
        line: None,
    };
    let sourced = |value| Sourced {
        value,
        origin: origin.clone(),
    };
    let placeholder_limits = Limits {
        processes: sourced(0),
        memory_mb: sourced(0),
        open_files: sourced(0),
        file_size_mb: sourced(0),
        cpu_seconds: None,
    };
    let mut draft = Draft {
        launch: LaunchPolicy {
            allow_commands: Vec::new(),
            allow_trust: Sourced {
                value: false,
                origin: origin.clone(),
            },
        },
        tool_entries: Vec::new(),
        tools_default: Sourced {
            value: Action::Deny,
            origin: origin.clone(),
        },
        sandbox: SandboxPolicy {
            network: Sourced {
                value: Network::None,
                origin: origin.clone(),
            },
            read: Vec::new(),
            write: Vec::new(),
            env: Vec::new(),
            run_as: Sourced {
                value: RunAs::Nobody,
                origin: origin.clone(),
            },
            require: Vec::new(),
            kill_timeout: Sourced {
                value: 3,
                origin: origin.clone(),
            },
            limits: placeholder_limits,
        },
        audit: AuditPolicy {
            path: None,
            redact: Vec::new(),
        },
        locks: Locks::default(),
    };
    draft.apply(&ctx, &file)?;
    let limits = &draft.sandbox.limits;
    if [
        &limits.processes,
        &limits.memory_mb,
        &limits.open_files,
        &limits.file_size_mb,
    ]
    .iter()
    .any(|l| l.value == 0)
    {
        return Err(missing("sandbox.limits"));
    }
    if draft.launch.allow_commands.is_empty() {
        return Err(missing("launch.allow_commands"));
    }
    Ok(draft)
}

fn compile(draft: Draft) -> (LaunchPolicy, ToolRules, SandboxPolicy, AuditPolicy) {
    let Draft {
        launch,
        tool_entries,
        tools_default,
        sandbox,
        audit,
        ..
    } = draft;
    (
        launch,
        ToolRules::new(tool_entries, tools_default),
        sandbox,
        audit,
    )
}

/// SHA-256 over every input of the merge, each field framed by a tag and its length, so no two
/// different sets of files share a digest by shifting bytes from one field into the next (a path
/// ending where a text begins).
pub(super) fn digest(sources: &[LayerSource], servers: &[ServerOverride<'_>]) -> String {
    fn field(hasher: &mut Sha256, tag: u8, bytes: &[u8]) {
        hasher.update([tag]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    let mut hasher = Sha256::new();
    for source in sources {
        field(&mut hasher, b'l', source.layer.to_string().as_bytes());
        field(
            &mut hasher,
            b'p',
            source.path.as_os_str().as_encoded_bytes(),
        );
        field(&mut hasher, b't', source.text.as_bytes());
    }
    let mut seen_config = Vec::new();
    for server in servers {
        if !seen_config.contains(&server.path) {
            seen_config.push(server.path);
            field(
                &mut hasher,
                b'c',
                server.path.as_os_str().as_encoded_bytes(),
            );
            field(&mut hasher, b't', server.text.as_bytes());
        }
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Merges the built-in default with `sources` (any order; they are sorted by authority) and the
/// per-server blocks of the server config, and compiles the result.
pub fn load(
    sources: &[LayerSource],
    servers: &[ServerOverride<'_>],
) -> Result<Policy, SourceError> {
    let mut ordered: Vec<&LayerSource> = sources.iter().collect();
    ordered.sort_by_key(|source| source.layer);
    let mut draft = builtin_draft()?;
    let mut project_files = Vec::new();
    for source in &ordered {
        let file = parse_policy_file(&source.path, &source.text)?;
        let ctx = Ctx {
            layer: source.layer,
            path: &source.path,
            text: &source.text,
        };
        parse_version(&ctx, &file)?;
        if source.layer == Layer::Project {
            project_files.push((*source, file));
        } else {
            draft.apply(&ctx, &file)?;
        }
    }

    // A server with its own sandbox block gets the global sandbox plus that block; the project
    // layer then narrows the global policy and every such server's alike.
    let mut server_sandbox: BTreeMap<String, SandboxPolicy> = BTreeMap::new();
    for server in servers {
        let ctx = Ctx {
            layer: Layer::Config,
            path: server.path,
            text: server.text,
        };
        if let Some(tools) = server.tools {
            reject_lock_outside_org(&ctx, &tools.get_ref().locked)?;
            let widening = widening_for(Layer::Config, &draft.locks.tools);
            let scope = PatternScope::Server(server.server);
            merge_tools(
                &mut draft.tool_entries,
                &mut draft.tools_default,
                &ctx,
                &widening,
                scope,
                tools.get_ref(),
            )?;
        }
        if let Some(sandbox) = server.sandbox {
            reject_lock_outside_org(&ctx, &sandbox.get_ref().locked)?;
            let widening = widening_for(Layer::Config, &draft.locks.sandbox);
            let mut own = draft.sandbox.clone();
            merge_sandbox(&mut own, &ctx, &widening, sandbox.get_ref())?;
            server_sandbox.insert(server.server.to_string(), own);
        }
    }
    for (source, file) in &project_files {
        let ctx = Ctx {
            layer: Layer::Project,
            path: &source.path,
            text: &source.text,
        };
        draft.apply(&ctx, file)?;
        if let Some(section) = &file.sandbox {
            for own in server_sandbox.values_mut() {
                merge_sandbox(own, &ctx, &Widening::ProjectOnlyNarrows, section.get_ref())?;
            }
        }
    }

    let digest = digest(sources, servers);
    let (launch, tools, sandbox, audit) = compile(draft);
    Ok(Policy {
        launch,
        tools,
        sandbox,
        server_sandbox,
        audit,
        sources: ordered.iter().map(|s| (s.layer, s.path.clone())).collect(),
        digest,
    })
}
