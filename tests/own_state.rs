//! Tests own their state: every test gives airlock its own HOME, state, config and org policy
//! dirs, so the suite passes while another airlock runs on the machine (and never reads the
//! machine's policies or writes its state).
//!
//! Two guards. `.ci/test` poisons the machine-wide locations for the whole run (an org policy
//! dir and a config dir whose policy does not load, a state dir that cannot be created): a test
//! that lets airlock inherit them fails. What inheritance cannot catch is checked here: a
//! command whose environment is cleared, and the Python SDK's stdio client, which passes only
//! PATH and HOME to the server it starts unless given `env=`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

fn tests_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests"))
}

/// The text of every call `name(...)` in `text` (parentheses balanced).
fn calls<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(name) {
        let after = &rest[at + name.len()..];
        let mut depth = 1;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map(|(i, _)| i)
            .unwrap_or(after.len());
        out.push(&after[..end]);
        rest = &after[end..];
    }
    out
}

#[test]
fn every_python_client_hands_airlock_its_environment() {
    let mut python = Vec::new();
    files(&tests_dir(), "py", &mut python);
    assert!(!python.is_empty());
    for file in python {
        let text = std::fs::read_to_string(&file).unwrap();
        for call in calls(&text, "StdioServerParameters(") {
            assert!(
                call.contains("env="),
                "{}: StdioServerParameters without env= starts airlock with only PATH and HOME, \
                 so it uses the machine's state and policies: pass env=dict(os.environ)",
                file.display()
            );
        }
    }
}

#[test]
fn every_test_that_clears_the_environment_sets_its_own_dirs() {
    let mut rust = Vec::new();
    files(&tests_dir(), "rs", &mut rust);
    for file in rust {
        let text = std::fs::read_to_string(&file).unwrap();
        if file.ends_with("own_state.rs") || !text.contains("env_clear()") {
            continue;
        }
        for var in [
            "\"HOME\"",
            "\"XDG_STATE_HOME\"",
            "\"XDG_CONFIG_HOME\"",
            "\"AIRLOCK_ORG_POLICY_DIR\"",
        ] {
            assert!(
                text.contains(var),
                "{} clears the environment but never sets {var}: airlock would fall back to the \
                 machine's dirs",
                file.display()
            );
        }
    }
}
