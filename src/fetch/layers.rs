//! airlock's private copy of a package cache, per server and per package spec: what install
//! steps fetched, kept as overlay layers above the user's real cache (which is never written).
//!
//! `<servers dir>/<server>/packages/<cache>/<spec>/` ([`Runner::store_name`]): one store per
//! spec as written (`npx -y @scope/pkg@1`), so what one package's install wrote (its install
//! scripts run, confined, and may write anything into the cache view) is never in another's
//! view, nor in another version's: two packages a server name does not tell apart (`run` names
//! `@evil/server-x` and `@good/server-x` both `server-x`) used to share one store, and the first
//! one's install could plant the second's code where the second's start found it "cached".
//!
//! [`Runner::store_name`]: super::Runner::store_name
//!
//! In each store:
//! - `layers/<n>`: one directory per finished install, the upper layer that install wrote; the
//!   server's cache view stacks them (newest first) above the real cache;
//! - `staging/<pid>/{upper,work}`: an install in progress. It becomes `layers/<n>` by one
//!   `rename` when the install succeeds, and is removed when it fails. One left behind by a
//!   killed airlock is removed by the next install (under the lock, so never one in progress);
//! - `install.lock`: held for the whole install, so two instances never install at once (the
//!   second finds the package cached when it gets the lock);
//! - `installed.json`: what each finished install fetched (for uv, whose cache cannot be asked
//!   cheaply whether a package is in it).
//!
//! A failed or killed install therefore leaves nothing a later run sees: the next run starts
//! from the real cache and the layers of installs that finished.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::sandbox::Identity;

/// How long an install waits for another instance's install of the same server.
const LOCK_WAIT: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("another airlock has been installing this server's package for {}s ({}); wait for it, or stop it", LOCK_WAIT.as_secs(), .0.display())]
    Busy(PathBuf),
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LayerError + 'a {
    move |source| LayerError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// The store of one server's one cache (`packages/<cache>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    pub dir: PathBuf,
}

/// One finished install, as `installed.json` records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// What was asked for (`npx`/`uvx` and the package specs): the marker's key.
    pub key: String,
    pub package: String,
    pub version: String,
    pub integrity: Option<String>,
    pub layer: String,
}

impl Store {
    /// `spec`: the store's name for what is installed ([`super::Runner::store_name`]).
    pub fn new(servers_dir: &Path, server: &str, cache: &str, spec: &str) -> Store {
        Store {
            dir: servers_dir
                .join(server)
                .join("packages")
                .join(cache)
                .join(spec),
        }
    }

    pub fn layers_dir(&self) -> PathBuf {
        self.dir.join("layers")
    }

    /// The finished layers, newest first.
    pub fn layers(&self) -> Vec<PathBuf> {
        layers_in(&self.layers_dir())
    }

    /// The record of a finished install of `key`, if any.
    pub fn record(&self, key: &str) -> Option<Record> {
        let text = std::fs::read_to_string(self.dir.join("installed.json")).ok()?;
        let records: Vec<Record> = serde_json::from_str(&text).ok()?;
        records.into_iter().rev().find(|record| record.key == key)
    }

    /// Takes the install lock (waiting for another instance's install), removes what killed
    /// installs left behind, and makes a fresh staging upper/work pair owned by `owner` (the
    /// uid the install runs as, when airlock is root and it is another).
    pub fn begin(&self, owner: Option<Identity>) -> Result<Staging, LayerError> {
        for dir in [&self.dir, &self.layers_dir(), &self.dir.join("staging")] {
            std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        let lock_path = self.dir.join("install.lock");
        let lock = File::create(&lock_path).map_err(io("creating", &lock_path))?;
        lock_exclusive(&lock, &lock_path)?;
        let staging_root = self.dir.join("staging");
        if let Ok(entries) = std::fs::read_dir(&staging_root) {
            for entry in entries.flatten() {
                remove_tree(&entry.path());
            }
        }
        let dir = staging_root.join(std::process::id().to_string());
        for sub in ["upper", "work"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(io("creating", &path))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
                .map_err(io("chmod", &path))?;
            if let Some(id) = owner {
                std::os::unix::fs::chown(&path, Some(id.uid), Some(id.gid))
                    .map_err(io("chown", &path))?;
            }
        }
        Ok(Staging {
            store: self.clone(),
            dir,
            _lock: lock,
        })
    }
}

/// The finished layers under `dir`, newest first (names sort by time).
pub fn layers_in(dir: &Path) -> Vec<PathBuf> {
    let mut layers: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.is_dir())
                .collect()
        })
        .unwrap_or_default();
    layers.sort();
    layers.reverse();
    layers
}

