//! The seccomp table (data, one comment per entry) and its compilation to BPF.
//!
//! The filter is a deny list over an allowed default: runtimes use hundreds of syscalls across
//! versions, and an allow list that misses one breaks a server in ways nobody can debug. What is
//! denied is what a confined server never needs and an attacker wants. Three BPF programs are
//! installed (one per errno) plus an architecture guard; the kernel runs all of them and the
//! strictest answer wins. A syscall from any other architecture (i386 `int 0x80` from an x86_64
//! process, x32) kills the process.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::SeccompPlan;

/// The answer for a denied syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Deny {
    /// "Operation not permitted": the caller gives up on this feature.
    Perm,
    /// "Function not implemented": the caller falls back (glibc `clone3` -> `clone`, libuv
    /// `io_uring` -> epoll, the new mount API -> nothing).
    NoSys,
    /// "Permission denied": for sockets, what a firewall-less refusal looks like to callers.
    Acces,
}

impl Deny {
    fn errno(self) -> u32 {
        let errno = match self {
            Deny::Perm => libc::EPERM,
            Deny::NoSys => libc::ENOSYS,
            Deny::Acces => libc::EACCES,
        };
        errno as u32
    }
}

/// When a rule applies: always, or when every condition on the arguments holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    /// `arg[index] & mask == value` for each entry (an AND).
    Args(&'static [(u8, u64, u64)]),
}

#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    pub nr: i64,
    pub deny: Deny,
    pub when: When,
    pub why: &'static str,
}

const ALL: u64 = u64::MAX;
const LOW32: u64 = 0xffff_ffff;

macro_rules! entry {
    ($name:ident, $deny:expr, $why:expr) => {
        Entry {
            name: stringify!($name),
            nr: libc::$name,
            deny: $deny,
            when: When::Always,
            why: $why,
        }
    };
    ($name:ident, $deny:expr, $when:expr, $why:expr) => {
        Entry {
            name: stringify!($name),
            nr: libc::$name,
            deny: $deny,
            when: $when,
            why: $why,
        }
    };
}

