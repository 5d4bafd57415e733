//! The decision procedure of the compiled rules: precedence, indexing, argument conditions.

use super::pattern::ToolPattern;
use super::reading::PathContext;
use super::rules::*;
use super::{Action, Call, Origin, Sourced};
use crate::policy::Layer;
use serde_json::{Value, json};
use std::path::PathBuf;

fn origin(layer: Layer) -> Origin {
    Origin {
        layer,
        file: PathBuf::from(format!("{layer}.toml")),
        line: Some(1),
    }
}

fn entry(action: Action, pattern: &str, layer: Layer) -> ToolEntry {
    ToolEntry {
        action,
        pattern: ToolPattern::parse(pattern).unwrap(),
        condition: None,
        rule: format!("tools.{action} {pattern:?}"),
        origin: origin(layer),
        only_narrows: false,
        written: None,
        reading: None,
        who: None,
    }
}

fn default(action: Action) -> Sourced<Action> {
    Sourced {
        value: action,
        origin: origin(Layer::Builtin),
    }
}

fn call<'a>(server: &'a str, tool: &'a str, arguments: Option<&'a Value>) -> Call<'a> {
    Call {
        server,
        tool,
        arguments,
        identity: None,
    }
}

#[test]
fn deny_beats_ask_beats_allow_whatever_the_layer() {
    let rules = ToolRules::new(
        vec![
            entry(Action::Allow, "mcp:fs__*", Layer::Org),
            entry(Action::Ask, "mcp:fs__write_*", Layer::Org),
            entry(Action::Deny, "mcp:fs__write_file", Layer::Project),
        ],
        default(Action::Allow),
    );
    let decision = rules.decide(&call("fs", "write_file", None));
    assert_eq!(decision.action, Action::Deny);
    assert_eq!(decision.layer, Layer::Project);
    assert_eq!(
        rules.decide(&call("fs", "write_dir", None)).action,
        Action::Ask
    );
    assert_eq!(
        rules.decide(&call("fs", "read", None)).action,
        Action::Allow
    );
}

/// A deny matches names regardless of case (`*exec*` is meant for `runExec`, and a server picks
/// its tools' names); an allow or ask matches exactly, so neither ever covers more than written.
#[test]
fn a_deny_matches_regardless_of_case_and_an_allow_exactly() {
    let rules = ToolRules::new(
        vec![
            entry(Action::Deny, "mcp:*__*exec*", Layer::User),
            entry(Action::Deny, "mcp:fs__*Shell*", Layer::User),
            entry(Action::Deny, "mcp:fs__write_file", Layer::User),
            entry(Action::Allow, "mcp:fs__read_*", Layer::User),
            entry(Action::Ask, "mcp:fs__move_*", Layer::User),
        ],
        default(Action::Deny),
    );
    for (server, tool) in [
        ("fs", "runExec"),
        ("fs", "EXEC"),
        ("git", "shellExecute"),
        ("fs", "runshellcommand"),
        ("fs", "RUN_SHELL"),
        ("fs", "Write_File"),
    ] {
        let decision = rules.decide(&call(server, tool, None));
        assert_eq!(decision.action, Action::Deny, "{server}__{tool}");
        assert_ne!(decision.rule, "tools.default", "{server}__{tool}");
        assert!(!rules.lists_tool(server, tool), "{server}__{tool}");
    }
    assert_eq!(
        rules.decide(&call("fs", "read_file", None)).action,
        Action::Allow
    );
    assert_eq!(
        rules.decide(&call("fs", "READ_file", None)).action,
        Action::Deny
    );
    assert_eq!(
        rules.decide(&call("fs", "move_file", None)).action,
        Action::Ask
    );
    assert_eq!(
        rules.decide(&call("fs", "Move_file", None)).action,
        Action::Deny
    );
    // A letter whose lowercase is two (`İ`) keeps its one character: `?` still covers it.
    let one = ToolRules::new(
        vec![entry(Action::Deny, "mcp:fs__?", Layer::User)],
        default(Action::Allow),
    );
    assert_eq!(
        one.decide(&call("fs", "\u{130}", None)).action,
        Action::Deny
    );
    // Server names are the config's own: compared as written.
    assert_eq!(one.decide(&call("FS", "x", None)).action, Action::Allow);
    // Many wildcard denies, matched through one `RegexSet`: lowercased there too.
    let many: Vec<ToolEntry> = (0..3000)
        .map(|n| entry(Action::Deny, &format!("mcp:*__*Exec{n}x*"), Layer::User))
        .collect();
    let scanned = ToolRules::new(many, default(Action::Allow));
    assert_eq!(
        scanned.decide(&call("fs", "runEXEC2999Xy", None)).action,
        Action::Deny
    );
}

