//! Shared setup for the sandbox end-to-end tests: a world-traversable work dir (the server runs
//! as nobody when the tests run as root), the hostile fixture compiled with `cc`, and a runner for
//! `airlock __sandbox-exec`.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

pub struct World {
    pub root: PathBuf,
    pub hostile: PathBuf,
    pub secret: PathBuf,
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Where `.ci/install-peers` put the pinned third-party peers.
pub fn peers() -> PathBuf {
    std::env::var_os("AIRLOCK_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.peers")))
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Every entry of a tree: mode, owner, size, mtime and a hash of the content (or link target),
/// to prove a real cache is byte-for-byte unchanged after a confined run.
pub fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, (u32, u32, u64, i64, u64)> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        if meta.file_type().is_symlink() {
            std::fs::read_link(&path).unwrap().hash(&mut hasher);
        } else if meta.is_file() {
            std::fs::read(&path).unwrap().hash(&mut hasher);
        } else if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
        out.insert(
            path.strip_prefix(dir).unwrap().to_path_buf(),
            (
                meta.mode(),
                meta.uid(),
                meta.len(),
                meta.mtime(),
                hasher.finish(),
            ),
        );
    }
    out
}

/// One world per test process; the fixture binary is shared across processes by content hash.
pub fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("airlock-sandbox-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in [
            "", "tools", "secret", "state", "config", "org", "home", "grant", "sockets",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            chmod(&root.join(dir), 0o755);
        }
        chmod(&root.join("state"), 0o777);
        chmod(&root.join("grant"), 0o777);
        let secret = root.join("secret/secret.txt");
        std::fs::write(&secret, "TOP SECRET\n").unwrap();
        chmod(&secret, 0o666);
        // Not `bin/`: the install prefix of `<x>/bin/prog` is `<x>`, which would grant the secret.
        let hostile = root.join("tools/hostile");
        let status = Command::new("cc")
            .args(["-O1", "-o"])
            .arg(&hostile)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/sandbox/hostile.c"
            ))
            .status()
            .expect("cc");
        assert!(status.success(), "compiling the hostile fixture");
        World {
            root,
            hostile,
            secret,
        }
    })
}

impl World {
    pub fn command(&self, server: &str, extra: &[&str], hostile_args: &[&str]) -> Command {
        let mut cmd = Command::new(AIRLOCK);
        cmd.arg("__sandbox-exec").arg("--server").arg(server);
        cmd.args(extra);
        cmd.arg("--").arg(&self.hostile).args(hostile_args);
        self.env(&mut cmd);
        cmd
    }

    pub fn env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.root.join("home"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", self.root.join("org"))
            .env("SECRET_TOKEN", "s3cr3t-do-not-leak")
            .current_dir(&self.root);
    }

    pub fn run(&self, server: &str, extra: &[&str], hostile_args: &[&str]) -> Output {
        self.command(server, extra, hostile_args)
            .stdin(Stdio::null())
            .output()
            .expect("run airlock")
    }
}

pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts the hostile program reported a refusal (and not an escape).
pub fn assert_refused(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("REFUSED") && !stdout.contains("ESCAPED"),
        "{}",
        text(out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(out));
}

pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

pub fn wait_until(timeout: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    done()
}
