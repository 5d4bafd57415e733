//! Reloads and the install step's allowance, through the core of two servers.

use super::*;

#[test]
fn a_reload_after_the_first_start_installed_the_package_keeps_the_server() {
    let installing = |name: &str| ServerSpec {
        install_allowance: Duration::from_secs(300),
        ..spec(name)
    };
    let mut h = Harness::new(
        vec![installing("alpha"), spec("beta")],
        vec![vec!["read", "write"], vec!["read", "delete"]],
    );
    h.initialize(json!({}));
    h.tool_names();
    // The package is cached now: the reloaded spec has no allowance, and nothing else changed.
    let summary = reload_both_unchanged(&mut h, POLICY);
    assert_eq!(summary.unchanged, vec!["alpha", "beta"]);
    assert!(summary.retired.is_empty() && summary.added.is_empty());
    assert_eq!(h.router.servers[0].life.install_allowance, Duration::ZERO);
}

#[test]
fn the_install_allowance_covers_the_spawn_only_and_is_gone_once_the_server_runs() {
    let installing = ServerSpec {
        install_allowance: Duration::from_secs(300),
        ..spec("alpha")
    };
    let mut h = Harness::new(vec![installing], vec![vec!["read"]]);
    let declared = spec("alpha").startup_timeout;
    assert_eq!(
        h.router.servers[0].life.start_budget(),
        declared + Duration::from_secs(300)
    );
    h.initialize(json!({}));
    h.tool_names();
    // Spawned (the install is behind it) and ready: a later start gets the declared timeout.
    assert_eq!(h.starts, vec![1]);
    assert_eq!(h.router.servers[0].life.start_budget(), declared);
}

const DENY_ALPHA_WRITE: &str =
    "version = 1\n[tools]\ndefault = \"allow\"\ndeny = [\"mcp:alpha__write\"]\n";

/// Reloads `two()`'s servers unchanged, under the policy `text`.
fn reload_both_unchanged(h: &mut Harness, text: &str) -> crate::session::core::ReloadSummary {
    let reloaded = ["alpha", "beta"]
        .map(|name| Reloaded {
            spec: spec(name),
            launch_changed: false,
        })
        .to_vec();
    let redactor = Arc::new(Redactor::new([]).unwrap());
    h.router
        .reload(reloaded, policy_from(text), redactor, h.now)
}

#[test]
fn a_reload_that_changes_the_policy_lists_the_unchanged_servers_tools_through_it() {
    let mut h = two();
    h.initialize(json!({}));
    assert_eq!(
        h.tool_names(),
        vec!["alpha__read", "alpha__write", "beta__read"]
    );
    // beta's delete is allowed now, alpha's write denied.
    let summary = reload_both_unchanged(&mut h, DENY_ALPHA_WRITE);
    assert_eq!(summary.unchanged, vec!["alpha", "beta"]);
    h.drive();
    assert!(
        h.to_host
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "{:?}",
        h.to_host
    );
    assert_eq!(
        h.tool_names(),
        vec!["alpha__read", "beta__read", "beta__delete"],
        "the listing follows the new policy"
    );
    assert_eq!(h.starts, vec![1, 1], "the servers kept running");
}

#[test]
fn a_host_listing_right_after_a_reload_is_answered_at_once_and_then_told_of_the_change() {
    let mut h = two();
    h.initialize(json!({}));
    assert_eq!(h.tool_names().len(), 3);
    reload_both_unchanged(&mut h, DENY_ALPHA_WRITE);
    // The host lists before the servers answered the relist: no wait for a timer.
    h.router.on_host(
        json!({"jsonrpc":"2.0","id":"again","method":"tools/list"}),
        h.now,
    );
    h.drive();
    assert!(
        h.to_host
            .iter()
            .any(|m| m.get("id") == Some(&json!("again"))),
        "{:?}",
        h.to_host
    );
    // Once the new lists are in, the host is told, and lists what the new policy allows.
    let changed = h
        .to_host
        .iter()
        .filter(|m| m["method"] == "notifications/tools/list_changed")
        .count();
    assert!(changed >= 2, "{:?}", h.to_host);
    assert_eq!(
        h.tool_names(),
        vec!["alpha__read", "beta__read", "beta__delete"]
    );
}
