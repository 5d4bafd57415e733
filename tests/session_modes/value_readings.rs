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

/// A path is read as the kernel will resolve it for the server, through the links along it:
/// `link/b` where `link` points into a denied directory is in it, and so is `up/../c` where `up`
/// points to a directory inside it (lexically `c` would be beside `up`), a dangling link's
/// target, and a path padded past any small bound. A path with no link along it is read as
/// written; a prefix with a link in it holds for the paths under its target; a path through
/// `/proc/self` fails closed. Links are followed only where the server can look (its grants).
pub(super) fn a_path_rule_fires_through_the_links_along_the_path(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().canonicalize().unwrap().join("data");
    std::fs::create_dir_all(data.join("secret/sub")).unwrap();
    std::fs::create_dir_all(data.join("public/d")).unwrap();
    std::os::unix::fs::symlink("secret", data.join("link")).unwrap();
    std::os::unix::fs::symlink("secret/sub", data.join("up")).unwrap();
    std::os::unix::fs::symlink("../secret/new", data.join("public/dangle")).unwrap();
    std::os::unix::fs::symlink("public", data.join("alias")).unwrap();
    let rule = |argument: &str, negate: bool, prefix: &str| {
        format!(
            "[[tools.rule]]\ntool = \"mcp:fixture__echo\"\naction = \"deny\"\nargument = {argument:?}\nnegate = {negate}\nprefix = {:?}\n",
            data.join(prefix).display().to_string()
        )
    };
    let setup = Setup::fixture("").policy(&format!(
        "read = [{:?}]\n{}{}",
        data.display().to_string(),
        rule("path", false, "secret"),
        rule("dest", true, "alias"),
    ));
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let path = |rest: &str| data.join(rest).display().to_string();
    let padded = format!("public/{}../link/x", "d/../".repeat(80));
    let cases = [
        ("path", path("secret/a"), true),
        ("path", path("link/b"), true),
        ("path", path("up/../c"), true),
        ("path", path("public/../link/d"), true),
        ("path", path("public/dangle"), true),
        ("path", path(&padded), true),
        ("path", "/proc/self/cwd/x".to_string(), true),
        ("path", path("public/e"), false),
        ("path", path("up/../../public/f"), false),
        // `dest` must be under `alias`, a link to `public`: its target's paths are.
        ("dest", path("public/g"), false),
        ("dest", path("alias/h"), false),
        ("dest", path("secret/i"), true),
    ];
    for (id, (argument, value, denied)) in cases.into_iter().enumerate() {
        // Both arguments each time (a `negate` rule fires on an absent one), the other harmless.
        let mut arguments =
            json!({"text": "through", "path": path("public/ok"), "dest": path("public/ok")});
        arguments[argument] = json!(value);
        let answer = client.call(id as i64 + 1, &world.tool("echo"), arguments);
        let reached = Client::text(&answer).contains("fixture: through");
        assert_eq!(reached, !denied, "{argument} {value}: {answer}");
    }
}