#[test]
fn no_match_falls_to_the_default_and_says_so() {
    let rules = ToolRules::new(
        vec![entry(Action::Allow, "mcp:fs", Layer::User)],
        default(Action::Deny),
    );
    let decision = rules.decide(&call("git", "log", None));
    assert_eq!(decision.action, Action::Deny);
    assert_eq!(decision.rule, "tools.default");
    assert_eq!(decision.layer, Layer::Builtin);
}

#[test]
fn the_most_authoritative_matching_rule_is_reported() {
    let rules = ToolRules::new(
        vec![
            entry(Action::Deny, "mcp:*__exec", Layer::Org),
            entry(Action::Deny, "mcp:sh__exec", Layer::User),
        ],
        default(Action::Allow),
    );
    assert_eq!(rules.decide(&call("sh", "exec", None)).layer, Layer::Org);
}

#[test]
fn a_narrowing_ask_raises_allow_but_never_lowers_deny() {
    let narrowing = ToolEntry {
        only_narrows: true,
        ..entry(Action::Ask, "mcp:fs", Layer::Project)
    };
    let closed = ToolRules::new(vec![narrowing.clone()], default(Action::Deny));
    assert_eq!(
        closed.decide(&call("fs", "read", None)).action,
        Action::Deny
    );
    let open = ToolRules::new(vec![narrowing], default(Action::Allow));
    let decision = open.decide(&call("fs", "read", None));
    assert_eq!(
        (decision.action, decision.layer),
        (Action::Ask, Layer::Project)
    );
}

fn prefix_rule(action: Action, prefix: &str, negate: bool) -> ToolEntry {
    ToolEntry {
        condition: Some(Condition {
            argument: "path".into(),
            matcher: ArgMatcher::Prefix(prefix.into()),
            negate,
            normalize_path: true,
        }),
        ..entry(action, "mcp:fs__write_file", Layer::User)
    }
}

#[test]
fn argument_rules_see_through_dot_dot() {
    let rules = ToolRules::new(
        vec![prefix_rule(Action::Deny, "/tmp/", true)],
        default(Action::Allow),
    );
    let inside = json!({"path": "/tmp/notes.txt"});
    let escape = json!({"path": "/tmp/../etc/passwd"});
    let missing = json!({});
    assert_eq!(
        rules
            .decide(&call("fs", "write_file", Some(&inside)))
            .action,
        Action::Allow
    );
    assert_eq!(
        rules
            .decide(&call("fs", "write_file", Some(&escape)))
            .action,
        Action::Deny
    );
    assert_eq!(
        rules
            .decide(&call("fs", "write_file", Some(&missing)))
            .action,
        Action::Deny
    );
}

#[test]
fn lists_cannot_smuggle_one_bad_value() {
    let deny = ToolRules::new(
        vec![prefix_rule(Action::Deny, "/etc", false)],
        default(Action::Allow),
    );
    let mixed = json!({"path": ["/tmp/a", "/etc/shadow"]});
    assert_eq!(
        deny.decide(&call("fs", "write_file", Some(&mixed))).action,
        Action::Deny
    );
    let allow = ToolRules::new(
        vec![prefix_rule(Action::Allow, "/tmp", false)],
        default(Action::Deny),
    );
    assert_eq!(
        allow.decide(&call("fs", "write_file", Some(&mixed))).action,
        Action::Deny
    );
    let good = json!({"path": ["/tmp/a", "/tmp/b"]});
    assert_eq!(
        allow.decide(&call("fs", "write_file", Some(&good))).action,
        Action::Allow
    );
}

