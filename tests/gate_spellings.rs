//! The gate holds whatever spelling a call uses, end to end in both modes: a lenient server
//! (`tests/fixtures/mcp/lenient_server.py` lowercases, trims and Unicode-folds the names it is
//! called with, and runs tools it never listed) under the real binary, with a policy denying
//! `write_file`. No other spelling of it, and no unlisted name, reaches the server; the listed
//! name of an allowed tool still works, also when the host calls before listing and after the
//! server's list changed. And the official filesystem server, given a directory with a rule
//! denying a subdirectory of it: relative, `~`, URL and odd-key spellings of paths inside the
//! subdirectory are refused by airlock, while the rest of the directory works.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Client, Mode, Setup, World, start, start_again};

both_modes!(
    no_other_spelling_of_a_denied_or_unlisted_tool_reaches_the_server,
    a_key_a_lenient_server_reads_as_another_never_steers_it,
    a_method_spelled_otherwise_is_refused_not_passed_on,
    a_call_before_any_listing_is_decided_against_the_servers_own_listing,
    a_tool_added_after_list_changed_is_callable_by_its_listed_name_only,
    the_filesystem_server_never_sees_a_spelling_into_a_denied_subdirectory,
    a_tilde_path_is_read_against_the_exact_home_the_server_sees,
    a_rule_prefix_under_tilde_is_the_users_own_home,
    a_relative_path_is_denied_whichever_directory_the_server_starts_in,
    a_relative_path_is_read_in_the_home_of_a_server_whose_uid_cannot_enter_its_working_directory,
);

/// The fixture under a policy denying its `write_file`; the log of calls that reached it.
fn lenient(mode: Mode) -> (World, Client, std::path::PathBuf) {
    let (setup, log) = lenient_setup();
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    (world, client, log)
}

/// The fixture's setup (policy: `write_file` denied, no pins) and the log of calls reaching it.
fn lenient_setup() -> (Setup, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap().keep();
    let log = dir.join("calls.log");
    std::fs::write(&log, "").unwrap();
    let script = support::root().join("tests/fixtures/mcp/lenient_server.py");
    let (script, log_arg) = (script.display().to_string(), log.display().to_string());
    let setup = Setup::command(&["/usr/bin/python3", &script, &log_arg])
        .policy(&format!("write = [{:?}]", dir.display().to_string()))
        .policy("[tools]\ndeny = [\"mcp:fixture__write_file\"]")
        // A tool new since the first listing would be hidden until approved (pins); this test
        // is about names, so pins stay out of the way.
        .policy("[pins]\npinning = \"off\"");
    (setup, log)
}

