//! The planner's memory mechanism: a cgroup where airlock may make one, else `RLIMIT_DATA` with
//! the shared memory it cannot count refused, and what the plan says about each.

use std::path::Path;

use super::tests::{request, rule, with_read};
use super::*;

#[test]
fn memory_is_a_cgroup_where_airlock_may_make_one_else_rlimit_data_never_rlimit_as() {
    let as_root = plan(
        &request("/usr/bin/node", &[]),
        &HostFacts::full_featured_root(),
    )
    .unwrap();
    assert!(matches!(
        as_root.memory,
        MemoryLimit::Cgroup { bytes, .. } if bytes == 4096 << 20
    ));
    assert!(!as_root.rlimits.iter().any(|l| l.kind == RlimitKind::Data));

    let user = HostFacts {
        is_root: false,
        uid: 1000,
        gid: 1000,
        memory_cgroup: None,
        ..HostFacts::full_featured_root()
    };
    let plan = plan(&with_read("/srv/x"), &user).unwrap();
    assert_eq!(
        plan.memory,
        MemoryLimit::RlimitData {
            bytes: 4096 << 20,
            shared_refused: true
        }
    );
    assert!(plan.seccomp.deny_uncounted_memory);
    assert!(!as_root.seccomp.deny_uncounted_memory, "a cgroup counts it");
    assert!(
        plan.weaker_than_asked
            .iter()
            .any(|note| note.starts_with("memory: ") && note.contains("each process")),
        "{:?}",
        plan.weaker_than_asked
    );
    let no_seccomp = plan_for_user_without_seccomp();
    assert!(!no_seccomp.seccomp.deny_uncounted_memory);
    assert!(no_seccomp.memory.describe().contains("NOT bounded"));
    assert!(
        plan.rlimits
            .iter()
            .any(|l| l.kind == RlimitKind::Data && l.value == 4096 << 20)
    );
    // A cgroup namespace all the same (the host's cgroup paths stay hidden), but no cgroup view.
    assert!(plan.namespaces.cgroup);
    assert!(!plan.root.as_ref().unwrap().cgroup_view);
    assert!(
        !plan
            .fs
            .iter()
            .any(|r| r.path == Path::new("/sys/fs/cgroup"))
    );
    // airlock's own uid: plain binds, and the plan names the uid.
    assert_eq!(rule(&plan, "/srv/x").shown, Shown::Bind);
    assert!(
        plan.to_string()
            .contains("runs as: airlock's own uid 1000, all capabilities dropped"),
        "{plan}"
    );
    assert_eq!(plan.audit_summary().run_as, "airlock's uid 1000");
    assert!(plan.audit_summary().memory.contains("RLIMIT_DATA"));
}

fn plan_for_user_without_seccomp() -> SandboxPlan {
    let host = HostFacts {
        is_root: false,
        uid: 1000,
        gid: 1000,
        memory_cgroup: None,
        seccomp: false,
        ..HostFacts::full_featured_root()
    };
    plan(&with_read("/srv/x"), &host).unwrap()
}

#[test]
fn a_memory_cgroup_that_cannot_bound_swap_says_so() {
    let host = HostFacts {
        memory_cgroup: Some(MemoryCgroup {
            version: CgroupVersion::V1,
            parent: "/sys/fs/cgroup/memory/x".into(),
            bounds_swap: false,
        }),
        ..HostFacts::full_featured_root()
    };
    let plan = plan(&request("/usr/bin/node", &[]), &host).unwrap();
    assert!(
        plan.weaker_than_asked
            .iter()
            .any(|n| n.contains("cannot bound swap")),
        "{:?}",
        plan.weaker_than_asked
    );
    // v1: no cgroup2 view to mount.
    assert!(!plan.root.unwrap().cgroup_view);
}
