//! Finding the policy layers on disk.
//!
//! - org: `/etc/airlock`: `policy.toml`, then `policy.d/*.toml` in name order.
//!   `$AIRLOCK_ORG_POLICY_DIR` names another directory only on a machine with no org policy there
//!   (tests, trying an org policy out): where an organisation has put one, no variable of a
//!   user's or a project's host config can take it away. An org file or `policy.d` that others
//!   could write ([`org_file_problem`]) is refused, not read.
//! - user: `--policy FILE|PRESET`, else `$XDG_CONFIG_HOME/airlock/policy.toml` (default
//!   `~/.config/airlock/policy.toml`).
//! - project: the nearest `.airlock/policy.toml` from the working directory upwards. It may only
//!   narrow, so looking upwards can never loosen anything.
//!
//! Missing files are simply absent layers; unreadable ones are errors (a policy that cannot be
//! read must never be silently skipped).

use std::path::{Path, PathBuf};

use super::{Layer, LayerSource, presets};
use crate::diagnostic::SourceError;
use crate::paths::{UserDirs, VarSource};

/// The organisation's policy directory when `AIRLOCK_ORG_POLICY_DIR` is not set.
pub const DEFAULT_ORG_DIR: &str = "/etc/airlock";

/// The environment the discovery depends on, passed in so tests control it.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryInputs {
    /// `AIRLOCK_ORG_POLICY_DIR`, when set and allowed to count ([`org_dir_from`]).
    pub org_dir: Option<PathBuf>,
    pub user_dirs: UserDirs,
    pub cwd: Option<PathBuf>,
    /// `--policy`: a file path or a preset name.
    pub user_override: Option<String>,
}

/// The variable that names another org policy directory (see [`org_dir_from`]).
pub const ORG_DIR_ENV: &str = "AIRLOCK_ORG_POLICY_DIR";

/// The org policy directory to read, given `$AIRLOCK_ORG_POLICY_DIR` (`named`) and whether the
/// default one holds a policy: the variable counts only where it takes nothing away. Pure.
pub fn org_dir_choice(named: Option<PathBuf>, default_holds_policy: bool) -> Option<PathBuf> {
    named.filter(|_| !default_holds_policy)
}

/// Whether `/etc/airlock` holds an org policy (its `policy.toml` or a `policy.d`, readable or
/// not: an unreadable one still counts, and discovery then says it cannot be read).
fn default_holds_policy() -> bool {
    let dir = Path::new(DEFAULT_ORG_DIR);
    dir.join("policy.toml").symlink_metadata().is_ok()
        || dir.join("policy.d").symlink_metadata().is_ok()
}

/// The org policy directory named by the environment, when it may be used (see
/// [`org_dir_choice`]); a variable that may not is said once, on stderr.
pub fn org_dir_from(env: &(impl VarSource + ?Sized)) -> Option<PathBuf> {
    let named = env.absolute_path(ORG_DIR_ENV)?;
    let chosen = org_dir_choice(Some(named.clone()), default_holds_policy());
    if chosen.is_none() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                "{ORG_DIR_ENV}={} is ignored: this machine has an org policy in {DEFAULT_ORG_DIR}, which no environment variable replaces",
                named.display()
            );
        });
    }
    chosen
}

impl DiscoveryInputs {
    pub fn new(env: &dyn VarSource, cwd: Option<PathBuf>, user_override: Option<String>) -> Self {
        DiscoveryInputs {
            org_dir: org_dir_from(env),
            user_dirs: UserDirs::from_env(env),
            cwd,
            user_override,
        }
    }

    pub fn org_dir(&self) -> PathBuf {
        self.org_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_ORG_DIR))
    }
}

/// A policy longer than this is no policy a person wrote: it is refused, not read into memory.
pub const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// How a policy file came to be read, which decides what may be read as one.
#[derive(Clone, Copy)]
enum Found {
    /// Found by its conventional place. A project's `.airlock/` may be in a directory a server
    /// could write (the working directory it was granted), so only a regular file is read: a
    /// link it planted to a FIFO or a device must not make the next start wait or fill memory.
    AtItsPlace,
    /// Named with `--policy`: what the user named is read, a pipe too (`--policy <(...)`).
    Named,
}

fn read_if_present(
    layer: Layer,
    path: &Path,
    found: Found,
) -> Result<Option<LayerSource>, SourceError> {
    let read = match found {
        Found::AtItsPlace => crate::paths::read_small_text(path, MAX_POLICY_BYTES),
        Found::Named => read_named(path),
    };
    match read {
        Ok(text) => Ok(Some(LayerSource {
            layer,
            path: path.to_path_buf(),
            text,
        })),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(
            SourceError::new(path, None, format!("cannot read policy: {err}")).with_fix(
                "make it a regular file of at most 1 MiB that this user can read, or remove it",
            ),
        ),
    }
}

/// A file named on the command line, up to [`MAX_POLICY_BYTES`].
fn read_named(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_POLICY_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_POLICY_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_POLICY_BYTES} bytes"),
        ));
    }
    Ok(text)
}

fn read_required(layer: Layer, path: &Path, found: Found) -> Result<LayerSource, SourceError> {
    read_if_present(layer, path, found)?.ok_or_else(|| {
        let names: Vec<&str> = presets::names().collect();
        // `--policy strictt`: a misspelt preset, not a missing file.
        let meant = path
            .to_str()
            .filter(|text| !text.contains('/'))
            .and_then(|text| {
                crate::diagnostic::did_you_mean_quoted(text, &names, &|name| format!("`{name}`"))
            })
            .map(|hint| format!("{hint} "))
            .unwrap_or_default();
        SourceError::new(path, None, "policy file not found").with_fix(format!(
            "{meant}pass an existing file, or a preset name: {}",
            names.join(", ")
        ))
    })
}

