//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! .ci/install-peers) run natively against `airlock serve --listen` with the official
//! server-everything behind it, and in the same test against mcp-proxy (a plain stdio →
//! Streamable HTTP bridge) in front of the same server. Every scenario that passes behind
//! mcp-proxy must pass through airlock, at the handshake-era wire and at 2026-07-28, and so must
//! the transport scenarios a bridge without those protections fails (DNS rebinding).
//! The `server-stateless` scenario (2026-07-28, outside the suite's active set) fails as a whole
//! behind both (its diagnostic tools are the suite's own), so it is compared check by check.
//! The per-scenario results are printed (README "Conformance" holds a run's table).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod http_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use http_support::*;
use serde_json::Value;

/// Scenario → passed, read from the suite's per-scenario `checks.json` files.
fn results(dir: &Path) -> BTreeMap<String, bool> {
    let mut results = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("server-") else {
            continue;
        };
        // `server-<scenario>-<timestamp>`: the timestamp starts with the year.
        let scenario = rest.split("-20").next().unwrap_or(rest).to_string();
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            continue;
        };
        let checks: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        let passed = !checks.is_empty() && checks.iter().all(|c| c["status"] != "FAILURE");
        results.insert(scenario, passed);
    }
    results
}

/// Check id → passed (no occurrence of it failed; a SHOULD's warning is not a failure), over
/// every scenario in `dir`.
fn checks(dir: &Path) -> BTreeMap<String, bool> {
    let mut checks = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            continue;
        };
        let found: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        for check in found {
            let id = check["id"].as_str().unwrap_or_default().to_string();
            let passed = check["status"] != "FAILURE";
            *checks.entry(id).or_insert(true) &= passed;
        }
    }
    checks
}

fn run_suite(url: &str, out: &Path, extra: &[&str]) -> BTreeMap<String, bool> {
    let status = Command::new(http_peer("conformance"))
        .env("PATH", path_with_node22())
        .args(["server", "--url", url, "-o"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    // The suite exits 1 when any scenario fails (server-everything lacks the suite's own tools).
    assert!(status.code().is_some(), "the suite was killed");
    results(out)
}

struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_proxy(everything: &Path) -> (Proxy, String) {
    let port = free_port();
    let child = Command::new(http_peer("mcp-proxy"))
        .env("PATH", path_with_node22())
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--server",
            "stream",
            "--",
            "node",
        ])
        .arg(everything)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let ready = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(ready, "mcp-proxy did not start");
    (Proxy(child), url)
}

fn table(proxy: &BTreeMap<String, bool>, airlock: &BTreeMap<String, bool>) -> String {
    let mark = |r: Option<&bool>| match r {
        Some(true) => "pass",
        Some(false) => "fail",
        None => "-",
    };
    let mut out = String::from("| scenario | mcp-proxy | airlock |\n|---|---|---|\n");
    for scenario in proxy
        .keys()
        .chain(airlock.keys().filter(|k| !proxy.contains_key(*k)))
    {
        out.push_str(&format!(
            "| {scenario} | {} | {} |\n",
            mark(proxy.get(scenario)),
            mark(airlock.get(scenario))
        ));
    }
    out
}

/// Runs the suite with `extra` through airlock (server-everything behind it) and then behind
/// mcp-proxy: the two result directories (in the returned world).
fn run_both(extra: &[&str]) -> (World, PathBuf, PathBuf) {
    let everything =
        peers().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        everything.exists() && http_peer("conformance").exists(),
        "run .ci/install-peers first"
    );
    let world = World::new();
    let (airlock, proxy) = (world.path("airlock-results"), world.path("proxy-results"));
    let gateway = world.listen(&everything_server().unwrap(), &[]);
    run_suite(&gateway.url, &airlock, extra);
    drop(gateway);
    let (_proxy, proxy_url) = start_proxy(&everything);
    run_suite(&proxy_url, &proxy, extra);
    (world, airlock, proxy)
}

fn compare(label: &str, extra: &[&str], must_also_pass: &[&str]) {
    let (_world, airlock, proxy) = run_both(extra);
    let (airlock, proxy) = (results(&airlock), results(&proxy));
    println!("conformance, {label}:\n{}", table(&proxy, &airlock));
    assert!(
        !proxy.is_empty() && !airlock.is_empty(),
        "the suite produced no results"
    );
    for (scenario, passed) in &proxy {
        if *passed {
            assert_eq!(
                airlock.get(scenario),
                Some(&true),
                "{label}: {scenario} passes behind mcp-proxy but not through airlock\n{}",
                table(&proxy, &airlock)
            );
        }
    }
    for scenario in must_also_pass {
        assert_eq!(
            airlock.get(*scenario),
            Some(&true),
            "{label}: {scenario}\n{}",
            table(&proxy, &airlock)
        );
    }
}

#[test]
fn handshake_era_scenarios_pass_wherever_they_pass_behind_mcp_proxy() {
    compare(
        "active suite (2025-11-25 wire)",
        &[],
        &["dns-rebinding-protection", "server-session-lifecycle"],
    );
}

#[test]
fn stateless_scenarios_pass_wherever_they_pass_behind_mcp_proxy() {
    compare(
        "2026-07-28 wire",
        &["--spec-version", "2026-07-28"],
        &["dns-rebinding-protection", "tools-list"],
    );
}

#[test]
fn server_stateless_checks_pass_wherever_they_pass_behind_mcp_proxy() {
    let scenario = [
        "--scenario",
        "server-stateless",
        "--spec-version",
        "2026-07-28",
        "--force",
    ];
    let (_world, airlock, proxy) = run_both(&scenario);
    let (airlock, proxy) = (checks(&airlock), checks(&proxy));
    let table = table(&proxy, &airlock);
    let passed = |c: &BTreeMap<String, bool>| c.values().filter(|p| **p).count();
    println!(
        "server-stateless checks: mcp-proxy {}/{}, airlock {}/{}\n{table}",
        passed(&proxy),
        proxy.len(),
        passed(&airlock),
        airlock.len()
    );
    assert!(!proxy.is_empty() && !airlock.is_empty(), "no checks ran");
    for (check, passed) in &proxy {
        if *passed {
            assert_eq!(
                airlock.get(check),
                Some(&true),
                "server-stateless: {check} passes behind mcp-proxy but not through airlock\n{table}"
            );
        }
    }
    // The session core's own: the subscription stream, and a discovery hosts can trust.
    for check in [
        "sep-2575-server-sends-subscription-ack",
        "sep-2575-server-tags-subscription-id",
        "sep-2575-server-honors-notification-filter",
        "sep-2575-server-declares-prompts-in-discover",
        "sep-2575-discover-capabilities-match-handlers",
    ] {
        assert_eq!(airlock.get(check), Some(&true), "{check}\n{table}");
    }
}
