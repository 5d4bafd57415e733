//! Load errors through the public `load`: each names its position and its fix, and one bad
//! element does not hide the others.

use super::*;

#[test]
fn a_bad_element_of_an_array_does_not_hide_the_other_errors() {
    let err = load_error(&[user(
        "version = 1\n[tools]\ndeny = [5]\n[sandbox]\nnetwork = \"sometimes\"\n[sandbox.limits]\nmemory_mb = -5\n",
    )]);
    let lines: Vec<usize> = err
        .flatten()
        .iter()
        .filter_map(|e| e.position.map(|p| p.line))
        .collect();
    assert_eq!(lines, vec![3, 5, 7]);
}

/// Each policy text fails to load with its error at `line:column`, a message containing the
/// needle, and a fix.
fn assert_load_errors(cases: &[(&str, usize, usize, &str)]) {
    for &(text, line, column, needle) in cases {
        let err = load_error(&[user(text)]);
        assert_eq!(
            err.position,
            Some(LineCol { line, column }),
            "{text:?}: {err}"
        );
        assert!(err.message.contains(needle), "{text:?}: {err}");
        assert!(err.fix.is_some(), "{text:?}: no fix in {err}");
    }
}

/// A pattern without `mcp:` gets the pattern it meant as its fix.
#[test]
fn a_pattern_missing_mcp_gets_the_one_it_meant() {
    let err = load(
        &[user("version = 1\n[tools]\ndeny = [\"fs__write_file\"]\n")],
        &[],
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("write \"mcp:fs__write_file\""), "{text}");
}

#[test]
fn version_and_tools_load_errors_have_positions_and_fixes() {
    assert_load_errors(&[
        ("version = 2\n", 1, 11, "unsupported policy version"),
        ("[tools]\ndeny = []\n", 1, 1, "missing `version`"),
        (
            "version = 1\n[tools]\nalow = [\"mcp:x\"]\n",
            3,
            1,
            "unknown field `alow`",
        ),
        (
            "version = 1\n[tools]\ndeny = [\"fs__x\"]\n",
            3,
            9,
            "must start with `mcp:`",
        ),
        (
            "version = 1\n[tools]\ndefault = \"maybe\"\n",
            3,
            11,
            "unknown variant",
        ),
    ]);
}

#[test]
fn sandbox_load_errors_have_positions_and_fixes() {
    assert_load_errors(&[
        (
            "version = 1\n[sandbox]\nnetwork = \"wifi\"\n",
            3,
            11,
            "`network` must be",
        ),
        (
            "version = 1\n[sandbox]\nnetwork = [70000]\n",
            3,
            11,
            "`network` must be",
        ),
        (
            "version = 1\n[sandbox]\nread = [\"relative/dir\"]\n",
            3,
            9,
            "relative",
        ),
        (
            "version = 1\n[sandbox]\nrequire = [\"landlock>=x\"]\n",
            3,
            12,
            "bad version",
        ),
        (
            "version = 1\n[sandbox]\nrequire = [\"apparmor\"]\n",
            3,
            12,
            "unknown requirement",
        ),
        (
            "version = 1\n[sandbox]\nkill_timeout = 0\n",
            3,
            16,
            "out of range",
        ),
        (
            "version = 1\n[sandbox.limits]\nmemory_mb = 1\n",
            3,
            13,
            "out of range",
        ),
        (
            "version = 1\n[sandbox]\nenv = [\"BAD-NAME\"]\n",
            3,
            8,
            "not a variable name",
        ),
    ]);
}

#[test]
fn launch_audit_and_rule_load_errors_have_positions_and_fixes() {
    assert_load_errors(&[
        (
            "version = 1\n[launch]\nallow_commands = [\"./x\"]\n",
            3,
            19,
            "neither a command name",
        ),
        (
            "version = 1\n[audit]\nredact = [\"(\"]\n",
            3,
            11,
            "does not compile",
        ),
        (
            "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__w\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/a\"\nglob = \"*\"\n",
            2,
            1,
            "exactly one of",
        ),
        (
            "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__w\"\naction = \"deny\"\nargument = \"path\"\nregex = \"[\"\n",
            6,
            9,
            "does not compile",
        ),
        (
            "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__w\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"home/me\"\n",
            6,
            10,
            "is relative",
        ),
        (
            "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__w\"\naction = \"deny\"\nargument = \"path\"\nglob = \"~/.ssh/*\"\n",
            6,
            8,
            "starts with `~`",
        ),
    ]);
}

/// A rule is quoted as written: `**` compiles to `*` (either matches across `/`), but the
/// refusal, `explain` and the audit's `rule` show `**/x.txt`, which a search of the log finds.
#[test]
fn a_glob_rule_is_quoted_as_written() {
    let policy = load(
        &[user(
            "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__write_file\"\naction = \"deny\"\nargument = \"path\"\nglob = \"/data/**/x.txt\"\n",
        )],
        &[],
    )
    .unwrap();
    let arguments = json!({"path": "/data/a/b/x.txt"});
    let decision = policy.decide(&Call {
        server: "fs",
        tool: "write_file",
        arguments: Some(&arguments),
        identity: None,
    });
    assert_eq!(decision.action, Action::Deny);
    assert!(
        decision.rule.contains("path glob \"/data/**/x.txt\""),
        "{}",
        decision.rule
    );
}
