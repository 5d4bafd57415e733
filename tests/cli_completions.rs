//! `airlock completions` and `airlock man` run from the real binary: each script parses in its
//! shell (where that shell is installed; bash always is under CI), and the man page renders with
//! groff without a single warning. This is how CI generates them on every run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::Write;
use std::process::{Command, Stdio};

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

fn generate(args: &[&str]) -> Vec<u8> {
    let out = Command::new(AIRLOCK)
        .args(args)
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "airlock {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "nothing on stderr for {args:?}");
    out.stdout
}

fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Feeds `text` to `program args...` on stdin; returns (success, stderr).
fn check_with(program: &str, args: &[&str], text: &[u8]) -> (bool, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn completion_scripts_parse_in_their_shells() {
    for (shell, checker) in [("bash", "bash"), ("zsh", "zsh"), ("fish", "fish")] {
        let script = generate(&["completions", shell]);
        let text = String::from_utf8(script.clone()).unwrap();
        for sub in [
            "install",
            "uninstall",
            "run",
            "serve",
            "status",
            "completions",
            "man",
        ] {
            assert!(text.contains(sub), "{shell} completions lack `{sub}`");
        }
        if !installed(checker) {
            assert!(
                shell != "bash",
                "bash must be there to check the bash script"
            );
            eprintln!("{checker} not installed: only generated, not parsed");
            continue;
        }
        let (ok, stderr) = check_with(checker, &["-n"], &script);
        assert!(ok, "{shell} rejects its completion script: {stderr}");
    }
}

#[test]
fn bash_completion_completes_subcommands() {
    let script = generate(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("airlock.bash");
    std::fs::write(&path, script).unwrap();
    // Drive the completion function the way bash's readline would for `airlock st<TAB>`.
    let probe = format!(
        "source {}; COMP_WORDS=(airlock st); COMP_CWORD=1; COMP_LINE='airlock st'; COMP_POINT=10; \
         _airlock airlock st airlock; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    let words = String::from_utf8_lossy(&out.stdout);
    assert!(
        words.lines().any(|w| w == "status"),
        "`airlock st<TAB>` offers: {words:?} (stderr {})",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_man_page_renders_without_warnings() {
    let page = generate(&["man"]);
    let text = String::from_utf8(page.clone()).unwrap();
    assert!(text.contains(".TH airlock 1"));
    for section in [
        "AIRLOCK RUN",
        "AIRLOCK SERVE",
        "AIRLOCK CHECK",
        "AIRLOCK COMPLETIONS",
    ] {
        assert!(text.contains(section), "man page lacks {section}");
    }
    if !installed("groff") {
        eprintln!("groff not installed: the page is generated, not rendered");
        return;
    }
    let (ok, stderr) = check_with("groff", &["-man", "-ww", "-z"], &page);
    assert!(ok && stderr.is_empty(), "groff warns: {stderr}");
}
