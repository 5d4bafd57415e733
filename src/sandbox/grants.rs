//! Which host paths a server may reach, and how: the system paths every runtime needs, the paths
//! derived from the command (install prefix, virtualenv, script package), the protected paths no
//! grant may contain, and the deduplicated landlock rules.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use super::layouts::Provenance;
use super::vars::Vars;
use super::{FsAccess, FsRule, PlanError, PlanRequest, RuntimeProfile, Shown};
use crate::paths::normalize_path;
use crate::policy::SandboxPolicy;
use crate::sandbox::AirlockDirs;

/// System paths every runtime needs, read+execute, bound read-only at their own path. Missing
/// ones are skipped by the helper. Deliberately file-by-file under `/etc`: `/etc/shadow`,
/// `/etc/ssh`, `/etc/sudoers` stay closed (and do not exist in the server's root).
pub(super) const SYSTEM_READ: &[(&str, &str)] = &[
    ("/usr", "system programs and libraries"),
    ("/bin", "system programs"),
    ("/sbin", "system programs"),
    ("/lib", "system libraries"),
    ("/lib64", "system libraries"),
    ("/lib32", "system libraries"),
    ("/etc/ld.so.cache", "dynamic linker cache"),
    ("/etc/ld.so.conf", "dynamic linker config"),
    ("/etc/ld.so.conf.d", "dynamic linker config"),
    ("/etc/ssl", "TLS certificates"),
    ("/etc/ca-certificates", "TLS certificates"),
    ("/etc/pki", "TLS certificates"),
    ("/etc/resolv.conf", "name resolution"),
    ("/etc/hosts", "name resolution"),
    ("/etc/nsswitch.conf", "name resolution"),
    ("/etc/host.conf", "name resolution"),
    ("/etc/gai.conf", "name resolution"),
    ("/etc/localtime", "time zone"),
    ("/etc/timezone", "time zone"),
    (
        "/etc/passwd",
        "user names (no password hashes: those are in /etc/shadow, never granted)",
    ),
    ("/etc/group", "group names"),
    ("/etc/os-release", "OS identification"),
    ("/etc/mime.types", "MIME types"),
    ("/etc/alternatives", "Debian alternatives symlinks"),
    ("/etc/python3", "Debian Python site config"),
    ("/etc/python3.11", "Debian Python site config"),
    ("/etc/python3.12", "Debian Python site config"),
    ("/etc/python3.13", "Debian Python site config"),
    ("/sys/devices/system/cpu", "CPU count for thread pools"),
];

/// The server's own `/etc/hosts` when it has a network of its own (none, or egress by name):
/// the names of its own loopback and its host name, nothing of the host's. The host's file names
/// machines of the user's network (and may pin an allowed name to an address the allow list does
/// not hold, so the server's connection would be refused); names go through airlock's resolver.
pub(super) const OWN_HOSTS_PATH: &str = "/etc/hosts";
pub(super) const OWN_HOSTS: &str =
    "127.0.0.1\tlocalhost\n127.0.1.1\tairlock\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// Device nodes: the only entries of the server's `/dev` (with `/dev/fd` and the std links).
pub(super) const DEVICES: &[(&str, FsAccess, &str)] = &[
    ("/dev/null", FsAccess::ReadWrite, "device"),
    ("/dev/full", FsAccess::ReadWrite, "device"),
    ("/dev/zero", FsAccess::ReadExec, "device"),
    ("/dev/urandom", FsAccess::ReadExec, "randomness"),
    ("/dev/random", FsAccess::ReadExec, "randomness"),
];

/// Whether `path` is one of the device nodes every server's `/dev` holds ([`DEVICES`]): nothing
/// of the user's is in one, so none is a path to keep from the server.
pub fn is_servers_own_device(path: &std::path::Path) -> bool {
    DEVICES
        .iter()
        .any(|(device, _, _)| path == std::path::Path::new(device))
}

/// Joins the reasons of a path granted more than once.
const ALSO: &str = "; also: ";