const CLONE_NS_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// The table: every syscall the sandbox refuses, for both architectures.
pub fn base_table() -> Vec<Entry> {
    use Deny::*;
    let mut table = vec![
        // Reading or steering other processes: the launcher's memory and environment hold secrets.
        entry!(
            SYS_ptrace,
            Perm,
            "debugging another process reads its memory and secrets"
        ),
        entry!(SYS_process_vm_readv, Perm, "reads another process's memory"),
        entry!(
            SYS_process_vm_writev,
            Perm,
            "writes another process's memory"
        ),
        entry!(
            SYS_pidfd_getfd,
            Perm,
            "steals a file descriptor from another process"
        ),
        entry!(SYS_kcmp, Perm, "probes other processes' kernel objects"),
        // Namespaces and mounts: a new user namespace regains capabilities, a mount hides rules.
        entry!(
            SYS_unshare,
            Perm,
            "new namespaces regain capabilities (the kernel's largest attack surface)"
        ),
        entry!(SYS_setns, Perm, "joins another namespace"),
        entry!(
            SYS_mount,
            Perm,
            "mounting over paths changes what the landlock rules see"
        ),
        entry!(SYS_umount2, Perm, "unmounting reveals what a mount hid"),
        entry!(SYS_pivot_root, Perm, "changes the root file system"),
        entry!(SYS_chroot, Perm, "chroot tricks confuse path-based checks"),
        // The new mount API: ENOSYS so tools fall back to mount(2), which is refused above.
        entry!(SYS_open_tree, NoSys, "new mount API"),
        entry!(SYS_move_mount, NoSys, "new mount API"),
        entry!(SYS_fsopen, NoSys, "new mount API"),
        entry!(SYS_fsconfig, NoSys, "new mount API"),
        entry!(SYS_fsmount, NoSys, "new mount API"),
        entry!(SYS_fspick, NoSys, "new mount API"),
        entry!(SYS_mount_setattr, NoSys, "new mount API"),
        // The kernel keyring holds credentials of the user's session (Kerberos, ecryptfs, ...).
        entry!(
            SYS_keyctl,
            Perm,
            "the session keyring holds the user's credentials"
        ),
        entry!(SYS_add_key, Perm, "keyring"),
        entry!(SYS_request_key, Perm, "keyring"),
        // Kernel attack surface no MCP server needs.
        entry!(
            SYS_bpf,
            Perm,
            "eBPF: kernel attack surface, can read kernel memory"
        ),
        entry!(
            SYS_perf_event_open,
            Perm,
            "side channels and kernel attack surface"
        ),
        entry!(
            SYS_userfaultfd,
            Perm,
            "the classic tool for winning kernel race conditions"
        ),
        entry!(
            SYS_fanotify_init,
            Perm,
            "reports other processes' use of the files it marks, the host's shared system files too"
        ),
        entry!(
            SYS_memfd_secret,
            Perm,
            "unevictable memory hidden from the kernel; no memory limit without a cgroup counts it"
        ),
        entry!(SYS_init_module, Perm, "loads kernel code"),
        entry!(SYS_finit_module, Perm, "loads kernel code"),
        entry!(SYS_delete_module, Perm, "unloads kernel code"),
        entry!(SYS_kexec_load, Perm, "replaces the running kernel"),
        entry!(SYS_kexec_file_load, Perm, "replaces the running kernel"),
        entry!(SYS_reboot, Perm, "reboots the machine"),
        // io_uring bypasses seccomp for the operations it performs; libuv falls back to epoll.
        entry!(
            SYS_io_uring_setup,
            NoSys,
            "io_uring operations are invisible to seccomp"
        ),
        entry!(SYS_io_uring_enter, NoSys, "io_uring"),
        entry!(SYS_io_uring_register, NoSys, "io_uring"),
        // clone3 passes flags in memory seccomp cannot read; glibc falls back to clone(2).
        entry!(
            SYS_clone3,
            NoSys,
            "flags in memory: namespace flags would be unfilterable"
        ),
        // Terminal injection: pushes keystrokes into the user's shell.
        entry!(
            SYS_ioctl,
            Perm,
            When::Args(&[(1, LOW32, libc::TIOCSTI)]),
            "TIOCSTI types into the user's terminal"
        ),
        entry!(
            SYS_ioctl,
            Perm,
            When::Args(&[(1, LOW32, libc::TIOCLINUX)]),
            "TIOCLINUX can inject console input"
        ),
        // Personality: READ_IMPLIES_EXEC and ADDR_NO_RANDOMIZE weaken exploit mitigations. Only
        // the query (0xffffffff) and PER_LINUX (0) are allowed, as Docker does.
        Entry {
            name: "SYS_personality",
            nr: libc::SYS_personality,
            deny: Perm,
            when: When::Args(&[]),
            why: "personality changes weaken exploit mitigations",
        },
        // Packet and raw sockets forge traffic and sniff the network.
        entry!(
            SYS_socket,
            Perm,
            When::Args(&[(0, LOW32, libc::AF_PACKET as u64)]),
            "packet sockets sniff and forge traffic"
        ),
        entry!(
            SYS_socket,
            Perm,
            When::Args(&[
                (0, LOW32, libc::AF_INET as u64),
                (1, 0xf, libc::SOCK_RAW as u64)
            ]),
            "raw IPv4 sockets"
        ),
        entry!(
            SYS_socket,
            Perm,
            When::Args(&[
                (0, LOW32, libc::AF_INET6 as u64),
                (1, 0xf, libc::SOCK_RAW as u64)
            ]),
            "raw IPv6 sockets"
        ),
        // Landlock's TCP rules cover IPPROTO_TCP only: an MPTCP socket would connect and bind
        // past them (where the network namespace is the host's, anywhere). EACCES like the other
        // refused sockets (one BPF program per errno, and every program runs on every syscall);
        // runtimes that try MPTCP first (Go) fall back to TCP on any error.
        entry!(
            SYS_socket,
            Acces,
            When::Args(&[
                (0, LOW32, libc::AF_INET as u64),
                (2, LOW32, libc::IPPROTO_MPTCP as u64)
            ]),
            "MPTCP is outside landlock's TCP rules"
        ),
        entry!(
            SYS_socket,
            Acces,
            When::Args(&[
                (0, LOW32, libc::AF_INET6 as u64),
                (2, LOW32, libc::IPPROTO_MPTCP as u64)
            ]),
            "MPTCP is outside landlock's TCP rules"
        ),
        // vsock is not confined by the network namespace: it reaches the hypervisor and other
        // VMs of the host.
        entry!(
            SYS_socket,
            Acces,
            When::Args(&[(0, LOW32, libc::AF_VSOCK as u64)]),
            "vsock reaches the hypervisor, outside the network namespace"
        ),
    ];
    table.extend(set_id_table());
    table.extend(fallocate_mode_table());
    // clone(2) with any namespace flag: the same reason as unshare.
    for flag in CLONE_NS_FLAGS {
        table.push(Entry {
            name: "SYS_clone",
            nr: libc::SYS_clone,
            deny: Perm,
            when: When::Args(clone_flag_cond(flag)),
            why: "clone with a namespace flag regains capabilities",
        });
    }
    table
}

