//! The release binaries the proxy benches drive: built once per bench run, then located in the
//! target directory (`CARGO_TARGET_DIR` respected).

use std::path::PathBuf;
use std::process::Command;

pub struct Binaries {
    pub airlock: PathBuf,
    /// The fast native fixture server, `examples/mcp_echo.rs`.
    pub mcp_echo: PathBuf,
}

/// Set to an airlock binary to measure that one instead of building the working tree's: how two
/// builds are compared in alternating runs of the same bench binary.
pub const AIRLOCK_OVERRIDE_ENV: &str = "AIRLOCK_BENCH_AIRLOCK";

/// Builds `airlock` and `examples/mcp_echo` with `--release` and returns their paths.
pub fn build_release() -> Binaries {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let given = std::env::var_os(AIRLOCK_OVERRIDE_ENV).map(PathBuf::from);
    let mut build = vec!["build", "--release", "--example", "mcp_echo"];
    if given.is_none() {
        build.extend(["--bin", "airlock"]);
    }
    let status = Command::new(env!("CARGO"))
        .args(build)
        .current_dir(&root)
        .status()
        .expect("cargo build");
    assert!(status.success(), "release build failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Binaries {
        airlock: given.unwrap_or_else(|| target.join("release/airlock")),
        mcp_echo: target.join("release/examples/mcp_echo"),
    }
}
