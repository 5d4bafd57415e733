//! `airlock install [HOST]` and `airlock uninstall HOST`: put `airlock run` in front of every
//! stdio server in a host's MCP config, and take it out again. The decisions and edits are pure
//! (`crate::install`); this file finds the files, prints, backs up and writes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::CliError;
use crate::diagnostic::{LineCol, SourceError};
use crate::install::entry::{Action, Kept, UninstallScope};
use crate::install::hosts::{self, Format, Host, Scope};
use crate::install::record::{self, InstallRecord, Step};
use crate::install::{self as plan, HostEnv, InstallOptions, Removed, Rewrite};
use crate::paths::{EnvVars, UserDirs};

/// Wrap every stdio MCP server of a host in `airlock run` (no HOST: list hosts and what would change).
#[derive(Debug, Args)]
#[command(
    after_help = "Hosts: claude-desktop, claude-code, cursor, vscode, windsurf, gemini, codex, zed.\n\n\
Examples:\n  airlock install                       # which hosts are here, and what would change\n  \
airlock install claude-code --dry-run  # the diff, nothing written\n  \
airlock install cursor                 # wrap, with a backup; restart Cursor afterwards\n  \
airlock install claude-code --project  # also ./.mcp.json\n  \
airlock install vscode --gateway       # remote servers too, through `airlock serve`\n\n\
Each change is written atomically after a backup under $XDG_STATE_HOME/airlock/installs/;\n\
`airlock uninstall HOST` undoes it."
)]
pub struct InstallArgs {
    /// The host: claude-desktop, claude-code, cursor, vscode, windsurf, gemini, codex or zed.
    pub host: Option<String>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Route remote (http/sse) servers through one `airlock serve` entry too.
    #[arg(long)]
    pub gateway: bool,
}

/// Undo `airlock install HOST`: restore the file byte for byte, or unwrap airlock's entries.
#[derive(Debug, Args)]
#[command(
    after_help = "When the file is exactly as airlock wrote it, the backup goes back byte for byte;\n\
when the host or you changed it since, only airlock's part is taken out."
)]
pub struct UninstallArgs {
    /// The host the install was for.
    pub host: String,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Which of a host's files to edit.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Edit this file instead of the host's usual ones.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Also the host's project file in the current directory (e.g. .mcp.json, .cursor/mcp.json).
    #[arg(long)]
    pub project: bool,
    /// Print the diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// One host file to work on.
struct Target {
    path: PathBuf,
    format: Format,
    scope: Scope,
    maps: Vec<&'static [&'static str]>,
    /// The host's first user file at its usual place: the one whose `--gateway` config is
    /// named after the host alone.
    main_user_file: bool,
}

fn host_env() -> Result<HostEnv, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|err| CliError::Failure(anyhow::anyhow!("no current directory: {err}")))?;
    Ok(HostEnv::from_env(&EnvVars::from_process(), &cwd))
}

/// airlock's own state and config directories (records and backups; gateway configs).
struct Dirs {
    state: PathBuf,
    config: PathBuf,
}

fn dirs() -> Result<Dirs, CliError> {
    let user = UserDirs::from_env(&EnvVars::from_process());
    match (user.state_dir(), user.config_dir()) {
        (Some(state), Some(config)) => Ok(Dirs { state, config }),
        _ => Err(CliError::Failure(anyhow::anyhow!(
            "neither HOME nor XDG_STATE_HOME/XDG_CONFIG_HOME is set: airlock has nowhere to keep backups"
        ))),
    }
}

