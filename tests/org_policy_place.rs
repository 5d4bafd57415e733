//! End to end: where the machine has an org policy in `/etc/airlock`, `AIRLOCK_ORG_POLICY_DIR`
//! cannot replace it. A host config's `env` is set on airlock itself, so a project's `.mcp.json`
//! (or a user's own entry) naming an empty directory there took every locked org rule away. On a
//! machine without one the variable still names the org directory (how every other test gives
//! airlock an org policy of its own).
//!
//! `/etc/airlock` is made only inside a private mount namespace (an overlay on `/etc` there), so
//! nothing of the machine changes and no other test sees it. Root is needed for that (the tests
//! run as root in CI).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::Path;
use std::process::{Command, Output};

/// `command` with only this test's environment: `PATH`, and home, config, state and org policy
/// dirs under `work` (the org dir as `org` names it), never the machine's.
fn own_env<'a>(command: &'a mut Command, work: &Path, org: &Path) -> &'a mut Command {
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", work.join("home"))
        .env("XDG_CONFIG_HOME", work.join("xdg"))
        .env("XDG_STATE_HOME", work.join("state"))
        .env("AIRLOCK_ORG_POLICY_DIR", org)
}

/// `airlock check` run where `/etc/airlock/policy.toml` is `org_policy` (when given), with
/// `AIRLOCK_ORG_POLICY_DIR` naming `named`.
fn check_with_org_in_etc(work: &Path, org_policy: Option<&str>, named: &Path) -> Output {
    for dir in [
        "up",
        "overlay-work",
        "home",
        "xdg/airlock",
        "state",
        "project",
    ] {
        std::fs::create_dir_all(work.join(dir)).unwrap();
    }
    if let Some(text) = org_policy {
        std::fs::create_dir_all(work.join("up/airlock")).unwrap();
        std::fs::write(work.join("up/airlock/policy.toml"), text).unwrap();
    }
    let script = "set -e; mount --make-rprivate /; \
                  mount -t overlay overlay -o lowerdir=/etc,upperdir=\"$1\"/up,workdir=\"$1\"/overlay-work /etc; \
                  shift; exec \"$@\"";
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "sh", "-c", script, "sh"])
        .arg(work)
        .arg(env!("CARGO_BIN_EXE_airlock"))
        .arg("check")
        .current_dir(work.join("project"));
    own_env(&mut command, work, named).output().unwrap()
}

#[test]
fn an_org_policy_in_etc_airlock_is_read_whatever_the_environment_names() {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test makes a mount namespace: run it as root (CI does)"
    );
    let work = tempfile::tempdir().unwrap();
    let elsewhere = work.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        elsewhere.join("policy.toml"),
        "version = 1\n[tools]\ndeny = [\"mcp:*__from_elsewhere\"]\n",
    )
    .unwrap();
    let org = "version = 1\n[tools]\ndeny = [\"mcp:*__exec\"]\nlocked = true\n";
    let output = check_with_org_in_etc(work.path(), Some(org), &elsewhere);
    let (out, err) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("tools.deny \"mcp:*__exec\"")
            && out.contains("[org /etc/airlock/policy.toml:3]"),
        "{out}"
    );
    assert!(!out.contains("from_elsewhere"), "{out}");
    assert!(
        err.contains("AIRLOCK_ORG_POLICY_DIR") && err.contains("is ignored"),
        "{err}"
    );

    // Without an org policy in its place, the variable names the org directory.
    let bare = tempfile::tempdir().unwrap();
    let output = check_with_org_in_etc(bare.path(), None, &elsewhere);
    let out = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("mcp:*__from_elsewhere"), "{out}");
}

