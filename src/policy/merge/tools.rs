//! Merging one layer's `[tools]` section: patterns, argument conditions, and the default.

use toml::Spanned;

use super::*;
use crate::diagnostic::SourceError;
use crate::policy::file::{RuleDecl, ToolsSection};
use crate::policy::pattern::{Glob, ToolPattern};
use crate::policy::rules::{ArgMatcher, Condition, ToolEntry, WrittenPattern};
use crate::policy::{Action, Layer, SchemaMode, Sourced};

/// How tool patterns are written in a section: globally (`mcp:server__tool`) or inside one
/// server's config block (just the tool glob).
#[derive(Clone, Copy)]
pub(super) enum PatternScope<'a> {
    Global,
    Server(&'a str),
}

pub(super) fn parse_pattern(
    ctx: &Ctx<'_>,
    scope: PatternScope<'_>,
    text: &Spanned<String>,
) -> Result<ToolPattern, SourceError> {
    let parsed = match scope {
        PatternScope::Global => ToolPattern::parse(text.get_ref()),
        PatternScope::Server(server) => ToolPattern::for_server(server, text.get_ref()),
    };
    parsed.map_err(|err| {
        let written = text.get_ref();
        // `fs__write_file` (no `mcp:`) is the common slip: name the pattern it meant.
        let fix = match matches!(scope, PatternScope::Global)
            && !written.starts_with("mcp")
            && ToolPattern::parse(&format!("mcp:{written}")).is_ok()
        {
            true => format!("write \"mcp:{written}\""),
            false => "write patterns as mcp:<server>__<tool>, with * and ? as wildcards".into(),
        };
        ctx.error(&text.span(), err.0).with_fix(fix)
    })
}

/// The pattern as written, with its line and column.
fn written(ctx: &Ctx<'_>, scope: PatternScope<'_>, text: &Spanned<String>) -> WrittenPattern {
    WrittenPattern {
        text: text.get_ref().clone(),
        at: crate::diagnostic::LineCol::from_offset(ctx.text, text.span().start),
        global: matches!(scope, PatternScope::Global),
    }
}

pub(super) fn compile_condition(
    ctx: &Ctx<'_>,
    rule: &Spanned<RuleDecl>,
) -> Result<Condition, SourceError> {
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
        (Some(glob), None, None, 1) => {
            let written = glob.get_ref();
            (
                ArgMatcher::Glob(Glob::parse(written), written.clone()),
                true,
            )
        }
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
    let normalize_path = decl.normalize_path.unwrap_or(path_like);
    // A path is compared in its absolute reading: a relative prefix would never match, and a
    // deny written so would silently do nothing.
    if normalize_path
        && let Some(prefix) = &decl.prefix
        && !(prefix.get_ref().starts_with('/')
            || prefix.get_ref() == "~"
            || prefix.get_ref().starts_with("~/"))
    {
        return Err(ctx
            .error(
                &prefix.span(),
                format!(
                    "`prefix` {:?} is relative: path arguments are compared as absolute paths, so it would never match",
                    prefix.get_ref()
                ),
            )
            .with_fix("write an absolute path (`/srv/data`), or one under your home (`~/.ssh`); to compare the text as written, add normalize_path = false"));
    }
    if normalize_path
        && let Some(glob) = &decl.glob
        && glob.get_ref().starts_with('~')
    {
        return Err(ctx
            .error(
                &glob.span(),
                format!(
                    "`glob` {:?} starts with `~`: path arguments are compared as absolute paths, and a glob's `~` is not expanded",
                    glob.get_ref()
                ),
            )
            .with_fix("use `prefix = \"~/...\"` (expanded to your home), or write the glob with the absolute path"));
    }
    Ok(Condition {
        argument: argument.to_string(),
        matcher,
        negate: decl.negate,
        normalize_path,
    })
}

