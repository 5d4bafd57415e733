//! How a plan reads to a person: `airlock check`, `__sandbox-exec --show-plan`.
//!
//! `{plan}` is the brief view: the system paths every server gets alike (programs, libraries,
//! the linker's, TLS and name-resolution files, devices) are counted on one line, so what is
//! particular to this server (its command line's paths, the policy's grants, derived grants, its
//! caches) stands out. `{plan:#}` lists every path.

use std::fmt;
use std::path::Path;

use super::grants::is_system_rule;
use super::root::shows_dir;
use super::{FsAccess, FsRule, NetMode, SandboxPlan, Shown};

impl fmt::Display for SandboxPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "sandbox for `{}`: {}", self.server, self.short_summary())?;
        writeln!(f, "  argv: {:?}", self.argv)?;
        if self.starting_dir() != self.cwd {
            writeln!(
                f,
                "  cwd: {} (not in the server's root: it starts in its private home {})",
                self.cwd.display(),
                self.private_home.display()
            )?;
        } else if self.cwd_leading_to_grants().is_some() {
            writeln!(
                f,
                "  cwd: {} (only leads to granted paths: the server may list it, nothing more)",
                self.cwd.display()
            )?;
        } else {
            writeln!(f, "  cwd: {}", self.cwd.display())?;
        }
        match self.identity {
            Some(id) => writeln!(f, "  runs as: uid {} gid {}", id.uid, id.gid)?,
            None => writeln!(
                f,
                "  runs as: airlock's own uid {}, all capabilities dropped",
                self.airlock_uid
            )?,
        }
        self.fmt_filesystem(f)?;
        for argument in self.arguments.iter().filter(|a| a.access.is_none()) {
            writeln!(
                f,
                "  NOT GRANTED from the server's command line: {} ({}): {}",
                argument.argument,
                argument.path.display(),
                argument.source
            )?;
        }
        writeln!(f, "  disk: {}", self.disk_text())?;
        writeln!(f, "  memory: {}", self.memory.describe())?;
        self.fmt_network_ipc(f)?;
        let limits: Vec<String> = self
            .rlimits
            .iter()
            .map(|l| format!("{}={}", l.kind.name(), l.value))
            .collect();
        writeln!(f, "  limits: {}", limits.join(" "))?;
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        writeln!(f, "  environment names: {}", names.join(" "))?;
        writeln!(f, "  kill timeout: {}s", self.kill_timeout_secs)?;
        for note in &self.weaker_than_asked {
            writeln!(f, "  LESS CONFINED THAN ASKED: {note}")?;
        }
        for note in &self.not_granted {
            writeln!(f, "  not granted: {note}")?;
        }
        Ok(())
    }
}

impl SandboxPlan {
    /// The directory the server will start in: its planned working directory when its root
    /// shows it, else its private home (`confine::enter_working_dir` makes the same choice at
    /// run time; a directory its uid may not enter is found from the host's permissions by
    /// `launch`, with [`SandboxPlan::dirs_deciding_entry`]). The gate reads relative path
    /// arguments against it. Pure.
    pub fn starting_dir(&self) -> &Path {
        if self.root.is_some() && !shows_dir(&self.cwd, &self.mounted_paths()) {
            &self.private_home
        } else {
            &self.cwd
        }
    }

    /// The host directories whose permissions decide whether the server's uid may enter its
    /// working directory: in its own root, the working directory's ancestors at or beneath a
    /// mounted path (those leading to a mount are the root's own, mode 0755); on the host's
    /// filesystem, every ancestor. Pure.
    pub fn dirs_deciding_entry(&self) -> Vec<&Path> {
        let mounted = self.mounted_paths();
        self.cwd
            .ancestors()
            .filter(|dir| self.root.is_none() || mounted.iter().any(|m| dir.starts_with(m)))
            .collect()
    }

    /// Every path placed in the constructed root (binds, private dirs, overlays, its `/proc`).
    /// The working directory when it exists in the server's constructed root only as the way to
    /// granted paths (not granted itself, and not `/`). The server may list it (landlock
    /// `READ_DIR`, beneath it too): runtimes that read their working directory at start fail
    /// without that (bun), and a listing there shows only names of what the root holds.
    pub fn cwd_leading_to_grants(&self) -> Option<&Path> {
        let mounted = self.mounted_paths();
        let leads = self.root.is_some()
            && self.cwd != Path::new("/")
            && mounted.iter().any(|path| path.starts_with(&self.cwd))
            && !mounted.iter().any(|path| self.cwd.starts_with(path));
        leads.then_some(self.cwd.as_path())
    }

    pub fn mounted_paths(&self) -> Vec<&Path> {
        self.fs
            .iter()
            .map(|rule| rule.path.as_path())
            .chain(self.cache_overlays.iter().map(|o| o.target.as_path()))
            .collect()
    }