/// Every `fallocate` mode but the plain one (0), one entry per mode bit (rules of one syscall
/// are alternatives). `RLIMIT_FSIZE` (`file_size_mb`) bounds a file's size, and only the plain
/// mode's growth is checked against it: `FALLOC_FL_KEEP_SIZE` takes disk past the end without
/// changing the size, `FALLOC_FL_INSERT_RANGE` grows the size unchecked (ext4 looks at the file
/// system's maximum only), after which a plain `fallocate` inside it takes the disk. One file in a write grant held 200 MiB under a 10 MiB limit each way (found
/// by two reviews). The other modes (punching holes, zeroing, collapsing, unsharing ranges) are
/// optional features callers go without: ENOSYS, what a kernel without `fallocate` answers,
/// rather than an errno of its own (each errno is one more program run on every syscall).
fn fallocate_mode_table() -> Vec<Entry> {
    const WHY: &str = "a mode other than the plain one takes disk the file size limit does not see";
    const MODE_BITS: [&[(u8, u64, u64)]; 8] = [
        &[(1, 0x01, 0x01)],
        &[(1, 0x02, 0x02)],
        &[(1, 0x04, 0x04)],
        &[(1, 0x08, 0x08)],
        &[(1, 0x10, 0x10)],
        &[(1, 0x20, 0x20)],
        &[(1, 0x40, 0x40)],
        &[(1, 0x80, 0x80)],
    ];
    MODE_BITS
        .into_iter()
        .map(|bit| Entry {
            name: "SYS_fallocate",
            nr: libc::SYS_fallocate,
            deny: Deny::NoSys,
            when: When::Args(bit),
            why: WHY,
        })
        .collect()
}

/// `fchmodat2(2)` (Linux 6.6) has the same number on every architecture; the libc crate does not
/// name it for aarch64 yet.
const SYS_FCHMODAT2: i64 = 452;

/// Two entries for a syscall whose argument `$index` is a file mode: one refusing `S_ISUID` in it,
/// one `S_ISGID` (seccomp compares masked values, so each bit is its own rule; rules of one
/// syscall are alternatives).
macro_rules! set_id {
    ($name:expr, $nr:expr, $index:literal, $why:expr) => {
        [
            Entry {
                name: $name,
                nr: $nr,
                deny: Deny::Perm,
                when: When::Args(&[($index, libc::S_ISUID as u64, libc::S_ISUID as u64)]),
                why: $why,
            },
            Entry {
                name: $name,
                nr: $nr,
                deny: Deny::Perm,
                when: When::Args(&[($index, libc::S_ISGID as u64, libc::S_ISGID as u64)]),
                why: $why,
            },
        ]
    };
}

