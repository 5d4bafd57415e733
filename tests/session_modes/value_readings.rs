//! An argument rule judges a value as every reading a lenient server may make of it.

use super::*;

/// `1e0`, `1.0`, `true` and `" 1"` are all the integer 1 to a lax server (the official Python
/// SDK's pydantic), and a list or object sent as a JSON string is parsed into it: a rule on the
/// number 1, or on the paths of a list, fires on each of those spellings. A value none of whose
/// readings match still goes through.
pub(super) fn an_argument_rule_fires_on_every_spelling_a_server_reads_as_the_same(mode: Mode) {
    let setup = Setup::fixture("").policy(
        r#"[[tools.rule]]
tool = "mcp:fixture__echo"
action = "deny"
argument = "pid"
regex = "^1$"

[[tools.rule]]
tool = "mcp:fixture__echo"
action = "deny"
argument = "paths"
prefix = "/srv/secret/"
"#,
    );
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let echo = world.tool("echo");
    let mut id = 0;
    let mut call = |arguments: &str| {
        id += 1;
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{echo}","arguments":{arguments}}}}}"#
        );
        let stdin = client.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        client.answer(json!(id), SECS(10))
    };
    // Written as raw JSON: `1e0` and `0.1e1` must reach airlock as the host spelled them.
    for pid in ["1", "1e0", "0.1e1", "1.0", "true", "\" 1\"", "\"1.0\""] {
        let answer = call(&format!(r#"{{"text":"x","pid":{pid}}}"#));
        assert_eq!(answer["result"]["isError"], true, "pid {pid}: {answer}");
        assert!(Client::text(&answer).contains("pid"), "pid {pid}: {answer}");
    }
    for denied in [
        r#"{"text":"x","paths":"[\"/srv/secret/key\"]"}"#,
        r#"{"text":"x","paths":{"a":"/srv/secret/key"}}"#,
        r#"{"text":"x","paths":"{\"a\": \"/srv/secret/key\"}"}"#,
    ] {
        let answer = call(denied);
        assert_eq!(answer["result"]["isError"], true, "{denied}: {answer}");
    }
    for allowed in [
        r#"{"text":"ok","pid":2.0}"#,
        r#"{"text":"ok","pid":"12"}"#,
        r#"{"text":"ok","paths":"[\"/srv/public/a\"]"}"#,
    ] {
        let answer = call(allowed);
        assert!(Client::text(&answer).contains("ok"), "{allowed}: {answer}");
    }
    let decisions: Vec<String> = world
        .events("decision")
        .iter()
        .map(|event| event["decision"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(decisions[..10], vec!["deny"; 10]);
    assert_eq!(decisions[10..], vec!["allow"; 3]);
}

/// An `allow` rule holds for a list or an object (sent as it is, or as a JSON string) only if
/// every element, key and value does: the server acts on those, not on the text (as written it
/// matched the rule: reviews' bypasses, `"[\"/srv/secret/key\", \"/srv/public/a\"]"` and the
/// same as an object, under `regex = "/srv/public/"`).
pub(super) fn an_allow_rule_holds_for_a_list_or_object_only_through_every_part(mode: Mode) {
    let setup = Setup::fixture("").policy(
        r#"[tools]
default = "deny"

[[tools.rule]]
tool = "mcp:fixture__echo"
action = "allow"
argument = "paths"
regex = "/srv/public/"
"#,
    );
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let echo = world.tool("echo");
    let mut id = 0;
    let mut call = |paths: Value| {
        id += 1;
        client.call(id, &echo, json!({"text": "ok", "paths": paths}))
    };
    for denied in [
        json!("[\"/srv/secret/key\", \"/srv/public/a\"]"),
        json!(["[\"/srv/secret/key\", \"/srv/public/a\"]"]),
        json!(["/srv/secret/key"]),
        // A dict to the server (the official Python SDK parses a string given for one).
        json!("{\"a\": \"/srv/secret/key\", \"b\": \"/srv/public/a\"}"),
        json!({"a": "/srv/secret/key", "b": "/srv/public/a"}),
    ] {
        let answer = call(denied.clone());
        assert_eq!(answer["result"]["isError"], true, "{denied}: {answer}");
        assert!(
            !Client::text(&answer).starts_with("ok"),
            "{denied}: {answer}"
        );
    }
    for allowed in [json!("[\"/srv/public/a\"]"), json!(["/srv/public/a"])] {
        let answer = call(allowed.clone());
        assert!(Client::text(&answer).contains("ok"), "{allowed}: {answer}");
    }
    let decisions: Vec<String> = world
        .events("decision")
        .iter()
        .map(|event| event["decision"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        decisions,
        ["deny", "deny", "deny", "deny", "deny", "allow", "allow"]
    );
}

/// A path through what a process has open (`/proc/self/cwd`, `/dev/fd`) is read by the
/// server's kernel for the server, which the gate cannot do: it fails closed, under a deny rule
/// whatever it names. Other paths are read as written, normalised.
pub(super) fn a_path_through_a_process_handle_fails_closed(mode: Mode) {
    let setup = Setup::fixture("").policy(
        "[[tools.rule]]\ntool = \"mcp:fixture__echo\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/srv/secret\"\n",
    );
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let cases = [
        ("/srv/secret/a", true),
        ("/srv/public/../secret/b", true),
        ("/proc/self/cwd/x", true),
        ("/proc/thread-self/root/srv/secret/c", true),
        ("/dev/fd/3", true),
        ("/srv/public/d", false),
        ("/proc/cpuinfo", false),
    ];
    for (id, (path, denied)) in cases.into_iter().enumerate() {
        let answer = client.call(
            id as i64 + 1,
            &world.tool("echo"),
            json!({"text": "through", "path": path}),
        );
        let reached = Client::text(&answer).contains("fixture: through");
        assert_eq!(reached, !denied, "{path}: {answer}");
    }
}

/// What servers make of a value before they read it is what the gate judges too: `~` that a
/// server does not expand (`~/../secret` is `secret` in its working directory), a `file:` URL
/// with spaces or controls around it or tabs and line breaks in it (URL parsers take them out),
/// digits other than ASCII ones (Python's `int()` reads them), arguments sent as a string holding
/// a JSON object; and a deny written in another case than the tool's name. None of those calls
/// reaches the server; the plain ones still do.
pub(super) fn the_gate_reads_a_value_as_a_server_cleans_it(mode: Mode) {
    let project = tempfile::tempdir().unwrap();
    let root = project.path().display().to_string();
    std::fs::create_dir_all(project.path().join("secret")).unwrap();
    let setup = Setup::fixture("").cwd(project.path()).policy(&format!(
        r#"[tools]
deny = ["mcp:*__PID"]

[[tools.rule]]
tool = "mcp:fixture__echo"
action = "deny"
argument = "path"
prefix = "{root}/secret/"

[[tools.rule]]
tool = "mcp:fixture__echo"
action = "deny"
argument = "n"
regex = "^1$"
"#
    ));
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let echo = world.tool("echo");
    let mut id = 0;
    let mut reaches = |arguments: Value| {
        id += 1;
        let answer = client.call(id, &echo, arguments);
        Client::text(&answer).contains("fixture: through")
    };
    let secret = format!("{root}/secret/key");
    for path in [
        "~/../secret/key".to_string(),
        format!(" file://{secret}"),
        format!("\u{1}file://{secret}"),
        format!("fi\tle://{secret}"),
        format!("file://{root}/sec\nret/key"),
        format!("\t{secret}\n"),
        format!("\u{feff}{secret}"),
        format!("file://{root}/secret\\key"),
    ] {
        assert!(
            !reaches(json!({"text": "through", "path": path})),
            "{path:?}"
        );
    }
    for n in ["\u{ff11}", "\u{661}", "\u{1d7cf}"] {
        assert!(!reaches(json!({"text": "through", "n": n})), "{n:?}");
    }
    let as_string = json!({"text": "through", "path": secret}).to_string();
    assert!(!reaches(json!(as_string)), "{as_string}");
    // A key twice in the string: a decoder keeping the first would read the secret.
    let twice = format!(r#"{{"text": "through", "path": {secret:?}, "path": "/srv/ok"}}"#);
    assert!(!reaches(json!(twice)), "{twice}");
    // The plain ones go through.
    for arguments in [
        json!({"text": "through", "path": format!("{root}/public/a")}),
        json!({"text": "through", "path": "~/notes"}),
        json!({"text": "through", "n": "2"}),
    ] {
        assert!(reaches(arguments.clone()), "{arguments}");
    }
    let pid = client.call(99, &world.tool("pid"), json!({}));
    assert_eq!(pid["result"]["isError"], true, "{pid}");
    // A refusal's record may follow its answer (nothing was forwarded to wait for it).
    let denied = || {
        world
            .events("decision")
            .iter()
            .filter(|event| event["decision"] == "deny")
            .count()
    };
    support::wait_until(SECS(5), || denied() == 14);
    assert_eq!(denied(), 14, "{:#?}", world.events("decision"));
}
