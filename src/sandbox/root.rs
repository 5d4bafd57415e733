//! The server's own root: what it holds (planned, pure) and the pure decisions the helper makes
//! from facts about the host's files (where each bind lands, in which order, which symlinks are
//! copied into the root so a path resolves in the sandbox as it does on the host).
//!
//! The root is a small tmpfs, read-only once built, holding only:
//! - every landlock rule's path as a bind mount at its own path ([`crate::sandbox::Shown`]):
//!   system dirs and runtime prefixes read-only, write grants read-write, device nodes;
//! - the server's scratch disk (one tmpfs of `scratch_mb`): its private home and tmp, and the
//!   upper layers of its cache overlays;
//! - its own `/proc` (for its pid namespace), its own cgroup (`cgroup_view`), a few generated
//!   files (`files`: `/dev/fd` and friends; the network work adds `/etc/resolv.conf` here);
//! - the directories leading to all of these (created in the tmpfs, mode 0755), so a grant under a
//!   0700 tree is reachable without the tree itself.
//!
//! Everything else of the host does not exist for the server.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Identity, Owner};
use crate::paths::walk_components;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootPlan {
    /// Size of the server's scratch disk (its home, tmp and cache layers): `disk_mb`.
    pub scratch_mb: u64,
    /// Files generated into the root. They win over a bind written as the same path (the plan
    /// leaves that bind out); a bind written as another path that resolves there wins over them
    /// (the helper leaves the file out).
    pub files: Vec<RootFile>,
    /// Paths no bind may resolve to or contain, checked by the helper on the *resolved* host path
    /// (the planner checks the paths as written): the real home, airlock's config and state, the
    /// audit log, the policy files.
    pub protected: Vec<PathBuf>,
    /// Mount the server's own cgroup (cgroup v2, through its cgroup namespace) at
    /// `/sys/fs/cgroup`, read-only, so runtimes read their memory limit there.
    pub cgroup_view: bool,
    /// The user's home: a bind that reaches one of its hidden entries (`~/.ssh`, `~/.bashrc`,
    /// `~/.config/...`) through a symlink is refused ([`hidden_through_link`]), because whoever
    /// could write that link chose what the server gets; a grant naming the entry by its own
    /// path still works.
    #[serde(default)]
    pub home: Option<PathBuf>,
    /// The grant ledger: every directory bound writable to a server, one per line, appended by
    /// the helper at each start and read to judge links ([`planted_link`]). In airlock's state
    /// dir, which no server reaches.
    #[serde(default)]
    pub grant_ledger: Option<PathBuf>,
    /// Protected trees no bind may resolve *into* either (airlock's config and state, the org
    /// policy directory): a link a server left could otherwise lead a later grant there.
    #[serde(default)]
    pub protected_trees: Vec<PathBuf>,
}

/// A file the helper creates in the root before making it read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootFile {
    pub path: PathBuf,
    pub content: RootFileContent,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootFileContent {
    Symlink(PathBuf),
    /// A regular file (owned by the sandbox's root, read-only like the rest of the root).
    Text {
        text: String,
        mode: u32,
    },
}

impl RootPlan {
    pub fn new(scratch_mb: u64, protected: Vec<PathBuf>, cgroup_view: bool) -> Self {
        let mut root = RootPlan {
            scratch_mb,
            files: Vec::new(),
            protected,
            cgroup_view,
            home: None,
            grant_ledger: None,
            protected_trees: Vec::new(),
        };
        for (name, target) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            root.add_file(
                Path::new("/dev").join(name),
                RootFileContent::Symlink(PathBuf::from(target)),
            );
        }
        root
    }

    /// Places a generated file in the root (replacing an earlier one at the same path). A landlock
    /// rule for it, if the server must read it, is the caller's to add (as a
    /// [`crate::sandbox::Shown::Constructed`] rule). The extension point for files that exist
    /// only for the sandbox, such as a resolver configuration.
    pub fn add_file(&mut self, path: PathBuf, content: RootFileContent) {
        self.files.retain(|file| file.path != path);
        self.files.push(RootFile { path, content });
    }

    /// Whether a generated file sits at `path` (a bind there is left out).
    pub fn generates(&self, path: &Path) -> bool {
        self.files.iter().any(|file| file.path == path)
    }
}

