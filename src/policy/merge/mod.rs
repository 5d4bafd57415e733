//! Layering: turns the built-in default, org, user, config and project layers into one
//! [`Policy`], refusing any widening the layer is not entitled to.
//!
//! Semantics, per key (written down in README "Policy layering"):
//! - The built-in `policies/default.toml` supplies every key no other layer sets.
//! - Lists that grant (commands, paths, env names, allow rules) are the union of every layer that
//!   sets them; lists that restrict (ask, deny, require) are always unioned. `audit.redact`
//!   is unioned too, but a redaction hides what the log shows, so a new one counts as widening.
//! - Scalars (network, limits, run_as, allow_trust, kill_timeout, audit path, pins): the last layer that
//!   sets them wins, except `tools.default`, where the org's value stands if it set one (a lower
//!   layer may only make it stricter).
//! - A layer may not widen: the project layer ever; the user and config layers in a section an org
//!   file marked `locked = true`. Trying is a load error that names both files.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use toml::Spanned;

use super::file::{PolicyFile, SandboxSection, ToolsSection};
use super::presets;
use super::rules::{ToolEntry, ToolRules};
use super::{
    Action, AuditPolicy, GrantArgs, LaunchPolicy, Layer, Limits, Network, NewServers, Origin,
    PinningMode, PinsPolicy, Policy, RunAs, SandboxPolicy, SchemaMode, Sourced,
};
use crate::diagnostic::{LineCol, SourceError};

mod pins;
mod sections;
mod tools;
mod values;

use sections::*;
use tools::*;
use values::*;

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
    /// The block only adds (the command line's `--allow-*` grants): its `read`, `write` and
    /// `env` entries join the built-in default's lists instead of replacing them, so
    /// `--allow-env=TOKEN` passes TOKEN besides PATH and LANG, not instead of them.
    pub adds_only: bool,
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
    pins: Option<Origin>,
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

/// An org that locks `[sandbox]` pins its grants: paths on a server's command line then grant
/// only what the org itself says in `grant_args` (none when it says nothing), or a user could
/// widen the locked `write` list by naming a directory as an argument.
fn lock_grant_args(draft: &mut Draft) {
    draft.sandbox.locked = draft.locks.sandbox.clone();
    if let Some(lock) = &draft.locks.sandbox
        && draft.sandbox.grant_args.origin.layer != Layer::Org
    {
        draft.sandbox.grant_args = Sourced {
            value: GrantArgs::None,
            origin: lock.clone(),
        };
    }
}

/// Puts back the built-in entries of the granting lists a block replaced (see
/// [`ServerOverride::adds_only`]).
fn keep_builtin_lists(before: &SandboxPolicy, after: &mut SandboxPolicy) {
    for (had, has) in [
        (&before.read, &mut after.read),
        (&before.write, &mut after.write),
        (&before.env, &mut after.env),
    ] {
        let replaced: Vec<Sourced<String>> = had
            .iter()
            .filter(|entry| entry.origin.layer == Layer::Builtin)
            .filter(|entry| !has.iter().any(|now| now.value == entry.value))
            .cloned()
            .collect();
        has.splice(0..0, replaced);
    }
}

/// Everything merged so far, before compilation.
struct Draft {
    launch: LaunchPolicy,
    tool_entries: Vec<ToolEntry>,
    tools_default: Sourced<Action>,
    gate_schema: Sourced<SchemaMode>,
    sandbox: SandboxPolicy,
    audit: AuditPolicy,
    pins: PinsPolicy,
    locks: Locks,
}