#[test]
fn regex_and_glob_conditions() {
    let regex_rule = ToolEntry {
        condition: Some(Condition {
            argument: "url".into(),
            matcher: ArgMatcher::Regex(regex::Regex::new("^https://internal\\.").unwrap()),
            negate: false,
            normalize_path: false,
        }),
        ..entry(Action::Deny, "mcp:web__fetch", Layer::Org)
    };
    let rules = ToolRules::new(vec![regex_rule], default(Action::Allow));
    let internal = json!({"url": "https://internal.corp/x"});
    let public = json!({"url": "https://example.com"});
    assert_eq!(
        rules.decide(&call("web", "fetch", Some(&internal))).action,
        Action::Deny
    );
    assert_eq!(
        rules.decide(&call("web", "fetch", Some(&public))).action,
        Action::Allow
    );
}

#[test]
fn listing_hides_only_what_no_call_could_use() {
    let rules = ToolRules::new(
        vec![
            entry(Action::Deny, "mcp:fs__delete_*", Layer::User),
            prefix_rule(Action::Deny, "/etc", false),
        ],
        default(Action::Allow),
    );
    assert!(!rules.lists_tool("fs", "delete_file"));
    assert!(rules.lists_tool("fs", "write_file"));
    let closed = ToolRules::new(
        vec![entry(Action::Allow, "mcp:fs__read_*", Layer::User)],
        default(Action::Deny),
    );
    assert!(closed.lists_tool("fs", "read_file"));
    assert!(!closed.lists_tool("fs", "write_file"));
}

fn server_context() -> PathContext {
    PathContext {
        home: Some(PathBuf::from("/state/servers/fs/home")),
        cwd: Some(PathBuf::from("/data/notes")),
        bases: Vec::new(),
        fallback_cwd: None,
        user_homes: vec![PathBuf::from("/home/me")],
    }
}

fn decide_path(rules: &ToolRules, arguments: Value) -> Action {
    rules
        .decide_in(
            &call("fs", "write_file", Some(&arguments)),
            &server_context(),
        )
        .action
}

/// Every spelling a server resolves into `/etc` is caught by a `deny ... prefix /etc/` rule,
/// and the same value spelled plainly inside the working directory is not.
#[test]
fn a_deny_prefix_holds_for_every_spelling_of_the_path() {
    let rules = ToolRules::new(
        vec![prefix_rule(Action::Deny, "/etc/", false)],
        default(Action::Allow),
    );
    for spelling in [
        "/etc/passwd",
        "../../etc/passwd",
        "~/../../../../etc/passwd",
        "file:///etc/passwd",
        "file://localhost/etc/passwd",
        "file:///etc%2Fpasswd",
        "%2Fetc%2Fpasswd",
        "/data/notes/../../etc/shadow",
    ] {
        assert_eq!(
            decide_path(&rules, json!({"path": spelling})),
            Action::Deny,
            "{spelling}"
        );
    }
    for fine in [
        "todo.md",
        "./sub/../todo.md",
        "/data/notes/x",
        "~/cache",
        "file:///tmp/x",
    ] {
        assert_eq!(
            decide_path(&rules, json!({"path": fine})),
            Action::Allow,
            "{fine}"
        );
    }
}

/// A value that cannot be read as one absolute path fires every deny and satisfies no allow.
#[test]
fn unreadable_values_fail_closed() {
    let deny = ToolRules::new(
        vec![prefix_rule(Action::Deny, "/etc/", false)],
        default(Action::Allow),
    );
    let allow_inside = ToolRules::new(
        vec![prefix_rule(Action::Allow, "/data/notes/", false)],
        default(Action::Deny),
    );
    for unreadable in ["~root/.ssh/id_rsa", "file://other-host/data/notes/x", "%FF"] {
        let args = json!({ "path": unreadable });
        assert_eq!(
            decide_path(&deny, args.clone()),
            Action::Deny,
            "{unreadable}"
        );
        assert_eq!(
            decide_path(&allow_inside, args),
            Action::Deny,
            "{unreadable}"
        );
    }
    // Without a known working directory a relative path is unreadable too.
    let relative = json!({"path": "todo.md"});
    assert_eq!(
        deny.decide(&call("fs", "write_file", Some(&relative)))
            .action,
        Action::Deny
    );
    assert_eq!(decide_path(&allow_inside, relative), Action::Allow);
}

