//! What every test binary needs, whatever it starts: where the repository and the pinned peers
//! are, the peers themselves (skipped locally when missing, a failure under CI), the programs on
//! PATH, and waiting for a condition. `support` re-exports it; the other support modules include
//! the parts they use (`#[path]`), so each helper is written once.
#![allow(dead_code)] // each test binary uses its own part

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn peers() -> PathBuf {
    std::env::var_os("AIRLOCK_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".peers"))
}

/// A pinned peer (`.ci/install-peers`) at `relative` under the peers dir, or `None` (skip)
/// locally; under CI a missing peer is a failure.
pub fn peer(relative: &str) -> Option<PathBuf> {
    let path = peers().join(relative);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "peer {relative} missing under CI: run .ci/install-peers"
    );
    eprintln!("SKIP: peer {relative} missing (run .ci/install-peers)");
    None
}

/// The Python of the venv that holds the official `mcp` SDK (a pinned peer).
pub fn sdk_python() -> Option<PathBuf> {
    peer("sandbox-venv/bin/python")
}

/// The entry point of an official reference server from the pinned npm peers
/// (`server-filesystem`, `server-everything`), or `None` (skip) locally; under CI a missing
/// peer is a failure.
pub fn npm_server(name: &str) -> Option<PathBuf> {
    let entry = peers().join(format!(
        "npm/node_modules/@modelcontextprotocol/{name}/dist/index.js"
    ));
    if entry.exists() {
        return Some(entry);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "peer {name} missing under CI: run .ci/install-peers"
    );
    eprintln!("SKIP: peer {name} missing (run .ci/install-peers)");
    None
}

pub fn wait_until(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    check()
}

/// The pids of every process whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

/// The real interpreter behind `python3` (not a pyenv shim, which would need the user's home
/// inside the sandbox).
pub fn real_python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8(out.stdout)
        .expect("utf8")
        .trim()
        .to_string()
}

/// The SDK's Python and the directory of the reference servers (`@modelcontextprotocol`, with
/// `server-filesystem` and `server-everything`), or `None` (skip) locally; under CI a missing
/// peer is a failure.
pub fn sdk_and_reference_servers() -> Option<(PathBuf, PathBuf)> {
    npm_server("server-filesystem")?;
    let everything = npm_server("server-everything")?;
    // .../@modelcontextprotocol/server-everything/dist/index.js
    let scope = everything.ancestors().nth(3)?.to_path_buf();
    Some((sdk_python()?, scope))
}

/// The SDK's Python and `server-everything`'s entry point, or `None` (skip) locally.
pub fn sdk_and_everything() -> Option<(PathBuf, PathBuf)> {
    Some((sdk_python()?, npm_server("server-everything")?))
}

/// `program` from PATH, its real path (the sandbox grants a runtime's prefix).
pub fn which(program: &str) -> PathBuf {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .expect("sh");
    let path = PathBuf::from(String::from_utf8(out.stdout).expect("utf8").trim());
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// `node` from PATH, its real path.
pub fn node() -> PathBuf {
    which("node")
}
