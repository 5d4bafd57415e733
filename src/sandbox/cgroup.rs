//! Memory cgroups airlock may create for a server: probed once (see [`probe`]), named in the plan
//! by [`MemoryCgroup`], created per server by the confine helper (`confine/cgroup.rs`).
//!
//! Which one, in order: a cgroup v2 parent with the memory controller enabled for its children
//! that airlock may write (root, or a user slice delegated by systemd); the v1 memory controller
//! when airlock is root (v1 and hybrid hosts: v1 has no safe delegation to users). Otherwise there
//! is none, and the planner falls back to `RLIMIT_DATA`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Where each server's own memory cgroup goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCgroup {
    pub version: CgroupVersion,
    /// The cgroup directory under which the helper makes `airlock-<server>-<helper pid>`.
    pub parent: PathBuf,
    /// Swap can be bounded too (v2 `memory.swap.max`, v1 `memory.memsw.limit_in_bytes`).
    pub bounds_swap: bool,
}

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The name of each instance's cgroup starts with this.
pub const INSTANCE_PREFIX: &str = "airlock-";

/// The memory cgroup of one instance: `parent/airlock-<server>-<helper pid>` (made and removed by
/// the confine helper; by airlock when the helper was killed).
pub fn instance_dir(cgroup: &MemoryCgroup, server: &str, helper_pid: u32) -> PathBuf {
    cgroup
        .parent
        .join(format!("{INSTANCE_PREFIX}{server}-{helper_pid}"))
}

/// Looks at this process's cgroups and what it may write. Cheap: a few `stat`/`access` calls.
pub fn probe(is_root: bool) -> Option<MemoryCgroup> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = OwnCgroups::parse(&own);
    if let (Some(mount), Some(path)) = (v2_mount(), &own.v2) {
        let found = v2_parent(path, |dir| {
            let dir = join_cgroup(&mount, dir);
            let subtree = std::fs::read_to_string(dir.join("cgroup.subtree_control"));
            let memory = subtree.is_ok_and(|text| text.split_whitespace().any(|c| c == "memory"));
            memory && writable(&dir) && writable(&dir.join("cgroup.procs"))
        });
        if let Some(parent) = found {
            let parent = join_cgroup(&mount, &parent);
            // The parent's own `memory.swap.max` shows swap accounting is there (the root
            // cgroup has none: then swap is reported as not bounded, to be safe).
            let bounds_swap = !host_has_swap() || parent.join("memory.swap.max").is_file();
            return Some(MemoryCgroup {
                version: CgroupVersion::V2,
                parent,
                bounds_swap,
            });
        }
    }
    let v1 = own.v1_memory.as_ref().filter(|_| is_root)?;
    let parent = join_cgroup(Path::new("/sys/fs/cgroup/memory"), v1);
    if !parent.join("memory.limit_in_bytes").is_file() || !writable(&parent) {
        return None;
    }
    Some(MemoryCgroup {
        version: CgroupVersion::V1,
        bounds_swap: !host_has_swap() || parent.join("memory.memsw.limit_in_bytes").is_file(),
        parent,
    })
}

/// This process's cgroup paths, from `/proc/self/cgroup`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OwnCgroups {
    /// The unified hierarchy's path (`0::/path`).
    pub v2: Option<PathBuf>,
    /// The v1 memory controller's path (`N:memory:/path`, or `memory` among several).
    pub v1_memory: Option<PathBuf>,
}

impl OwnCgroups {
    pub fn parse(text: &str) -> Self {
        let mut out = OwnCgroups::default();
        for line in text.lines() {
            let mut fields = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if id == "0" && controllers.is_empty() {
                out.v2 = Some(PathBuf::from(path));
            } else if controllers.split(',').any(|c| c == "memory") {
                out.v1_memory = Some(PathBuf::from(path));
            }
        }
        out
    }
}

/// The nearest ancestor of `own` (never `own` itself, unless it is the root: a cgroup v2 with
/// processes in it cannot give its children controllers) that has the memory controller enabled
/// for its children and that airlock may write. `usable` is the effectful check.
pub fn v2_parent(own: &Path, usable: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let mut candidate = match own.parent() {
        Some(parent) => parent,
        None => own,
    };
    loop {
        if usable(candidate) {
            return Some(candidate.to_path_buf());
        }
        candidate = candidate.parent()?;
    }
}

fn join_cgroup(mount: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix("/") {
        Ok(relative) => mount.join(relative),
        Err(_) => mount.join(path),
    }
}

fn v2_mount() -> Option<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| filesystem_magic(path) == Some(CGROUP2_SUPER_MAGIC))
}

fn filesystem_magic(path: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statfs is a valid value for statfs to overwrite; the path is a valid C
    // string.
    unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        (libc::statfs(path.as_ptr(), &mut buf) == 0).then_some(buf.f_type as i64)
    }
}

fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access reads a valid C string.
    unsafe { libc::access(path.as_ptr(), libc::W_OK) == 0 }
}

/// Any active swap device or file (`/proc/swaps` has more than its header line).
pub fn host_has_swap() -> bool {
    std::fs::read_to_string("/proc/swaps").is_ok_and(|text| text.lines().count() > 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cgroups_are_read_from_proc_self_cgroup() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n";
        assert_eq!(
            OwnCgroups::parse(hybrid),
            OwnCgroups {
                v2: Some(PathBuf::from("/")),
                v1_memory: Some(PathBuf::from("/process_api/abc")),
            }
        );
        let unified = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope\n";
        let own = OwnCgroups::parse(unified);
        assert_eq!(own.v1_memory, None);
        assert_eq!(
            own.v2.as_deref(),
            Some(Path::new(
                "/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope"
            ))
        );
        let several = "5:cpu,memory:/a\n";
        assert_eq!(
            OwnCgroups::parse(several).v1_memory,
            Some(PathBuf::from("/a"))
        );
    }

    #[test]
    fn v2_parent_is_the_nearest_usable_ancestor_never_our_own_leaf() {
        let own = Path::new("/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope");
        // Delegated: user@1000.service and below are the user's.
        let delegated =
            |dir: &Path| dir.starts_with("/user.slice/user-1000.slice/user@1000.service");
        assert_eq!(
            v2_parent(own, delegated),
            Some(PathBuf::from(
                "/user.slice/user-1000.slice/user@1000.service/app.slice"
            ))
        );
        assert_eq!(
            v2_parent(own, |dir: &Path| dir == Path::new("/")),
            Some(PathBuf::from("/"))
        );
        assert_eq!(v2_parent(own, |_: &Path| false), None);
        // Already at the root: the root itself (it may have processes and controllers).
        assert_eq!(
            v2_parent(Path::new("/"), |_: &Path| true),
            Some(PathBuf::from("/"))
        );
    }
}
