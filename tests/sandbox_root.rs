//! End to end: the server sees only what it was given (its own root, its own /proc, bounded memory
//! and disk, no signals outside itself, no metadata changes outside its write grants), with the
//! real `airlock` binary and the hostile fixture (tests/fixtures/sandbox/hostile.c). Every case
//! runs as root (when the tests run as root: the server is then nobody) AND as an ordinary user
//! (uid 65533 via setpriv; or the test's own uid when the tests do not run as root).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sandbox_support::*;

#[path = "sandbox_root/kernel_views.rs"]
mod kernel_views;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn no_host_process_is_visible_or_reachable_by_any_pid() {
    let mut host_process = Command::new("sleep").arg("30").spawn().unwrap();
    let host_pid = host_process.id().to_string();
    let me = std::process::id().to_string();
    for who in everyone() {
        let out = who.hostile(&[], &["ps"]);
        let listed: Vec<(String, String)> = stdout(&out)
            .lines()
            .filter_map(|line| line.strip_prefix("PID "))
            .map(|rest| {
                let (pid, cmd) = rest.split_once(' ').unwrap_or((rest, ""));
                (pid.to_string(), cmd.to_string())
            })
            .collect();
        assert!(!listed.is_empty(), "{who:?}: {}", text(&out));
        for (pid, cmd) in &listed {
            assert!(
                cmd.starts_with(world().hostile.to_str().unwrap()),
                "{who:?}: process {pid} ({cmd}) is not the server's own\n{}",
                text(&out)
            );
        }
        // Guessing host pids: neither signal 0 nor /proc reaches them.
        for guess in [&host_pid, &me] {
            let out = who.hostile(&[], &["guess", guess]);
            assert_refused(&out);
            assert!(
                stdout(&out).contains(&format!("REFUSED kill({guess}, 0)")),
                "{who:?}: {}",
                text(&out)
            );
        }
    }
    host_process.kill().unwrap();
    let _ = host_process.wait();
}

#[test]
fn a_host_path_outside_the_grants_does_not_exist_for_the_server() {
    // Readable by everyone on the host; none is granted: in the constructed root they are not
    // denied, they are absent.
    let secret = world().secret.display().to_string();
    for who in everyone() {
        for path in [secret.as_str(), "/root/.bashrc", "/var/log/dpkg.log"] {
            if !Path::new(path).exists() {
                continue;
            }
            let out = who.hostile(&[], &["read", path]);
            assert_refused(&out);
            assert!(
                stdout(&out).contains(&format!("REFUSED {path}: No such file or directory")),
                "{who:?}: {path} must not exist for the server\n{}",
                text(&out)
            );
        }
    }
}

