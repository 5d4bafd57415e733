//! The server's root, helper side: before the clone, while the helper still sees the host as it
//! is, every bind of the plan is resolved on the host (its physical path, the symlinks on the way,
//! what it is), checked against the protected paths, ordered (`sandbox::root::order`), and, when
//! airlock is root and the server is not, cloned as an idmapped tree in which the path's owner on
//! disk appears as the server (only the initial user namespace's root may idmap a mount). init then builds the root from this (`build.rs`).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{Step, fail, idmap, sys};
use crate::sandbox::root::{
    Node, Placement, ResolveError, Resolved, ResolvedBind, exposes, hidden_through_link, order,
    planted_link, resolve,
};
use crate::sandbox::{FsAccess, FsRule, Identity, Owner, RootFile, RootPlan, SandboxPlan, Shown};

/// One bind, ready for init.
pub(super) struct Bind {
    pub at: PathBuf,
    pub writable: bool,
    pub device: bool,
    pub dir: bool,
    /// An idmapped clone made by the helper; `None`: init clones `/oldroot<at>` itself.
    pub tree: Option<OwnedFd>,
}

/// Everything init needs to build the root.
pub(super) struct Prepared {
    pub binds: Vec<Bind>,
    /// Symlinks to copy into the root so paths resolve as on the host: `(where, text)`.
    pub links: Vec<(PathBuf, PathBuf)>,
    pub scratch_mb: u64,
    pub files: Vec<RootFile>,
    pub cgroup_view: bool,
    /// Who owns the scratch disk's home and tmp (the server's uid when airlock is root).
    pub owner: Option<Identity>,
    pub home: PathBuf,
    pub tmp: PathBuf,
}

fn probe(path: &Path) -> Result<Node, ResolveError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            let kind = meta.file_type();
            Ok(if kind.is_symlink() {
                Node::Symlink(
                    std::fs::read_link(path).map_err(|e| ResolveError::Io(e.to_string()))?,
                )
            } else if kind.is_dir() {
                Node::Dir
            } else if kind.is_file() {
                Node::File
            } else if kind.is_char_device() || kind.is_block_device() {
                Node::Device
            } else {
                Node::Other
            })
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Node::Missing),
        Err(err) => Err(ResolveError::Io(format!("{}: {err}", path.display()))),
    }
}

/// Paths as written and as they are on disk (a symlinked home is protected where it really is).
fn with_canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in paths {
        out.push(path.clone());
        if let Ok(real) = std::fs::canonicalize(path)
            && &real != path
        {
            out.push(real);
        }
    }
    out
}

/// Fails the start when a bind would follow a symlink that a server could have planted in a
/// write grant (`sandbox::root::planted_link`).
/// The directories earlier starts bound writable (the grant ledger), each still as it resolves.
/// A ledger that cannot be read fails the start: judging links without it would trust links a
/// server may have left.
fn written_before(ledger: Option<&Path>) -> Vec<PathBuf> {
    let Some(ledger) = ledger else {
        return Vec::new();
    };
    match std::fs::read_to_string(ledger) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect(),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(err) => fail(
            Step::Root,
            format!("reading the grant ledger {}: {err}", ledger.display()),
        ),
    }
}

/// Adds this start's writable binds to the grant ledger (appended whole lines; a path already
/// there is not written again). A failure is said on stderr, not fatal.
fn record_written(ledger: Option<&Path>, known: &[PathBuf], binds: &[(PathBuf, Resolved, bool)]) {
    use std::io::Write as _;
    let Some(ledger) = ledger else {
        return;
    };
    let mut new: Vec<&Path> = Vec::new();
    for (_, resolved, writable) in binds {
        let path = resolved.canonical.as_path();
        if *writable && !known.iter().any(|k| k == path) && !new.contains(&path) {
            new.push(path);
        }
    }
    if new.is_empty() {
        return;
    }
    let mut text = String::new();
    for path in new {
        text.push_str(&path.to_string_lossy());
        text.push('\n');
    }
    let appended = ledger
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(ledger)
        })
        .and_then(|mut file| file.write_all(text.as_bytes()));
    // This start is as confined either way; what is lost is later starts' memory of it, so
    // it is said, not fatal (a state dir the user cannot write, say).
    if let Err(err) = appended {
        eprintln!(
            "airlock-confine: note: cannot record this start's write grants in {} ({err}); a later start will not know a server could leave links there",
            ledger.display()
        );
    }
}