/// Whether `rule` is one of [`SYSTEM_READ`] or [`DEVICES`] exactly as [`system_rules`] makes
/// them, with no other grant merged into it (which would add its reason, and may widen its
/// access or make it an idmapped bind): the same for every server, so the brief view of a plan
/// counts them instead of listing them.
pub(super) fn is_system_rule(rule: &FsRule) -> bool {
    let path = rule.path.as_os_str();
    let plain = rule.owner.is_none() && rule.derived_via.is_none() && rule.named_by.is_none();
    let system = || {
        SYSTEM_READ.iter().any(|(p, reason)| {
            path == *p
                && rule.reason == *reason
                && rule.access == FsAccess::ReadExec
                && rule.shown == Shown::Bind
        })
    };
    let device = || {
        DEVICES.iter().any(|(p, access, reason)| {
            path == *p
                && rule.reason == *reason
                && rule.access == *access
                && rule.shown == Shown::Device
        })
    };
    plain && (system() || device())
}

/// The system rules: [`SYSTEM_READ`], [`DEVICES`], `/proc` and the cgroup view. With a constructed
/// root, `/proc` is the server's own procfs (a fresh mount for its pid namespace: no host process
/// exists in it) and `/sys/fs/cgroup` its own cgroup when it has a v2 one (else absent); without
/// one they are the host's, as landlock rules.
pub(super) fn system_rules(fs: &mut FsRules, constructed_root: bool, cgroup_view: bool) {
    for (path, reason) in SYSTEM_READ {
        fs.push(PathBuf::from(path), FsAccess::ReadExec, reason, Shown::Bind);
    }
    for (path, access, reason) in DEVICES {
        fs.push(PathBuf::from(path), *access, reason, Shown::Device);
    }
    if constructed_root {
        fs.push(
            PathBuf::from("/proc"),
            FsAccess::ReadExec,
            "the server's own procfs (its pid namespace only)",
            Shown::Constructed,
        );
        if cgroup_view {
            fs.push(
                PathBuf::from("/sys/fs/cgroup"),
                FsAccess::ReadExec,
                "the server's own memory cgroup, for heap sizing",
                Shown::Constructed,
            );
        }
    } else {
        fs.push(
            PathBuf::from("/proc"),
            FsAccess::ReadExec,
            "runtimes read /proc/self; other processes are guarded by landlock's ptrace scoping",
            Shown::Bind,
        );
        fs.push(
            PathBuf::from("/sys/fs/cgroup"),
            FsAccess::ReadExec,
            "memory limits for heap sizing",
            Shown::Bind,
        );
    }
}

/// Paths no grant may contain: the real home itself, airlock's config dir, state dir (other than
/// this server's own private dirs, granted separately), audit log, the policy files and the
/// organisation's policy directory.
pub(super) fn protected_paths(dirs: &AirlockDirs) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    if let Some(home) = &dirs.home {
        out.push(("the home directory".to_string(), home.clone()));
    }
    if let Some(config) = &dirs.config_dir {
        out.push(("airlock's config directory".to_string(), config.clone()));
    }
    out.push((
        "airlock's state directory".to_string(),
        dirs.state_dir.clone(),
    ));
    if let Some(audit) = &dirs.audit_path {
        out.push(("the audit log".to_string(), audit.clone()));
    }
    for policy in &dirs.policy_files {
        out.push(("a policy file".to_string(), policy.clone()));
    }
    for config in &dirs.config_files {
        out.push((
            "the server config airlock was started from".to_string(),
            config.clone(),
        ));
    }
    if let Some(org) = &dirs.org_policy_dir {
        out.push((
            "the organisation's policy directory".to_string(),
            org.clone(),
        ));
    }
    for (host, config) in &dirs.host_configs {
        out.push((format!("{host}'s MCP config"), config.clone()));
    }
    // Each also as it resolves: a grant (or a derived one, from a script's resolved path) that
    // reaches the home through a symlink is the home all the same. A file not there yet (a
    // host's `mcp.json` before its first server) resolves through the links its directories
    // already are: a server granted where `~/.cursor` leads could otherwise create it.
    let resolved: Vec<(String, PathBuf)> = out
        .iter()
        .filter_map(|(what, path)| {
            let real = crate::paths::resolve_as_far_as_exists(path)?;
            (real != *path).then(|| (what.clone(), real))
        })
        .collect();
    out.extend(resolved);
    out
}