fn reached(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// An unknown tool, answered by airlock as a tool result with `isError: true`.
fn assert_unknown(answer: &Value, sent: &str) {
    assert_eq!(answer["result"]["isError"], true, "{sent:?}: {answer}");
    let text = Client::text(answer);
    assert!(text.starts_with("Unknown tool: "), "{sent:?}: {text}");
}

fn no_other_spelling_of_a_denied_or_unlisted_tool_reaches_the_server(mode: Mode) {
    let (world, mut client, log) = lenient(mode);
    let listing = client.request(1, "tools/list", json!({}));
    let names: Vec<&str> = listing["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.contains("write_file")), "{names:?}");

    let denied = client.call(2, &world.tool("write_file"), json!({"text": "x"}));
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    let spellings = [
        "WRITE_FILE",
        "write_file ",
        " write_file",
        "Write_File",
        "write\u{200b}_file",
        "\u{ff57}\u{ff52}\u{ff49}\u{ff54}\u{ff45}_file",
        "hidden",
        "HIDDEN ",
    ];
    for (n, spelling) in spellings.iter().enumerate() {
        let answer = client.call(10 + n as i64, &world.tool(spelling), json!({"text": "x"}));
        assert_unknown(&answer, spelling);
    }
    assert!(
        reached(&log).is_empty(),
        "reached the server: {:?}",
        reached(&log)
    );

    let echo = client.call(30, &world.tool("echo"), json!({"text": "hi"}));
    assert_eq!(Client::text(&echo), "echo ran: hi", "{echo}");
    assert_eq!(reached(&log), vec!["\"echo\"\techo".to_string()]);

    // Each refusal is audited with the name as sent.
    let decisions = world.events("decision");
    for spelling in spellings {
        let decision = decisions
            .iter()
            .find(|e| e["tool"] == spelling)
            .unwrap_or_else(|| panic!("no decision for {spelling:?}: {decisions:?}"));
        assert_eq!(decision["decision"], "deny", "{decision}");
        assert_eq!(decision["rule"], "airlock: not a listed tool", "{decision}");
    }
}

/// The host's side of the same reading: a server reading keys as Go's `encoding/json` does takes
/// `"Name"` after `"name"` for the tool, `"ARGUMENTS"` for the arguments, `"PARAMS"` for the
/// params and `"Method"` for the method. A host (or an HTTP client) sending both spellings must
/// not get a call past the gate that decided on the exact ones: the server reads only those.
fn a_key_a_lenient_server_reads_as_another_never_steers_it(mode: Mode) {
    let (setup, log) = lenient_setup();
    let dir = log.parent().unwrap().to_path_buf();
    let secret = dir.join("secret");
    let setup = setup.policy(&format!(
        "[[tools.rule]]\ntool = \"mcp:fixture__echo\"\naction = \"deny\"\nargument = \"path\"\nprefix = {:?}",
        secret.display().to_string()
    ));
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    client.request(1, "tools/list", json!({}));
    let echo = world.tool("echo");
    let open = dir.join("open").display().to_string();
    let inside = secret.join("key").display().to_string();

    client.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": echo, "arguments": {"text": "hi"}, "Name": "write_file"}}));
    let answer = client.answer(json!(2), Duration::from_secs(10));
    assert_eq!(Client::text(&answer), "echo ran: hi", "{answer}");

    client.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": echo, "arguments": {"path": open}, "ARGUMENTS": {"path": inside}}}));
    let answer = client.answer(json!(3), Duration::from_secs(10));
    assert_eq!(
        Client::text(&answer),
        format!("echo ran: {open}"),
        "{answer}"
    );

    // A value too: a server reading the path as a C string stops at the NUL, inside `secret`.
    let cut = format!("{inside}\u{0}/../../open");
    let denied = client.call(6, &echo, json!({"path": cut}));
    assert_eq!(denied["result"]["isError"], true, "{denied}");

    client.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": echo, "arguments": {"text": "hi"}},
        "PARAMS": {"name": "write_file"},
        "pa\u{017F}ams\u{0}": {"name": "write_file"}}));
    let answer = client.answer(json!(4), Duration::from_secs(10));
    assert_eq!(Client::text(&answer), "echo ran: hi", "{answer}");

    // In `serve` the gateway answers a ping itself; in `run` the server gets it.
    client.send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "ping", "Method": "tools/call",
        "params": {"name": "write_file"}}),
    );
    let answer = client.answer(json!(5), Duration::from_secs(10));
    assert_eq!(answer["result"], json!({}), "{answer}");

    assert_eq!(
        reached(&log),
        vec!["\"echo\"\techo".to_string(); 3],
        "only echo ran, as decided"
    );
    let decisions = world.events("decision");
    assert!(
        decisions.iter().all(|d| d["tool"] != "write_file"),
        "{decisions:?}"
    );
}

/// A method airlock does not know goes on in `run` as it came; `"tools/call\u0000"` or
/// `"Tools/Call"` is a `tools/call` to a server reading method names leniently, and would run
/// ungated and unaudited. Such a spelling of a method airlock handles is refused and recorded.
fn a_method_spelled_otherwise_is_refused_not_passed_on(mode: Mode) {
    let (world, mut client, log) = lenient(mode);
    client.request(1, "tools/list", json!({}));
    for (n, method) in ["tools/call\u{0}", "Tools/Call", "tools/call "]
        .into_iter()
        .enumerate()
    {
        let id = 10 + n as i64;
        client.send(json!({"jsonrpc": "2.0", "id": id, "method": method,
            "params": {"name": "write_file", "arguments": {"text": "x"}}}));
        let answer = client.answer(json!(id), Duration::from_secs(10));
        assert_eq!(answer["error"]["code"], -32600, "{method:?}: {answer}");
    }
    // A notification has no answer to carry the refusal: it is dropped.
    client.send(json!({"jsonrpc": "2.0", "method": "TOOLS/CALL", "ID": 20,
        "params": {"name": "write_file", "arguments": {"text": "x"}}}));
    let echo = client.call(21, &world.tool("echo"), json!({"text": "after"}));
    assert_eq!(Client::text(&echo), "echo ran: after", "{echo}");
    assert_eq!(reached(&log), vec!["\"echo\"\techo".to_string()]);
    let dropped: Vec<Value> = world
        .audit()
        .into_iter()
        .filter(|e| e["event"] == "dropped" && e["server"] == "host")
        .collect();
    assert_eq!(dropped.len(), 4, "{dropped:?}");
    assert!(
        dropped.iter().all(|e| e["reason"]
            .as_str()
            .is_some_and(|r| r.contains("\"tools/call\""))),
        "{dropped:?}"
    );
}