/// The files of `host` to edit: `--config`, else the existing user files (and project files
/// with `--project`).
fn targets(host: &Host, args: &TargetArgs, env: &HostEnv) -> Result<Vec<Target>, CliError> {
    if let Some(path) = &args.config {
        let toml = path.extension().is_some_and(|e| e == "toml");
        let format = if toml { Format::Toml } else { Format::Json };
        let maps = host
            .files
            .iter()
            .filter(|f| f.format == format)
            .flat_map(|f| f.server_maps.iter().copied())
            .fold(Vec::new(), |mut all: Vec<&[&str]>, map| {
                if !all.contains(&map) {
                    all.push(map);
                }
                all
            });
        if maps.is_empty() {
            return Err(CliError::Refused(format!(
                "{} keeps no {} config; give the path of its own file",
                host.name,
                if toml { "TOML" } else { "JSON" }
            )));
        }
        return Ok(vec![Target {
            path: path.clone(),
            format,
            scope: Scope::User,
            maps,
            main_user_file: false,
        }]);
    }
    let mut found: Vec<Target> = Vec::new();
    let mut looked = Vec::new();
    // The host's main user file where the host keeps it by default: the one file whose
    // gateway config is named after the host alone (a `CODEX_HOME` elsewhere is another file).
    let defaults = HostEnv {
        codex_home: None,
        ..env.clone()
    };
    let main_path = host
        .files
        .iter()
        .find(|file| file.scope == Scope::User)
        .and_then(|file| defaults.path_of(file));
    for file in host.files {
        if file.scope == Scope::Project && !args.project {
            continue;
        }
        let Some(path) = env.path_of(file) else {
            continue;
        };
        // A project file that is the user file itself (`--project` in the home directory) is
        // edited once, as the user file.
        let same_file = |other: &Target| {
            other.path == path
                || std::fs::canonicalize(&other.path)
                    .is_ok_and(|real| std::fs::canonicalize(&path).is_ok_and(|p| p == real))
        };
        if found.iter().any(same_file) {
            continue;
        }
        if path.is_file() {
            found.push(Target {
                main_user_file: file.scope == Scope::User && main_path.as_ref() == Some(&path),
                path,
                format: file.format,
                scope: file.scope,
                maps: file.server_maps.to_vec(),
            });
        } else {
            looked.push(path.display().to_string());
        }
    }
    if found.is_empty() {
        return Err(CliError::Failure(anyhow::anyhow!(
            "no {} config found (looked at {}){}",
            host.name,
            looked.join(", "),
            if args.project {
                ""
            } else {
                "; --project also looks in the current directory, --config PATH takes any file"
            }
        )));
    }
    Ok(found)
}

/// The text of `path`, or `None` when there is no such file.
fn read_if_present(path: &Path) -> Result<Option<String>, CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(CliError::Failure(anyhow::anyhow!(
            "cannot read {}: {err}",
            path.display()
        ))),
    }
}

fn read_text(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|err| CliError::Failure(anyhow::anyhow!("cannot read {}: {err}", path.display())))
}

fn edit_error(path: &Path, text: &str, err: &plan::EditError) -> CliError {
    let position = err.offset.map(|offset| LineCol::from_offset(text, offset));
    CliError::BadInput(
        SourceError::new(path, position, err.message.clone()).with_fix(
            "correct the file by hand (airlock changes nothing in a file it cannot read)",
        ),
    )
}

/// The command a host should start: this binary's absolute path (GUI hosts often lack the
/// user's PATH).
/// The command a host's entry starts this airlock with: this binary's own path, links resolved.
/// Not the link `PATH` finds (`~/bin/airlock`), which would outlive an upgrade: a link sits in a
/// directory that a server may be granted to write (one on its command line), and the host
/// starts whatever is there next time, unconfined.
fn airlock_command() -> Result<String, CliError> {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|err| {
            CliError::Failure(anyhow::anyhow!("cannot find airlock's own path: {err}"))
        })?;
    Ok(exe.display().to_string())
}

/// Where `--gateway` keeps the servers it moved out of `target`: one config per host file, so
/// two files of one host (VS Code's `mcp.json` and `settings.json`, a `--config` file beside
/// the usual one) never write over each other's. The host's main user file keeps the short
/// name earlier installs gave it; any other file's name carries a digest of its path.
fn gateway_config_path(dirs: &Dirs, host: &Host, target: &Target) -> PathBuf {
    let name = if target.main_user_file {
        format!("{}.toml", host.id)
    } else {
        let digest = record::sha256_hex(target.path.to_string_lossy().as_bytes());
        format!("{}-{}.toml", host.id, &digest[..12])
    };
    dirs.config.join("hosts").join(name)
}