/// Whether `dir` exists in the root: inside a mounted path, or one of the directories leading to
/// one. `mounted` is every path placed in the root (binds, private dirs, overlays). Lexical: the
/// helper's `chdir` is the final word (it falls back to the private home).
pub fn shows_dir(dir: &Path, mounted: &[&Path]) -> bool {
    mounted
        .iter()
        .any(|path| dir.starts_with(path) || path.starts_with(dir))
}

/// Whether a process of `id` (no supplementary groups: the helper clears them) may search a
/// directory with these permission bits and owner. The owner's bits decide for the owner, the
/// group's for the group, the others' for everyone else, as the kernel reads them (ACLs aside).
/// Pure.
pub fn may_search(mode: u32, owner: u32, group: u32, id: Identity) -> bool {
    let bit = if owner == id.uid {
        0o100
    } else if group == id.gid {
        0o010
    } else {
        0o001
    };
    mode & bit != 0
}

/// What a host path is, as far as resolving it goes (the helper's `lstat`, or a test's map).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Missing,
    Dir,
    File,
    /// A character or block device.
    Device,
    Symlink(PathBuf),
    /// A socket or fifo: never bound.
    Other,
}

/// A host path resolved the way the kernel would: its physical location and every symlink met on
/// the way, so the root can hold the same links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// No symlinks, no `.`/`..`: where the bind lands in the root.
    pub canonical: PathBuf,
    /// What is there (never [`Node::Symlink`] or [`Node::Missing`]).
    pub node: Node,
    /// `(where the link is, its text)`, in the order met; `where` has no symlinks in it.
    pub links: Vec<(PathBuf, PathBuf)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The path (or a directory on the way) does not exist: an optional path is skipped.
    #[error("does not exist")]
    Missing,
    #[error("{0} is not a directory")]
    NotDir(PathBuf),
    #[error("too many levels of symbolic links")]
    Loop,
    #[error("{0}")]
    Io(String),
}

/// Resolves `path` (absolute) component by component, following symlinks as path lookup does,
/// with `probe` telling what each prefix is. Pure apart from `probe`.
pub fn resolve(
    path: &Path,
    mut probe: impl FnMut(&Path) -> Result<Node, ResolveError>,
) -> Result<Resolved, ResolveError> {
    const MAX_LINKS: usize = 40;
    let mut pending: VecDeque<OsString> = walk_components(path);
    let mut canonical = PathBuf::from("/");
    let mut node = Node::Dir;
    let mut links = Vec::new();
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            canonical.pop();
            node = Node::Dir;
            continue;
        }
        if node != Node::Dir {
            return Err(ResolveError::NotDir(canonical));
        }
        let candidate = canonical.join(&name);
        match probe(&candidate)? {
            Node::Symlink(text) => {
                if links.len() >= MAX_LINKS {
                    return Err(ResolveError::Loop);
                }
                if text.is_absolute() {
                    canonical = PathBuf::from("/");
                }
                let mut rest = walk_components(&text);
                rest.extend(pending);
                pending = rest;
                links.push((candidate, text));
                node = Node::Dir;
            }
            Node::Missing => return Err(ResolveError::Missing),
            found => {
                canonical = candidate;
                node = found;
            }
        }
    }
    Ok(Resolved {
        canonical,
        node,
        links,
    })
}

/// One bind as the helper will make it, after resolving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The resolved host path, which is also where it lands in the root.
    pub at: PathBuf,
    pub writable: bool,
    /// Idmapped: the owner on disk whose files appear as the server's. `None`: a plain bind.
    pub idmap: Option<Owner>,
    pub device: bool,
    pub dir: bool,
}

