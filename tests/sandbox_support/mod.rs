//! Shared setup for the sandbox end-to-end tests: a world-traversable work dir (the server runs
//! as nobody when the tests run as root), the hostile fixture compiled with `cc`, and a runner for
//! `airlock __sandbox-exec`.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

#[path = "../support/basics.rs"]
mod basics;
#[allow(unused_imports)] // each test binary uses its own part
pub use basics::{peer, peers, wait_until};

pub struct World {
    pub root: PathBuf,
    pub hostile: PathBuf,
    pub secret: PathBuf,
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
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

const WORLD_PREFIX: &str = "airlock-sandbox-";

/// Removes the worlds of test processes that have ended. A world lives in a static, which is
/// never dropped, so without this every test process would leave its world in the temp dir
/// (a full run leaves about a hundred, a few MiB each).
fn sweep_ended_worlds(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|name| name.strip_prefix(WORLD_PREFIX))
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            // Another test process may be sweeping the same world: whoever gets there first.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// One world per test process; the fixture binary is shared across processes by content hash.
pub fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let temp = std::env::temp_dir();
        sweep_ended_worlds(&temp);
        let root = temp.join(format!("{WORLD_PREFIX}{}", std::process::id()));
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
            .args(["-O1", "-pthread", "-o"])
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

    /// Like [`World::run`] but with stdin held open until the server is done: EOF starts
    /// airlock's kill sequence, which would cut a slow attempt short.
    pub fn run_held(&self, server: &str, extra: &[&str], hostile_args: &[&str]) -> Output {
        output_holding_stdin(self.command(server, extra, hostile_args))
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

/// The memory bound held: the allocation was refused (RLIMIT_DATA: mmap fails) or the server was
/// killed by the OOM killer of its memory cgroup (SIGKILL: the helper reports 128 + 9), and it
/// never touched the whole 3 GiB.
pub fn assert_memory_bounded(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("ESCAPED"), "{}", text(out));
    let refused = stdout.contains("REFUSED mmap") && out.status.code() == Some(0);
    let oom_killed = out.status.code() == Some(128 + 9);
    assert!(refused || oom_killed, "{}", text(out));
    let touched = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("TOUCHED "))
        .filter_map(|rest| rest.trim_end_matches(" MiB").parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    assert!(touched < 3072, "{}", text(out));
}

/// Runs `cmd` with a piped stdin that stays open until the process has exited.
pub fn output_holding_stdin(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run airlock");
    let stdin = child.stdin.take();
    let out = child.wait_with_output().expect("wait for airlock");
    drop(stdin);
    out
}

/// The ordinary user the tests become when they run as root.
pub const USER_UID: u32 = 65533;

/// The `airlock` binary, run as `uid` through `setpriv` (real and effective ids, no
/// supplementary groups), or as the test process itself.
pub fn airlock_as(uid: Option<u32>) -> Command {
    match uid {
        None => Command::new(AIRLOCK),
        Some(uid) => {
            let mut cmd = Command::new("setpriv");
            cmd.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .arg(AIRLOCK);
            cmd
        }
    }
}

/// Who runs airlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The test process itself (root when the tests run as root).
    Me,
    /// An ordinary user, through setpriv.
    User(u32),
}

pub fn everyone() -> Vec<Who> {
    if is_root() {
        vec![Who::Me, Who::User(USER_UID)]
    } else {
        vec![Who::Me]
    }
}

impl Who {
    pub fn uid(self) -> u32 {
        match self {
            // SAFETY: geteuid cannot fail.
            Who::Me => unsafe { libc::geteuid() },
            Who::User(uid) => uid,
        }
    }

    pub fn is_root(self) -> bool {
        self.uid() == 0
    }

    pub fn tag(self) -> String {
        format!("u{}", self.uid())
    }

    /// A directory of the test world owned by this user.
    pub fn dir(self, name: &str, mode: u32) -> PathBuf {
        let dir = world().root.join(format!("{name}-{}", self.tag()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        self.own(&dir);
        chmod(&dir, mode);
        dir
    }

    /// `airlock ARGS` as a host starts it for this user: an argv (through `setpriv` for the
    /// ordinary user), for clients that spawn the command themselves (the Python SDK).
    #[allow(dead_code)] // each test binary uses its own part
    pub fn airlock_argv(self, args: &[String]) -> Vec<String> {
        let mut argv = Vec::new();
        if let Who::User(uid) = self {
            argv.extend([
                "setpriv".to_string(),
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".to_string(),
            ]);
        }
        argv.push(AIRLOCK.to_string());
        argv.extend(args.iter().cloned());
        argv
    }

    /// Gives `dir` and everything in it to this user (`chown -R`).
    #[allow(dead_code)] // each test binary uses its own part
    pub fn own_tree(self, dir: &Path) {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{0}:{0}", self.uid()))
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success(), "chown -R {}", dir.display());
    }

    pub fn own(self, path: &Path) {
        std::os::unix::fs::chown(path, Some(self.uid()), Some(self.uid())).unwrap();
    }

    /// `airlock ARGS` as this user, in the test world, with its own state dir.
    pub fn airlock(self, args: &[&str]) -> Command {
        let mut cmd = airlock_as(match self {
            Who::Me => None,
            Who::User(uid) => Some(uid),
        });
        let state = world().root.join(format!("state-{}", self.tag()));
        std::fs::create_dir_all(&state).unwrap();
        chmod(&state, 0o777);
        cmd.args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", world().root.join("home"))
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CONFIG_HOME", world().root.join("config"))
            .env("AIRLOCK_ORG_POLICY_DIR", world().root.join("org"))
            .current_dir(&world().root);
        cmd
    }

    /// The hostile fixture in `mode`, confined, with stdin held open until it is done.
    pub fn hostile(self, extra: &[&str], args: &[&str]) -> Output {
        let mut argv = vec!["__sandbox-exec", "--show-plan", "--server", "root-tests"];
        argv.extend(extra);
        argv.push("--");
        let hostile = world().hostile.to_str().unwrap().to_string();
        argv.push(&hostile);
        argv.extend(args);
        output_holding_stdin(self.airlock(&argv))
    }
}