/// Who owns a file, and who runs airlock: (uid, gid) each.
#[derive(Debug, Clone, Copy)]
pub struct Owners {
    pub file: (u32, u32),
    pub running_as: (u32, u32),
}

/// Why an org policy file (or its `policy.d`) with these owners and mode is no org's: writable
/// by everyone, or by a group other than root's or the running user's own, or owned by someone
/// other than root or whoever runs airlock. Pure.
pub fn org_file_problem(owners: Owners, mode: u32) -> Option<String> {
    let (owner, group) = owners.file;
    let (running_as, running_group) = owners.running_as;
    let group_writes = mode & 0o020 != 0 && group != 0 && group != running_group;
    if mode & 0o002 != 0 || group_writes {
        return Some(format!(
            "it is writable by others than its owner (mode {:04o}): anyone who can write it writes the organisation's policy. Fix: chmod go-w it",
            mode & 0o7777
        ));
    }
    if owner != 0 && owner != running_as {
        return Some(format!(
            "it belongs to uid {owner}, neither root nor who runs airlock: its owner writes the organisation's policy. Fix: chown root it"
        ));
    }
    None
}

/// Refuses an org policy file or directory whose owner or mode make it no org's.
fn check_org_file(path: &Path) -> Result<(), SourceError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    let running_as = unsafe { (libc::geteuid(), libc::getegid()) };
    let owners = Owners {
        file: (meta.uid(), meta.gid()),
        running_as,
    };
    match org_file_problem(owners, meta.mode()) {
        Some(why) => Err(SourceError::new(
            path,
            None,
            format!("not read as an org policy: {why}"),
        )),
        None => Ok(()),
    }
}

/// Reads every policy layer that exists, highest authority first.
pub fn discover(inputs: &DiscoveryInputs) -> Result<Vec<LayerSource>, SourceError> {
    let mut sources = Vec::new();
    let org_dir = inputs.org_dir();
    if let Some(source) =
        read_if_present(Layer::Org, &org_dir.join("policy.toml"), Found::AtItsPlace)?
    {
        check_org_file(&source.path)?;
        sources.push(source);
    }
    let drop_in = org_dir.join("policy.d");
    match std::fs::read_dir(&drop_in) {
        Ok(entries) => {
            check_org_file(&drop_in)?;
            let all: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .collect();
            if let Some(near) = all.iter().find(|path| {
                path.extension()
                    .is_some_and(|ext| ext != "toml" && ext.eq_ignore_ascii_case("toml"))
            }) {
                return Err(SourceError::new(
                    near,
                    None,
                    "an org policy file whose name does not end in `.toml` exactly is not read",
                )
                .with_fix("rename it to end in .toml, or move it out of policy.d"));
            }
            let mut paths: Vec<PathBuf> = all
                .into_iter()
                .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
                .collect();
            paths.sort();
            for path in paths {
                let source = read_required(Layer::Org, &path, Found::AtItsPlace)?;
                check_org_file(&source.path)?;
                sources.push(source);
            }
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => {
            return Err(SourceError::new(
                &drop_in,
                None,
                format!("cannot list org policies: {err}"),
            ));
        }
    }

    match &inputs.user_override {
        Some(name) if !name.contains('/') && presets::named(name).is_some() => {
            let text = presets::named(name).unwrap_or_default().to_string();
            sources.push(LayerSource {
                layer: Layer::User,
                path: PathBuf::from(format!("builtin:{name}.toml")),
                text,
            });
        }
        Some(path) => {
            let mut source = read_required(Layer::User, Path::new(path), Found::Named)?;
            // The file itself, not the path as given: the digest covers the path, and
            // `./policy.toml`, `sub/../policy.toml` and a link to it are one policy.
            source.path = std::fs::canonicalize(&source.path).unwrap_or(source.path);
            sources.push(source);
        }
        None => {
            if let Some(path) = inputs.user_dirs.user_policy()
                && let Some(source) = read_if_present(Layer::User, &path, Found::AtItsPlace)?
            {
                sources.push(source);
            }
        }
    }

    if let Some(cwd) = &inputs.cwd {
        for dir in cwd.ancestors() {
            if let Some(source) = read_if_present(
                Layer::Project,
                &dir.join(".airlock").join("policy.toml"),
                Found::AtItsPlace,
            )? {
                sources.push(source);
                break;
            }
        }
    }
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_org_file_others_can_write_or_someone_else_owns_is_no_orgs() {
        let owners = |file, running_as| Owners { file, running_as };
        let user = (1000, 1000);
        assert_eq!(org_file_problem(owners((0, 0), user), 0o100644), None);
        assert_eq!(
            org_file_problem(owners((0, 0), user), 0o100664),
            None,
            "root's group"
        );
        assert_eq!(
            org_file_problem(owners(user, user), 0o100664),
            None,
            "who runs airlock"
        );
        let staff = owners((0, 50), user);
        assert!(org_file_problem(staff, 0o100664).is_some_and(|why| why.contains("0664")));
        let everyone = org_file_problem(owners((0, 0), user), 0o100666);
        assert!(everyone.is_some_and(|why| why.contains("0666")));
        assert!(
            org_file_problem(owners((0, 0), (0, 0)), 0o040777).is_some(),
            "policy.d"
        );
        let other = org_file_problem(owners((1001, 1001), user), 0o100644);
        assert!(other.is_some_and(|why| why.contains("1001")));
    }

    #[test]
    fn the_variable_names_the_org_dir_only_where_none_is_in_place() {
        let named = Some(PathBuf::from("/tmp/org"));
        assert_eq!(org_dir_choice(named.clone(), false), named);
        assert_eq!(org_dir_choice(named, true), None);
        assert_eq!(org_dir_choice(None, false), None);
    }
}