fn lock_exclusive(lock: &File, path: &Path) -> Result<(), LayerError> {
    let start = Instant::now();
    loop {
        if crate::lock::flock(lock, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
            return Ok(());
        }
        if start.elapsed() > LOCK_WAIT {
            return Err(LayerError::Busy(path.to_path_buf()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Removes a tree an overlay wrote, whatever modes it left (overlayfs makes its `work/work`
/// directory mode 000).
pub fn remove_tree(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() {
        return;
    }
    fn open_up(path: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if meta.is_dir() {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
            if let Ok(entries) = std::fs::read_dir(path) {
                for entry in entries.flatten() {
                    open_up(&entry.path());
                }
            }
        }
    }
    open_up(path);
    let _ = std::fs::remove_dir_all(path);
}

/// An install in progress: its upper layer and workdir, and the lock.
#[derive(Debug)]
pub struct Staging {
    store: Store,
    pub dir: PathBuf,
    _lock: File,
}

impl Staging {
    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }

    /// Makes the upper layer a finished layer (one `rename`) and records the install.
    pub fn commit(self, mut record: Record) -> Result<PathBuf, LayerError> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let name = format!("{stamp:020}-{}", std::process::id());
        let layer = self.store.layers_dir().join(&name);
        let upper = self.upper();
        std::fs::rename(&upper, &layer).map_err(io("committing the install layer", &layer))?;
        remove_tree(&self.dir);
        record.layer = name;
        let path = self.store.dir.join("installed.json");
        let mut records: Vec<Record> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        records.retain(|have| have.key != record.key);
        records.push(record);
        let text = serde_json::to_string_pretty(&records).unwrap_or_default();
        let temporary = self.store.dir.join("installed.json.new");
        std::fs::write(&temporary, text).map_err(io("writing", &temporary))?;
        std::fs::rename(&temporary, &path).map_err(io("writing", &path))?;
        Ok(layer)
    }

    /// Throws the install away: nothing of it is seen by any later run.
    pub fn discard(self) {
        remove_tree(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str) -> Record {
        Record {
            key: key.into(),
            package: "p".into(),
            version: "1".into(),
            integrity: None,
            layer: String::new(),
        }
    }

    #[test]
    fn a_finished_install_becomes_a_layer_and_a_failed_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "fs", "npm", "npx-a");
        let staging = store.begin(None).unwrap();
        std::fs::write(staging.upper().join("file"), "x").unwrap();
        staging.discard();
        assert!(store.layers().is_empty());
        assert_eq!(
            std::fs::read_dir(store.dir.join("staging"))
                .unwrap()
                .count(),
            0
        );
        assert!(store.record("npx a").is_none());

        let staging = store.begin(None).unwrap();
        std::fs::write(staging.upper().join("file"), "x").unwrap();
        let layer = staging.commit(record("npx a")).unwrap();
        assert_eq!(store.layers(), vec![layer.clone()]);
        assert!(layer.join("file").is_file());
        assert_eq!(
            store.record("npx a").unwrap().layer,
            layer.file_name().unwrap().to_str().unwrap()
        );
        // A later install stacks above it.
        let staging = store.begin(None).unwrap();
        let newer = staging.commit(record("npx b")).unwrap();
        assert_eq!(store.layers(), vec![newer, layer]);
    }

    #[test]
    fn what_a_killed_install_left_is_swept_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "fs", "npm", "npx-a");
        let left = store.dir.join("staging/999999/work/work");
        std::fs::create_dir_all(&left).unwrap();
        std::fs::set_permissions(&left, std::fs::Permissions::from_mode(0o000)).unwrap();
        let staging = store.begin(None).unwrap();
        assert!(!store.dir.join("staging/999999").exists());
        staging.discard();
    }
}