impl Draft {
    /// Merges one file. Each section is merged on its own, so the errors of every section of
    /// the file are reported together.
    fn apply(&mut self, ctx: &Ctx<'_>, file: &PolicyFile) -> Result<(), SourceError> {
        let mut errors = Vec::new();
        if let Some(section) = &file.launch {
            let merged = read_lock(ctx, &section.get_ref().locked, &mut self.locks.launch)
                .and_then(|()| {
                    let widening = widening_for(ctx.layer, &self.locks.launch);
                    merge_launch(&mut self.launch, ctx, &widening, section.get_ref())
                });
            errors.extend(merged.err());
        }
        if let Some(section) = &file.tools {
            let merged =
                read_lock(ctx, &section.get_ref().locked, &mut self.locks.tools).and_then(|()| {
                    let widening = widening_for(ctx.layer, &self.locks.tools);
                    let tools = merge_tools(
                        &mut self.tool_entries,
                        &mut self.tools_default,
                        ctx,
                        &widening,
                        PatternScope::Global,
                        section.get_ref(),
                    );
                    let schema = merge_gate_schema(
                        &mut self.gate_schema,
                        ctx,
                        &widening,
                        PatternScope::Global,
                        section.get_ref(),
                    );
                    tools.and(schema)
                });
            errors.extend(merged.err());
        }
        for (name, section) in &file.identities {
            let widening = widening_for(ctx.layer, &self.locks.tools);
            let merged = tools::merge_identity(
                &mut self.tool_entries,
                ctx,
                &widening,
                name,
                section.get_ref(),
            );
            errors.extend(merged.err());
        }
        if let Some(section) = &file.sandbox {
            let merged = read_lock(ctx, &section.get_ref().locked, &mut self.locks.sandbox)
                .and_then(|()| {
                    let widening = widening_for(ctx.layer, &self.locks.sandbox);
                    merge_sandbox(&mut self.sandbox, ctx, &widening, section.get_ref())
                });
            errors.extend(merged.err());
        }
        if let Some(section) = &file.audit {
            let merged =
                read_lock(ctx, &section.get_ref().locked, &mut self.locks.audit).and_then(|()| {
                    let widening = widening_for(ctx.layer, &self.locks.audit);
                    merge_audit(&mut self.audit, ctx, &widening, section.get_ref())
                });
            errors.extend(merged.err());
        }
        if let Some(section) = &file.pins {
            let merged =
                read_lock(ctx, &section.get_ref().locked, &mut self.locks.pins).and_then(|()| {
                    let widening = widening_for(ctx.layer, &self.locks.pins);
                    pins::merge_pins(&mut self.pins, ctx, &widening, section.get_ref())
                });
            errors.extend(merged.err());
        }
        SourceError::all(errors).map_or(Ok(()), Err)
    }
}

/// Parses and merges one policy file (a project file is parsed only: it is merged last). Every
/// problem of the file is reported, in file order: a bad key or value does not hide the others,
/// since what parses is still checked.
fn read_policy_file(
    draft: &mut Draft,
    source: &LayerSource,
) -> Result<Option<PolicyFile>, SourceError> {
    let (file, mut errors) =
        crate::diagnostic::parse_toml_partial::<PolicyFile>(&source.path, &source.text);
    let ctx = Ctx {
        layer: source.layer,
        path: &source.path,
        text: &source.text,
    };
    if let Some(file) = &file {
        match parse_version(&ctx, file) {
            Err(err) => errors.push(err),
            Ok(()) if source.layer != Layer::Project => {
                errors.extend(draft.apply(&ctx, file).err())
            }
            Ok(()) => {}
        }
    }
    let mut errors: Vec<SourceError> = errors.into_iter().flat_map(SourceError::flatten).collect();
    errors.sort_by_key(|e| e.position.map(|p| (p.line, p.column)));
    match SourceError::all(errors) {
        Some(err) => Err(err),
        None if source.layer == Layer::Project => Ok(file),
        None => Ok(None),
    }
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
    let file = crate::diagnostic::parse_toml_all::<PolicyFile>(path, text)?;
    let origin = Origin {
        layer: Layer::Builtin,
        file: path.to_path_buf(),
        line: None,
    };
    let mut draft = placeholder_draft(&origin);
    draft.apply(&ctx, &file)?;
    check_builtin_complete(&draft, path)?;
    Ok(draft)
}

/// A draft the built-in file is applied onto: every value a placeholder with the built-in
/// origin, the limits zero so that a key the file does not set is noticed.
fn placeholder_draft(origin: &Origin) -> Draft {
    let sourced = |value| Sourced {
        value,
        origin: origin.clone(),
    };
    let placeholder_limits = Limits {
        processes: sourced(0),
        memory_mb: sourced(0),
        open_files: sourced(0),
        file_size_mb: sourced(0),
        disk_mb: sourced(0),
        cpu_seconds: None,
    };
    Draft {
        launch: LaunchPolicy {
            allow_commands: Vec::new(),
            allow_trust: builtin_value(false, origin),
        },
        tool_entries: Vec::new(),
        tools_default: builtin_value(Action::Deny, origin),
        gate_schema: builtin_value(SchemaMode::Enforce, origin),
        sandbox: SandboxPolicy {
            network: builtin_value(Network::None, origin),
            read: Vec::new(),
            write: Vec::new(),
            env: Vec::new(),
            run_as: builtin_value(RunAs::Nobody, origin),
            require: Vec::new(),
            kill_timeout: builtin_value(3, origin),
            limits: placeholder_limits,
            grant_args: builtin_value(GrantArgs::None, origin),
            locked: None,
        },
        audit: AuditPolicy {
            path: None,
            redact: Vec::new(),
            rotate_mb: builtin_value(crate::audit::rotate::DEFAULT_ROTATE_MB, origin),
            keep_rotated: builtin_value(crate::audit::rotate::DEFAULT_KEEP_ROTATED, origin),
            locked: None,
        },
        pins: PinsPolicy {
            pinning: builtin_value(PinningMode::Enforce, origin),
            new_servers: builtin_value(NewServers::Trust, origin),
        },
        locks: Locks::default(),
    }
}