/// Setuid and setgid files. Inside the sandbox every bind is `nosuid`, but a write grant is the
/// host's directory: when airlock is root its binds are idmapped, so a file the server creates
/// there is the grant owner's (root's) on disk, and a setuid copy of any program would be a
/// setuid-root program on the host. For an ordinary user the same would leave programs that run
/// as the user for anyone. No MCP server needs either bit, so every way to set one is refused, for
/// every uid: changing a mode, and creating a file with one. `mkdir` ignores both bits (a
/// directory's setgid bit is inherited, never asked for).
fn set_id_table() -> Vec<Entry> {
    const CHMOD: &str = "a setuid/setgid file in a write grant runs as its owner on the host";
    const CREATE: &str = "creates a setuid/setgid file, which runs as its owner on the host";
    let mut table = Vec::new();
    table.extend(set_id!("SYS_fchmod", libc::SYS_fchmod, 1, CHMOD));
    table.extend(set_id!("SYS_fchmodat", libc::SYS_fchmodat, 2, CHMOD));
    table.extend(set_id!("SYS_fchmodat2", SYS_FCHMODAT2, 2, CHMOD));
    table.extend(set_id!("SYS_openat", libc::SYS_openat, 3, CREATE));
    table.extend(set_id!("SYS_mknodat", libc::SYS_mknodat, 2, CREATE));
    // The syscalls aarch64 never had (it has only the *at forms).
    #[cfg(target_arch = "x86_64")]
    {
        table.extend(set_id!("SYS_chmod", libc::SYS_chmod, 1, CHMOD));
        table.extend(set_id!("SYS_open", libc::SYS_open, 2, CREATE));
        table.extend(set_id!("SYS_creat", libc::SYS_creat, 1, CREATE));
        table.extend(set_id!("SYS_mknod", libc::SYS_mknod, 1, CREATE));
    }
    // openat2 passes its mode in memory seccomp cannot read; callers fall back to openat.
    table.push(entry!(
        SYS_openat2,
        Deny::NoSys,
        "its mode is in memory: a setuid/setgid creation would be unfilterable"
    ));
    table
}

/// Under `RLIMIT_DATA` (no memory cgroup), the memory a process could grow that the limit does
/// not count and no file bounds: shared anonymous mappings (`mmap(-1)` in Python), memfd and SysV
/// shared memory. Node and Python servers use none of them; file-backed shared mappings (SQLite's
/// `-shm`, locale archives) stay allowed, bounded by the scratch disk or the grant's filesystem.
fn uncounted_memory_table() -> Vec<Entry> {
    const SHARED_ANONYMOUS: u64 = (libc::MAP_SHARED | libc::MAP_ANONYMOUS) as u64;
    vec![
        // MAP_SHARED_VALIDATE (0x3) includes MAP_SHARED's bit, so it matches too.
        entry!(
            SYS_mmap,
            Deny::Perm,
            When::Args(&[(3, SHARED_ANONYMOUS, SHARED_ANONYMOUS)]),
            "shared anonymous memory is not counted by RLIMIT_DATA"
        ),
        entry!(
            SYS_memfd_create,
            Deny::Perm,
            "memfd pages are not counted by RLIMIT_DATA"
        ),
        entry!(
            SYS_shmget,
            Deny::Perm,
            "SysV shared memory is not counted by RLIMIT_DATA"
        ),
    ]
}

fn clone_flag_cond(flag: u64) -> &'static [(u8, u64, u64)] {
    // A small fixed set: leaking the slices once keeps `Entry` `Copy` and the table `'static`.
    macro_rules! cond {
        ($f:expr) => {
            &[(0u8, $f as u64, $f as u64)]
        };
    }
    match flag {
        f if f == libc::CLONE_NEWNS as u64 => cond!(libc::CLONE_NEWNS),
        f if f == libc::CLONE_NEWUTS as u64 => cond!(libc::CLONE_NEWUTS),
        f if f == libc::CLONE_NEWIPC as u64 => cond!(libc::CLONE_NEWIPC),
        f if f == libc::CLONE_NEWUSER as u64 => cond!(libc::CLONE_NEWUSER),
        f if f == libc::CLONE_NEWPID as u64 => cond!(libc::CLONE_NEWPID),
        f if f == libc::CLONE_NEWNET as u64 => cond!(libc::CLONE_NEWNET),
        _ => cond!(libc::CLONE_NEWCGROUP),
    }
}

