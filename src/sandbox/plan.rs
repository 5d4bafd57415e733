//! [`plan`]: the pure decision of a server's sandbox.

use super::env::build_env;
use super::grants::{
    FsRules, OWN_HOSTS, OWN_HOSTS_PATH, command_rules, policy_rules, protected_paths, system_rules,
};
use super::limits::{memory_limit, rlimits};
use super::overlays::plan_cache_overlays;
use super::root::{RootFileContent, RootPlan};
use super::vars::Vars;
use super::*;
use crate::policy::{Feature, RunAs};

/// Decides the sandbox for one server. Pure: same request and host, same plan.
pub fn plan(request: &PlanRequest, host: &HostFacts) -> Result<SandboxPlan, PlanError> {
    let policy = &request.sandbox;
    validate(request, host)?;

    let vars = Vars::new(request);
    let protected = protected_paths(&request.dirs);
    let mut notes = Vec::new();
    // The server's own root lives in its own mount namespace, which comes with the user namespace.
    let constructed_root = host.user_namespaces;
    let identity = identity(host, policy.run_as.value, &mut notes);
    let memory = memory_limit(policy.limits.memory_mb.value, host, &mut notes);
    let cgroup_view = constructed_root
        && matches!(&memory, MemoryLimit::Cgroup { cgroup, .. } if cgroup.version == CgroupVersion::V2);
    let user_paths = user_paths_shown(host, identity, constructed_root);

    let mut fs = FsRules::default();
    system_rules(&mut fs, constructed_root, cgroup_view);
    let profile = profile::for_program(
        &request.program,
        request.resolved.program_canonical.as_deref(),
    );
    // What the command itself brings (its runtime, its package, its cache), each skipped part
    // noted as not granted.
    let mut not_granted = Vec::new();
    let skipped = &mut not_granted;
    command_rules(
        request, &vars, profile, &protected, user_paths, &mut fs, skipped,
    );
    let cache_overlays = profile
        .map(|profile| plan_cache_overlays(request, host, &vars, profile, &protected, skipped))
        .unwrap_or_default();
    private_dir_rules(&mut fs, &vars, constructed_root);
    policy_rules(policy, &vars, &protected, user_paths, &mut fs)?;
    let mut arguments = super::arguments::argument_rules(
        &request.resolved.arguments,
        policy,
        request.dirs.home.as_deref(),
        &argument_protected(&protected, &cache_overlays),
        user_paths,
        &mut fs,
    );
    // The arguments' decisions say what the server gets: read-only where that is now so.
    for read_only in fs.keep_read_only(&request.dirs.programs, &mut not_granted) {
        for argument in arguments.iter_mut().filter(|a| a.path == read_only) {
            if argument.access == Some(FsAccess::ReadWrite) {
                argument.access = Some(FsAccess::ReadExec);
                argument
                    .source
                    .push_str("; read-only: it holds airlock's own program");
            }
        }
    }

    let network = NetMode::from(&policy.network.value);
    let namespaces = namespaces(host, &network, constructed_root);
    host_notes(host, &namespaces, &network, &mut notes);
    check_egress(request, host, &network)?;
    // A server with a network namespace of its own gets a hosts file of its own too.
    let own_hosts = constructed_root && network != NetMode::Host && fs.own_hosts_file();
    let root = constructed_root.then(|| {
        let mut root = root_plan(request, host, &protected, cgroup_view);
        if own_hosts {
            root.add_file(
                PathBuf::from(OWN_HOSTS_PATH),
                RootFileContent::Text {
                    text: OWN_HOSTS.into(),
                    mode: 0o644,
                },
            );
        }
        Box::new(root)
    });

    Ok(SandboxPlan {
        server: request.server.clone(),
        program: request.program.clone(),
        argv: argv(request),
        env: build_env(request, &vars, profile, &network, &cache_overlays),
        cwd: request
            .cwd
            .clone()
            .unwrap_or_else(|| vars.private_home.clone()),
        private_home: vars.private_home.clone(),
        private_tmp: vars.private_tmp.clone(),
        fs: fs.into_rules(),
        root,
        cache_overlays,
        network: network.clone(),
        id_maps: namespaces.user.then(|| id_maps(host, identity)),
        namespaces,
        identity,
        airlock_uid: host.uid,
        landlock: LandlockPlan {
            abi: host.landlock_abi,
            net_rules: host.landlock_abi >= 4 && network != NetMode::Host,
            scopes: host.landlock_abi >= 6,
        },
        seccomp: SeccompPlan {
            enabled: host.seccomp,
            deny_unix_sockets: network != NetMode::Host,
            // With egress, UDP reaches only airlock's resolver: nothing leaves the namespace.
            deny_udp: network == NetMode::None,
            deny_fast_open: matches!(network, NetMode::Egress(_)),
            deny_listen: matches!(network, NetMode::Egress(_)),
            deny_uncounted_memory: matches!(
                memory,
                MemoryLimit::RlimitData {
                    shared_refused: true,
                    ..
                }
            ),
        },
        rlimits: rlimits(&policy.limits, &memory),
        memory,
        kill_timeout_secs: policy.kill_timeout.value,
        weaker_than_asked: notes,
        not_granted,
        arguments,
        launcher_pid: None,
        launcher_thp_disabled: false,
    })
}

