//! An argument rule judges a value as every reading a lenient server may make of it.

use super::*;

/// `1e0`, `1.0`, `true` and `" 1"` are all the integer 1 to a lax server (the official Python
/// SDK's pydantic), and a list sent as a JSON string is parsed into the list: a rule on the
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
    let denied = call(r#"{"text":"x","paths":"[\"/srv/secret/key\"]"}"#);
    assert_eq!(denied["result"]["isError"], true, "{denied}");
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
    assert_eq!(decisions[..8], vec!["deny"; 8]);
    assert_eq!(decisions[8..], vec!["allow"; 3]);
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