/// The table for one plan: the base plus the network switches.
pub fn table(plan: &SeccompPlan) -> Vec<Entry> {
    let mut table = base_table();
    if plan.deny_unix_sockets {
        // Landlock below ABI 8 cannot refuse connect(2) to a pathname socket (docker.sock, the ssh
        // agent); refusing socket(AF_UNIX) closes it. socketpair(2), which runtimes use, stays.
        table.push(entry!(
            SYS_socket,
            Deny::Acces,
            When::Args(&[(0, LOW32, libc::AF_UNIX as u64)]),
            "unix sockets reach host daemons"
        ));
    }
    if plan.deny_uncounted_memory {
        table.extend(uncounted_memory_table());
    }
    if plan.deny_fast_open {
        // A Fast Open send connects a TCP socket without connect(2), where airlock holds every
        // connection (`crate::net::handover`); on a disconnected host socket it would reach
        // anything in the host's network.
        const FAST_OPEN: u64 = libc::MSG_FASTOPEN as u64;
        let why = "a Fast Open send connects without connect(2)";
        table.push(entry!(
            SYS_sendto,
            Deny::Acces,
            When::Args(&[(3, FAST_OPEN, FAST_OPEN)]),
            why
        ));
        table.push(entry!(
            SYS_sendmsg,
            Deny::Acces,
            When::Args(&[(2, FAST_OPEN, FAST_OPEN)]),
            why
        ));
        table.push(entry!(
            SYS_sendmmsg,
            Deny::Acces,
            When::Args(&[(3, FAST_OPEN, FAST_OPEN)]),
            why
        ));
    }
    if plan.deny_listen {
        table.push(entry!(
            SYS_listen,
            Deny::Acces,
            "a socket of the host's network handed to the server must not listen there"
        ));
    }
    if plan.deny_udp {
        // Landlock has TCP rules only; UDP would reach any host and port.
        table.push(entry!(
            SYS_socket,
            Deny::Acces,
            When::Args(&[
                (0, LOW32, libc::AF_INET as u64),
                (1, 0xf, libc::SOCK_DGRAM as u64)
            ]),
            "UDP is outside landlock's TCP rules"
        ));
        table.push(entry!(
            SYS_socket,
            Deny::Acces,
            When::Args(&[
                (0, LOW32, libc::AF_INET6 as u64),
                (1, 0xf, libc::SOCK_DGRAM as u64)
            ]),
            "UDP is outside landlock's TCP rules"
        ));
    }
    table
}

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("unsupported architecture {0}: seccomp filters exist for x86_64 and aarch64 only")]
    Arch(String),
    #[error("building the seccomp filter for {name}: {source}")]
    Build {
        name: &'static str,
        source: seccompiler::BackendError,
    },
}

fn target_arch() -> Result<TargetArch, SeccompError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(TargetArch::x86_64),
        "aarch64" => Ok(TargetArch::aarch64),
        other => Err(SeccompError::Arch(other.to_string())),
    }
}

fn condition(
    index: u8,
    mask: u64,
    value: u64,
    name: &'static str,
) -> Result<SeccompCondition, SeccompError> {
    let op = if mask == ALL || mask == LOW32 {
        SeccompCmpOp::Eq
    } else {
        SeccompCmpOp::MaskedEq(mask)
    };
    // Flags, families and ioctl requests are C ints: compare the low 32 bits only, so a caller
    // cannot dodge a rule by setting garbage in the upper half.
    let len = if mask == ALL {
        SeccompCmpArgLen::Qword
    } else {
        SeccompCmpArgLen::Dword
    };
    SeccompCondition::new(index, len, op, value)
        .map_err(|source| SeccompError::Build { name, source })
}

fn rules_for(entry: &Entry) -> Result<Vec<SeccompRule>, SeccompError> {
    let build = |conds: Vec<SeccompCondition>| {
        SeccompRule::new(conds).map_err(|source| SeccompError::Build {
            name: entry.name,
            source,
        })
    };
    match entry.when {
        When::Always => Ok(Vec::new()),
        When::Args([]) if entry.nr == libc::SYS_personality => {
            // personality(persona): deny unless persona is 0 (PER_LINUX) or 0xffffffff (query).
            let ne = |value| {
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value).map_err(
                    |source| SeccompError::Build {
                        name: entry.name,
                        source,
                    },
                )
            };
            Ok(vec![build(vec![ne(0)?, ne(0xffff_ffff)?])?])
        }
        When::Args(conds) => {
            let conds = conds
                .iter()
                .map(|&(i, m, v)| condition(i, m, v, entry.name))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(vec![build(conds)?])
        }
    }
}