/// The binds to make, parents before children. Two rules resolving to one path become one bind
/// with the wider access; a bind inside another that already gives it as much (read-write covers
/// read; an idmapped bind covers a plain one, and an idmapped one with the same owner) is left
/// out, which is landlock's rule too: access on a path is the union of the rules on it and its
/// parents. A grant owned by someone else inside an idmapped bind keeps its own bind, so its
/// owner's files are the server's there.
pub fn order(mut placements: Vec<Placement>) -> Vec<Placement> {
    placements.sort_by(|a, b| a.at.cmp(&b.at));
    let mut out: Vec<Placement> = Vec::new();
    for placement in placements {
        if let Some(same) = out.iter_mut().find(|kept| kept.at == placement.at) {
            same.writable |= placement.writable;
            same.idmap = same.idmap.or(placement.idmap);
            continue;
        }
        let covered = out.iter().any(|outer| {
            outer.dir
                && placement.at.starts_with(&outer.at)
                && (outer.writable || !placement.writable)
                && (placement.idmap.is_none() || outer.idmap == placement.idmap)
                && !placement.device
        });
        if !covered {
            out.push(placement);
        }
    }
    out
}

/// The protected path that `canonical` is or contains. A bind *inside* a protected directory is
/// fine (a grant under the home); one that holds it is not.
pub fn exposes<'a>(canonical: &Path, protected: &'a [PathBuf]) -> Option<&'a Path> {
    protected
        .iter()
        .find(|path| path.starts_with(canonical))
        .map(PathBuf::as_path)
}

/// The hidden entry of a home (`~/.ssh`, `~/.bashrc`, `~/.config`, ...) that `canonical` is or
/// lies in, when a symlink led there: one that is not on the way to a home itself (a symlinked
/// home is the user's own layout). `homes` holds the home as written and as it is on disk.
/// Credentials, shell start-up files, browser profiles and keyrings all live there, and a grant
/// that means one names it by its own path. Pure.
pub fn hidden_through_link(resolved: &Resolved, homes: &[PathBuf]) -> Option<PathBuf> {
    let foreign_link = resolved
        .links
        .iter()
        .any(|(at, _)| !homes.iter().any(|home| home.starts_with(at)));
    if !foreign_link {
        return None;
    }
    homes.iter().find_map(|home| {
        let first = resolved
            .canonical
            .strip_prefix(home)
            .ok()?
            .components()
            .next()?;
        let name = first.as_os_str().to_str()?;
        name.starts_with('.').then(|| home.join(name))
    })
}

/// A grant that reached where it leads through a symlink inside a writable bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantedLink {
    /// The grant as the plan names it.
    pub grant: PathBuf,
    /// The symlink on the way, and the writable bind it lies in.
    pub link: PathBuf,
    pub inside: PathBuf,
    /// Where the grant leads.
    pub leads_to: PathBuf,
}

/// One bind of the plan after [`resolve`]: the path the plan names, what it resolved to, and
/// whether it is bound writable.
pub struct ResolvedBind<'a> {
    pub grant: &'a Path,
    pub resolved: &'a Resolved,
    pub writable: bool,
}

/// The grant ledger of the servers airlock starts as `uid`: every directory bound writable to
/// one of them, one per line ([`RootPlan::grant_ledger`]).
pub fn grant_ledger_path(state_dir: &Path, uid: u32) -> PathBuf {
    state_dir.join(format!("write-grants-{uid}"))
}

/// The directory of the grant ledger (`ledger`, its text) that holds `path`, if any: a file
/// there may be a server's. Pure.
pub fn written_by_a_server(path: &Path, ledger: &str) -> Option<PathBuf> {
    ledger
        .lines()
        .filter(|line| !line.is_empty())
        .map(Path::new)
        .find(|dir| path.starts_with(dir))
        .map(Path::to_path_buf)
}

