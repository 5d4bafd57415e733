//! What the kernel offers: probed once by [`HostFacts::detect`], consumed by the pure planner.

use std::fmt;

use serde::Serialize;

use super::cgroup::{CgroupVersion, MemoryCgroup};

/// Kernel features and airlock's own identity, as far as the sandbox cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostFacts {
    /// Landlock ABI version; 0 when landlock is unavailable.
    pub landlock_abi: u32,
    pub seccomp: bool,
    /// This process can create a user namespace (and with it pid and net namespaces).
    pub user_namespaces: bool,
    /// seccomp user notifications that can put a socket in place of the caller's fd
    /// (`SECCOMP_ADDFD_FLAG_SETFD`, Linux 5.14): egress by name makes every `connect` of the
    /// server through them (`crate::net::handover`).
    pub connect_handover: bool,
    /// `v1`, `v2`, `hybrid` or `none`.
    pub cgroup: String,
    /// Where airlock may create a memory cgroup per server; `None`: `RLIMIT_DATA` instead.
    pub memory_cgroup: Option<MemoryCgroup>,
    pub is_root: bool,
    pub uid: u32,
    pub gid: u32,
    pub arch: String,
}

impl HostFacts {
    /// Probes the running kernel. Creating a user namespace is tried for real in a short-lived
    /// child, because sysctls (Debian's `unprivileged_userns_clone`, Ubuntu's AppArmor
    /// restriction) are not the only thing that can refuse it.
    pub fn detect() -> Self {
        // SAFETY: geteuid/getegid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        HostFacts {
            landlock_abi: landlock_abi(),
            seccomp: seccomp_available(),
            user_namespaces: probe_user_namespace(),
            connect_handover: seccomp_available() && connect_handover_available(),
            cgroup: cgroup_version().to_string(),
            memory_cgroup: super::cgroup::probe(uid == 0),
            is_root: uid == 0,
            uid,
            gid,
            arch: std::env::consts::ARCH.to_string(),
        }
    }

    /// Everything a sandbox could want, for unit tests of the planner.
    pub fn full_featured_root() -> Self {
        HostFacts {
            landlock_abi: 7,
            seccomp: true,
            user_namespaces: true,
            connect_handover: true,
            cgroup: "v2".to_string(),
            memory_cgroup: Some(MemoryCgroup {
                version: CgroupVersion::V2,
                parent: "/sys/fs/cgroup/system.slice".into(),
                bounds_swap: true,
            }),
            is_root: true,
            uid: 0,
            gid: 0,
            arch: "x86_64".to_string(),
        }
    }

    pub fn short(&self) -> String {
        format!(
            "landlock {}, seccomp {}, user namespaces {}",
            if self.landlock_abi == 0 {
                "unavailable".to_string()
            } else {
                format!("ABI {}", self.landlock_abi)
            },
            if self.seccomp { "yes" } else { "no" },
            if self.user_namespaces { "yes" } else { "no" },
        )
    }
}

/// The running kernel's release (`6.18.4-arch1`), from procfs; `None` when it cannot be read.
/// For `airlock check` and `--show-plan`: who owns each idmapped path on disk, so the plan says
/// whose files the server reaches there, and which paths do not exist here (the helper skips
/// them). The helper looks again when it builds the root.
pub fn observe_host(plan: &mut super::SandboxPlan) {
    use std::os::unix::fs::MetadataExt;
    // airlock makes these itself when the server starts (on the host's disk or in the root).
    let made_by_airlock = [plan.private_home.clone(), plan.private_tmp.clone()];
    for rule in &mut plan.fs {
        let meta = std::fs::metadata(&rule.path);
        rule.missing = is_missing(&meta)
            && rule.shown != super::Shown::Constructed
            && !made_by_airlock.contains(&rule.path);
        if rule.shown == super::Shown::IdmappedBind {
            rule.owner = meta.ok().map(|meta| super::Owner {
                uid: meta.uid(),
                gid: meta.gid(),
            });
        }
    }
}

/// The policy's own grants (its `read`/`write` lists, the `--allow-*` flags) that do not exist
/// on this host: the server will not reach them, which a user who asked for them should hear
/// (a directory to create first, a typo), not find out from the server's errors.
pub fn missing_policy_grants(plan: &super::SandboxPlan) -> Vec<&super::FsRule> {
    plan.fs
        .iter()
        .filter(|rule| rule.reason.contains(super::grants::POLICY_GRANT))
        .filter(|rule| is_missing(&std::fs::metadata(&rule.path)))
        .collect()
}

fn is_missing(meta: &std::io::Result<std::fs::Metadata>) -> bool {
    matches!(meta, Err(err) if err.kind() == std::io::ErrorKind::NotFound)
}

pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|text| text.trim().to_string())
}

/// Whether this kernel has `SECCOMP_ADDFD_FLAG_SETFD` (Linux 5.14). Read from the release; a
/// release that does not parse counts as having it (the helper's own attempt then says so, exit
/// 107, rather than refusing a kernel that may well have it).
fn connect_handover_available() -> bool {
    kernel_release().and_then(|release| release_older_than(&release, 5, 14)) != Some(true)
}

/// Whether a kernel release is older than `major.minor`; `None` when it does not parse (then no
/// version advice is given: it could be wrong).
pub fn release_older_than(release: &str, major: u32, minor: u32) -> Option<bool> {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(str::parse::<u32>);
    let have_major = numbers.next()?.ok()?;
    let have_minor = numbers.next()?.ok()?;
    Some((have_major, have_minor) < (major, minor))
}

impl fmt::Display for HostFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "landlock: {}",
            if self.landlock_abi == 0 {
                "unavailable".to_string()
            } else {
                format!("ABI {}", self.landlock_abi)
            }
        )?;
        writeln!(
            f,
            "seccomp: {}",
            if self.seccomp {
                "available"
            } else {
                "unavailable"
            }
        )?;
        writeln!(
            f,
            "user namespaces: {}",
            if self.user_namespaces {
                "available"
            } else {
                "unavailable"
            }
        )?;
        writeln!(
            f,
            "connect hand-over (egress by name): {}",
            if self.connect_handover {
                "available"
            } else {
                "unavailable (needs seccomp user notifications, Linux 5.14)"
            }
        )?;
        writeln!(f, "cgroup: {}", self.cgroup)?;
        match &self.memory_cgroup {
            Some(cgroup) => writeln!(
                f,
                "memory cgroup: {} under {}{}",
                match cgroup.version {
                    CgroupVersion::V1 => "v1",
                    CgroupVersion::V2 => "v2",
                },
                cgroup.parent.display(),
                if cgroup.bounds_swap {
                    ""
                } else {
                    " (swap not bounded)"
                }
            )?,
            None => writeln!(f, "memory cgroup: none airlock may create")?,
        }
        writeln!(f, "arch: {}", self.arch)?;
        write!(
            f,
            "airlock runs as: uid {} gid {}{}",
            self.uid,
            self.gid,
            if self.is_root { " (root)" } else { "" }
        )
    }
}

fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attr and size 0 and the VERSION flag the kernel only returns the ABI
    // number (or an error); no memory is read or written.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(abi).unwrap_or(0)
}

fn seccomp_available() -> bool {
    // SAFETY: PR_GET_SECCOMP takes no pointer arguments.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    mode >= 0 && std::path::Path::new("/proc/sys/kernel/seccomp/actions_avail").exists()
}

fn probe_user_namespace() -> bool {
    // SAFETY: the child only calls async-signal-safe functions (unshare, _exit) before exiting,
    // so forking a possibly multi-threaded process is sound; the parent reaps it with waitpid.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return false;
        }
        if pid == 0 {
            let ok =
                // Not CLONE_NEWNET: creating and tearing down a network namespace costs milliseconds.
                libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) == 0;
            libc::_exit(if ok { 0 } else { 1 });
        }
        let mut status = 0;
        loop {
            let rc = libc::waitpid(pid, &mut status, 0);
            if rc == pid {
                break;
            }
            if rc < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return false;
            }
        }
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }
}

fn cgroup_version() -> &'static str {
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    let Ok(path) = std::ffi::CString::new("/sys/fs/cgroup") else {
        return "none";
    };
    // SAFETY: statfs writes into the zeroed struct we own; the path is a valid C string.
    let magic = unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        if libc::statfs(path.as_ptr(), &mut buf) != 0 {
            return "none";
        }
        buf.f_type as i64
    };
    if magic == CGROUP2_SUPER_MAGIC {
        "v2"
    } else if std::path::Path::new("/sys/fs/cgroup/unified/cgroup.controllers").exists() {
        "hybrid (v1 controllers, v2 unified hierarchy)"
    } else if std::path::Path::new("/sys/fs/cgroup").exists() {
        "v1"
    } else {
        "none"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert_eq!(release_older_than("6.18.44-fc-v769", 6, 6), Some(false));
        assert_eq!(release_older_than("6.6.0", 6, 6), Some(false));
        assert_eq!(release_older_than("6.5.13-arch1", 6, 6), Some(true));
        assert_eq!(release_older_than("5.15.0-91-generic", 6, 6), Some(true));
        assert_eq!(release_older_than("weird", 6, 6), None);
    }
}