/// Compiles the table into BPF programs, one per errno, plus the x32 guard. Built before the
/// point of no return; installing them is [`install`].
pub fn compile(plan: &SeccompPlan) -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = target_arch()?;
    // `None` = unconditional for that syscall (an empty seccompiler chain means "always").
    let mut by_errno: BTreeMap<Deny, BTreeMap<i64, Option<Vec<SeccompRule>>>> = BTreeMap::new();
    for entry in table(plan) {
        let rules = rules_for(&entry)?;
        let slot = by_errno
            .entry(entry.deny)
            .or_default()
            .entry(entry.nr)
            .or_insert_with(|| Some(Vec::new()));
        match (slot.as_mut(), rules.is_empty()) {
            (_, true) => *slot = None,
            (Some(chain), false) => chain.extend(rules),
            (None, false) => {}
        }
    }
    let mut programs = Vec::new();
    for (deny, rules) in by_errno {
        let rules: BTreeMap<i64, Vec<SeccompRule>> = rules
            .into_iter()
            .map(|(nr, chain)| (nr, chain.unwrap_or_default()))
            .collect();
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(deny.errno()),
            arch,
        )
        .map_err(|source| SeccompError::Build {
            name: "filter",
            source,
        })?;
        let program = BpfProgram::try_from(filter).map_err(|source| SeccompError::Build {
            name: "filter",
            source,
        })?;
        programs.push(program);
    }
    if arch == TargetArch::x86_64 {
        programs.push(x32_guard());
    }
    Ok(programs)
}

/// x32 syscalls run with the x86_64 audit arch but numbers with bit 30 set; they would bypass the
/// tables above (which match x86_64 numbers). Kill them.
fn x32_guard() -> BpfProgram {
    use seccompiler::sock_filter;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const LD_W_ABS: u16 = 0x20;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    vec![
        // A = seccomp_data.nr (offset 0)
        sock_filter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_KILL_PROCESS,
        },
        sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ]
}

/// Installs the programs. Requires `no_new_privs` (set just before).
pub fn install(programs: &[BpfProgram]) -> Result<(), seccompiler::Error> {
    for program in programs {
        seccompiler::apply_filter(program)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> SeccompPlan {
        SeccompPlan {
            enabled: true,
            deny_unix_sockets: true,
            deny_udp: true,
            deny_uncounted_memory: true,
            deny_fast_open: true,
            deny_listen: true,
        }
    }

    #[test]
    fn every_entry_says_why() {
        for entry in table(&full()) {
            assert!(!entry.why.is_empty(), "{} has no reason", entry.name);
        }
    }

    #[test]
    fn table_covers_the_issue_list() {
        let names: Vec<&str> = table(&full()).iter().map(|e| e.name).collect();
        for needed in [
            "SYS_ptrace",
            "SYS_process_vm_readv",
            "SYS_unshare",
            "SYS_setns",
            "SYS_mount",
            "SYS_keyctl",
            "SYS_bpf",
            "SYS_perf_event_open",
            "SYS_userfaultfd",
            "SYS_fanotify_init",
            "SYS_memfd_secret",
            "SYS_kexec_load",
            "SYS_reboot",
            "SYS_personality",
            "SYS_clone3",
            "SYS_io_uring_setup",
            "SYS_fsopen",
            "SYS_ioctl",
            "SYS_socket",
            "SYS_clone",
            "SYS_fchmod",
            "SYS_fchmodat",
            "SYS_fchmodat2",
            "SYS_openat",
            "SYS_openat2",
            "SYS_mknodat",
        ] {
            assert!(names.contains(&needed), "missing {needed}");
        }
    }

    #[test]
    fn network_switches_change_the_table() {
        let open = SeccompPlan {
            enabled: true,
            deny_unix_sockets: false,
            deny_udp: false,
            deny_uncounted_memory: false,
            deny_fast_open: false,
            deny_listen: false,
        };
        assert!(table(&full()).len() > table(&open).len());
        let egress = SeccompPlan {
            deny_fast_open: true,
            deny_listen: true,
            ..open
        };
        let added: Vec<&str> = table(&egress)[table(&open).len()..]
            .iter()
            .map(|entry| entry.name)
            .collect();
        assert_eq!(
            added,
            ["SYS_sendto", "SYS_sendmsg", "SYS_sendmmsg", "SYS_listen"]
        );
    }

    #[test]
    fn compiles() {
        let programs = compile(&full()).expect("compiles");
        assert!(programs.len() >= 3);
    }
}