#[test]
fn an_org_that_locks_the_audit_section_keeps_the_log_where_it_is() {
    // `[audit] locked = true` with no path: the log stays at its default place; `--audit -`
    // (stderr) or another file would have taken it out of the org's hands.
    let work = tempfile::tempdir().unwrap();
    let org = work.path().join("org");
    std::fs::create_dir_all(&org).unwrap();
    std::fs::write(
        org.join("policy.toml"),
        "version = 1\n[audit]\nlocked = true\nrotate_mb = 16\n",
    )
    .unwrap();
    for moved in ["-", "/tmp/not-the-orgs.jsonl"] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_airlock"));
        command.args(["run", "--audit", moved, "--", "python3", "-c", "pass"]);
        let output = own_env(&mut command, work.path(), &org)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{err}");
        assert!(
            err.contains("organisation locks [audit]") && err.contains("Fix: drop --audit"),
            "{err}"
        );
    }
}

#[test]
fn an_org_policy_anyone_could_write_or_misnamed_stops_airlock() {
    use std::os::unix::fs::PermissionsExt;
    let check = |org: &Path| {
        let work = org.parent().unwrap();
        own_env(
            Command::new(env!("CARGO_BIN_EXE_airlock")).arg("check"),
            work,
            org,
        )
        .output()
        .unwrap()
    };
    // A file planted in a world-writable policy.d would be read as the organisation's.
    let work = tempfile::tempdir().unwrap();
    let org = work.path().join("org");
    std::fs::create_dir_all(org.join("policy.d")).unwrap();
    let planted = org.join("policy.d/10-mine.toml");
    std::fs::write(&planted, "version = 1\n").unwrap();
    assert_eq!(check(&org).status.code(), Some(0));
    std::fs::set_permissions(org.join("policy.d"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = check(&org);
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not read as an org policy") && err.contains("0777"),
        "{err}"
    );
    std::fs::set_permissions(org.join("policy.d"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(check(&org).status.code(), Some(2));
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A name that is almost `.toml` is not silently skipped.
    std::fs::write(org.join("policy.d/50-deny.TOML"), "version = 1\n").unwrap();
    let output = check(&org);
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("50-deny.TOML"), "{err}");
}

/// The owner rule as an ordinary user sees it (the tests run as root, for whom "root or the
/// running user" is one uid): an org file of root's or of the user's own is read; one of another
/// user's, or writable by another user's group, is that user's policy and stops airlock.
#[test]
fn as_an_ordinary_user_an_org_file_of_another_user_stops_airlock() {
    use std::os::unix::fs::{PermissionsExt, chown};
    const USER: u32 = 65534; // nobody, whose group is nogroup (65534)
    const OTHER: u32 = 4242; // no one's: a uid and gid of a user that is not the runner
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let org = work.path().join("org");
    std::fs::create_dir_all(&org).unwrap();
    for dir in ["home", "xdg", "state"] {
        std::fs::create_dir_all(work.path().join(dir)).unwrap();
        chown(work.path().join(dir), Some(USER), Some(USER)).unwrap();
    }
    let policy = org.join("policy.toml");
    std::fs::write(&policy, "version = 1\n").unwrap();
    let check = || {
        let mut command = Command::new("setpriv");
        command.args([
            &format!("--reuid={USER}"),
            &format!("--regid={USER}"),
            "--clear-groups",
            env!("CARGO_BIN_EXE_airlock"),
            "check",
        ]);
        own_env(&mut command, work.path(), &org).output().unwrap()
    };
    let owned = |uid: u32, gid: u32, mode: u32| {
        chown(&policy, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(mode)).unwrap();
        check()
    };
    for (uid, gid, mode) in [(0, 0, 0o644), (USER, USER, 0o644), (0, USER, 0o664)] {
        let output = owned(uid, gid, mode);
        assert_eq!(
            output.status.code(),
            Some(0),
            "owner {uid}:{gid} mode {mode:o}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    for (uid, gid, mode, said) in [
        (OTHER, OTHER, 0o644, "belongs to uid 4242"),
        (0, OTHER, 0o664, "writable by others than its owner"),
    ] {
        let output = owned(uid, gid, mode);
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{err}");
        assert!(
            err.contains("not read as an org policy") && err.contains(said),
            "{err}"
        );
    }
}
