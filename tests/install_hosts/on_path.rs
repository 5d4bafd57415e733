//! The `airlock` a user's `PATH` finds: what install writes, and a wrapper written by hand.

use super::*;

/// With `airlock` on PATH as a link, install still writes the binary's own path: the link's
/// directory may be one a server is granted to write, and the host would start whatever it
/// found there, unconfined. An entry a user wrote by hand with `"command": "airlock"` is this
/// airlock's wrapper, not another's.
#[test]
fn install_writes_the_binarys_own_path_and_knows_a_bare_name_for_it() {
    let user = User::new();
    let bin = user.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("airlock");
    std::os::unix::fs::symlink(AIRLOCK, &link).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let airlock = |args: &[&str]| {
        let out = user
            .own_env(Command::new(&link).args(args).current_dir(&user.project))
            .env("PATH", &path)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "airlock {args:?}: {said}");
        said
    };
    let cursor = user.home.join(".cursor/mcp.json");
    user.place("cursor/mcp.json", &cursor);
    airlock(&["install", "cursor"]);
    let config = read_config(&cursor);
    let binary = std::fs::canonicalize(AIRLOCK).unwrap();
    assert_eq!(
        config["mcpServers"]["report"]["command"],
        binary.display().to_string(),
        "{config}"
    );

    let mut config = read_config(&cursor);
    config["mcpServers"]["report"]["command"] = json!("airlock");
    std::fs::write(&cursor, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    let said = airlock(&["install", "cursor"]);
    assert!(
        said.contains("already wrapped") && !said.contains("by another airlock"),
        "{said}"
    );
}
