//! End to end: where part of `/proc` is covered by another mount (systemd's
//! `ProtectKernelTunables=` binds `/proc/sys` read-only; `ProtectKernelLogs=` covers `/proc/kmsg`;
//! container runtimes mask both), the kernel refuses the fresh procfs every server's root needs.
//! `airlock doctor` tries that mount for real and says so (exit 2, the covering mounts, the fix),
//! and a server started there fails at the helper's root step (105) with a fix that names the
//! cause. Outside such a namespace the same commands work. As root and as an ordinary user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod sandbox_support;

use std::process::{Command, Output};

use sandbox_support::*;

/// `cmd` run in a new mount namespace whose `/proc/sys` is a read-only bind of itself and whose
/// `/proc/kmsg` is covered by `/dev/null`, as systemd's two directives leave them. Root is needed
/// to make that namespace (the tests run as root in CI); the command itself then runs as `cmd`
/// says (through setpriv for the ordinary user).
fn under_masked_proc(cmd: &Command) -> Command {
    let script = "set -e; mount --make-rprivate /; \
                  mount --bind /proc/sys /proc/sys; mount -o remount,bind,ro /proc/sys; \
                  mount --bind /dev/null /proc/kmsg; exec \"$@\"";
    let mut masked = Command::new("unshare");
    if !is_root() {
        // An ordinary test user makes the namespace as root of its own user namespace; the
        // mounts are then locked for every namespace airlock creates below it, just the same.
        masked.arg("--map-root-user");
    }
    masked
        .args(["--mount", "sh", "-c", script, "sh"])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear();
    // The wrapped command's environment is all the namespace passes on, so it must carry the
    // test's own dirs (never the machine's).
    for var in [
        "HOME",
        "XDG_STATE_HOME",
        "XDG_CONFIG_HOME",
        "AIRLOCK_ORG_POLICY_DIR",
    ] {
        assert!(
            cmd.get_envs()
                .any(|(name, value)| name == var && value.is_some()),
            "the wrapped command does not set {var}"
        );
    }
    for (name, value) in cmd.get_envs() {
        if let Some(value) = value {
            masked.env(name, value);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        masked.current_dir(dir);
    }
    masked
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn doctor_tries_the_servers_own_proc_and_names_what_covers_proc() {
    for who in everyone() {
        let plain = who.airlock(&["doctor"]).output().unwrap();
        assert!(
            stdout(&plain).contains(
                "its own /proc ............... mounted (tried here: a procfs for a new pid namespace)"
            ),
            "{who:?} unmasked:\n{}",
            text(&plain)
        );
        // Unmasked, /proc is not among what runs less confined than asked (an ordinary user's
        // memory line may be: RLIMIT_DATA is weaker than a cgroup, and doctor says so).
        let weaker = stdout(&plain)
            .split_once("less confined than asked:")
            .map(|(_, list)| list.to_owned())
            .unwrap_or_default();
        assert!(
            !weaker.contains("/proc") && !stdout(&plain).contains("REFUSED"),
            "{who:?} unmasked:\n{}",
            text(&plain)
        );
        assert_eq!(plain.status.code(), Some(0), "{who:?}:\n{}", text(&plain));

        let masked = under_masked_proc(&who.airlock(&["doctor"]))
            .output()
            .unwrap();
        let report = text(&masked);
        assert_eq!(masked.status.code(), Some(2), "{who:?} masked:\n{report}");
        assert!(
            report.contains("its own /proc ............... REFUSED by the kernel"),
            "{who:?} masked:\n{report}"
        );
        assert!(
            report.contains("no server can start here")
                && report.contains("/proc/sys, /proc/kmsg are covered by another mount")
                && report.contains("fix: run airlock where /proc is not masked"),
            "{who:?} masked:\n{report}"
        );
        assert!(
            !report.contains("nothing runs less confined"),
            "{who:?} masked: the report must not say all is well:\n{report}"
        );
    }
}

#[test]
fn a_server_under_a_masked_proc_fails_at_its_root_with_the_cause_and_the_fix() {
    for who in everyone() {
        // The positive side: the hostile fixture lists the processes of its own /proc.
        let out = who.hostile(&[], &["ps"]);
        assert!(
            stdout(&out).lines().any(|line| line.starts_with("PID ")),
            "{who:?} unmasked:\n{}",
            text(&out)
        );

        let run = who.airlock(&["run", "--trust", "--", "/bin/true"]);
        let plain = output_holding_stdin(who.airlock(&["run", "--trust", "--", "/bin/true"]));
        assert_eq!(plain.status.code(), Some(0), "{who:?}:\n{}", text(&plain));
        let masked = output_holding_stdin(under_masked_proc(&run));
        let report = text(&masked);
        assert_eq!(masked.status.code(), Some(105), "{who:?} masked:\n{report}");
        assert!(
            report.contains("mounting the server's own /proc: Operation not permitted")
                && report.contains("/proc/sys, /proc/kmsg are covered by another mount")
                && report.contains("without ProtectKernelTunables= or ProtectKernelLogs="),
            "{who:?} masked:\n{report}"
        );
        assert!(
            !report.contains("remove or narrow the grant"),
            "{who:?} masked: the step's generic fix blames a grant:\n{report}"
        );
    }
}

/// Without a usable `/proc` (an empty one mounted over it), a policy found at its place cannot
/// be opened the way airlock opens a file a server may have written (through
/// `/proc/self/fd`): the command stops, exit 2, naming the file and the cause, rather than
/// going on as if the policy were not there. With `/proc` the same policy is read.
#[test]
fn without_proc_a_policy_found_at_its_place_stops_the_command_instead_of_being_skipped() {
    if !is_root() {
        return;
    }
    let org = tempfile::tempdir().unwrap();
    std::fs::write(
        org.path().join("policy.toml"),
        "version = 1\n[tools]\ndeny = [\"mcp:*__wipe\"]\n",
    )
    .unwrap();
    let explain = || {
        let mut cmd = Who::Me.airlock(&["explain", "mcp:notes__wipe"]);
        cmd.env("AIRLOCK_ORG_POLICY_DIR", org.path());
        cmd
    };
    let plain = explain().output().unwrap();
    assert!(
        stdout(&plain).contains("deny") && stdout(&plain).contains("policy.toml"),
        "{}",
        text(&plain)
    );
    let cmd = explain();
    let mut no_proc = Command::new("unshare");
    no_proc
        .args(["--mount", "sh", "-c"])
        .arg("set -e; mount --make-rprivate /; mount -t tmpfs none /proc; exec \"$@\"")
        .arg("sh")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))));
    if let Some(dir) = cmd.get_current_dir() {
        no_proc.current_dir(dir);
    }
    let out = no_proc.output().unwrap();
    let report = text(&out);
    assert_eq!(out.status.code(), Some(2), "{report}");
    assert!(
        report.contains("policy.toml: cannot read policy") && report.contains("is /proc mounted?"),
        "{report}"
    );
}