/// The protected path other than the home that `grant` lies inside, if any: airlock's config and
/// state, the org policy directory are whole trees no grant reaches into (the home is only
/// never granted itself or by a parent: grants inside it are the point).
pub(super) fn inside_protected(
    grant: &Path,
    protected: &[(String, PathBuf)],
    home: Option<&Path>,
) -> Option<(String, PathBuf)> {
    protected
        .iter()
        .filter(|(_, at)| Some(at.as_path()) != home)
        .find(|(_, at)| grant.starts_with(at))
        .map(|(what, at)| (what.clone(), at.clone()))
}

/// The protected path that `grant` equals or contains, if any.
pub(super) fn covers_protected(
    grant: &Path,
    protected: &[(String, PathBuf)],
) -> Option<(String, PathBuf)> {
    protected
        .iter()
        .find(|(_, path)| path.starts_with(grant))
        .map(|(what, path)| (what.clone(), path.clone()))
}

/// A derived grant (install prefix, script package) that would cover a protected path is refused;
/// `/` and the home itself are never granted.
pub(super) fn narrow_derived(
    path: &Path,
    protected: &[(String, PathBuf)],
    _home: Option<&Path>,
) -> Option<PathBuf> {
    if path.parent().is_none() || covers_protected(path, protected).is_some() {
        return None;
    }
    Some(path.to_path_buf())
}