fn print_report(out: &mut String, target: &Target, rewrite: &Rewrite, dry_run: bool) {
    let _ = writeln!(out, "{} ({} scope):", target.path.display(), target.scope);
    let lines = plan::summary_lines(rewrite);
    if lines.is_empty() {
        let _ = writeln!(out, "  no servers");
    }
    for line in lines {
        // Nothing is written in a dry run: say what would be done.
        let line = if dry_run {
            line.replace(": wrapped in", ": would be wrapped in")
        } else {
            line
        };
        let _ = writeln!(out, "  {line}");
    }
}

/// For each entry this install wraps: what stops `airlock run` from starting its command under
/// the policy as it stands (not on the launch allowlist, not found), so a wrapped server does
/// not just vanish from the host after its restart. Judged with this shell's `PATH` from the
/// current directory; the host may start it with another `PATH`.
fn launch_warnings(rewrite: &Rewrite, file: &Path) -> Vec<String> {
    use crate::install::entry::{Action, Shape};
    use crate::policy::LaunchVerdict;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let path_var = std::env::var_os("PATH");
    let mut warnings = Vec::new();
    for (facts, action) in &rewrite.entries {
        let (Action::Wrap { .. }, Shape::Stdio { command, .. }) = (action, &facts.shape) else {
            continue;
        };
        let name = crate::install::entry::server_name(&facts.name);
        let resolved = match crate::paths::resolve_command(command, path_var.as_deref(), &cwd) {
            Ok(resolved) => resolved,
            Err(err) => {
                warnings.push(format!(
                    "{name}: its command {command:?} is not found from here ({err}): the host may not start it through airlock either"
                ));
                continue;
            }
        };
        let policy = match super::active_policy::load_active_for_server(None, &name, &[]) {
            Ok(policy) => policy,
            Err(err) => {
                warnings.push(format!(
                    "{name}: the policy does not load, so every wrapped server will be refused until it is fixed: {err}"
                ));
                break;
            }
        };
        let fix = format!(
            "add \"--trust\" before \"--\" in its args in {}",
            file.display()
        );
        if let LaunchVerdict::Refused { message, fix } =
            policy.launch.verdict(&name, &resolved, false, &fix)
        {
            warnings.push(format!(
                "{message}: the host cannot start it through airlock as wrapped. Fix: {fix}"
            ));
        }
    }
    warnings
}

