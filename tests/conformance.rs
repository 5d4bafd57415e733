//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `.ci/install-peers`) run against the official server-everything three times — directly,
//! through `airlock run` and through `airlock serve` — each behind `mcp-proxy` (stdio →
//! Streamable HTTP on loopback). airlock must not change the verdict of any scenario: the same
//! scenarios pass (and fail) in all three. Peers come from `.ci/install-peers`; without them the
//! test is skipped locally and fails under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod support;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{AIRLOCK, root, wait_until};

struct Peers {
    node: PathBuf,
    everything: PathBuf,
    proxy: PathBuf,
    suite: PathBuf,
}

fn peer_paths() -> Option<Peers> {
    let conformance = "conformance/node_modules";
    Some(Peers {
        node: support::node(),
        everything: support::npm_server("server-everything")?,
        proxy: support::peer(&format!("{conformance}/mcp-proxy/dist/bin/mcp-proxy.mjs"))?,
        suite: support::peer(&format!(
            "{conformance}/@modelcontextprotocol/conformance/dist/index.js"
        ))?,
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `mcp-proxy` serving `command` on a loopback port; killed on drop.
struct Proxy(Child, u16);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn proxy(peers: &Peers, dir: &Path, command: &[String]) -> Proxy {
    let port = free_port();
    let child = Command::new(&peers.node)
        .arg(&peers.proxy)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--"])
        .args(command)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("AIRLOCK_ORG_POLICY_DIR", dir.join("org"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mcp-proxy");
    let up = wait_until(Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "mcp-proxy did not listen");
    Proxy(child, port)
}

/// Runs every server scenario against `url`; scenario → passed, from the suite's summary
/// (`✓ name: 1 passed, 0 failed` / `✗ name: ...`).
fn suite(peers: &Peers, url: &str, dir: &Path) -> BTreeMap<String, bool> {
    let out = Command::new(&peers.node)
        .arg("--import")
        .arg(root().join("tests/fixtures/conformance/node20.mjs"))
        .arg(&peers.suite)
        .args(["server", "--url", url])
        .current_dir(dir)
        .output()
        .expect("conformance");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut verdicts = BTreeMap::new();
    for line in stdout.lines() {
        let (passed, rest) = match (line.strip_prefix("✓ "), line.strip_prefix("✗ ")) {
            (Some(rest), _) => (true, rest),
            (_, Some(rest)) => (false, rest),
            _ => continue,
        };
        if let Some((scenario, _)) = rest.split_once(':') {
            verdicts.insert(scenario.to_string(), passed);
        }
    }
    assert!(
        !verdicts.is_empty(),
        "no summary: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verdicts
}

#[test]
fn the_conformance_suite_gives_the_same_verdicts_through_run_and_serve_as_direct() {
    let Some(peers) = peer_paths() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[sandbox]\nrun_as = \"root\"\nkill_timeout = 1\nread = [\"{}\"]\n",
            support::peers().join("npm").display()
        ),
    )
    .unwrap();
    let config = dir.path().join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.everything]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\n",
            peers.node.display().to_string(),
            peers.everything.display().to_string()
        ),
    )
    .unwrap();
    let (node, everything) = (
        peers.node.display().to_string(),
        peers.everything.display().to_string(),
    );
    let audit = dir.path().join("audit.jsonl").display().to_string();
    let policy = policy.display().to_string();
    let direct = vec![node.clone(), everything.clone(), "stdio".into()];
    let mut run = vec![
        AIRLOCK.to_string(),
        "run".into(),
        "--name".into(),
        "everything".into(),
    ];
    run.extend([
        "--policy".into(),
        policy.clone(),
        "--audit".into(),
        audit.clone(),
        "--".into(),
    ]);
    run.extend(direct.clone());
    let serve = vec![
        AIRLOCK.to_string(),
        "serve".into(),
        "--config".into(),
        config.display().to_string(),
        "--policy".into(),
        policy,
        "--audit".into(),
        audit,
    ];
    let mut verdicts = Vec::new();
    for (label, command) in [("direct", direct), ("run", run), ("serve", serve)] {
        let proxy = proxy(&peers, dir.path(), &command);
        let url = format!("http://127.0.0.1:{}/mcp", proxy.1);
        let got = suite(&peers, &url, dir.path());
        assert!(!got.is_empty(), "{label}: no scenario ran");
        eprintln!("{label}: {got:?}");
        verdicts.push((label, got));
    }
    let (_, direct) = &verdicts[0];
    assert!(
        direct.values().any(|passed| *passed),
        "direct passes nothing: {direct:?}"
    );
    for (label, got) in &verdicts[1..] {
        assert_eq!(got, direct, "{label} differs from direct");
    }
}
