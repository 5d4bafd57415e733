//! Resource limits: the memory mechanism (a cgroup of the server's own where airlock may make one,
//! else `RLIMIT_DATA`) and the rlimits.

use super::{HostFacts, MemoryLimit, Rlimit, RlimitKind};
use crate::policy::Limits;

fn mib(value: u64) -> u64 {
    value.saturating_mul(1024 * 1024)
}

/// `memory_mb` as the host can enforce it. Never `RLIMIT_AS`: V8 reserves far more address
/// space than it uses (a Node server needs 768+ MiB of it to start).
pub(super) fn memory_limit(
    memory_mb: u64,
    host: &HostFacts,
    notes: &mut Vec<String>,
) -> MemoryLimit {
    let bytes = mib(memory_mb);
    match &host.memory_cgroup {
        Some(cgroup) => {
            if !cgroup.bounds_swap {
                notes.push(format!(
                    "memory: the cgroup under {} cannot bound swap (no swap accounting): memory_mb bounds resident memory only, the server may swap beyond it",
                    cgroup.parent.display()
                ));
            }
            MemoryLimit::Cgroup {
                cgroup: cgroup.clone(),
                bytes,
            }
        }
        None => {
            let shared_refused = host.seccomp;
            notes.push(format!(
                "memory: no memory cgroup airlock may create: RLIMIT_DATA bounds the private memory of each process (up to `processes` of them, each its own {} MiB), not the server as a whole; its scratch disk (tmpfs, up to disk_mb) and kernel memory it makes the kernel hold (socket and pipe buffers) are not counted; shared anonymous memory, memfd and SysV shm {}",
                memory_mb,
                if shared_refused {
                    "are refused (seccomp)"
                } else {
                    "are NOT bounded (no seccomp)"
                }
            ));
            MemoryLimit::RlimitData {
                bytes,
                shared_refused,
            }
        }
    }
}

pub(super) fn rlimits(limits: &Limits, memory: &MemoryLimit) -> Vec<Rlimit> {
    let mut out = vec![
        Rlimit {
            kind: RlimitKind::Processes,
            value: limits.processes.value,
        },
        Rlimit {
            kind: RlimitKind::OpenFiles,
            value: limits.open_files.value,
        },
        Rlimit {
            kind: RlimitKind::FileSize,
            value: mib(limits.file_size_mb.value),
        },
        Rlimit {
            kind: RlimitKind::Core,
            value: 0,
        },
    ];
    if let MemoryLimit::RlimitData { bytes, .. } = memory {
        out.push(Rlimit {
            kind: RlimitKind::Data,
            value: *bytes,
        });
    }
    if let Some(cpu) = &limits.cpu_seconds {
        out.push(Rlimit {
            kind: RlimitKind::Cpu,
            value: cpu.value,
        });
    }
    out
}