/// The host's `/etc/hosts` names machines of the user's network. A server with a network of its
/// own (none, or egress by name) reads its own instead, naming only its loopback and its host
/// name; with the host's network, or a grant naming the file (or a link to it), it reads the
/// host's.
#[test]
fn the_hosts_file_is_the_servers_own_unless_it_has_the_hosts_network() {
    let lines = |text: &str| -> Vec<String> { text.lines().map(str::to_string).collect() };
    let host_hosts = lines(&std::fs::read_to_string("/etc/hosts").unwrap());
    let own = lines(
        "127.0.0.1\tlocalhost\n127.0.1.1\tairlock\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    );
    assert_ne!(
        host_hosts, own,
        "the host's file must differ for the test to tell them apart"
    );
    let shown = |out: &Output| -> Vec<String> {
        stdout(out)
            .lines()
            .filter_map(|line| line.strip_prefix("LINE "))
            .map(str::to_string)
            .collect()
    };
    for who in everyone() {
        // A grant written as another path that leads to the file names it too.
        let link = who.dir("hosts-link", 0o755).join("hosts");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/etc/hosts", &link).unwrap();
        let link = link.display().to_string();
        for (extra, expected) in [
            (&["--network", "none"][..], &own),
            (&["--network", "api.github.com"], &own),
            (&["--network", "host"], &host_hosts),
            (&["--grant-read", "/etc/hosts"], &host_hosts),
            (&["--grant-read", &link], &host_hosts),
        ] {
            let out = who.hostile(extra, &["cat", "/etc/hosts"]);
            assert_eq!(&shown(&out), expected, "{who:?} {extra:?}\n{}", text(&out));
        }
    }
}

#[test]
fn the_server_cannot_signal_its_init_or_its_parent() {
    for who in everyone() {
        let out = who.hostile(&[], &["killppid"]);
        assert_refused(&out);
        assert!(
            stdout(&out).contains("REFUSED kill(ppid"),
            "{who:?}: {}",
            text(&out)
        );
    }
}

/// 3 GiB touched against the default 2048 MiB: root gets a memory cgroup of its own (the OOM
/// killer ends the server), an ordinary user without a delegated cgroup RLIMIT_DATA (the
/// allocation fails). The plan says which, and the outcome matches it.
///
/// The same for memory `RLIMIT_DATA` cannot count: shared anonymous mappings (`mmap(-1)`),
/// memfd and SysV shm. Under `RLIMIT_DATA` seccomp refuses them (the first one already); a
/// memory cgroup counts them.
#[test]
fn a_3_gib_touched_allocation_is_stopped() {
    for who in everyone() {
        for bomb in [
            &["membomb"][..],
            &["sharedbomb", "shared"],
            &["sharedbomb", "memfd"],
            &["sharedbomb", "sysv"],
        ] {
            three_gib_are_stopped(who, bomb);
        }
    }
}

fn three_gib_are_stopped(who: Who, bomb: &[&str]) {
    let out = who.hostile(&[], bomb);
    assert_memory_bounded(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let plan_memory = stderr
        .lines()
        .find(|line| line.trim_start().starts_with("memory: "))
        .unwrap_or_else(|| panic!("{who:?}: no memory line in the plan\n{stderr}"));
    if plan_memory.contains("RLIMIT_DATA") {
        assert!(
            stdout(&out).contains("REFUSED mmap"),
            "{who:?} {bomb:?}: {}",
            text(&out)
        );
        if bomb[0] == "sharedbomb" {
            assert!(
                stdout(&out).contains("after 0 MiB: Operation not permitted"),
                "{who:?} {bomb:?}: seccomp refuses the first one\n{}",
                text(&out)
            );
        }
    } else {
        assert!(plan_memory.contains("resident, cgroup"), "{plan_memory}");
        assert_eq!(out.status.code(), Some(128 + 9), "{who:?}: {}", text(&out));
    }
}

/// Files named `bomb-*` anywhere under `dir`.
fn bombs_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if entry.file_name().to_string_lossy().starts_with("bomb-") {
                out.push(path);
            }
        }
    }
    out
}

/// The private home and tmp are one tmpfs of `disk_mb` (1024 MiB): 3 GiB into either stops at
/// it with ENOSPC, and nothing reaches the user's disk.
#[test]
fn a_3_gib_write_into_tmpdir_or_home_is_stopped_at_disk_mb() {
    for who in everyone() {
        for var in ["TMPDIR", "HOME"] {
            let out = who.hostile(&[], &["diskbomb", var]);
            assert_refused(&out);
            let line = stdout(&out);
            assert!(
                line.contains("No space left on device"),
                "{who:?} {var}: {}",
                text(&out)
            );
            let written = count_after(&line);
            assert!(written <= 1024, "{who:?} {var}: {}", text(&out));
        }
        let state = world().root.join(format!("state-{}", who.tag()));
        assert!(
            bombs_under(&state).is_empty(),
            "{who:?}: {:?}",
            bombs_under(&state)
        );
    }
}

/// Empty directories take no space, but each is kernel memory of the host: the scratch disk
/// holds as many inodes as `disk_mb` has 4 KiB pages (262,144 for 1024 MiB), not the kernel's
/// default of millions.
#[test]
fn a_million_empty_directories_stop_at_the_scratch_disks_inodes() {
    for who in everyone() {
        let out = who.hostile(&[], &["inodebomb", "TMPDIR"]);
        assert_refused(&out);
        let line = stdout(&out);
        assert!(
            line.contains("No space left on device"),
            "{who:?}: {}",
            text(&out)
        );
        assert!(count_after(&line) <= 1024 * 256, "{who:?}: {}", text(&out));
    }
}