/// `arguments` sent as a string holding a JSON object (as function-calling APIs send them): a
/// deny judges the object a server may decode; an allow judges what was sent, where the
/// argument is absent.
#[test]
fn arguments_sent_as_a_json_string_are_judged_as_the_object_they_hold() {
    let deny = ToolRules::new(
        vec![prefix_rule(Action::Deny, "/etc/", false)],
        default(Action::Allow),
    );
    for (sent, action) in [
        (r#"{"path": "/etc/passwd"}"#, Action::Deny),
        (r#" {"path": "/etc/passwd", "n": NaN} "#, Action::Deny),
        (r#"{"path": "/data/notes/x"}"#, Action::Allow),
        (r#"["/etc/passwd"]"#, Action::Allow),
        ("not json", Action::Allow),
        // An object no parser here reads as one: a lenient decoder may.
        (r#"{"path": "/etc/passwd",}"#, Action::Deny),
        (r#"{"path": "/etc/passwd"} {"a": 1}"#, Action::Deny),
        ("{'path': '/etc/passwd'}", Action::Deny),
        // A byte order mark before it (a decoder of bytes drops it), and the object encoded
        // twice (a string holding a string holding it).
        ("\u{feff}{\"path\": \"/etc/passwd\"}", Action::Deny),
        (r#""{\"path\": \"/etc/passwd\"}""#, Action::Deny),
        (r#""{\"path\": \"/data/notes/x\"}""#, Action::Allow),
    ] {
        assert_eq!(decide_path(&deny, json!(sent)), action, "{sent}");
    }
    let nested = format!("{{\"path\": {}1{}}}", "[".repeat(200), "]".repeat(200));
    assert_eq!(decide_path(&deny, json!(nested)), Action::Deny);
    let allow_inside = ToolRules::new(
        vec![prefix_rule(Action::Allow, "/data/notes/", false)],
        default(Action::Deny),
    );
    assert_eq!(
        decide_path(&allow_inside, json!(r#"{"path": "/data/notes/x"}"#)),
        Action::Deny
    );
    // An allow holds only when both readings do: "allow unless under /etc/" (`negate`) is met by
    // the string as sent (no `path` at all), not by the object it holds.
    let allow_outside = ToolRules::new(
        vec![prefix_rule(Action::Allow, "/etc/", true)],
        default(Action::Deny),
    );
    assert_eq!(
        decide_path(&allow_outside, json!(r#"{"path": "/etc/passwd"}"#)),
        Action::Deny
    );
    assert_eq!(
        decide_path(&allow_outside, json!({"path": "/data/x"})),
        Action::Allow
    );
    // A key twice: a decoder keeping the first reads `/etc/passwd`; no one reading, so a deny
    // fires and an allow does not hold.
    let twice = json!(r#"{"path": "/etc/passwd", "path": "/data/x"}"#);
    assert_eq!(decide_path(&deny, twice.clone()), Action::Deny);
    assert_eq!(decide_path(&allow_outside, twice), Action::Deny);
}

/// An allow needs every reading inside: a value that decodes elsewhere is not allowed.
#[test]
fn an_allow_prefix_needs_every_reading_inside() {
    let rules = ToolRules::new(
        vec![prefix_rule(Action::Allow, "/data/notes/", false)],
        default(Action::Deny),
    );
    assert_eq!(
        decide_path(&rules, json!({"path": "a/b.md"})),
        Action::Allow
    );
    // Read literally it is a file named "..%2F..%2Fetc" inside notes; decoded it is /etc.
    assert_eq!(
        decide_path(&rules, json!({"path": "..%2F..%2Fetc%2Fpasswd"})),
        Action::Deny
    );
}

/// `Path`, ` path` and `ｐａｔｈ` are `path` to a lenient server, so to the rule; two of them in
/// one call are ambiguous and fail closed.
#[test]
fn argument_keys_are_read_as_a_lenient_server_reads_them() {
    let deny = ToolRules::new(
        vec![prefix_rule(Action::Deny, "/etc/", false)],
        default(Action::Allow),
    );
    for key in [
        "Path",
        "PATH",
        " path",
        "path\t",
        "ｐａｔｈ",
        "pa\u{200B}th",
    ] {
        let mut args = serde_json::Map::new();
        args.insert(key.to_string(), json!("/etc/passwd"));
        assert_eq!(
            decide_path(&deny, Value::Object(args)),
            Action::Deny,
            "{key:?}"
        );
    }
    let allow = ToolRules::new(
        vec![prefix_rule(Action::Allow, "/data/notes/", false)],
        default(Action::Deny),
    );
    let ambiguous = json!({"path": "/data/notes/a", "Path": "/etc/passwd"});
    assert_eq!(decide_path(&deny, ambiguous.clone()), Action::Deny);
    assert_eq!(decide_path(&allow, ambiguous.clone()), Action::Deny);
    let decision = deny.decide_in(
        &call("fs", "write_file", Some(&ambiguous)),
        &server_context(),
    );
    let trace = decision.argument.unwrap();
    assert_eq!(trace.keys, vec!["path".to_string(), "Path".to_string()]);
    assert!(trace.note.unwrap().contains("ambiguous"));
}

/// The decision carries how the deciding rule read the value: raw value -> resolved paths.
#[test]
fn the_decision_shows_how_the_value_was_read() {
    let rules = ToolRules::new(
        vec![prefix_rule(Action::Deny, "/etc/", false)],
        default(Action::Allow),
    );
    let args = json!({"path": "file:///etc%2Fpasswd"});
    let decision = rules.decide_in(&call("fs", "write_file", Some(&args)), &server_context());
    let trace = decision.argument.unwrap();
    assert_eq!(trace.values[0].raw, "file:///etc%2Fpasswd");
    let resolved: Vec<_> = trace.values[0]
        .readings
        .iter()
        .map(|r| r.resolved.clone().unwrap())
        .collect();
    assert_eq!(resolved, vec!["/etc%2Fpasswd", "/etc/passwd"]);
}

/// `prefix = "~/.ssh"` means the user's own home, as a grant's `~` does: it catches the real
/// path and the server's own `~` spellings that reach it, and not the server's private home.
#[test]
fn a_home_prefix_means_the_users_real_home() {
    let rules = ToolRules::new(
        vec![prefix_rule(Action::Deny, "~/.ssh", false)],
        default(Action::Allow),
    );
    for caught in [
        "/home/me/.ssh/id_rsa",
        "/home/me/.ssh",
        "~/../../../../home/me/.ssh/k",
    ] {
        assert_eq!(
            decide_path(&rules, json!({"path": caught})),
            Action::Deny,
            "{caught}"
        );
    }
    for fine in ["/home/me/.sshx", "~/.ssh/id_rsa", "/home/me/notes"] {
        assert_eq!(
            decide_path(&rules, json!({"path": fine})),
            Action::Allow,
            "{fine} (the server's ~ is its private home)"
        );
    }
    // A home reached through a link: either spelling of a path under it is caught.
    let linked = PathContext {
        user_homes: vec![PathBuf::from("/home/me"), PathBuf::from("/data/me")],
        ..server_context()
    };
    let decision = rules.decide_in(
        &call(
            "fs",
            "write_file",
            Some(&json!({"path": "/data/me/.ssh/k"})),
        ),
        &linked,
    );
    assert_eq!(decision.action, Action::Deny);
    // No known home: the rule cannot be read, and a deny fails closed.
    let unknown = PathContext {
        user_homes: Vec::new(),
        ..server_context()
    };
    let decision = rules.decide_in(
        &call("fs", "write_file", Some(&json!({"path": "/tmp/x"}))),
        &unknown,
    );
    assert_eq!(decision.action, Action::Deny);
}