pub(super) fn merge_tools(
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
            let warning = crate::diagnostic::SourceWarning::at_span(
                ctx.path,
                ctx.text,
                value.span(),
                format!(
                    "tools.default = \"{proposed}\" is ignored: the org policy sets \"{}\" ({})",
                    default.value, default.origin
                ),
            );
            tracing::warn!("{warning}");
        }
    }
    let mut errors = Vec::new();
    for (action, list) in [
        (Action::Allow, &section.allow),
        (Action::Ask, &section.ask),
        (Action::Deny, &section.deny),
    ] {
        for text in list {
            match list_entry(ctx, widening, scope, action, text) {
                Ok(entry) => entries.push(entry),
                Err(err) => errors.push(err),
            }
        }
    }
    for rule in &section.rule {
        match rule_entry(ctx, widening, scope, rule) {
            Ok(entry) => entries.push(entry),
            Err(err) => errors.push(err),
        }
    }
    // Every bad entry of the section is reported, not only the first.
    SourceError::all(errors).map_or(Ok(()), Err)
}

/// One entry of `allow`, `ask` or `deny`.
fn list_entry(
    ctx: &Ctx<'_>,
    widening: &Widening,
    scope: PatternScope<'_>,
    action: Action,
    text: &Spanned<String>,
) -> Result<ToolEntry, SourceError> {
    let pattern = parse_pattern(ctx, scope, text)?;
    widening.check(
        ctx,
        &text.span(),
        &format!("`tools.allow` entry {:?}", text.get_ref()),
        action == Action::Allow,
    )?;
    Ok(ToolEntry {
        action,
        rule: format!("tools.{action} {:?}", text.get_ref()),
        pattern,
        condition: None,
        origin: ctx.origin(&text.span()),
        only_narrows: widening.only_narrows(),
        written: Some(written(ctx, scope, text)),
        reading: None,
        who: None,
    })
}

/// One `[[tools.rule]]`.
fn rule_entry(
    ctx: &Ctx<'_>,
    widening: &Widening,
    scope: PatternScope<'_>,
    rule: &Spanned<RuleDecl>,
) -> Result<ToolEntry, SourceError> {
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
    Ok(ToolEntry {
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
        written: Some(written(ctx, scope, &decl.tool)),
        reading: None,
        who: None,
    })
}

/// `tools.gate_schema`: the last layer that sets it wins; lowering it (`enforce` → `warn` → `off`)
/// is a widening, refused where the layer may only narrow. A server's own block cannot set it.
pub(super) fn merge_gate_schema(
    mode: &mut Sourced<SchemaMode>,
    ctx: &Ctx<'_>,
    widening: &Widening,
    scope: PatternScope<'_>,
    section: &ToolsSection,
) -> Result<(), SourceError> {
    let Some(value) = &section.gate_schema else {
        return Ok(());
    };
    if let PatternScope::Server(_) = scope {
        return Err(ctx
            .error(
                &value.span(),
                "a server's `tools` block cannot set `gate_schema`",
            )
            .with_fix("set tools.gate_schema in a policy file"));
    }
    let proposed = *value.get_ref();
    widening.check(
        ctx,
        &value.span(),
        &format!("`tools.gate_schema = \"{proposed}\"`"),
        // Below the builtin default too: a project policy (a cloned repository's, or one a
        // server with a write grant planted) may only raise it.
        proposed < mode.value,
    )?;
    *mode = ctx.sourced(proposed, &value.span());
    Ok(())
}

/// `[identities.NAME]`: the section's lists, about NAME's calls only. Allowing is widening,
/// checked under the `[tools]` lock like `tools.allow` (an org that locked tools also fixed what
/// each identity may do).
pub(super) fn merge_identity(
    entries: &mut Vec<ToolEntry>,
    ctx: &Ctx<'_>,
    widening: &Widening,
    name: &Spanned<String>,
    section: &crate::policy::file::IdentitySection,
) -> Result<(), SourceError> {
    let who = name.get_ref().trim();
    if who.is_empty() {
        return Err(ctx
            .error(&name.span(), "an identity section needs a name")
            .with_fix("write [identities.alice], or a glob such as [identities.\"ci-*\"]"));
    }
    for (action, list) in [
        (Action::Allow, &section.allow),
        (Action::Ask, &section.ask),
        (Action::Deny, &section.deny),
    ] {
        for text in list {
            let mut entry = list_entry(ctx, widening, PatternScope::Global, action, text)?;
            entry.rule = format!("identities.{who:?}.{action} {:?}", text.get_ref());
            entry.who = Some(Glob::parse(who));
            entries.push(entry);
        }
    }
    Ok(())
}