fn builtin_value<T>(value: T, origin: &Origin) -> Sourced<T> {
    Sourced {
        value,
        origin: origin.clone(),
    }
}

/// The built-in file must set every limit and at least one allowed command.
fn check_builtin_complete(draft: &Draft, path: &Path) -> Result<(), SourceError> {
    let missing =
        |key: &str| SourceError::new(path, None, format!("built-in default policy lacks `{key}`"));
    let limits = &draft.sandbox.limits;
    if [
        &limits.processes,
        &limits.memory_mb,
        &limits.open_files,
        &limits.file_size_mb,
        &limits.disk_mb,
    ]
    .iter()
    .any(|l| l.value == 0)
    {
        return Err(missing("sandbox.limits"));
    }
    if draft.launch.allow_commands.is_empty() {
        return Err(missing("launch.allow_commands"));
    }
    Ok(())
}

fn compile(
    draft: Draft,
) -> (
    LaunchPolicy,
    ToolRules,
    SandboxPolicy,
    AuditPolicy,
    PinsPolicy,
) {
    let Draft {
        launch,
        tool_entries,
        tools_default,
        sandbox,
        audit,
        pins,
        ..
    } = draft;
    (
        launch,
        ToolRules::new(tool_entries, tools_default),
        sandbox,
        audit,
        pins,
    )
}

/// SHA-256 over every input of the merge, each field framed by a tag and its length, so no two
/// different sets of files share a digest by shifting bytes from one field into the next (a path
/// ending where a text begins). The built-in default is an input too: two airlock versions
/// whose defaults differ run different policies from the same files.
pub(super) fn digest(sources: &[LayerSource], servers: &[ServerOverride<'_>]) -> String {
    fn field(hasher: &mut Sha256, tag: u8, bytes: &[u8]) {
        hasher.update([tag]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    let mut hasher = Sha256::new();
    field(&mut hasher, b'b', presets::DEFAULT.as_bytes());
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
    let mut errors = Vec::new();
    for source in &ordered {
        match read_policy_file(&mut draft, source) {
            Ok(Some(file)) => project_files.push((*source, file)),
            Ok(None) => {}
            Err(err) => errors.push(err),
        }
    }
    if let Some(err) = SourceError::all(errors) {
        return Err(err);
    }

    lock_grant_args(&mut draft);
    draft.audit.locked = draft.locks.audit.clone();

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
            merge_gate_schema(
                &mut draft.gate_schema,
                &ctx,
                &widening,
                scope,
                tools.get_ref(),
            )?;
        }
        if let Some(sandbox) = server.sandbox {
            reject_lock_outside_org(&ctx, &sandbox.get_ref().locked)?;
            let widening = widening_for(Layer::Config, &draft.locks.sandbox);
            // A server may have several config-layer blocks (its config file's and the
            // command line's grants): each adds to the one before.
            let mut own = server_sandbox
                .remove(server.server)
                .unwrap_or_else(|| draft.sandbox.clone());
            let before = own.clone();
            merge_sandbox(&mut own, &ctx, &widening, sandbox.get_ref())?;
            if server.adds_only {
                keep_builtin_lists(&before, &mut own);
            }
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
    let mut config_sources: Vec<PathBuf> = Vec::new();
    for server in servers {
        if !config_sources.iter().any(|path| path == server.path) {
            config_sources.push(server.path.to_path_buf());
        }
    }
    let gate_schema = draft.gate_schema.clone();
    let (launch, tools, sandbox, audit, pins) = compile(draft);
    Ok(Policy {
        launch,
        tools,
        gate_schema,
        sandbox,
        server_sandbox,
        audit,
        pins,
        sources: ordered.iter().map(|s| (s.layer, s.path.clone())).collect(),
        config_sources,
        digest,
    })
}
