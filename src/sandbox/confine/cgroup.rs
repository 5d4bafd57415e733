//! The server's own memory cgroup ([`crate::sandbox::MemoryLimit::Cgroup`]): created by the helper
//! before the clone (limits written, so a failure starts nothing), init moved into it right after
//! the clone (before it is released, so every process of the sandbox is born inside), removed by
//! the supervisor when init is gone. A cgroup left by a helper that was SIGKILLed is swept at the
//! next start under the same parent (`rmdir` only removes empty cgroups, so a live one is safe).

use std::path::{Path, PathBuf};

use super::{Step, fail};
use crate::sandbox::cgroup::{INSTANCE_PREFIX, instance_dir};
use crate::sandbox::{CgroupVersion, MemoryCgroup};

/// The cgroup of this instance; removed by [`Lease::finish`].
pub(super) struct Lease {
    dir: PathBuf,
}

fn write(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value)
}

/// Makes `parent/airlock-<server>-<helper pid>` with the memory limit (and no swap where swap is
/// accounted).
pub(super) fn create(cgroup: &MemoryCgroup, server: &str, bytes: u64) -> Lease {
    sweep(&cgroup.parent);
    let dir = instance_dir(cgroup, server, std::process::id());
    // A leftover with our pid (an earlier helper that had it) is empty: reuse it.
    if let Err(err) = std::fs::create_dir(&dir)
        && err.kind() != std::io::ErrorKind::AlreadyExists
    {
        fail(
            Step::Memory,
            format!("creating the memory cgroup {}: {err}", dir.display()),
        );
    }
    let lease = Lease { dir };
    let limits = match cgroup.version {
        CgroupVersion::V2 => [("memory.max", bytes), ("memory.swap.max", 0)],
        // memsw is memory + swap, so equal limits mean no swap.
        CgroupVersion::V1 => [
            ("memory.limit_in_bytes", bytes),
            ("memory.memsw.limit_in_bytes", bytes),
        ],
    };
    for (index, (file, value)) in limits.into_iter().enumerate() {
        // The swap file is optional (no swap accounting): the plan says so when swap exists.
        if index == 1 && !lease.dir.join(file).exists() {
            continue;
        }
        if let Err(err) = write(&lease.dir, file, &value.to_string()) {
            lease.remove();
            fail(
                Step::Memory,
                format!(
                    "writing {value} to {}/{file}: {err}",
                    cgroup.parent.display()
                ),
            );
        }
    }
    lease
}

impl Lease {
    /// Moves `pid` (init, not yet released) into the cgroup.
    pub(super) fn add(&self, pid: libc::pid_t) {
        if let Err(err) = write(&self.dir, "cgroup.procs", &pid.to_string()) {
            self.remove();
            fail(
                Step::Memory,
                format!("moving the sandbox into {}: {err}", self.dir.display()),
            );
        }
    }

    /// Once init is gone: the cgroup is empty (or about to be: exiting processes leave it
    /// asynchronously), remove it.
    pub(super) fn finish(self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        eprintln!(
            "airlock-confine: note: the memory cgroup {} is still busy; it is removed at the next start",
            self.dir.display()
        );
    }

    fn remove(&self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Removes the cgroups of helpers that are gone. Best effort.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|name| name.starts_with(INSTANCE_PREFIX))
            .and_then(|name| name.rsplit('-').next())
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only checks that the process exists; no pointers.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
        if !alive {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}
