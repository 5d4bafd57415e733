//! What the server sees of the kernel: /sys, its seccomp filters, the huge-page setting, SysV IPC,
//! its cgroup namespace, a rewritten pyvenv.cfg.

use super::*;

/// `/sys` holds only what runtimes read: the CPU topology (`/sys/devices/system/cpu`, for the
/// number of CPUs) and, with a cgroup v2 memory cgroup, the server's own cgroup at
/// `/sys/fs/cgroup`. Everything else of the host's sysfs does not exist for the server (not
/// denied: absent), and `/sys` itself, a directory of the root's own, cannot be listed.
#[test]
fn sys_holds_only_the_cpu_topology_and_the_servers_own_cgroup() {
    for who in everyone() {
        let out = who.hostile(&[], &["tree", "/sys/devices/system/cpu"]);
        assert!(
            stdout(&out).contains("TREE /sys/devices/system/cpu/online\n"),
            "{who:?}: runtimes read the CPU count there\n{}",
            text(&out)
        );
        let cgroup_v2 = String::from_utf8_lossy(&out.stderr).contains("cgroup v2 memory.max");
        let mut absent = vec![
            "/sys/class/net",
            "/sys/kernel",
            "/sys/firmware",
            "/sys/block",
            "/sys/module",
            "/sys/devices/virtual",
            "/sys/devices/system/node",
        ];
        if !cgroup_v2 {
            absent.push("/sys/fs/cgroup");
        }
        for path in absent {
            if !Path::new(path).exists() {
                continue;
            }
            let out = who.hostile(&[], &["tree", path]);
            assert!(
                stdout(&out).contains(&format!("REFUSED {path}: No such file or directory")),
                "{who:?}: {path} must not exist for the server\n{}",
                text(&out)
            );
        }
        let out = who.hostile(&[], &["tree", "/sys"]);
        assert!(
            stdout(&out).starts_with("REFUSED /sys: "),
            "{who:?}: {}",
            text(&out)
        );
        if cgroup_v2 {
            let out = who.hostile(&[], &["tree", "/sys/fs/cgroup"]);
            assert!(
                stdout(&out).contains("TREE /sys/fs/cgroup/memory.max\n"),
                "{who:?}: its own cgroup\n{}",
                text(&out)
            );
        }
    }
}