fn refuse_planted_links(binds: &[(PathBuf, Resolved, bool)], written_before: &[PathBuf]) {
    let views: Vec<ResolvedBind<'_>> = binds
        .iter()
        .map(|(grant, resolved, writable)| ResolvedBind {
            grant,
            resolved,
            writable: *writable,
        })
        .collect();
    if let Some(found) = planted_link(&views, written_before) {
        // A `named_by` file stands in the list of links (see `judged_with_derivation`).
        let is_link = std::fs::symlink_metadata(&found.link).is_ok_and(|m| m.is_symlink());
        let (through, what) = if is_link {
            ("the symlink", "make links there")
        } else {
            (
                "the program whose first line names it,",
                "rewrite files there",
            )
        };
        fail(
            Step::Root,
            format!(
                "{} leads to {} through {through} {}, which lies in {}, granted writable to a server (now or in an earlier start): a server can {what}, so airlock does not follow it; grant {} itself if you meant it, or remove the link",
                found.grant.display(),
                found.leads_to.display(),
                found.link.display(),
                found.inside.display(),
                found.leads_to.display()
            ),
        );
    }
}

/// `resolved` with what decided where a derived grant lands added to its links: the symlinks
/// met on the rule's `derived_via` path (a script a server replaced by a link decides where its
/// package root is), and the file whose content named it (`named_by`, a program's `#!` line),
/// as if it were a link lying where that file lies. The links the root recreates are the bind's
/// own, not these.
///
/// Fails closed: a `derived_via` that no longer resolves, or that now leads elsewhere than where
/// the plan derived the grant from (swapped since airlock looked), fails the start.
fn judged_with_derivation(rule: &FsRule, resolved: &Resolved) -> Resolved {
    let mut judged = resolved.clone();
    if let Some(via) = &rule.derived_via {
        let derivation = resolve(via, probe).unwrap_or_else(|err| {
            fail(
                Step::Root,
                format!(
                    "{} ({}) was derived from {}, which no longer resolves ({err}); start the server again",
                    rule.path.display(),
                    rule.reason,
                    via.display()
                ),
            )
        });
        if !still_derives(&derivation.canonical, &resolved.canonical) {
            fail(
                Step::Root,
                format!(
                    "{} ({}) was derived from {}, which now leads to {}: it changed since airlock looked; start the server again",
                    rule.path.display(),
                    rule.reason,
                    via.display(),
                    derivation.canonical.display()
                ),
            );
        }
        judged.links.extend(derivation.links);
    }
    if let Some(named_by) = &rule.named_by {
        let file = std::fs::canonicalize(named_by).unwrap_or_else(|_| named_by.clone());
        judged.links.push((file, resolved.canonical.clone()));
    }
    judged
}

/// Whether a derivation path that leads to `target` still derives a grant at `grant`: the target
/// inside it (a script in its package root), beside it (a program's companion file), or inside
/// the directory it is an entry of (a runtime's prefix is granted as its entries: the program in
/// `<prefix>/bin` derives `<prefix>/lib`), never the root directory's. Pure.
fn still_derives(target: &Path, grant: &Path) -> bool {
    target.starts_with(grant)
        || grant.parent().is_some_and(|dir| {
            target.parent() == Some(dir) || (dir.parent().is_some() && target.starts_with(dir))
        })
}