fn a_call_before_any_listing_is_decided_against_the_servers_own_listing(mode: Mode) {
    let (world, mut client, log) = lenient(mode);
    // No tools/list from the host: airlock lists for itself.
    let upper = client.call(1, &world.tool("ECHO"), json!({"text": "a"}));
    assert_unknown(&upper, "ECHO");
    let echo = client.call(2, &world.tool("echo"), json!({"text": "b"}));
    assert_eq!(Client::text(&echo), "echo ran: b", "{echo}");
    assert_eq!(reached(&log), vec!["\"echo\"\techo".to_string()]);
}

fn a_tool_added_after_list_changed_is_callable_by_its_listed_name_only(mode: Mode) {
    let (world, mut client, log) = lenient(mode);
    client.request(1, "tools/list", json!({}));
    assert_unknown(&client.call(2, &world.tool("late"), json!({})), "late");
    // `grow` lists `late` and says so; the host calls it at once, without listing again.
    let grow = client.call(3, &world.tool("grow"), json!({}));
    assert_eq!(Client::text(&grow), "grow ran: ", "{grow}");
    let late = client.call(4, &world.tool("late"), json!({"text": "c"}));
    assert_eq!(Client::text(&late), "late ran: c", "{late}");
    assert_unknown(&client.call(5, &world.tool("LATE"), json!({})), "LATE");
    let calls = reached(&log);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[1], "\"late\"\tlate");
}