pub fn install(args: InstallArgs) -> Result<ExitCode, CliError> {
    let env = host_env()?;
    let Some(id) = &args.host else {
        return list_hosts(&env);
    };
    let host = hosts::find(id).ok_or_else(|| unknown_host(id))?;
    let dirs = dirs()?;
    let airlock = airlock_command()?;
    let mut out = String::new();
    // Files whose install stopped at an entry it may not take.
    let mut stopped = Vec::new();
    // Every file is planned before any is written: a file that stops the install leaves all of
    // them as they were, not the ones before it rewritten.
    let mut to_write = Vec::new();
    for target in targets(host, &args.target, &env)? {
        let text = read_text(&target.path)?;
        let gateway_config = if args.gateway {
            Some(gateway_config_path(&dirs, host, &target))
        } else {
            None
        };
        let gateway_existing = match &gateway_config {
            Some(path) => read_if_present(path)?,
            None => None,
        };
        let options = InstallOptions {
            airlock: airlock.clone(),
            gateway_config,
            gateway_existing,
            project: (target.scope == Scope::Project).then(|| dirs.config.join("hosts")),
        };
        let planned = plan::plan_install(&text, target.format, host, &target.maps, &options)
            .map_err(|err| edit_error(&target.path, &text, &err))?;
        print_report(&mut out, &target, &planned.rewrite, args.target.dry_run);
        for warning in launch_warnings(&planned.rewrite, &target.path) {
            let _ = writeln!(out, "  warning: {warning}");
        }
        if let Some(gateway) = &planned.gateway {
            let how = if gateway.added { "added" } else { "kept" };
            let _ = writeln!(
                out,
                "  {}: {how}, serves the moved servers from {}",
                gateway.name,
                gateway.path.display()
            );
        }
        let refused = planned
            .rewrite
            .entries
            .iter()
            .filter(|(_, action)| matches!(action, Action::Keep(Kept::Refused(_))))
            .count();
        if refused > 0 {
            let _ = writeln!(
                out,
                "  not written: {refused} entr{} above {} refused",
                if refused == 1 { "y" } else { "ies" },
                if refused == 1 { "is" } else { "are" }
            );
            stopped.push(target.path.display().to_string());
            continue;
        }
        if !planned.rewrite.changed(&text) {
            let _ = writeln!(out, "  nothing to change");
            continue;
        }
        if args.target.dry_run {
            // The host's file as it is: it may hold tokens in `env` or `headers`.
            let diff = plan::diff(&target.path, &text, &planned.rewrite.text);
            out.push_str(&crate::secret::mask_in_config_text(&diff));
            if let Some(gateway) = &planned.gateway {
                let _ = writeln!(
                    out,
                    "and would write {}:\n{}",
                    gateway.path.display(),
                    crate::secret::mask_in_config_text(&gateway.text)
                );
            }
            continue;
        }
        to_write.push((target, text, planned));
    }
    if !stopped.is_empty() {
        print!("{out}");
        let unwritten = if to_write.is_empty() {
            String::new()
        } else {
            format!(
                "; nothing was written, not even {}",
                to_write
                    .iter()
                    .map(|(target, _, _)| target.path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Err(CliError::Refused(format!(
            "install stopped for {}: a project's file may not choose how airlock confines its servers (the entries marked refused above say why and what to change){unwritten}",
            stopped.join(", ")
        )));
    }
    for (target, text, planned) in &to_write {
        let backup = commit_install(&dirs, host, target, text, planned)?;
        let _ = writeln!(
            out,
            "{}: written; the previous file is saved as {}",
            target.path.display(),
            backup.display()
        );
        if target.scope == Scope::Project {
            // A project file is often committed: others get this machine's path to airlock.
            let _ = writeln!(
                out,
                "  note: this project file now names this machine's airlock ({airlock}); if the file is shared (committed), others need airlock at that path, or keep it out of version control"
            );
        }
    }
    if !to_write.is_empty() {
        let _ = writeln!(
            out,
            "Restart {} so it starts the servers through airlock.",
            host.name
        );
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Backs up, writes the gateway config (if any) and the host file, and records the step.
fn commit_install(
    dirs: &Dirs,
    host: &Host,
    target: &Target,
    before: &str,
    planned: &plan::InstallPlan,
) -> Result<PathBuf, CliError> {
    let failure =
        |what: &str, err: std::io::Error| CliError::Failure(anyhow::anyhow!("{what}: {err}"));
    let record_file = record::record_path(&dirs.state, host.id, &target.path);
    let mut saved = record::load(&record_file)
        .map_err(|err| failure(&format!("cannot read {}", record_file.display()), err))?
        .unwrap_or_else(|| InstallRecord {
            host: host.id.to_string(),
            path: target.path.clone(),
            steps: Vec::new(),
        });
    let backup = record::save_backup(&record_file, saved.steps.len(), before.as_bytes())
        .map_err(|err| failure("cannot save the backup", err))?;
    if let Some(gateway) = &planned.gateway {
        record::write_config(&gateway.path, gateway.text.as_bytes())
            .map_err(|err| failure(&format!("cannot write {}", gateway.path.display()), err))?;
    }
    let after = &planned.rewrite.text;
    record::replace_file(&target.path, before.as_bytes(), after.as_bytes())
        .map_err(|err| failure(&format!("cannot write {}", target.path.display()), err))?;
    saved.steps.push(Step {
        at: crate::audit::event::rfc3339(std::time::SystemTime::now()),
        backup: backup.clone(),
        before_sha256: record::sha256_hex(before.as_bytes()),
        written_sha256: record::sha256_hex(after.as_bytes()),
        wrapped: planned.rewrite.wrapped(),
        keys_with_maps: true,
        moved: planned
            .rewrite
            .removed
            .iter()
            .map(|r| record::SavedEntry {
                name: r.name.clone(),
                text: r.text.clone(),
            })
            .collect(),
        gateway: planned
            .gateway
            .as_ref()
            .map(|gateway| (gateway.name.clone(), gateway.path.clone())),
    });
    record::store(&record_file, &saved)
        .map_err(|err| failure(&format!("cannot write {}", record_file.display()), err))?;
    Ok(backup)
}

pub fn uninstall(args: UninstallArgs) -> Result<ExitCode, CliError> {
    let env = host_env()?;
    let host = hosts::find(&args.host).ok_or_else(|| unknown_host(&args.host))?;
    let dirs = dirs()?;
    let mut out = String::new();
    for target in targets(host, &args.target, &env)? {
        let text = read_text(&target.path)?;
        let record_file = record::record_path(&dirs.state, host.id, &target.path);
        let saved = record::load(&record_file).map_err(|err| {
            CliError::Failure(anyhow::anyhow!(
                "cannot read {}: {err}",
                record_file.display()
            ))
        })?;
        let steps = saved.as_ref().map(|r| r.steps.clone()).unwrap_or_default();
        let undone = record::undo(&steps, text.as_bytes(), &|p| std::fs::read(p))
            .map_err(|err| CliError::Failure(anyhow::anyhow!("cannot undo the install: {err}")))?;
        let restored = match undone.restored {
            Some(bytes) => Some(String::from_utf8(bytes).map_err(|_| {
                CliError::Failure(anyhow::anyhow!(
                    "the backup of {} is not text",
                    target.path.display()
                ))
            })?),
            None => None,
        };
        let base = restored.as_deref().unwrap_or(&text);
        // Every install undone from its backup: the backup's bytes as they are, not read and
        // written again (a TOML rewrite drops a byte order mark and CRLF line ends: a review
        // found "restored byte for byte" untrue there).
        let after = match &restored {
            Some(bytes) if undone.remaining.is_empty() => plan::Rewrite {
                text: bytes.clone(),
                ..plan::Rewrite::default()
            },
            _ => unwrap_remaining(base, host, &target, saved.as_ref(), &undone.remaining)?,
        };
        let _ = writeln!(out, "{} ({} scope):", target.path.display(), target.scope);
        // Nothing is written in a dry run: say what would be done, as install does.
        let would = if args.target.dry_run { "would be " } else { "" };
        if restored.is_some() {
            let _ = writeln!(out, "  {would}restored byte for byte from the backup");
        }
        for line in plan::summary_lines(&after)
            .iter()
            .filter(|l| l.contains("unwrapped") || l.contains("removed"))
        {
            let line = line
                .replace(": unwrapped:", &format!(": {would}unwrapped:"))
                .replace(": removed", &format!(": {would}removed"));
            let _ = writeln!(out, "  {line}");
        }
        if after.text == text {
            let _ = writeln!(out, "  nothing to change");
            continue;
        }
        if args.target.dry_run {
            let diff = plan::diff(&target.path, &text, &after.text);
            out.push_str(&crate::secret::mask_in_config_text(&diff));
            continue;
        }
        record::replace_file(&target.path, text.as_bytes(), after.text.as_bytes()).map_err(
            |err| {
                CliError::Failure(anyhow::anyhow!(
                    "cannot write {}: {err}",
                    target.path.display()
                ))
            },
        )?;
        for step in &steps {
            if let Some((_, config)) = &step.gateway {
                let _ = std::fs::remove_file(config);
            }
        }
        if let Some(mut saved) = saved {
            saved.steps.clear();
            let _ = record::store(&record_file, &saved);
        }
        let _ = writeln!(out, "  written");
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Unwraps what the steps that could not be restored byte for byte did (every airlock entry
/// when there is no record).
fn unwrap_remaining(
    text: &str,
    host: &Host,
    target: &Target,
    saved: Option<&InstallRecord>,
    remaining: &[Step],
) -> Result<Rewrite, CliError> {
    let names: Vec<String> = remaining.iter().flat_map(|s| s.wrapped.clone()).collect();
    let restore: Vec<Removed> = remaining
        .iter()
        .flat_map(|s| s.moved.iter())
        .map(|m| Removed {
            name: m.name.clone(),
            text: m.text.clone(),
            remote: None,
        })
        .collect();
    let gateway = remaining
        .iter()
        .find_map(|s| s.gateway.as_ref().map(|(name, _)| name.as_str()));
    let airlock = airlock_command()?;
    let scope = UninstallScope {
        wrapped: saved.map(|_| names.as_slice()),
        keys_with_maps: remaining.iter().all(|step| step.keys_with_maps),
        gateway,
        airlock: &airlock,
    };
    plan::plan_uninstall(text, target.format, host, &target.maps, scope, &restore)
        .map_err(|err| edit_error(&target.path, text, &err))
}

fn unknown_host(id: &str) -> CliError {
    if let Some([first, second]) = hosts::ambiguous(id) {
        return CliError::Refused(format!(
            "host {id:?} could mean {first} or {second} (Claude Code's program is `claude`): name one"
        ));
    }
    CliError::Refused(format!(
        "unknown host {id:?}; airlock knows {}",
        hosts::ids().join(", ")
    ))
}

/// `airlock install` without a host: every host file here, and what an install would change.
fn list_hosts(env: &HostEnv) -> Result<ExitCode, CliError> {
    let airlock = airlock_command()?;
    let mut out = String::new();
    let mut found = 0;
    for host in hosts::HOSTS {
        // Run from the home directory, a host's project file is its user file: list it once.
        let mut listed = std::collections::BTreeSet::new();
        for file in host.files {
            let Some(path) = env.path_of(file).filter(|p| p.is_file()) else {
                continue;
            };
            if !listed.insert(std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone())) {
                continue;
            }
            found += 1;
            // A project file is edited only with --project: the command said is the one that
            // edits this file.
            let project = if file.scope == Scope::Project {
                " --project"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "{} [{}] {} ({} scope): `airlock install {}{project}`",
                host.name,
                host.id,
                path.display(),
                file.scope,
                host.id
            );
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(err) => {
                    let _ = writeln!(out, "  cannot read it: {err}");
                    continue;
                }
            };
            let options = InstallOptions {
                airlock: airlock.clone(),
                gateway_config: None,
                gateway_existing: None,
                project: (file.scope == Scope::Project)
                    .then(|| dirs().ok().map(|dirs| dirs.config.join("hosts")))
                    .flatten(),
            };
            match plan::plan_install(&text, file.format, host, file.server_maps, &options) {
                Ok(planned) => {
                    let lines = plan::summary_lines(&planned.rewrite);
                    if lines.is_empty() {
                        let _ = writeln!(out, "  no servers");
                    }
                    for line in lines {
                        let line = line.replace(": wrapped in", ": would be wrapped in");
                        let _ = writeln!(out, "  {line}");
                    }
                }
                Err(err) => {
                    let at = err.offset.map(|o| LineCol::from_offset(&text, o));
                    let where_ = at
                        .map(|a| format!(":{}:{}", a.line, a.column))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  cannot edit it ({}{where_}: {})",
                        path.display(),
                        err.message
                    );
                }
            }
        }
    }
    if found == 0 {
        let _ = writeln!(
            out,
            "No MCP host configuration found (hosts airlock knows: {}). Looked for:",
            hosts::ids().join(", ")
        );
        for host in hosts::HOSTS {
            for path in host.files.iter().filter_map(|file| env.path_of(file)) {
                let _ = writeln!(out, "  {} [{}] {}", host.name, host.id, path.display());
            }
        }
        let _ = writeln!(
            out,
            "A host file elsewhere: `airlock install HOST --config PATH`."
        );
    } else {
        let _ = writeln!(
            out,
            "\nRun the command a file names to wrap its servers (`--dry-run` shows the diff)."
        );
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}
