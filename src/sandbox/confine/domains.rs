//! The landlock layers: the server's domain (filesystem, TCP, scopes; exactly the plan's rules)
//! and init's outer domain (scopes, and moving files anywhere: see [`init_ruleset`]), which the
//! server's nests inside. A scoped domain may
//! signal (and reach abstract unix sockets of) its own and nested domains only, so the server
//! cannot signal init, and nothing in the sandbox can signal the helper or the host.

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{Step, fail};
use crate::sandbox::{FsAccess, SandboxPlan, Shown};

fn abi(plan: &SandboxPlan) -> ABI {
    ABI::from(plan.landlock.abi.min(8) as i32)
}

/// The server's ruleset with every rule on a host path (opened now, before the clone). Rules on
/// paths that exist only in the constructed root are added by [`add_constructed`] once it exists.
pub(super) fn server_ruleset(plan: &SandboxPlan) -> RulesetCreated {
    // The ABI the host reported, as a hard requirement: the kernel enforces exactly what the plan
    // (and `airlock check`) promised, or the helper stops.
    let abi = abi(plan);
    let fail_ll = |what: &str, err: &dyn std::fmt::Display| -> ! {
        fail(Step::Prepare, format!("landlock {what}: {err}"))
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .unwrap_or_else(|e| fail_ll("handle fs", &e));
    if plan.landlock.net_rules {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .unwrap_or_else(|e| fail_ll("handle net", &e));
    }
    if plan.landlock.scopes {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .unwrap_or_else(|e| fail_ll("scope", &e));
    }
    let mut created = ruleset.create().unwrap_or_else(|e| fail_ll("create", &e));
    for rule in plan
        .fs
        .iter()
        .filter(|rule| rule.shown != Shown::Constructed)
    {
        let fd = match PathFd::new(&rule.path) {
            Ok(fd) => fd,
            // Missing optional paths (`/lib32`, a cache the user never filled) are simply absent.
            Err(_) if !rule.path.exists() => continue,
            Err(err) => fail_ll(&format!("open {}", rule.path.display()), &err),
        };
        let mut access = match rule.access {
            FsAccess::ReadExec => AccessFs::from_read(abi),
            FsAccess::ReadWrite => AccessFs::from_all(abi),
        };
        if !rule.path.is_dir() {
            access &= AccessFs::from_file(abi);
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .unwrap_or_else(|e| fail_ll(&format!("rule for {}", rule.path.display()), &e));
    }
    if let (true, Some(ports)) = (plan.landlock.net_rules, plan.network.connect_ports()) {
        for port in ports {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .unwrap_or_else(|e| fail_ll(&format!("rule for port {port}"), &e));
        }
    }
    created
}

/// In init, inside the built root: the rules on what exists only there (the private home and tmp
/// on the scratch disk, the server's `/proc`, its cgroup), opened now by path, plus `extra`
/// (overlays mounted over real cache paths: read-write on the mounted overlay's root only).
pub(super) fn add_constructed(
    plan: &SandboxPlan,
    ruleset: RulesetCreated,
    extra: Vec<(PathBuf, OwnedFd)>,
) -> RulesetCreated {
    let abi = abi(plan);
    let mut ruleset = ruleset;
    let constructed = plan
        .fs
        .iter()
        .filter(|rule| rule.shown == Shown::Constructed);
    for rule in constructed {
        let fd = PathFd::new(&rule.path).unwrap_or_else(|err| {
            fail(
                Step::Landlock,
                format!(
                    "opening {} in the server's root: {err}",
                    rule.path.display()
                ),
            )
        });
        let mut access = match rule.access {
            FsAccess::ReadExec => AccessFs::from_read(abi),
            FsAccess::ReadWrite => AccessFs::from_all(abi),
        };
        // A generated file (`/etc/hosts`): a file's rights only, as for the host's files above.
        if !rule.path.is_dir() {
            access &= AccessFs::from_file(abi);
        }
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .unwrap_or_else(|err| {
                fail(
                    Step::Landlock,
                    format!("rule for {}: {err}", rule.path.display()),
                )
            });
    }
    // A working directory that only leads to grants: listed, nothing more (see
    // `SandboxPlan::cwd_leading_to_grants`). Missing in the root: init starts the server in its
    // private home instead.
    if let Some(cwd) = plan.cwd_leading_to_grants()
        && let Ok(fd) = PathFd::new(cwd)
    {
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, AccessFs::ReadDir))
            .unwrap_or_else(|err| {
                fail(
                    Step::Landlock,
                    format!("rule for the working directory {}: {err}", cwd.display()),
                )
            });
    }
    for (path, fd) in extra {
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
            .unwrap_or_else(|err| {
                fail(
                    Step::Overlay,
                    format!("landlock rule for the overlay at {}: {err}", path.display()),
                )
            });
    }
    ruleset
}

/// Applies a ruleset to the calling process; the kernel must report it fully enforced.
pub(super) fn restrict(ruleset: RulesetCreated) {
    match ruleset.restrict_self() {
        Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => {}
        Ok(status) => fail(
            Step::Landlock,
            format!("not fully enforced: {:?}", status.ruleset),
        ),
        Err(err) => fail(Step::Landlock, err),
    }
}

/// init's own domain: scopes, and the one filesystem right no domain may leave unhandled.
/// Built before the clone like the server's; [`allow_reparenting`] adds its rule once the
/// server's root exists.
///
/// Landlock denies `REFER` (moving or linking a file into another directory) in every domain
/// that does not grant it by a rule, even one that does not handle it: a scopes-only outer domain
/// would make every cross-directory `rename(2)` of the nested server fail with `EXDEV`, inside
/// its own write grants too. So init's domain handles `REFER` and grants it on the whole root;
/// the server's domain alone decides where it may move files.
pub(super) fn init_ruleset(plan: &SandboxPlan) -> Option<RulesetCreated> {
    if !plan.landlock.scopes {
        return None;
    }
    let abi = abi(plan);
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(refer(abi))
        .and_then(|ruleset| ruleset.scope(Scope::from_all(abi)))
        .and_then(|ruleset| ruleset.create())
        .unwrap_or_else(|err| fail(Step::Prepare, format!("landlock init domain: {err}")));
    Some(created)
}

/// `REFER` where the ABI has it (2 and later), else nothing.
fn refer(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(abi) & BitFlags::from_flag(AccessFs::Refer)
}

/// The rule of init's domain: `REFER` beneath `/` (the server's root, once entered).
pub(super) fn allow_reparenting(plan: &SandboxPlan, outer: RulesetCreated) -> RulesetCreated {
    let access = refer(abi(plan));
    if access.is_empty() {
        return outer;
    }
    let root = PathFd::new("/").unwrap_or_else(|err| {
        fail(
            Step::Landlock,
            format!("opening / for init's domain: {err}"),
        )
    });
    outer
        .add_rule(PathBeneath::new(root, access))
        .unwrap_or_else(|err| fail(Step::Landlock, format!("init's rule on /: {err}")))
}