fn the_filesystem_server_never_sees_a_spelling_into_a_denied_subdirectory(mode: Mode) {
    let Some(server) = support::npm_server("server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let granted = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(granted.join("public")).unwrap();
    std::fs::create_dir_all(granted.join("secret")).unwrap();
    std::fs::write(granted.join("public/a.txt"), "public words").unwrap();
    std::fs::write(granted.join("secret/key.txt"), "secret words").unwrap();
    let d = granted.display().to_string();
    let (node, server) = (support::node(), server.display().to_string());
    let npm = support::peers().join("npm").display().to_string();
    let setup = Setup::command(&[&node.display().to_string(), &server, &d])
        .cwd(&granted)
        .policy(&format!("read = [{npm:?}]\nwrite = [{d:?}]"))
        .policy(&format!(
            "[[tools.rule]]\ntool = \"mcp:fixture__*\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"{d}/secret/\""
        ));
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let read = world.tool("read_text_file");

    let works = client.call(1, &read, json!({"path": "public/a.txt"}));
    assert_eq!(Client::text(&works), "public words", "{works}");
    let works = client.call(2, &read, json!({"path": format!("{d}/public/a.txt")}));
    assert_eq!(Client::text(&works), "public words", "{works}");

    // `~` spelled from the exact HOME the server sees: up to the common ancestor, down into the
    // granted directory. Read against any other HOME it lands elsewhere.
    let home = world.path("state").join("airlock/servers/fixture/home");
    let from_home = relative(&home, &granted.join("secret/key.txt"));
    let spellings = [
        json!({"path": "secret/key.txt"}),
        json!({"path": "public/../secret/key.txt"}),
        json!({"path": "./secret//key.txt"}),
        json!({ "path": format!("~/{from_home}") }),
        json!({"path": format!("file://localhost{d}/secret/key.txt")}),
        json!({"path": format!("file://{d}%2Fsecret%2Fkey.txt")}),
        json!({"path": format!("{}%2Fsecret%2Fkey.txt", d.replace('/', "%2F"))}),
        json!({"Path": format!("{d}/secret/key.txt")}),
        json!({"path": format!("{d}/public/a.txt"), " path": format!("{d}/secret/key.txt")}),
    ];
    for (n, arguments) in spellings.iter().enumerate() {
        let answer = client.call(10 + n as i64, &read, arguments.clone());
        let text = Client::text(&answer);
        assert_eq!(answer["result"]["isError"], true, "{arguments}: {answer}");
        assert!(text.starts_with("airlock denied"), "{arguments}: {text}");
        assert!(!text.contains("secret words"), "{text}");
    }
    // Each refusal is audited (the log is written as the session goes: wait for the last).
    let denied = || {
        world
            .events("decision")
            .into_iter()
            .filter(|e| e["decision"] == "deny")
            .count()
    };
    support::wait_until(Duration::from_secs(5), || denied() == spellings.len());
    assert_eq!(denied(), spellings.len(), "{:?}", world.events("decision"));
}

/// `~` is read against the HOME the server itself sees (its private home under airlock's state
/// dir), exactly: the server reports its own reading of `~/public/a`, a rule on
/// `<that HOME>/private/` refuses `~/private/a` and one `..` out and back in (which only lands
/// there with the right last component), and lets `..` into a sibling of HOME through.
fn a_tilde_path_is_read_against_the_exact_home_the_server_sees(mode: Mode) {
    // A first session makes the world (its state dir is where the server's HOME lives).
    let (world, first, _) = lenient(mode);
    drop(first);
    let home = world.path("state").join("airlock/servers/fixture/home");
    let home = home.display().to_string();
    let (setup, log) = lenient_setup();
    // A working directory the server is not granted: it starts in its home instead, and a
    // relative path is read there too.
    let elsewhere = tempfile::tempdir().unwrap();
    let setup = setup
        .policy(&format!(
            "[[tools.rule]]\ntool = \"mcp:fixture__echo\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"{home}/private/\""
        ))
        .cwd(elsewhere.path());
    let mut client = start_again(&world, setup);
    client.initialize("2025-06-18");
    let echo = world.tool("echo");

    let own = client.call(1, &echo, json!({"path": "~/public/a"}));
    assert_eq!(
        Client::text(&own),
        format!("echo ran: {home}/public/a"),
        "{own}"
    );
    for (n, path) in [
        "~/private/a",
        "~/../home/private/a",
        "~/public/../private/a",
    ]
    .iter()
    .enumerate()
    {
        let answer = client.call(10 + n as i64, &echo, json!({ "path": path }));
        let text = Client::text(&answer);
        assert!(text.starts_with("airlock denied"), "{path}: {text}");
        assert!(
            text.contains(&format!("was read as {home}/private/a")),
            "{text}"
        );
    }
    let public = client.call(14, &echo, json!({"path": "public/b"}));
    assert_eq!(
        Client::text(&public),
        format!("echo ran: {home}/public/b"),
        "the server reads a relative path from its home: {public}"
    );
    let relative = client.call(15, &echo, json!({"path": "private/a"}));
    let text = Client::text(&relative);
    assert!(
        text.contains(&format!("was read as {home}/private/a")),
        "relative to the home it starts in: {text}"
    );
    let sibling = client.call(20, &echo, json!({"path": "~/../homework/private/a"}));
    assert_eq!(
        Client::text(&sibling),
        format!("echo ran: {}work/private/a", home),
        "{sibling}"
    );
    assert_eq!(reached(&log).len(), 3, "{:?}", reached(&log));
}

/// A rule's `prefix = "~/.ssh"` is the user's real home (the HOME airlock runs with), as a
/// grant's `~` is; the server's own `~` (its private home) is another directory.
fn a_rule_prefix_under_tilde_is_the_users_own_home(mode: Mode) {
    let (setup, log) = lenient_setup();
    let setup = setup.policy(
        "[[tools.rule]]\ntool = \"mcp:fixture__echo\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"~/.ssh\"",
    );
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let echo = world.tool("echo");
    let key = world.path("home").join(".ssh/id_rsa").display().to_string();
    let denied = client.call(1, &echo, json!({ "path": key }));
    let text = Client::text(&denied);
    assert!(text.starts_with("airlock denied"), "{text}");
    assert!(text.contains("prefix \"~/.ssh\""), "{text}");
    let own = client.call(2, &echo, json!({"path": "~/.ssh/id_rsa"}));
    assert!(Client::text(&own).starts_with("echo ran: "), "{own}");
    assert_eq!(reached(&log).len(), 1, "{:?}", reached(&log));
}

/// The working directory is the resolved form of a grant given through a link: the plan cannot
/// tell from the paths as written whether the server starts there or in its home, so a relative
/// path is read against both, and a deny on the working directory's `.git` holds.
fn a_relative_path_is_denied_whichever_directory_the_server_starts_in(mode: Mode) {
    let log = tempfile::tempdir().unwrap().keep().join("calls.log");
    std::fs::write(&log, "").unwrap();
    let dir = tempfile::tempdir().unwrap().keep();
    let real = dir.join("real/proj");
    std::fs::create_dir_all(real.join(".git")).unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let script = support::root().join("tests/fixtures/mcp/lenient_server.py");
    let (script, log_arg) = (script.display().to_string(), log.display().to_string());
    // The log's directory and the project through its link are granted.
    let setup = Setup::command(&["/usr/bin/python3", &script, &log_arg])
        .policy(&format!(
            "write = [{:?}, {:?}]",
            log.parent().unwrap().display().to_string(),
            link.display().to_string()
        ))
        .policy("[pins]\npinning = \"off\"")
        .policy(&format!(
            "[[tools.rule]]\ntool = \"mcp:fixture__echo\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"{}/.git\"",
            real.display()
        ))
        .cwd(&real);
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let echo = world.tool("echo");
    let denied = client.call(1, &echo, json!({"path": ".git/config"}));
    let text = Client::text(&denied);
    assert!(text.starts_with("airlock denied"), "{text}");
    let fine = client.call(2, &echo, json!({"path": "notes.txt"}));
    assert!(Client::text(&fine).starts_with("echo ran: "), "{fine}");
    assert_eq!(reached(&log).len(), 1, "{:?}", reached(&log));
}

/// Root runs the server as `nobody`, and its working directory is in its root (beneath a
/// grant) but closed to that uid (root's, 0700): the server starts in its private home, so a
/// relative path is read there too. A rule refusing any path outside the working directory then
/// refuses `notes.txt` (the server would take it in its home), while the same file named
/// absolutely still passes.
fn a_relative_path_is_read_in_the_home_of_a_server_whose_uid_cannot_enter_its_working_directory(
    mode: Mode,
) {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: only root can run a server as another uid");
        return;
    }
    let chmod = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let dir = tempfile::tempdir().unwrap().keep();
    chmod(&dir, 0o755);
    let logs = dir.join("logs");
    std::fs::create_dir(&logs).unwrap();
    chmod(&logs, 0o777);
    let log = logs.join("calls.log");
    std::fs::write(&log, "").unwrap();
    chmod(&log, 0o666);
    let closed = dir.join("closed");
    std::fs::create_dir(&closed).unwrap();
    chmod(&closed, 0o700);
    let script = support::root().join("tests/fixtures/mcp/lenient_server.py");
    let (script, log_arg) = (script.display().to_string(), log.display().to_string());
    let setup = Setup::command(&["/usr/bin/python3", &script, &log_arg])
        .run_as("nobody")
        .policy(&format!("write = [{:?}]", dir.display().to_string()))
        .policy("[pins]\npinning = \"off\"")
        .policy(&format!(
            "[[tools.rule]]\ntool = \"mcp:fixture__echo\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"{}/\"\nnegate = true",
            closed.display()
        ))
        .cwd(&closed);
    let (world, mut client) = start(mode, setup);
    client.initialize("2025-06-18");
    let echo = world.tool("echo");
    let denied = client.call(1, &echo, json!({"path": "notes.txt"}));
    let text = Client::text(&denied);
    assert!(text.starts_with("airlock denied"), "{text}");
    let absolute = closed.join("notes.txt").display().to_string();
    let fine = client.call(2, &echo, json!({"path": absolute}));
    assert!(Client::text(&fine).starts_with("echo ran: "), "{fine}");
    assert_eq!(reached(&log).len(), 1, "{:?}", reached(&log));
}

/// `to` relative to `from` (both absolute): `..` up to their common ancestor, then down.
fn relative(from: &std::path::Path, to: &std::path::Path) -> String {
    let (from, to): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let up = std::iter::repeat_n("..".to_string(), from.len() - common);
    let down = to[common..]
        .iter()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    up.chain(down).collect::<Vec<_>>().join("/")
}