/// The private dirs: on the scratch disk in the server's root, or on the host's disk.
fn private_dir_rules(fs: &mut FsRules, vars: &Vars, constructed_root: bool) {
    let private = [Shown::Bind, Shown::Constructed][usize::from(constructed_root)];
    for (path, reason) in [
        (&vars.private_home, "private home (HOME)"),
        (&vars.private_tmp, "private tmp (TMPDIR)"),
    ] {
        fs.push(path.clone(), FsAccess::ReadWrite, reason, private);
    }
}

/// The paths a command-line argument never grants: airlock's protected paths and the real
/// caches behind the overlays, which are reached only through the private copy (a grant would
/// bypass the copy-on-write view).
fn argument_protected(
    protected: &[(String, PathBuf)],
    cache_overlays: &[CacheOverlayPlan],
) -> Vec<(String, PathBuf)> {
    protected
        .iter()
        .cloned()
        .chain(cache_overlays.iter().map(|overlay| {
            let what = format!(
                "the real {} cache (the server sees its private copy)",
                overlay.name
            );
            (what, overlay.lower.clone())
        }))
        .collect()
}

/// The constructed root's plan: the scratch disk, what no bind may reach (checked again by the
/// helper where each bind resolves), and the grant ledger.
fn root_plan(
    request: &PlanRequest,
    host: &HostFacts,
    protected: &[(String, PathBuf)],
    cgroup_view: bool,
) -> RootPlan {
    let home = request.dirs.home.as_deref();
    let paths = protected.iter().map(|(_, path)| path.clone()).collect();
    let mut root = RootPlan::new(request.sandbox.limits.disk_mb.value, paths, cgroup_view);
    // The home is protected only as a whole (never granted itself); the other protected paths
    // are trees no bind reaches into.
    root.protected_trees = protected
        .iter()
        .filter(|(_, path)| Some(path.as_path()) != home)
        .map(|(_, path)| path.clone())
        .collect();
    root.home = home.map(std::path::Path::to_path_buf);
    // One ledger per uid: a state dir shared between users (tests do this) keeps each user's
    // own, readable and writable by that user alone.
    root.grant_ledger = Some(super::root::grant_ledger_path(
        &request.dirs.state_dir,
        host.uid,
    ));
    root
}

fn namespaces(host: &HostFacts, network: &NetMode, constructed_root: bool) -> Namespaces {
    Namespaces {
        user: host.user_namespaces,
        pid: host.user_namespaces,
        net: host.user_namespaces && *network != NetMode::Host,
        // The constructed root and the cache overlays in it.
        mount: constructed_root,
        // Rooted at the server's memory cgroup, or without one at airlock's own: either way the
        // host's cgroup paths (which name the user's session and slices) are not the server's.
        cgroup: host.user_namespaces,
        ipc: host.user_namespaces,
        uts: host.user_namespaces,
    }
}

/// The program and its arguments, `~` in its own arguments expanded to the user's home.
fn argv(request: &PlanRequest) -> Vec<String> {
    std::iter::once(request.program.to_string_lossy().into_owned())
        .chain(super::arguments::expanded_argv(
            &request.args,
            request.resolved.own_arguments_from,
            request.dirs.home.as_deref(),
        ))
        .collect()
}

/// Paths of the user (not the system's) reach a server that is not airlock's uid through an
/// idmapped bind: airlock's files appear as the server's, so grants work read and write.
fn user_paths_shown(host: &HostFacts, identity: Option<Identity>, constructed_root: bool) -> Shown {
    if constructed_root && host.is_root && identity.is_some() {
        Shown::IdmappedBind
    } else {
        Shown::Bind
    }
}

fn validate(request: &PlanRequest, host: &HostFacts) -> Result<(), PlanError> {
    if !request.program.is_absolute() {
        return Err(PlanError::RelativeProgram(request.program.clone()));
    }
    check_server_name(&request.server)?;
    check_requirements(request, host)
}