/// N in a bomb's `REFUSED ... after N ...` line; `u64::MAX` when there is none.
fn count_after(line: &str) -> u64 {
    line.split(" after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// chmod/chown/utime/setxattr/rename/link on the user's own files outside its write grants:
/// refused for an ordinary user too (landlock has no right for metadata; the constructed root has
/// no such file, and a read grant is a read-only bind). Links and moves aim into a write grant,
/// where a link of the server's own file works (the control).
#[test]
fn metadata_of_the_users_files_outside_write_grants_cannot_change() {
    for who in everyone() {
        let outside = who.dir("meta-outside", 0o755);
        let granted = who.dir("meta-read-grant", 0o755);
        let mut files = Vec::new();
        for dir in [&outside, &granted] {
            let file = dir.join("file.txt");
            std::fs::write(&file, "mine\n").unwrap();
            who.own(&file);
            chmod(&file, 0o644);
            files.push(file);
        }
        let before: Vec<(u32, i64, i64)> = files
            .iter()
            .map(|f| {
                let m = std::fs::metadata(f).unwrap();
                (m.mode(), m.mtime(), m.mtime_nsec())
            })
            .collect();
        // A write grant as the destination of links and moves: were they refused only there, the
        // test would prove nothing about the source.
        let writable = who.dir("meta-write-grant", 0o755);
        let grant = [
            "--grant-read",
            granted.to_str().unwrap(),
            "--grant-write",
            writable.to_str().unwrap(),
        ];
        let own = writable.join("own.txt");
        std::fs::write(
            &own, "mine
",
        )
        .unwrap();
        who.own(&own);
        let own_link = writable.join("own-link");
        let out = who.hostile(
            &grant,
            &["ok-link", own.to_str().unwrap(), own_link.to_str().unwrap()],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{who:?}: the control: {}",
            text(&out)
        );
        for file in &files {
            let file = file.to_str().unwrap();
            for mode in ["chmod", "chown", "utime", "setxattr"] {
                let out = who.hostile(&grant, &[mode, file]);
                assert_refused(&out);
            }
            let moved = writable.join("moved");
            assert_refused(&who.hostile(&grant, &["rename", file, moved.to_str().unwrap()]));
            let link = writable.join("link");
            let out = who.hostile(&grant, &["hardlink", file, link.to_str().unwrap()]);
            assert_refused(&out);
            assert!(
                stdout(&out).contains("REFUSED link: "),
                "{who:?}: the link itself is refused\n{}",
                text(&out)
            );
        }
        let mut in_write_grant: Vec<String> = std::fs::read_dir(&writable)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        in_write_grant.sort();
        assert_eq!(in_write_grant, ["own-link", "own.txt"], "{who:?}");
        let after: Vec<(u32, i64, i64)> = files
            .iter()
            .map(|f| {
                let m = std::fs::metadata(f).unwrap();
                (m.mode(), m.mtime(), m.mtime_nsec())
            })
            .collect();
        assert_eq!(before, after, "{who:?}");
        for file in &files {
            assert!(
                xattr_absent(file),
                "{who:?}: {} got an xattr",
                file.display()
            );
        }
    }
}

fn xattr_absent(path: &Path) -> bool {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut buf = [0u8; 8];
    // SAFETY: (test) getxattr writes at most buf.len() bytes into our buffer.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"user.airlock".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    n < 0
}

/// A write grant deep in a 0700 tree: the directories leading to it are the root's own, so the
/// server reaches it read and write. As root the tree is root's and the server nobody (the grant
/// is an idmapped bind: what it writes is root's on disk); as an ordinary user the tree is the
/// user's. A 0700 tree of root's that the user cannot enter on the host stays out of reach.
#[test]
fn a_grant_under_a_0700_tree_is_reachable_read_and_write() {
    for who in everyone() {
        let tree = who.dir("locked", 0o700);
        let grant = tree.join("deep/grant");
        std::fs::create_dir_all(&grant).unwrap();
        for dir in [tree.join("deep"), grant.clone()] {
            who.own(&dir);
            chmod(&dir, 0o700);
        }
        let existing = grant.join("in.txt");
        std::fs::write(&existing, "from the host\n").unwrap();
        who.own(&existing);
        chmod(&existing, 0o600);
        let written = grant.join("out.txt");
        let out = who.hostile(
            &["--grant-write", grant.to_str().unwrap()],
            &["rw", existing.to_str().unwrap(), written.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", text(&out));
        assert!(
            stdout(&out).contains("READ from the host"),
            "{}",
            text(&out)
        );
        assert_eq!(std::fs::read_to_string(&written).unwrap(), "written\n");
        assert_eq!(
            std::fs::metadata(&written).unwrap().uid(),
            who.uid(),
            "{who:?}: the file belongs to the grant's owner on disk"
        );
        if who != Who::Me && is_root() {
            // root's own 0700 tree: the ordinary user cannot enter it on the host either.
            let roots = Who::Me.dir("locked-roots", 0o700);
            let grant = roots.join("grant");
            std::fs::create_dir_all(&grant).unwrap();
            std::fs::write(grant.join("in.txt"), "root's\n").unwrap();
            let out = who.hostile(
                &["--grant-write", grant.to_str().unwrap()],
                &[
                    "rw",
                    grant.join("in.txt").to_str().unwrap(),
                    grant.join("out.txt").to_str().unwrap(),
                ],
            );
            assert_eq!(out.status.code(), Some(4), "{}", text(&out));
            assert!(stdout(&out).contains("FAILED read"), "{}", text(&out));
            assert!(!grant.join("out.txt").exists());
        }
    }
}

/// Moving a file or a directory into another directory of a write grant works (landlock's
/// `REFER`, granted there, not denied by init's outer domain), for root and an ordinary user.
#[test]
fn a_server_moves_files_and_directories_between_directories_of_its_write_grant() {
    for who in everyone() {
        let grant = who.dir("moves", 0o755);
        for dir in ["a/d", "b"] {
            std::fs::create_dir_all(grant.join(dir)).unwrap();
        }
        std::fs::write(grant.join("a/x"), "x\n").unwrap();
        for path in ["a", "a/d", "a/x", "b"] {
            who.own(&grant.join(path));
        }
        for name in ["x", "d"] {
            let (from, to) = (grant.join("a").join(name), grant.join("b").join(name));
            let out = who.hostile(
                &["--grant-write", grant.to_str().unwrap()],
                &["ok-move", from.to_str().unwrap(), to.to_str().unwrap()],
            );
            assert_eq!(out.status.code(), Some(0), "{who:?} {name}: {}", text(&out));
            assert!(to.exists() && !from.exists(), "{who:?}: {name} moved");
        }
    }
}

/// A working directory the server cannot use (not in its root: nothing granted there; or 0700
/// and not the server's) falls back to its private home with one notice; never a helper failure.
/// Granted, it is the server's working directory (as root through the idmapped bind).
#[test]
fn a_start_from_a_0700_working_directory_falls_back_to_the_private_home() {
    for who in everyone() {
        let cwd = who.dir("cwd", 0o700);
        let out = who.hostile(&["--cwd", cwd.to_str().unwrap()], &["pwd"]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr
                .matches("the server cannot use the working directory")
                .count(),
            1,
            "{who:?}: {stderr}"
        );
        assert!(
            stdout(&out).contains("CWD ") && stdout(&out).contains("servers/root-tests/home"),
            "{who:?}: {}",
            text(&out)
        );
        let out = who.hostile(
            &[
                "--cwd",
                cwd.to_str().unwrap(),
                "--grant-read",
                cwd.to_str().unwrap(),
            ],
            &["pwd"],
        );
        assert_eq!(
            stdout(&out).trim(),
            format!("CWD {}", cwd.display()),
            "{who:?}: {}",
            text(&out)
        );
        let mode = std::fs::metadata(&cwd).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}

/// A write grant is the host's directory: as root its bind is idmapped, so what the server
/// creates there is root's on disk, and a setuid copy of a program would be a setuid-root program
/// on the host. Every way to set S_ISUID/S_ISGID (chmod family, creating with the bit: open,
/// openat, creat, mknod; openat2 is ENOSYS) is refused, for root and an ordinary user, and plain
/// modes still change. The host's view of the grant afterwards holds no such file.
#[test]
fn a_server_cannot_leave_a_setuid_or_setgid_file_in_its_write_grant() {
    let attempts: &[&str] = if cfg!(target_arch = "x86_64") {
        &[
            "fchmodat 6755",
            "fchmodat 2755",
            "fchmod 4755",
            "fchmodat2 4755",
            "openat 2755",
            "mknodat 4755",
            "chmod 4755",
            "open 4755",
            "creat 6755",
            "mknod 2755",
            "openat2 4755",
        ]
    } else {
        &[
            "fchmodat 6755",
            "fchmodat 2755",
            "fchmod 4755",
            "fchmodat2 4755",
            "openat 2755",
            "mknodat 4755",
            "openat2 4755",
        ]
    };
    for who in everyone() {
        let grant = who.dir("setid", 0o755);
        let out = who.hostile(
            &["--grant-write", grant.to_str().unwrap()],
            &["setid", grant.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", text(&out));
        let said = stdout(&out);
        for attempt in attempts {
            assert!(
                said.contains(&format!("REFUSED {attempt}: ")),
                "{who:?}: {attempt} was not refused\n{}",
                text(&out)
            );
        }
        assert!(said.contains("PLAIN MODES OK"), "{who:?}: {}", text(&out));
        let copy = std::fs::metadata(grant.join("copy")).unwrap();
        assert_eq!(copy.mode() & 0o7777, 0o755, "{who:?}");
        assert_eq!(
            copy.uid(),
            who.uid(),
            "{who:?}: the copy is the grant owner's"
        );
        for entry in std::fs::read_dir(&grant).unwrap() {
            let entry = entry.unwrap();
            let mode = entry.metadata().unwrap().mode();
            assert_eq!(
                mode & 0o6000,
                0,
                "{who:?}: {} has mode {mode:o} on the host",
                entry.path().display()
            );
        }
    }
}

/// As root, a grant owned by another user (`/home/u/proj`, 0700, the user's): its bind maps that
/// owner to the server, so the server reads and writes there, and what it creates is the user's
/// on disk. Inside a root-owned write grant it keeps its own mapping (and the root-owned one
/// stays root's). The plan says whose files the server reaches.
#[test]
fn as_root_a_grant_owned_by_another_user_is_reached_as_its_owner() {
    if !is_root() {
        return; // an ordinary user's server reaches what the user can: nothing to map
    }
    const OWNER: u32 = 65532;
    let home = Who::Me.dir("home-of-u", 0o755);
    let proj = home.join("proj");
    std::fs::create_dir(&proj).unwrap();
    std::os::unix::fs::chown(&proj, Some(OWNER), Some(OWNER)).unwrap();
    chmod(&proj, 0o700);
    for dir in [&home, &proj] {
        let existing = dir.join("in.txt");
        std::fs::write(&existing, "theirs\n").unwrap();
        let owner = if dir == &proj { OWNER } else { 0 };
        std::os::unix::fs::chown(&existing, Some(owner), Some(owner)).unwrap();
        chmod(&existing, 0o600);
    }
    let grants = [
        "--grant-write",
        home.to_str().unwrap(),
        "--grant-write",
        proj.to_str().unwrap(),
    ];
    // `airlock check` says, before any start, whose files each grant shows the server.
    let check = Who::Me
        .airlock(&[
            "check",
            "--allow-write",
            proj.to_str().unwrap(),
            "--",
            "/usr/bin/python3",
            "server.py",
        ])
        .output()
        .unwrap();
    let said = stdout(&check);
    let line = said
        .lines()
        .find(|line| line.contains(proj.to_str().unwrap()) && line.contains("idmapped"))
        .unwrap_or_else(|| panic!("no line for {}:\n{said}", proj.display()));
    assert!(
        line.contains(&format!(
            "files of its owner on disk (uid {OWNER} gid {OWNER}) appear as uid 65534's, so it reaches them as their owner; what it creates is uid {OWNER}'s on disk"
        )),
        "{line}"
    );
    for (dir, owner) in [(&proj, OWNER), (&home, 0)] {
        let written = dir.join("out.txt");
        let out = Who::Me.hostile(
            &grants,
            &[
                "rw",
                dir.join("in.txt").to_str().unwrap(),
                written.to_str().unwrap(),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            dir.display(),
            text(&out)
        );
        assert!(stdout(&out).contains("READ theirs"), "{}", text(&out));
        let meta = std::fs::metadata(&written).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (owner, owner),
            "{}: what the server writes is the grant owner's on disk",
            dir.display()
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "idmapped: files of its owner on disk (uid {OWNER} gid {OWNER}) appear as uid 65534's"
            )),
            "{stderr}"
        );
    }
}
