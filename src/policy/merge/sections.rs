//! Merging the `[launch]`, `[sandbox]` (with its limits) and `[audit]` sections of one layer into
//! the draft, refusing what the layer may not widen.

use std::ops::Range;

use toml::Spanned;

use super::values::*;
use super::*;
use crate::diagnostic::SourceError;
use crate::policy::file::{AuditSection, LaunchSection, LimitsSection, SandboxSection};
use crate::policy::{AuditPolicy, LaunchPolicy, Limits, RunAs, SandboxPolicy, Sourced};

/// Reads a positive integer within `range`.
pub(super) fn bounded(
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

pub(super) fn merge_limit(
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

pub(super) fn merge_limits(
    limits: &mut Limits,
    ctx: &Ctx<'_>,
    widening: &Widening,
    section: &LimitsSection,
) -> Result<(), SourceError> {
    const MAX: u64 = 1 << 40;
    let mut errors = Vec::new();
    for (slot, key, value, range) in [
        (
            &mut limits.processes,
            "sandbox.limits.processes",
            &section.processes,
            1..1_000_001,
        ),
        (
            &mut limits.memory_mb,
            "sandbox.limits.memory_mb",
            &section.memory_mb,
            16..MAX,
        ),
        (
            &mut limits.open_files,
            "sandbox.limits.open_files",
            &section.open_files,
            16..1_048_577,
        ),
        (
            &mut limits.file_size_mb,
            "sandbox.limits.file_size_mb",
            &section.file_size_mb,
            1..MAX,
        ),
        (
            &mut limits.disk_mb,
            "sandbox.limits.disk_mb",
            &section.disk_mb,
            1..MAX,
        ),
    ] {
        errors.extend(merge_limit(slot, ctx, widening, key, value, range).err());
    }
    if let Some(value) = &section.cpu_seconds {
        errors.extend(merge_cpu_seconds(limits, ctx, widening, value).err());
    }
    SourceError::all(errors).map_or(Ok(()), Err)
}

fn merge_cpu_seconds(
    limits: &mut Limits,
    ctx: &Ctx<'_>,
    widening: &Widening,
    value: &Spanned<i64>,
) -> Result<(), SourceError> {
    let parsed = bounded(ctx, "sandbox.limits.cpu_seconds", value, 1..(1 << 40))?;
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
    Ok(())
}

/// Merges one `[sandbox]` section key by key: a bad key does not hide the errors of the others
/// (each is reported with its position), and the keys that are good are still merged.
pub(super) fn merge_sandbox(
    sandbox: &mut SandboxPolicy,
    ctx: &Ctx<'_>,
    widening: &Widening,
    section: &SandboxSection,
) -> Result<(), SourceError> {
    let mut errors = Vec::new();
    if let Some(value) = &section.network {
        errors.extend(merge_network(sandbox, ctx, widening, value).err());
    }
    for (key, new, current) in [
        ("sandbox.read", &section.read, &mut sandbox.read),
        ("sandbox.write", &section.write, &mut sandbox.write),
    ] {
        if let Some(paths) = new {
            let bad: Vec<SourceError> = paths
                .iter()
                .filter_map(|path| check_path_template(ctx, key, path).err())
                .collect();
            match SourceError::all(bad) {
                Some(err) => errors.push(err),
                None => errors.extend(merge_grants(current, paths, ctx, widening, key).err()),
            }
        }
    }
    if let Some(names) = &section.env {
        let bad: Vec<SourceError> = names
            .iter()
            .filter_map(|name| check_env_name(ctx, name).err())
            .collect();
        match SourceError::all(bad) {
            Some(err) => errors.push(err),
            None => {
                let merged = merge_grants(&mut sandbox.env, names, ctx, widening, "sandbox.env");
                errors.extend(merged.err());
            }
        }
    }
    if let Some(value) = &section.run_as {
        errors.extend(merge_run_as(sandbox, ctx, widening, value).err());
    }
    if let Some(requirements) = &section.require {
        for text in requirements {
            match parse_requirement(ctx, text) {
                Ok(requirement) => {
                    if !sandbox.require.iter().any(|have| have.value == requirement) {
                        sandbox.require.push(ctx.sourced(requirement, &text.span()));
                    }
                }
                Err(err) => errors.push(err),
            }
        }
    }
    if let Some(value) = &section.kill_timeout {
        // Longer is wider: the server keeps running that much longer after SIGTERM.
        let checked = bounded(ctx, "sandbox.kill_timeout", value, 1..61).and_then(|seconds| {
            widening
                .check(
                    ctx,
                    &value.span(),
                    &format!("`sandbox.kill_timeout = {seconds}`"),
                    seconds > sandbox.kill_timeout.value,
                )
                .map(|()| seconds)
        });
        match checked {
            Ok(seconds) => sandbox.kill_timeout = ctx.sourced(seconds, &value.span()),
            Err(err) => errors.push(err),
        }
    }
    if let Some(limits) = &section.limits {
        errors.extend(merge_limits(&mut sandbox.limits, ctx, widening, limits.get_ref()).err());
    }
    if let Some(value) = &section.grant_args {
        let grant = *value.get_ref();
        let checked = widening.check(
            ctx,
            &value.span(),
            &format!("`sandbox.grant_args = \"{grant}\"`"),
            grant > sandbox.grant_args.value,
        );
        match checked {
            Ok(()) => sandbox.grant_args = ctx.sourced(grant, &value.span()),
            Err(err) => errors.push(err),
        }
    }
    SourceError::all(errors).map_or(Ok(()), Err)
}

fn merge_network(
    sandbox: &mut SandboxPolicy,
    ctx: &Ctx<'_>,
    widening: &Widening,
    value: &Spanned<toml::Value>,
) -> Result<(), SourceError> {
    let network = parse_network(ctx, value)?;
    let current = &sandbox.network.value;
    let widens = network.is_wider_than(current);
    let what = match network.widening_entries(current).as_slice() {
        [] => format!("`sandbox.network = {network}`"),
        entries => format!("`sandbox.network` entry {}", entries.join(", ")),
    };
    widening.check(ctx, &value.span(), &what, widens)?;
    let merged = Network::merged(current, network, ctx.layer);
    sandbox.network = ctx.sourced(merged, &value.span());
    Ok(())
}

fn merge_run_as(
    sandbox: &mut SandboxPolicy,
    ctx: &Ctx<'_>,
    widening: &Widening,
    value: &Spanned<toml::Value>,
) -> Result<(), SourceError> {
    let run_as = parse_run_as(ctx, value)?;
    let widens = run_as != sandbox.run_as.value && run_as != RunAs::Nobody;
    widening.check(
        ctx,
        &value.span(),
        &format!("`sandbox.run_as = {run_as}`"),
        widens,
    )?;
    sandbox.run_as = ctx.sourced(run_as, &value.span());
    Ok(())
}

pub(super) fn merge_launch(
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

pub(super) fn merge_audit(
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
            // A redaction hides what the log would show, so a new one loosens the audit: a
            // project could blank every tool name and argument with `(?s).+`. Only a layer
            // entitled to loosen (user or config, in an unlocked section) may add one.
            let is_new = !audit
                .redact
                .iter()
                .any(|have| &have.value == pattern.get_ref());
            widening.check(ctx, &pattern.span(), "`audit.redact`", is_new)?;
            if is_new {
                audit
                    .redact
                    .push(ctx.sourced(pattern.get_ref().clone(), &pattern.span()));
            }
        }
    }
    for (slot, key, value) in [
        (&mut audit.rotate_mb, "audit.rotate_mb", &section.rotate_mb),
        (
            &mut audit.keep_rotated,
            "audit.keep_rotated",
            &section.keep_rotated,
        ),
    ] {
        let Some(value) = value else { continue };
        let parsed = bounded(ctx, key, value, 0..(1 << 40))?;
        // Less history kept is loosening: a smaller file or fewer of them (0 keeps everything).
        let kept = |n: u64| if n == 0 { u64::MAX } else { n };
        let widens = kept(parsed) < kept(slot.value);
        widening.check(ctx, &value.span(), &format!("`{key} = {parsed}`"), widens)?;
        *slot = ctx.sourced(parsed, &value.span());
    }
    Ok(())
}