/// `prefix(/x/versions/3.11/bin/python3.11) = /x/versions/3.11`; otherwise the containing dir.
pub fn install_prefix(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    if dir.file_name().is_some_and(|name| name == "bin") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// The program's venv and the script's package (the program itself and its runtime:
/// [`super::layouts::program_grants`]).
pub(super) fn derived_read_grants(request: &PlanRequest) -> Vec<super::layouts::Derived> {
    let mut out = Vec::new();
    let resolved = &request.resolved;
    if let Some(venv) = &resolved.venv_root {
        // The program's own venv, or the one of the interpreter its first line names (content
        // the helper judges like a link: see `FsRule::named_by`).
        let own = request.program.parent().and_then(Path::parent) == Some(venv.as_path());
        let named_by = (!own).then(|| {
            resolved
                .program_canonical
                .clone()
                .unwrap_or_else(|| request.program.clone())
        });
        for grant in super::layouts::as_grants(venv, &resolved.runtime) {
            out.push((
                grant,
                "the virtualenv of the interpreter".to_string(),
                Provenance {
                    via: None,
                    named_by: named_by.clone(),
                },
            ));
        }
    }
    // `pyvenv.cfg` may lie in a write grant: a base whose prefix is shared (the home's
    // `.local`, a Homebrew prefix with its `var/`) is not granted whole; the program's own link
    // target, when the venv's python is a link, brings the real interpreter's prefix anyway.
    if let Some(base) = &resolved.venv_base
        && let Some(prefix) = install_prefix(&base.join("python"))
        && super::layouts::shared_prefix(&prefix, request.dirs.home.as_deref()).is_none()
    {
        for grant in super::layouts::as_grants(&prefix, &resolved.runtime) {
            out.push((
                grant,
                "the base interpreter the virtualenv links to".to_string(),
                Provenance::default(),
            ));
        }
    }
    // The script's root as written and with its symlinks resolved: in the constructed root each
    // lands at its own path (the helper copies the symlinks), so the argument the server gets
    // resolves there as it does on the host.
    // The resolved one is derived through the script as written (its links are judged).
    let roots = [
        (&resolved.script_root_as_written, None),
        (&resolved.script_root, resolved.script_as_written.clone()),
    ];
    for (root, via) in roots {
        if let Some(root) = root {
            out.push((
                root.clone(),
                "the script's directory or package (with the node_modules it loads from)"
                    .to_string(),
                Provenance {
                    via,
                    named_by: None,
                },
            ));
        }
    }
    if let Some(project) = &resolved.project_root {
        out.push((
            project.clone(),
            "the server's Python project (its code and pyproject.toml; uv's --directory, the project its .venv is in, or where its -m module is)".to_string(),
            Provenance::default(),
        ));
    }
    // A script whose directory is or contains the home: the file alone (the resolved one
    // derived through the one written, as above).
    let mut alone = resolved.script_alone.iter();
    if let Some(resolved_script) = alone.next() {
        let written = alone.next().cloned();
        for (script, via) in [
            (Some(resolved_script.clone()), written.clone()),
            (written, None),
        ] {
            if let Some(script) = script {
                out.push((
                    script,
                    "the script alone: its directory holds the home".to_string(),
                    Provenance {
                        via,
                        named_by: None,
                    },
                ));
            }
        }
    }
    out
}

/// The command's own files and its runtime profile's paths: the install prefix, the virtualenv,
/// the script's package (read-only), the profile's read and write paths. Derived grants that would
/// cover a protected path (the home itself, airlock's config) are dropped and noted.
pub(super) fn command_rules(
    request: &PlanRequest,
    vars: &Vars<'_>,
    profile: Option<&RuntimeProfile>,
    protected: &[(String, PathBuf)],
    shown: Shown,
    fs: &mut FsRules,
    notes: &mut Vec<String>,
) {
    if let Some(script) = request.resolved.script_alone.first()
        && let Some(dir) = script.parent()
    {
        notes.push(format!(
            "{} (the script's directory): it is or contains the home; the script alone is granted (keep a server's files in a directory of their own)",
            dir.display()
        ));
    }
    let program = super::layouts::program_grants(request, profile, protected);
    for (path, reason, from) in program.into_iter().chain(derived_read_grants(request)) {
        match narrow_derived(&path, protected, request.dirs.home.as_deref()) {
            Some(narrowed) => fs.push_derived(narrowed, FsAccess::ReadExec, &reason, shown, from),
            None => notes.push(format!(
                "not granting {} ({reason}): it would expose a protected path",
                path.display()
            )),
        }
    }
    let Some(profile) = profile else { return };
    for template in &profile.read {
        if let Some(path) = vars.expand_path(template) {
            let reason = format!("{} runtime cache (read-only)", profile.name);
            match narrow_derived(&path, protected, request.dirs.home.as_deref()) {
                Some(path) => fs.push(path, FsAccess::ReadExec, &reason, shown),
                None => notes.push(format!(
                    "not granting {}: it would expose a protected path",
                    path.display()
                )),
            }
        }
    }
    for template in &profile.write {
        if let Some(path) = vars.expand_path(template) {
            let reason = format!("{} runtime", profile.name);
            fs.push(path, FsAccess::ReadWrite, &reason, shown);
        }
    }
}

/// The policy's `read` and `write` grants, expanded. A grant that names an unset variable, is
/// not absolute, or is or contains a protected path, is bad input.
pub(super) fn policy_rules(
    policy: &SandboxPolicy,
    vars: &Vars<'_>,
    protected: &[(String, PathBuf)],
    shown: Shown,
    fs: &mut FsRules,
) -> Result<(), PlanError> {
    for (grants, access) in [
        (&policy.read, FsAccess::ReadExec),
        (&policy.write, FsAccess::ReadWrite),
    ] {
        for grant in grants {
            let origin = grant.origin.to_string();
            // An error, not a skipped grant: the user meant the server to have this path, and
            // a server missing it fails in ways that do not point here.
            let Some(expanded) = vars.expand(&grant.value) else {
                return Err(PlanError::UnsetGrant {
                    grant: grant.value.clone(),
                    origin,
                });
            };
            let path = PathBuf::from(&expanded);
            if !path.is_absolute() {
                return Err(PlanError::RelativeGrant {
                    grant: grant.value.clone(),
                    origin,
                    expanded,
                });
            }
            let path = normalize_path(&path);
            if let Some((what, protected_path)) = covers_protected(&path, protected)
                .or_else(|| inside_protected(&path, protected, vars.home))
            {
                return Err(PlanError::GrantsProtected {
                    grant: grant.value.clone(),
                    origin,
                    what,
                    path: protected_path,
                });
            }
            fs.push(path, access, &format!("{POLICY_GRANT} ({origin})"), shown);
        }
    }
    Ok(())
}

/// How a rule the policy's `read`/`write` lists (or the `--allow-*` flags) made begins its reason.
pub const POLICY_GRANT: &str = "policy grant";

/// Deduplicated landlock rules: a path granted twice keeps the widest access.
#[derive(Default)]
pub(super) struct FsRules {
    rules: Vec<FsRule>,
    seen: BTreeSet<PathBuf>,
}

impl FsRules {
    pub(super) fn push(&mut self, path: PathBuf, access: FsAccess, reason: &str, shown: Shown) {
        self.push_derived(path, access, reason, shown, Provenance::default());
    }

    /// [`Self::push`] for a grant derived through `via` (see [`FsRule::derived_via`]). A path
    /// granted both ways keeps no `via`: a grant that names it makes it trusted.
    pub(super) fn push_derived(
        &mut self,
        path: PathBuf,
        access: FsAccess,
        reason: &str,
        shown: Shown,
        from: Provenance,
    ) {
        let path = if path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            normalize_path(&path)
        } else {
            path
        };
        if self.seen.contains(&path) {
            if let Some(rule) = self.rules.iter_mut().find(|rule| rule.path == path) {
                // Every reason the path is granted for is shown (a policy's grant of a system
                // path is not only the system's).
                if !rule.reason.split(ALSO).any(|known| known == reason) {
                    rule.reason.push_str(ALSO);
                    rule.reason.push_str(reason);
                }
                rule.access = rule.access.max(access);
                if shown == Shown::IdmappedBind {
                    rule.shown = shown;
                }
                if from == Provenance::default() {
                    rule.derived_via = None;
                    rule.named_by = None;
                }
            }
            return;
        }
        self.seen.insert(path.clone());
        self.rules.push(FsRule {
            path,
            access,
            reason: reason.to_string(),
            shown,
            owner: None,
            derived_via: from.via,
            named_by: from.named_by,
            missing: false,
        });
    }

    /// Turns the host's `/etc/hosts` into the server's own ([`OWN_HOSTS`], generated in its root
    /// and read under a rule on the generated file). False, changing nothing, when the host's
    /// file is shown on purpose: a grant names it, or binds a directory above it.
    pub(super) fn own_hosts_file(&mut self) -> bool {
        let hosts = Path::new(OWN_HOSTS_PATH);
        let bound_above = self.rules.iter().any(|rule| {
            rule.path != hosts
                && hosts.starts_with(&rule.path)
                && matches!(rule.shown, Shown::Bind | Shown::IdmappedBind)
        });
        if bound_above {
            return false;
        }
        let Some(rule) = self
            .rules
            .iter_mut()
            .find(|rule| rule.path == hosts && is_system_rule(rule))
        else {
            return false;
        };
        rule.shown = Shown::Constructed;
        rule.reason = "name resolution: localhost and the server's host name only".into();
        true
    }

    /// Makes read-only every write grant over `program` (airlock's own executable, links
    /// resolved), saying so in `notes`: a server that could replace it would be started as
    /// airlock, unconfined, the next time a host starts a server. Whatever granted it (a policy
    /// `write`, `--allow-write`, a directory on the server's command line), it may still read.
    /// A grant is judged where it really leads: links resolved, and by the directories it is
    /// (device and inode), so that another way to one of them (a bind mount) is caught too.
    /// Returns the paths made read-only.
    pub(super) fn keep_read_only(
        &mut self,
        programs: &[PathBuf],
        notes: &mut Vec<String>,
    ) -> Vec<PathBuf> {
        let mut kept = Vec::new();
        use std::os::unix::fs::MetadataExt;
        let identity = |path: &Path| std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        // Each program and every directory above it but `/`, by identity.
        let holding: Vec<((u64, u64), &PathBuf)> = programs
            .iter()
            .flat_map(|program| {
                program
                    .ancestors()
                    .filter(|dir| dir.parent().is_some())
                    .filter_map(move |dir| identity(dir).map(|id| (id, program)))
            })
            .collect();
        for rule in &mut self.rules {
            if rule.access != FsAccess::ReadWrite {
                continue;
            }
            let leads_to = std::fs::canonicalize(&rule.path).unwrap_or_else(|_| rule.path.clone());
            let by_path = programs
                .iter()
                .find(|program| program.starts_with(&leads_to) || program.starts_with(&rule.path));
            let by_identity = || {
                let id = identity(&rule.path)?;
                holding
                    .iter()
                    .find(|(held, _)| *held == id)
                    .map(|(_, program)| *program)
            };
            let Some(program) = by_path.or_else(by_identity) else {
                continue;
            };
            rule.access = FsAccess::ReadExec;
            notes.push(format!(
                "writing {} ({}): it holds airlock's own program {}, which hosts start; granted read-only",
                rule.path.display(),
                rule.reason,
                program.display()
            ));
            kept.push(rule.path.clone());
        }
        kept
    }

    pub(super) fn into_rules(self) -> Vec<FsRule> {
        self.rules
    }
}
