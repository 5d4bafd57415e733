//! Credentials and limits of init: rlimits (set inside the user namespace, so RLIMIT_NPROC counts
//! the sandbox's processes only), the capability sets, and leaving root.

use super::{Step, check, fail};
use crate::sandbox::{RlimitKind, SandboxPlan};

fn rlimit_resource(kind: RlimitKind) -> libc::__rlimit_resource_t {
    match kind {
        RlimitKind::Processes => libc::RLIMIT_NPROC,
        RlimitKind::Data => libc::RLIMIT_DATA,
        RlimitKind::OpenFiles => libc::RLIMIT_NOFILE,
        RlimitKind::FileSize => libc::RLIMIT_FSIZE,
        RlimitKind::Core => libc::RLIMIT_CORE,
        RlimitKind::Cpu => libc::RLIMIT_CPU,
    }
}

pub(super) fn apply_rlimits(plan: &SandboxPlan) {
    for limit in &plan.rlimits {
        let value = limit.value as libc::rlim_t;
        let rlim = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct we own.
        let rc = unsafe { libc::setrlimit(rlimit_resource(limit.kind), &rlim) };
        check(
            Step::Rlimits,
            &format!("setrlimit({}, {value})", limit.kind.name()),
            rc.into(),
        );
    }
}

pub(super) fn drop_capabilities_keep_setid() {
    use caps::CapSet;
    // Without CAP_SETPCAP (airlock unprivileged, no user namespace) the bounding set cannot be
    // changed, and there is nothing in it to gain: no_new_privs blocks file capabilities.
    let can_drop_bounding =
        caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false);
    for cap in caps::all().into_iter().filter(|_| can_drop_bounding) {
        if let Err(err) = caps::drop(None, CapSet::Bounding, cap) {
            fail(
                Step::Capabilities,
                format!("dropping {cap} from the bounding set: {err}"),
            );
        }
    }
    for set in [CapSet::Ambient, CapSet::Inheritable] {
        if let Err(err) = caps::clear(None, set) {
            fail(Step::Capabilities, format!("clearing {set:?}: {err}"));
        }
    }
}

pub(super) fn clear_capabilities() {
    use caps::CapSet;
    for set in [CapSet::Effective, CapSet::Permitted] {
        if let Err(err) = caps::clear(None, set) {
            fail(Step::Capabilities, format!("clearing {set:?}: {err}"));
        }
    }
    match caps::read(None, CapSet::Permitted) {
        Ok(left) if left.is_empty() => {}
        Ok(left) => fail(
            Step::Capabilities,
            format!("capabilities left after dropping: {left:?}"),
        ),
        Err(err) => fail(Step::Capabilities, format!("reading capabilities: {err}")),
    }
}

pub(super) fn leave_root(plan: &SandboxPlan) {
    let Some(id) = plan.identity else { return };
    // SAFETY: plain id syscalls with integer arguments; setgroups(0, NULL) clears the list.
    unsafe {
        check(
            Step::Identity,
            "setgroups([])",
            libc::setgroups(0, std::ptr::null()).into(),
        );
        check(
            Step::Identity,
            "setresgid",
            libc::setresgid(id.gid, id.gid, id.gid).into(),
        );
        check(
            Step::Identity,
            "setresuid",
            libc::setresuid(id.uid, id.uid, id.uid).into(),
        );
        if libc::getuid() != id.uid || libc::geteuid() != id.uid || libc::getegid() != id.gid {
            fail(Step::Identity, "the uid/gid did not change");
        }
    }
}
