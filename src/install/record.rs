//! What `install` remembers so `uninstall` can undo it exactly: a record per host file under
//! `$XDG_STATE_HOME/airlock/installs/` (directory 0700, files 0600) with, for each install that
//! changed the file, a backup of the bytes before it and the digest of the bytes it wrote.
//!
//! Undo walks the steps back: while the file is exactly what a step wrote, the step's backup
//! goes back in, byte for byte. Once the file differs (the host or the user changed it since),
//! the rest is undone by unwrapping just airlock's entries.

use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An entry `install --gateway` moved out of the file, to be put back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedEntry {
    pub name: String,
    pub text: String,
}

/// One install that changed the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub at: String,
    /// The file's bytes before this install, saved here.
    pub backup: PathBuf,
    pub before_sha256: String,
    pub written_sha256: String,
    /// Entries this install wrapped ([`super::entry::recorded_as`]).
    pub wrapped: Vec<String>,
    /// Whether `wrapped` names entries of other maps with their map (false in records written
    /// before they did).
    #[serde(default)]
    pub keys_with_maps: bool,
    /// Entries it moved behind the gateway.
    #[serde(default)]
    pub moved: Vec<SavedEntry>,
    /// The gateway entry it added and the config that entry serves.
    #[serde(default)]
    pub gateway: Option<(String, PathBuf)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallRecord {
    pub host: String,
    pub path: PathBuf,
    pub steps: Vec<Step>,
}

impl InstallRecord {
    pub fn wrapped(&self) -> Vec<String> {
        let mut names: Vec<String> = self.steps.iter().flat_map(|s| s.wrapped.clone()).collect();
        names.sort();
        names.dedup();
        names
    }
}

/// The result of walking the steps back from the file's current bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undo {
    /// The bytes to write back, when at least one step matched exactly.
    pub restored: Option<Vec<u8>>,
    /// Steps that could not be undone byte for byte (oldest first): their entries are unwrapped.
    pub remaining: Vec<Step>,
}

/// Walks `steps` back from `current`. `read_backup` reads a step's backup. Pure but for it.
pub fn undo(
    steps: &[Step],
    current: &[u8],
    read_backup: &dyn Fn(&Path) -> io::Result<Vec<u8>>,
) -> io::Result<Undo> {
    let mut remaining = steps.to_vec();
    let mut bytes: Option<Vec<u8>> = None;
    while let Some(last) = remaining.last() {
        let now = bytes.as_deref().unwrap_or(current);
        if sha256_hex(now) != last.written_sha256 {
            break;
        }
        let backup = read_backup(&last.backup)?;
        if sha256_hex(&backup) != last.before_sha256 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("backup {} does not match its record", last.backup.display()),
            ));
        }
        bytes = Some(backup);
        remaining.pop();
    }
    Ok(Undo {
        restored: bytes,
        remaining,
    })
}

/// Where the records live.
pub fn installs_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("installs")
}

/// The record's file for `host`'s file at `path`.
pub fn record_path(state_dir: &Path, host: &str, path: &Path) -> PathBuf {
    let digest = sha256_hex(path.to_string_lossy().as_bytes());
    installs_dir(state_dir).join(format!("{host}-{}.json", &digest[..16]))
}

pub fn load(record: &Path) -> io::Result<Option<InstallRecord>> {
    match std::fs::read(record) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Writes a new owner-only file (never following or replacing what is there).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Saves the bytes a file had before an install; returns the backup's path.
pub fn save_backup(record: &Path, step: usize, bytes: &[u8]) -> io::Result<PathBuf> {
    let dir = record.parent().unwrap_or(Path::new("."));
    private_dir(dir)?;
    let stem = record
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut path = dir.join(format!("{stem}.{step}.orig"));
    let mut attempt = 0;
    while path.exists() {
        attempt += 1;
        path = dir.join(format!("{stem}.{step}.{attempt}.orig"));
    }
    write_private(&path, bytes)?;
    Ok(path)
}

/// Saves the record (atomically), or removes it when no step is left.
pub fn store(record_file: &Path, record: &InstallRecord) -> io::Result<()> {
    if record.steps.is_empty() {
        return match std::fs::remove_file(record_file) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        };
    }
    let dir = record_file.parent().unwrap_or(Path::new("."));
    private_dir(dir)?;
    let text = serde_json::to_vec_pretty(record)
        .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))?;
    let temp = dir.join(format!(".record.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    write_private(&temp, &text)?;
    std::fs::rename(&temp, record_file)
}

/// Replaces the file at `path` with `bytes` atomically (a temporary file in the same directory,
/// then `rename`), keeping its permissions and owner. A symlink is followed: its target is
/// rewritten and the link stays. Refuses when the file no longer holds `expected` (someone wrote
/// it since it was read).
pub fn replace_file(path: &Path, expected: &[u8], bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let target = std::fs::canonicalize(path)?;
    let metadata = std::fs::metadata(&target)?;
    let dir = target.parent().unwrap_or(Path::new("/"));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.airlock-{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(metadata.mode() & 0o7777)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::set_permissions(
            &temp,
            std::fs::Permissions::from_mode(metadata.mode() & 0o7777),
        )?;
        // Best effort: only root may give the file back to another owner.
        let _ = std::os::unix::fs::chown(&temp, Some(metadata.uid()), Some(metadata.gid()));
        if std::fs::read(&target)? != expected {
            return Err(io::Error::other(format!(
                "{} changed while airlock was editing it; run the command again",
                path.display()
            )));
        }
        std::fs::rename(&temp, &target)?;
        if let Ok(dir_handle) = std::fs::File::open(dir) {
            let _ = dir_handle.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Writes a new file owner-only, atomically (the gateway config holds header values).
pub fn write_config(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    private_dir(dir)?;
    let temp = dir.join(format!(".gateway.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    write_private(&temp, bytes)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn step(before: &[u8], written: &[u8], backup: &str) -> Step {
        Step {
            at: String::new(),
            backup: PathBuf::from(backup),
            before_sha256: sha256_hex(before),
            written_sha256: sha256_hex(written),
            wrapped: vec![],
            keys_with_maps: true,
            moved: vec![],
            gateway: None,
        }
    }

    #[test]
    fn undo_restores_step_by_step_while_the_file_is_what_airlock_wrote() {
        let backups: HashMap<&str, &[u8]> = [("b1", &b"v0"[..]), ("b2", &b"v1-edited"[..])].into();
        let read = |p: &Path| Ok(backups[p.to_str().unwrap()].to_vec());
        let steps = vec![step(b"v0", b"v1", "b1"), step(b"v1-edited", b"v2", "b2")];
        // Untouched since the second install: back to before it, then not further (edited).
        let undone = undo(&steps, b"v2", &read).unwrap();
        assert_eq!(undone.restored.as_deref(), Some(&b"v1-edited"[..]));
        assert_eq!(undone.remaining.len(), 1);
        // Changed by someone else: nothing restored byte for byte.
        let undone = undo(&steps, b"v2-host-edit", &read).unwrap();
        assert_eq!(undone.restored, None);
        assert_eq!(undone.remaining.len(), 2);
        // One step, untouched: the original bytes.
        let undone = undo(&steps[..1], b"v1", &read).unwrap();
        assert_eq!(undone.restored.as_deref(), Some(&b"v0"[..]));
        assert!(undone.remaining.is_empty());
    }

    #[test]
    fn a_tampered_backup_is_refused() {
        let read = |_: &Path| Ok(b"something else".to_vec());
        let steps = vec![step(b"v0", b"v1", "b1")];
        assert!(undo(&steps, b"v1", &read).is_err());
    }
}