/// The server runs under seccomp (mode 2, filter) with one copy of the filters: init installs
/// them before it forks the server, which inherits them instead of stacking the same programs
/// again (each runs on every syscall). One program per errno (EPERM, ENOSYS, EACCES) plus the
/// x32 guard on x86_64: at most 4.
#[test]
fn the_server_runs_under_one_copy_of_the_seccomp_filters() {
    for who in everyone() {
        let out = who.hostile(&[], &["seccomp"]);
        let said = stdout(&out);
        assert!(said.contains("Seccomp:\t2\n"), "{who:?}: {}", text(&out));
        let filters: u32 = said
            .lines()
            .find_map(|line| line.strip_prefix("Seccomp_filters:\t"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{who:?}: no Seccomp_filters line\n{}", text(&out)));
        assert!(
            (1..=4).contains(&filters),
            "{who:?}: {filters} filters\n{}",
            text(&out)
        );
    }
}

/// airlock turns transparent huge pages off for itself (its allocator's arenas would otherwise
/// double its RSS on a host set to `always`), and the server gets back the setting airlock
/// inherited, whichever it was: enabled from a shell as usual, disabled when airlock was started
/// with it disabled.
#[test]
fn the_server_gets_the_huge_page_setting_airlock_inherited() {
    for who in everyone() {
        for inherited_disabled in [false, true] {
            let mut argv = vec![
                "__sandbox-exec",
                "--show-plan",
                "--server",
                "root-tests",
                "--",
            ];
            let hostile = world().hostile.to_str().unwrap().to_string();
            argv.extend([hostile.as_str(), "seccomp"]);
            let mut cmd = who.airlock(&argv);
            let flag = libc::c_ulong::from(inherited_disabled);
            // SAFETY: (test) prctl with integer arguments only, between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_THP_DISABLE, flag, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let out = output_holding_stdin(cmd);
            let want = if inherited_disabled {
                "THP_enabled:\t0\n"
            } else {
                "THP_enabled:\t1\n"
            };
            assert!(
                stdout(&out).contains(want),
                "{who:?}, started with THP disabled: {inherited_disabled}: want {want:?}\n{}",
                text(&out)
            );
        }
    }
}

/// SysV IPC is the server's own (an IPC namespace): a message queue the test makes on the host
/// (mode 0666, reachable by anyone sharing the host's namespace) is not found by the server, and
/// the queue the server creates and leaves does not outlive it on the host.
#[test]
fn sysv_ipc_is_the_servers_own_and_dies_with_it() {
    // Unique per test process (pid_max is at most 2^22): keys of parallel runs never meet.
    let key = |n: i32| 0x4000_0000 | ((std::process::id() as i32 & 0x3f_ffff) << 2) | n;
    for (n, who) in everyone().into_iter().enumerate() {
        let host_key = key(2 * n as i32);
        let left_key = key(2 * n as i32 + 1);
        // SAFETY: (test) msgget takes integers only.
        let host_queue = unsafe { libc::msgget(host_key, libc::IPC_CREAT | 0o666) };
        assert!(host_queue >= 0, "{}", std::io::Error::last_os_error());
        let out = who.hostile(&[], &["sysv", &host_key.to_string(), &left_key.to_string()]);
        // SAFETY: (test) removes the queue made above; no pointer is read for IPC_RMID.
        unsafe { libc::msgctl(host_queue, libc::IPC_RMID, std::ptr::null_mut()) };
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", text(&out));
        assert!(
            stdout(&out).contains("REFUSED host message queue: No such file or directory"),
            "{who:?}: {}",
            text(&out)
        );
        assert!(
            stdout(&out).contains("LEFT message queue"),
            "{}",
            text(&out)
        );
        // SAFETY: (test) msgget takes integers only.
        let left = unsafe { libc::msgget(left_key, 0) };
        if left >= 0 {
            // SAFETY: (test) cleans up what would be the failure's leftover.
            unsafe { libc::msgctl(left, libc::IPC_RMID, std::ptr::null_mut()) };
        }
        assert!(
            left < 0,
            "{who:?}: the server's queue outlived it on the host"
        );
    }
}

/// The host's cgroup paths (which name the user's session and slices) are not the server's: as
/// root (a memory cgroup of its own) and as an ordinary user (no cgroup, `RLIMIT_DATA`), every
/// line of its `/proc/self/cgroup` is the root of its own cgroup namespace.
#[test]
fn the_server_sees_only_the_root_of_its_own_cgroup_namespace() {
    let host = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    for who in everyone() {
        let out = who.hostile(&[], &["cat", "/proc/self/cgroup"]);
        let said = stdout(&out);
        let lines: Vec<&str> = said
            .lines()
            .filter_map(|line| line.strip_prefix("LINE "))
            .collect();
        assert!(!lines.is_empty(), "{who:?}: {}", text(&out));
        for line in &lines {
            assert!(
                line.ends_with(":/"),
                "{who:?}: {line}\nhost: {host}\n{}",
                text(&out)
            );
        }
    }
}

/// A virtualenv inside a write grant: its `pyvenv.cfg` is the server's to rewrite, and its
/// `home =` decides a read grant of the next start (the base interpreter's prefix). A server
/// that points it at `~/.ssh` gets nothing: only a directory holding a Python interpreter counts.
/// As root and as an ordinary user.
#[test]
fn a_rewritten_pyvenv_cfg_does_not_grant_the_next_start_a_secret() {
    let store = world().root.join("home/.ssh");
    std::fs::create_dir_all(&store).unwrap();
    chmod(&store, 0o755);
    std::fs::write(store.join("id_venv_canary"), "CANARY-VENV\n").unwrap();
    chmod(&store.join("id_venv_canary"), 0o644);
    // The secret's path is in the script's text, not on its command line (an existing path
    // there would be granted to the server).
    let script = world().root.join("venv-probe.py");
    std::fs::write(
        &script,
        format!("import sys\ncfg, target = sys.argv[1], {:?}\n", store.display().to_string())
            + "if sys.argv[2] == 'rewrite':\n\
         \x20   open(cfg, 'w').write('home = ' + target + '\\n')\n\
         \x20   print('REWROTE', file=sys.stderr)\n\
         else:\n\
         \x20   try:\n\
         \x20       print('READ ' + open(target + '/id_venv_canary').read().strip(), file=sys.stderr)\n\
         \x20   except OSError as err:\n\
         \x20       print('REFUSED ' + str(err), file=sys.stderr)\n",
    )
    .unwrap();
    chmod(&script, 0o644);
    for who in everyone() {
        let project = who.dir("venv-proj", 0o755);
        let bin = project.join(".venv/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", bin.join("python")).unwrap();
        let cfg = project.join(".venv/pyvenv.cfg");
        std::fs::write(&cfg, "home = /usr/bin\n").unwrap();
        for path in [project.join(".venv"), bin.clone(), cfg.clone()] {
            who.own(&path);
        }
        let start = |mode: &str, write: &Path| {
            let python = bin.join("python");
            let args = [
                "run",
                "--trust",
                "--allow-read",
                script.to_str().unwrap(),
                "--allow-write",
                write.to_str().unwrap(),
                "--",
                python.to_str().unwrap(),
                script.to_str().unwrap(),
                cfg.to_str().unwrap(),
                mode,
            ];
            output_holding_stdin(who.airlock(&args))
        };
        let rewrite = start("rewrite", &project);
        assert!(
            String::from_utf8_lossy(&rewrite.stderr).contains("REWROTE"),
            "{who:?}: {}",
            text(&rewrite)
        );
        let elsewhere = who.dir("venv-out", 0o755);
        let read = start("read", &elsewhere);
        let said = text(&read);
        assert!(
            !said.contains("CANARY-VENV") && said.contains("REFUSED"),
            "{who:?}: the rewritten pyvenv.cfg granted the secret:\n{said}"
        );
    }
}