/// The first bind that follows a symlink lying inside a writable bind to somewhere the root
/// would not otherwise show (with at least that access). A server can make symlinks in its
/// write grants, and they stay on the host: a later start that followed one would bind whatever
/// the server pointed it at (`~/.ssh`, an organisation's `policy.d`). Links that lead where a
/// bind reached without such a link already goes (a virtualenv's `python` into `/usr`) expose
/// nothing new and pass. Pure.
///
/// `written_before` are directories bound writable to a server by earlier starts (the grant
/// ledger): a link a server left there is as untrusted as one in a write grant of this start.
pub fn planted_link(binds: &[ResolvedBind<'_>], written_before: &[PathBuf]) -> Option<PlantedLink> {
    let writable: Vec<&Path> = binds
        .iter()
        .filter(|bind| bind.writable)
        .map(|bind| bind.resolved.canonical.as_path())
        .chain(written_before.iter().map(PathBuf::as_path))
        .collect();
    let link_in_writable = |bind: &ResolvedBind<'_>| {
        bind.resolved.links.iter().find_map(|(at, _)| {
            writable
                .iter()
                .find(|dir| at.starts_with(dir))
                .map(|dir| (at.clone(), dir.to_path_buf()))
        })
    };
    let trusted: Vec<&ResolvedBind<'_>> = binds
        .iter()
        .filter(|bind| link_in_writable(bind).is_none())
        .collect();
    binds.iter().find_map(|bind| {
        let (link, inside) = link_in_writable(bind)?;
        let leads_to = &bind.resolved.canonical;
        let already_shown = trusted.iter().any(|other| {
            leads_to.starts_with(&other.resolved.canonical) && (other.writable || !bind.writable)
        });
        (!already_shown).then(|| PlantedLink {
            grant: bind.grant.to_path_buf(),
            link,
            inside,
            leads_to: leads_to.clone(),
        })
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn fake(entries: &[(&str, Node)]) -> impl FnMut(&Path) -> Result<Node, ResolveError> + use<> {
        let map: BTreeMap<PathBuf, Node> = entries
            .iter()
            .map(|(path, node)| (PathBuf::from(path), node.clone()))
            .collect();
        move |path: &Path| Ok(map.get(path).cloned().unwrap_or(Node::Missing))
    }

    fn link(text: &str) -> Node {
        Node::Symlink(PathBuf::from(text))
    }

    #[test]
    fn resolving_records_every_link_on_the_way() {
        // /work/wt/.peers -> /work/main/.peers (absolute), /bin -> usr/bin (relative).
        let mut fs = fake(&[
            ("/work", Node::Dir),
            ("/work/wt", Node::Dir),
            ("/work/wt/.peers", link("/work/main/.peers")),
            ("/work/main", Node::Dir),
            ("/work/main/.peers", Node::Dir),
            ("/work/main/.peers/venv", Node::Dir),
            ("/bin", link("usr/bin")),
            ("/usr", Node::Dir),
            ("/usr/bin", Node::Dir),
            ("/usr/bin/node", Node::File),
        ]);
        let peers = resolve(Path::new("/work/wt/.peers/venv"), &mut fs).unwrap();
        assert_eq!(peers.canonical, PathBuf::from("/work/main/.peers/venv"));
        assert_eq!(peers.node, Node::Dir);
        assert_eq!(
            peers.links,
            vec![(
                PathBuf::from("/work/wt/.peers"),
                PathBuf::from("/work/main/.peers")
            )]
        );
        let node = resolve(Path::new("/bin/node"), &mut fs).unwrap();
        assert_eq!(node.canonical, PathBuf::from("/usr/bin/node"));
        assert_eq!(node.node, Node::File);
        assert_eq!(
            node.links,
            vec![(PathBuf::from("/bin"), PathBuf::from("usr/bin"))]
        );
    }

    #[test]
    fn resolving_handles_dotdot_after_a_link_physically_and_stops_loops() {
        let mut fs = fake(&[
            ("/etc", Node::Dir),
            ("/etc/resolv.conf", link("../run/resolve/stub.conf")),
            ("/run", Node::Dir),
            ("/run/resolve", Node::Dir),
            ("/run/resolve/stub.conf", Node::File),
            ("/a", link("/b")),
            ("/b", link("/a")),
        ]);
        let conf = resolve(Path::new("/etc/resolv.conf"), &mut fs).unwrap();
        assert_eq!(conf.canonical, PathBuf::from("/run/resolve/stub.conf"));
        assert_eq!(resolve(Path::new("/a/x"), &mut fs), Err(ResolveError::Loop));
        assert_eq!(
            resolve(Path::new("/nope/x"), &mut fs),
            Err(ResolveError::Missing)
        );
        assert_eq!(
            resolve(Path::new("/run/resolve/stub.conf/x"), &mut fs),
            Err(ResolveError::NotDir(PathBuf::from(
                "/run/resolve/stub.conf"
            )))
        );
    }

    const ROOT: Owner = Owner { uid: 0, gid: 0 };

    fn bind(at: &str, writable: bool, idmapped: bool) -> Placement {
        Placement {
            at: PathBuf::from(at),
            writable,
            idmap: idmapped.then_some(ROOT),
            device: false,
            dir: true,
        }
    }

    #[test]
    fn order_puts_parents_first_and_drops_what_a_parent_already_gives() {
        let ordered = order(vec![
            bind("/data/sub", false, true),  // read inside write: covered
            bind("/usr/lib/x", false, true), // idmapped inside plain: kept
            bind("/data", true, true),
            bind("/usr", false, false),
            bind("/usr/share", false, false), // read inside read: covered
            bind("/srv/ro", false, false),
            bind("/srv/ro/rw", true, false), // write inside read: kept
            bind("/srv/ro", true, false),    // the same path twice: the wider access
        ]);
        let at: Vec<(&str, bool)> = ordered
            .iter()
            .map(|p| (p.at.to_str().unwrap(), p.writable))
            .collect();
        assert_eq!(
            at,
            vec![
                ("/data", true),
                ("/srv/ro", true),
                ("/usr", false),
                ("/usr/lib/x", false),
            ]
        );
    }

    #[test]
    fn an_idmapped_bind_owned_by_someone_else_inside_another_keeps_its_own_mapping() {
        let user = Owner {
            uid: 1000,
            gid: 100,
        };
        let mut theirs = bind("/home/u/proj", true, true);
        theirs.idmap = Some(user);
        let mut also_theirs = bind("/home/u/proj/sub", true, true);
        also_theirs.idmap = Some(user);
        let ordered = order(vec![
            bind("/home", true, true),
            theirs,
            also_theirs,                          // same owner inside: covered
            bind("/home/root-owned", true, true), // root's inside root's: covered
        ]);
        let at: Vec<(&str, Option<Owner>)> = ordered
            .iter()
            .map(|p| (p.at.to_str().unwrap(), p.idmap))
            .collect();
        assert_eq!(
            at,
            vec![("/home", Some(ROOT)), ("/home/u/proj", Some(user))]
        );
    }

    #[test]
    fn a_bind_may_sit_under_a_protected_path_but_never_hold_one() {
        let protected = vec![
            PathBuf::from("/home/me"),
            PathBuf::from("/etc/airlock/p.toml"),
        ];
        assert_eq!(exposes(Path::new("/home/me/projects"), &protected), None);
        assert_eq!(
            exposes(Path::new("/home"), &protected),
            Some(Path::new("/home/me"))
        );
        assert_eq!(
            exposes(Path::new("/home/me"), &protected),
            Some(Path::new("/home/me"))
        );
        assert_eq!(
            exposes(Path::new("/etc"), &protected),
            Some(Path::new("/etc/airlock/p.toml"))
        );
    }

    #[test]
    fn search_permission_is_the_owners_bits_for_the_owner_then_the_groups_then_the_others() {
        let nobody = Identity {
            uid: 65534,
            gid: 65534,
        };
        assert!(!may_search(0o700, 0, 0, nobody));
        assert!(may_search(0o701, 0, 0, nobody));
        assert!(may_search(0o710, 0, 65534, nobody));
        assert!(may_search(0o700, 65534, 0, nobody));
        // The owner's bits alone decide for the owner, even when the others' would let them in.
        assert!(!may_search(0o077, 65534, 65534, nobody));
        assert!(!may_search(0o607, 0, 65534, nobody));
    }

    #[test]
    fn the_working_directory_exists_inside_or_above_what_is_mounted() {
        let mounted = [
            Path::new("/usr"),
            Path::new("/home/me/.local/state/airlock/servers/x/home"),
        ];
        assert!(shows_dir(Path::new("/usr/lib"), &mounted));
        assert!(shows_dir(Path::new("/home/me"), &mounted));
        assert!(shows_dir(Path::new("/"), &mounted));
        assert!(!shows_dir(Path::new("/home/me/project"), &mounted));
        assert!(!shows_dir(Path::new("/root"), &mounted));
    }

    fn resolved_bind<'a>(
        grant: &'a str,
        resolved: &'a Resolved,
        writable: bool,
    ) -> ResolvedBind<'a> {
        ResolvedBind {
            grant: Path::new(grant),
            resolved,
            writable,
        }
    }

    fn resolved(canonical: &str, links: &[(&str, &str)]) -> Resolved {
        Resolved {
            canonical: PathBuf::from(canonical),
            node: Node::Dir,
            links: links
                .iter()
                .map(|(at, text)| (PathBuf::from(at), PathBuf::from(text)))
                .collect(),
        }
    }

    #[test]
    fn a_homes_hidden_entries_are_bound_only_by_their_own_path() {
        let homes = [PathBuf::from("/home/u"), PathBuf::from("/data/u")];
        let direct = resolved("/home/u/.ssh", &[]);
        assert_eq!(hidden_through_link(&direct, &homes), None);
        let linked = resolved("/home/u/.ssh", &[("/proj/docs", "/home/u/.ssh")]);
        assert_eq!(
            hidden_through_link(&linked, &homes),
            Some(PathBuf::from("/home/u/.ssh"))
        );
        let rc = resolved("/home/u/.bashrc", &[("/proj/rc", "/home/u/.bashrc")]);
        assert_eq!(
            hidden_through_link(&rc, &homes),
            Some(PathBuf::from("/home/u/.bashrc"))
        );
        let chrome = resolved(
            "/home/u/.config/google-chrome",
            &[("/proj/d", "/home/u/.config/google-chrome")],
        );
        assert!(hidden_through_link(&chrome, &homes).is_some());
        // The home itself a symlink (/home/u -> /data/u): the user's own layout, followed.
        let via_home = resolved("/data/u/.ssh", &[("/home/u", "/data/u")]);
        assert_eq!(hidden_through_link(&via_home, &homes), None);
        let documents = resolved("/home/u/notes", &[("/proj/docs", "/home/u/notes")]);
        assert_eq!(hidden_through_link(&documents, &homes), None);
    }

    #[test]
    fn a_grant_through_a_link_in_a_write_grant_is_refused_unless_it_adds_nothing() {
        let proj = resolved("/home/u/proj", &[]);
        let docs = resolved("/home/u/.ssh", &[("/home/u/proj/docs", "/home/u/.ssh")]);
        let usr = resolved("/usr", &[]);
        let python = resolved(
            "/usr/bin/python3.11",
            &[("/home/u/proj/.venv/bin/python", "/usr/bin/python3.11")],
        );
        let (proj, docs, usr, python) = (&proj, &docs, &usr, &python);
        let found = planted_link(
            &[
                resolved_bind("/home/u/proj", proj, true),
                resolved_bind("/home/u/proj/docs", docs, false),
            ],
            &[],
        )
        .expect("refused");
        assert_eq!(found.link, PathBuf::from("/home/u/proj/docs"));
        assert_eq!(found.inside, PathBuf::from("/home/u/proj"));
        assert_eq!(found.leads_to, PathBuf::from("/home/u/.ssh"));
        // The same link, nothing writable holds it now and no earlier start wrote there: the
        // user's own link, followed.
        let alone = [resolved_bind("/home/u/proj/docs", docs, false)];
        assert_eq!(planted_link(&alone, &[]), None);
        // ...but an earlier start bound /home/u/proj writable: a server may have left it.
        let found = planted_link(&alone, &[PathBuf::from("/home/u/proj")]).expect("refused");
        assert_eq!(found.inside, PathBuf::from("/home/u/proj"));
        // A virtualenv's python into /usr, which the root shows anyway: nothing new.
        let venv = [
            resolved_bind("/home/u/proj", proj, true),
            resolved_bind("/usr", usr, false),
            resolved_bind("/home/u/proj/.venv/bin/python", python, false),
        ];
        assert_eq!(planted_link(&venv, &[]), None);
        // ...but not writable where the root shows it read-only.
        let writable_python = [
            resolved_bind("/home/u/proj", proj, true),
            resolved_bind("/usr", usr, false),
            resolved_bind("/home/u/proj/.venv/bin/python", python, true),
        ];
        assert!(planted_link(&writable_python, &[]).is_some());
    }
}