/// Why a bind may not land where `resolved` leads, if it may not: it would contain a protected
/// path, it is inside one of airlock's own trees or the org policy directory, or a symlink led it
/// into the home's hidden entries. Pure.
fn refused_destination(
    rule: &FsRule,
    resolved: &Resolved,
    protected: &[PathBuf],
    trees: &[PathBuf],
    homes: &[PathBuf],
) -> Option<String> {
    let (path, reason, leads) = (
        rule.path.display(),
        &rule.reason,
        resolved.canonical.display(),
    );
    if let Some(protected) = exposes(&resolved.canonical, protected) {
        return Some(format!(
            "{path} ({reason}) resolves to {leads}, which would expose {} to the server; grant a narrower directory",
            protected.display()
        ));
    }
    if let Some(tree) = trees
        .iter()
        .find(|tree| resolved.canonical.starts_with(tree))
    {
        return Some(format!(
            "{path} ({reason}) resolves to {leads}, inside {}, which no grant reaches (airlock's own files, or the organisation's policy)",
            tree.display()
        ));
    }
    hidden_through_link(resolved, homes).map(|hidden| {
        format!(
            "{path} ({reason}) leads through a symlink to {leads}, in the home's hidden {}; airlock follows a link there only when a grant names it by its own path",
            hidden.display()
        )
    })
}

pub(super) fn prepare(plan: &SandboxPlan, root: &RootPlan) -> Prepared {
    let protected = with_canonical(&root.protected);
    let homes = with_canonical(root.home.as_slice());
    let trees = with_canonical(&root.protected_trees);
    let mut placements = Vec::new();
    let mut links = Vec::new();
    let mut resolved_binds: Vec<(PathBuf, Resolved, bool)> = Vec::new();
    let shown_in_root =
        |shown: Shown| matches!(shown, Shown::Bind | Shown::IdmappedBind | Shown::Device);
    for rule in plan.fs.iter().filter(|rule| shown_in_root(rule.shown)) {
        if root.generates(&rule.path) {
            continue;
        }
        let resolved = match resolve(&rule.path, probe) {
            Ok(resolved) => resolved,
            // Optional paths (`/lib32`, a runtime the user never installed) are simply absent.
            Err(ResolveError::Missing) => continue,
            Err(err) => {
                eprintln!(
                    "airlock-confine: note: {} is not in the server's root: {err}",
                    rule.path.display()
                );
                continue;
            }
        };
        if resolved.node == Node::Other {
            eprintln!(
                "airlock-confine: note: {} is a socket or fifo: not in the server's root",
                rule.path.display()
            );
            continue;
        }
        if let Some(why) = refused_destination(rule, &resolved, &protected, &trees, &homes) {
            fail(Step::Root, why);
        }
        // A derived grant is judged by the planted-link rule with what decided where it lands
        // too (not by the hidden-home rule: an interpreter under ~/.local or ~/.pyenv is named
        // by a program's first line as a matter of course).
        let judged = judged_with_derivation(rule, &resolved);
        let writable = rule.access == FsAccess::ReadWrite;
        resolved_binds.push((rule.path.clone(), judged, writable));
        links.extend(resolved.links);
        let idmap = match rule.shown {
            Shown::IdmappedBind => owner_on_disk(&resolved.canonical),
            _ => None,
        };
        placements.push(Placement {
            at: resolved.canonical,
            writable: rule.access == FsAccess::ReadWrite,
            idmap,
            device: rule.shown == Shown::Device || resolved.node == Node::Device,
            dir: resolved.node == Node::Dir,
        });
    }
    let ledger = root.grant_ledger.as_deref();
    let earlier = written_before(ledger);
    refuse_planted_links(&resolved_binds, &earlier);
    record_written(ledger, &earlier, &resolved_binds);
    let ordered = order(placements);
    // A grant written as another path that resolves to a generated file's (a link to
    // `/etc/hosts`) names the host's file: its bind wins, as a grant written as that path does
    // in the plan, instead of both claiming one place in the root.
    let files = root
        .files
        .iter()
        .filter(|file| {
            !ordered
                .iter()
                .any(|bind| file.path == bind.at || (bind.dir && file.path.starts_with(&bind.at)))
        })
        .cloned()
        .collect();
    Prepared {
        binds: idmapped_trees(plan.identity, ordered),
        links,
        scratch_mb: root.scratch_mb,
        files,
        cgroup_view: root.cgroup_view,
        owner: plan.identity,
        home: plan.private_home.clone(),
        tmp: plan.private_tmp.clone(),
    }
}

