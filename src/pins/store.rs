//! Where pins live: `<state dir>/pins/<server>.json` (directory 0700, files 0600), never granted
//! to a server. Every change is read-modify-write under an exclusive `flock` on
//! `<server>.lock`, and lands by writing a temporary file and renaming it over the old one, so
//! several airlock processes (two `run`s of one server, a `serve`, `airlock pins approve`) never
//! lose each other's updates, and a crash never leaves half a file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::record::ServerPins;
use crate::lock::flock;

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("cannot use the pin store {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the pins of server {server:?} in {path} are unreadable ({reason}). Fix: `airlock pins reset {server}` forgets them (the server is then new again)"
    )]
    Corrupt {
        server: String,
        path: PathBuf,
        reason: String,
    },
}

#[derive(Debug, Clone)]
pub struct PinStore {
    dir: PathBuf,
}

/// Holds the server's lock file locked until dropped.
struct Locked(File);

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = flock(&self.0, libc::LOCK_UN);
    }
}

impl PinStore {
    /// The store under airlock's state dir (`$XDG_STATE_HOME/airlock`).
    pub fn in_state_dir(state_dir: &Path) -> PinStore {
        PinStore {
            dir: state_dir.join("pins"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path_of(&self, server: &str) -> PathBuf {
        self.dir.join(format!("{server}.json"))
    }

    fn io(&self, path: &Path) -> impl Fn(std::io::Error) -> PinError + '_ {
        let path = path.to_path_buf();
        move |source| PinError::Io {
            path: path.clone(),
            source,
        }
    }

    fn lock(&self, server: &str, exclusive: bool) -> Result<Locked, PinError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(self.io(&self.dir))?;
        let path = self.dir.join(format!("{server}.lock"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(self.io(&path))?;
        let operation = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        flock(&file, operation).map_err(self.io(&path))?;
        Ok(Locked(file))
    }

    fn read(&self, server: &str) -> Result<Option<ServerPins>, PinError> {
        let path = self.path_of(server);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(self.io(&path)(err)),
        };
        let record: ServerPins = serde_json::from_str(&text).map_err(|err| PinError::Corrupt {
            server: server.to_string(),
            path: path.clone(),
            reason: err.to_string(),
        })?;
        if record.server != server {
            return Err(PinError::Corrupt {
                server: server.to_string(),
                path,
                reason: format!("it holds the pins of {:?}", record.server),
            });
        }
        Ok(Some(record))
    }

    /// The server's pins, `None` when it has none.
    pub fn load(&self, server: &str) -> Result<Option<ServerPins>, PinError> {
        if !self.path_of(server).exists() {
            return Ok(None);
        }
        let _lock = self.lock(server, false)?;
        self.read(server)
    }

    /// Reads the server's pins, lets `change` decide what they become (`None`: forget them),
    /// and writes that back if it differs, all under the server's lock.
    pub fn update<T>(
        &self,
        server: &str,
        change: impl FnOnce(Option<ServerPins>) -> (Option<ServerPins>, T),
    ) -> Result<T, PinError> {
        let _lock = self.lock(server, true)?;
        let before = self.read(server)?;
        let (after, result) = change(before.clone());
        if after != before {
            match &after {
                Some(record) => self.write(server, record)?,
                None => {
                    let path = self.path_of(server);
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                        Err(err) => return Err(self.io(&path)(err)),
                    }
                }
            }
        }
        Ok(result)
    }

    /// Writes a temporary file beside the record, syncs it, and renames it into place.
    fn write(&self, server: &str, record: &ServerPins) -> Result<(), PinError> {
        let path = self.path_of(server);
        let temporary = self
            .dir
            .join(format!(".{server}.json.{}.tmp", std::process::id()));
        let mut text = serde_json::to_vec_pretty(record).map_err(|err| PinError::Corrupt {
            server: server.to_string(),
            path: path.clone(),
            reason: err.to_string(),
        })?;
        text.push(b'\n');
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(self.io(&temporary))?;
        file.write_all(&text)
            .and_then(|()| file.sync_all())
            .map_err(self.io(&temporary))?;
        std::fs::rename(&temporary, &path).map_err(self.io(&path))
    }

    /// Every server with pins, by name.
    pub fn servers(&self) -> Result<Vec<String>, PinError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(self.io(&self.dir)(err)),
        };
        let mut servers: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let server = name.strip_suffix(".json")?;
                (!server.starts_with('.')).then(|| server.to_string())
            })
            .collect();
        servers.sort();
        Ok(servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pins::record::Approval;

    fn approved(server: &str) -> ServerPins {
        ServerPins::new(
            server,
            Some(Approval {
                at: "t".into(),
                by: "first use".into(),
            }),
        )
    }

    #[test]
    fn updates_are_written_privately_read_back_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let store = PinStore::in_state_dir(dir.path());
        assert_eq!(store.load("fx").unwrap(), None);
        assert!(store.servers().unwrap().is_empty());
        store.update("fx", |_| (Some(approved("fx")), ())).unwrap();
        assert_eq!(store.load("fx").unwrap(), Some(approved("fx")));
        assert_eq!(store.servers().unwrap(), vec!["fx".to_string()]);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(store.dir()), 0o700);
        assert_eq!(mode(&store.path_of("fx")), 0o600);
        store.update("fx", |_| (None, ())).unwrap();
        assert_eq!(store.load("fx").unwrap(), None);
        assert!(!store.path_of("fx").exists());
    }

    #[test]
    fn a_corrupt_record_is_an_error_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let store = PinStore::in_state_dir(dir.path());
        std::fs::create_dir_all(store.dir()).unwrap();
        std::fs::write(store.path_of("fx"), "{not json").unwrap();
        let err = store.load("fx").unwrap_err().to_string();
        assert!(err.contains("airlock pins reset fx"), "{err}");
        std::fs::write(
            store.path_of("fx"),
            serde_json::to_string(&approved("other")).unwrap(),
        )
        .unwrap();
        assert!(matches!(store.load("fx"), Err(PinError::Corrupt { .. })));
    }

    #[test]
    fn concurrent_updates_from_many_threads_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = PinStore::in_state_dir(dir.path());
        std::thread::scope(|scope| {
            for thread in 0..8 {
                let store = store.clone();
                scope.spawn(move || {
                    for round in 0..20 {
                        store
                            .update("fx", |record| {
                                let mut record = record.unwrap_or_else(|| approved("fx"));
                                record.listed.clear();
                                record
                                    .repin
                                    .entry(crate::pins::Kind::Tool)
                                    .or_default()
                                    .insert(format!("{thread}-{round}"));
                                (Some(record), ())
                            })
                            .unwrap();
                    }
                });
            }
        });
        let record = store.load("fx").unwrap().unwrap();
        assert_eq!(record.repin[&crate::pins::Kind::Tool].len(), 160);
    }
}