    fn fmt_filesystem(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.root {
            Some(_) => writeln!(
                f,
                "  filesystem: its own root (a read-only tmpfs, pivot_root, in its own mount namespace) holding only these, each at its own path, and landlock allowing only these:"
            )?,
            None => writeln!(
                f,
                "  filesystem (the host's, landlock allowing only these; everything else denied):"
            )?,
        }
        let brief = !f.alternate();
        let (mut system, listed): (Vec<&FsRule>, Vec<&FsRule>) = self
            .fs
            .iter()
            .partition(|rule| brief && is_system_rule(rule));
        // "Where this host has them": one this host lacks is not counted.
        system.retain(|rule| !rule.missing);
        if let Some(first) = system.first() {
            let mut kinds: Vec<&str> = Vec::new();
            let mut devices: Vec<String> = Vec::new();
            for rule in &system {
                if rule.shown == Shown::Device {
                    let access = match rule.access {
                        FsAccess::ReadWrite => " (read-write)",
                        FsAccess::ReadExec => "",
                    };
                    devices.push(format!("{}{access}", rule.path.display()));
                    continue;
                }
                // "user names (no password hashes: ...)" counts as "user names".
                let kind = rule.reason.split(" (").next().unwrap_or(&rule.reason);
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            writeln!(
                f,
                "    system {} paths every server gets alike, where this host has them ({}; {}), and the devices {}; `--full` lists each",
                system.len() - devices.len(),
                kinds.join(", "),
                self.reach(first),
                devices.join(", ")
            )?;
        }
        for rule in listed {
            let access = match rule.access {
                FsAccess::ReadExec => "read ",
                FsAccess::ReadWrite => "write",
            };
            writeln!(
                f,
                "    {access} {}  ({}; {})",
                rule.path.display(),
                rule.reason,
                self.reach(rule)
            )?;
        }
        for overlay in &self.cache_overlays {
            if overlay.at_real_path {
                writeln!(
                    f,
                    "    overlay {} mounted over itself (the real path, in the sandbox's own mount namespace; read-write beneath it only through the overlay; copy-on-write, the real cache is never written; writes go to the server's scratch disk)",
                    overlay.lower.display(),
                )?;
            } else if overlay.mount {
                writeln!(
                    f,
                    "    overlay {} -> {} (copy-on-write; the real cache is never written; writes go to the server's scratch disk)",
                    overlay.lower.display(),
                    overlay.target.display(),
                )?;
            } else {
                writeln!(
                    f,
                    "    cache {} (private and empty: no mount namespace for an overlay of {})",
                    overlay.target.display(),
                    overlay.lower.display()
                )?;
            }
        }
        Ok(())
    }

    /// How the server reaches a granted path, and as whom.
    fn reach(&self, rule: &FsRule) -> String {
        let whom = match self.identity {
            Some(id) => format!("uid {}", id.uid),
            None => format!("airlock's uid {}", self.airlock_uid),
        };
        let mode = match rule.access {
            FsAccess::ReadExec => "read-only",
            FsAccess::ReadWrite => "read-write",
        };
        if rule.missing {
            return "missing on this host: skipped, the server cannot reach it".to_string();
        }
        match (self.root.is_some(), rule.shown) {
            (false, _) => format!("host path, as far as {whom}'s permissions go"),
            (true, Shown::Bind) => format!("bound {mode}, as far as {whom}'s permissions go"),
            (true, Shown::IdmappedBind) => match rule.owner {
                Some(owner) => format!(
                    "bound {mode}, idmapped: files of its owner on disk (uid {} gid {}) appear as {whom}'s, so it reaches them as their owner; what it creates is uid {}'s on disk",
                    owner.uid, owner.gid, owner.uid
                ),
                None => format!(
                    "bound {mode}, idmapped: files of its owner on disk appear as {whom}'s, so it reaches them as their owner"
                ),
            },
            (true, Shown::Device) => format!("device node, bound {mode}"),
            (true, Shown::Constructed) => format!("the server's own, {mode}"),
        }
    }

    fn fmt_network_ipc(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let net_by = match (&self.network, self.namespaces.net) {
            (NetMode::Host, _) => "nothing (host network)".to_string(),
            (NetMode::Egress(_), _) => {
                "private network namespace + airlock's resolver + every connect made by airlock (seccomp hand-over)"
                    .to_string()
            }
            (_, true) => {
                "private network namespace + landlock TCP rules + seccomp (UDP)".to_string()
            }
            (_, false) if self.landlock.net_rules => {
                "landlock TCP rules + seccomp (UDP)".to_string()
            }
            (_, false) => "seccomp only (no landlock TCP rules on this kernel)".to_string(),
        };
        writeln!(f, "  network: {} (enforced by {net_by})", self.network)?;
        if let NetMode::Egress(egress) = &self.network {
            for entry in &egress.allow.entries {
                writeln!(f, "    reaches {} ({})", entry.rule.reach(), entry.origin)?;
            }
            writeln!(
                f,
                "    names never lead to loopback, private or link-local addresses; any other name does not resolve"
            )?;
        }
        writeln!(
            f,
            "  ipc: abstract unix sockets and signals {}; pathname unix sockets {}; SysV IPC and POSIX queues {}",
            if self.landlock.scopes {
                "scoped to the server (landlock; its init sits in an outer domain it cannot signal)"
            } else {
                "NOT scoped (landlock < 6)"
            },
            if self.seccomp.deny_unix_sockets {
                "refused (seccomp: socket(AF_UNIX))"
            } else {
                "allowed"
            },
            if self.namespaces.ipc {
                "its own (IPC namespace)"
            } else {
                "the host's (no user namespaces)"
            }
        )
    }
}