/// Who the server runs as: airlock's own uid unless airlock is root, then `run_as`.
fn identity(host: &HostFacts, run_as: RunAs, notes: &mut Vec<String>) -> Option<Identity> {
    if !host.is_root && !matches!(run_as, RunAs::Nobody) {
        notes.push(format!(
            "run_as = {run_as} needs airlock to run as root; runs as airlock's uid {}",
            host.uid
        ));
    }
    match (host.is_root, run_as) {
        (false, _) | (true, RunAs::Root) => None,
        (true, RunAs::Nobody) => Some(Identity {
            uid: NOBODY,
            gid: NOBODY,
        }),
        (true, RunAs::Uid(uid)) => Some(Identity { uid, gid: uid }),
    }
}

/// An allow list needs the private network namespace its resolver lives in: without
/// user namespaces airlock refuses rather than run the server with more network than asked.
fn check_egress(
    request: &PlanRequest,
    host: &HostFacts,
    network: &NetMode,
) -> Result<(), PlanError> {
    let NetMode::Egress(_) = network else {
        return Ok(());
    };
    if !host.user_namespaces {
        return Err(PlanError::Unmet {
            server: request.server.clone(),
            unmet: "a private network namespace for its network allow list".into(),
            have: "no user namespaces".into(),
        });
    }
    if !host.connect_handover {
        return Err(PlanError::Unmet {
            server: request.server.clone(),
            unmet: "the connect hand-over of its network allow list (seccomp user notifications that replace an fd)".into(),
            have: "a kernel older than Linux 5.14".into(),
        });
    }
    Ok(())
}

/// What this host cannot enforce, in the words `check` and `doctor` print.
fn host_notes(
    host: &HostFacts,
    namespaces: &Namespaces,
    network: &NetMode,
    notes: &mut Vec<String>,
) {
    if !namespaces.pid {
        notes.push("no pid namespace (user namespaces unavailable): the kill sequence signals the process group, and a descendant that calls setsid can escape it".to_string());
    }
    if !namespaces.mount {
        notes.push("no mount namespace (user namespaces unavailable): no constructed root; the server sees the host's filesystem through landlock alone, the host's /proc (every process of the host), its home and tmp are on disk, not bounded by disk_mb, and it shares the host's SysV IPC and POSIX message queues".to_string());
    }
    if *network == NetMode::None && !namespaces.net && host.landlock_abi < 4 {
        notes.push("network `none` without a network namespace or landlock TCP rules: only seccomp (UDP) applies".to_string());
    }
    if host.landlock_abi == 0 {
        notes.push("landlock unavailable: no filesystem confinement".to_string());
    } else if host.landlock_abi < 6 {
        notes.push(format!(
            "landlock ABI {} < 6: abstract unix sockets and signals are not scoped (the server can signal its init)",
            host.landlock_abi
        ));
    }
    if !host.seccomp {
        notes.push("seccomp unavailable: no syscall filter".to_string());
    }
    if *network == NetMode::Host {
        notes.push(
            "network = host: pathname unix sockets outside the grants are reachable".to_string(),
        );
    }
}

pub(super) fn check_server_name(name: &str) -> Result<(), PlanError> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    if ok {
        Ok(())
    } else {
        Err(PlanError::BadServerName(name.to_string()))
    }
}

pub(super) fn check_requirements(request: &PlanRequest, host: &HostFacts) -> Result<(), PlanError> {
    let mut unmet = Vec::new();
    for requirement in &request.sandbox.require {
        let req = &requirement.value;
        let met = match req.feature {
            Feature::Landlock => host.landlock_abi >= req.min_version.unwrap_or(1).max(1),
            Feature::Seccomp => host.seccomp,
            Feature::UserNamespaces => host.user_namespaces,
        };
        if !met {
            unmet.push(format!("`{}` ({})", req.text, requirement.origin));
        }
    }
    if unmet.is_empty() {
        return Ok(());
    }
    Err(PlanError::Unmet {
        server: request.server.clone(),
        unmet: unmet.join(", "),
        have: host.short(),
    })
}

pub(super) fn id_maps(host: &HostFacts, identity: Option<Identity>) -> IdMaps {
    if host.is_root {
        // Root may map several ids: itself (so the helper can still chown and set up as root inside)
        // and the target identity it switches to before exec.
        let mut uids = vec![format!("0 0 1")];
        let mut gids = vec![format!("0 0 1")];
        if let Some(id) = identity.filter(|id| id.uid != 0) {
            uids.push(format!("{0} {0} 1", id.uid));
            gids.push(format!("{0} {0} 1", id.gid));
        }
        IdMaps {
            uid_map: uids.join("\n"),
            gid_map: gids.join("\n"),
            deny_setgroups: false,
        }
    } else {
        IdMaps {
            uid_map: format!("{0} {0} 1", host.uid),
            gid_map: format!("{0} {0} 1", host.gid),
            deny_setgroups: true,
        }
    }
}