/// Who owns `path` on disk: an idmapped bind shows this owner's files as the server's (root's
/// for a system path or root's own grant, the user's for `/home/u/proj`). A path that cannot be
/// looked at is bound plainly, with a note: less access, not less confinement.
fn owner_on_disk(path: &Path) -> Option<Owner> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(meta) => Some(Owner {
            uid: meta.uid(),
            gid: meta.gid(),
        }),
        Err(err) => {
            eprintln!(
                "airlock-confine: note: {}: {err}: not idmapped, the server reaches it only as far as its own uid's permissions go",
                path.display()
            );
            None
        }
    }
}

/// The attributes every bind gets: read-only unless written to, never setuid, device nodes only
/// where they are devices.
pub(super) fn bind_attributes(writable: bool, device: bool) -> u64 {
    let mut attributes = libc::MOUNT_ATTR_NOSUID;
    if !writable {
        attributes |= libc::MOUNT_ATTR_RDONLY;
    }
    if !device {
        attributes |= libc::MOUNT_ATTR_NODEV;
    }
    attributes
}

/// Clones the idmapped binds here, in the host's mount namespace (only the initial user
/// namespace's root may idmap). A filesystem that cannot be idmapped is bound plainly (the server
/// then reaches it only as far as its own permissions go) and said so: less access, not less
/// confinement.
fn idmapped_trees(identity: Option<Identity>, ordered: Vec<Placement>) -> Vec<Bind> {
    // One mapping per owner (a user namespace each), shared by that owner's binds.
    let mut mappings: BTreeMap<Owner, OwnedFd> = BTreeMap::new();
    ordered
        .into_iter()
        .map(|placement| {
            let tree = match (identity, placement.idmap) {
                (Some(id), Some(owner)) => {
                    let mapping = mappings
                        .entry(owner)
                        .or_insert_with(|| idmap::owner_as(owner.uid, owner.gid, id));
                    Some(idmapped_tree(&placement, mapping))
                }
                _ => None,
            };
            Bind {
                at: placement.at,
                writable: placement.writable,
                device: placement.device,
                dir: placement.dir,
                tree,
            }
        })
        .collect()
}

fn idmapped_tree(placement: &Placement, mapping: &OwnedFd) -> OwnedFd {
    let path = sys::c_path(&placement.at).unwrap_or_else(|err| fail(Step::Root, err));
    let tree = sys::clone_tree(libc::AT_FDCWD, &path).unwrap_or_else(|err| {
        fail(
            Step::Root,
            format!("cloning {} for the server: {err}", placement.at.display()),
        )
    });
    let attributes = bind_attributes(placement.writable, placement.device);
    if let Err(err) = sys::set_attributes(&tree, attributes, Some(mapping)) {
        eprintln!(
            "airlock-confine: note: {} cannot be idmapped ({err}): the server reaches it only as far as its own uid's permissions go",
            placement.at.display()
        );
        if let Err(err) = sys::set_attributes(&tree, attributes, None) {
            fail(
                Step::Root,
                format!("mount attributes on {}: {err}", placement.at.display()),
            );
        }
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::still_derives;
    use std::path::Path;

    #[test]
    fn a_derivation_still_holds_only_where_it_led() {
        let holds = |target: &str, grant: &str| still_derives(Path::new(target), Path::new(grant));
        // A script in its package root; a companion beside the program.
        assert!(holds("/p/pkg/index.js", "/p/pkg"));
        assert!(holds("/home/me/.local/bin/uvx", "/home/me/.local/bin/uv"));
        // An entry of the prefix the program is in.
        assert!(holds("/n/v20/bin/node", "/n/v20/lib"));
        assert!(holds("/n/v20/bin/node", "/n/v20/CHANGELOG.md"));
        // The link now leads elsewhere.
        assert!(!holds("/n/v22/bin/node", "/n/v20/lib"));
        assert!(!holds("/evil/pkg/index.js", "/p/pkg"));
        // An entry of the root directory derives from nothing below it.
        assert!(!holds("/opt/x/bin/prog", "/usr"));
    }
}
