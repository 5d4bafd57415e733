//! Bearer tokens made by `airlock token create NAME`: the token is printed once and only its
//! SHA-256 is stored. A token is 32 random bytes, so a fast hash is enough: nobody can search a
//! 256-bit space, and the check stays a hash and a map lookup per request.
//!
//! The store is one JSON file (owner-only, in a 0700 directory), rewritten atomically (a new file,
//! then `rename`) under an exclusive `flock` on a lock file beside it, so concurrent `create` and
//! `revoke` calls cannot lose each other's changes. A running gateway re-reads it when it changes:
//! a revoked token is refused from its next request on.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::hash::sha256_hex;

/// Every token starts with this, so secret scanners (and airlock's own redaction) know it.
pub const TOKEN_PREFIX: &str = "airlock_";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "`{0}` is not a token name: use 1-64 of letters, digits, `_`, `-`, `.` and `@` (e.g. alice, ci-deploy, bob@example.com)"
    )]
    BadName(String),
    #[error("a token named `{0}` exists already; revoke it first (`airlock token revoke {0}`)")]
    Exists(String),
    #[error("no token is named `{0}` (see `airlock token list`)")]
    NotFound(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: not a token store airlock wrote ({source}); move it away to start a new one")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// One stored token: its name and the SHA-256 of the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub name: String,
    pub sha256: String,
    /// RFC 3339, UTC.
    pub created: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    version: u32,
    tokens: Vec<TokenRecord>,
}

fn io_error(path: &Path) -> impl Fn(io::Error) -> TokenError + '_ {
    move |source| TokenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.@".contains(&b))
}

/// The records of the store at `path` (empty when it does not exist).
pub fn list(path: &Path) -> Result<Vec<TokenRecord>, TokenError> {
    Ok(read(path)?.tokens)
}

/// Makes a token for `name`, stores its hash, and returns the token (shown once).
pub fn create(path: &Path, name: &str, now: SystemTime) -> Result<String, TokenError> {
    if !valid_name(name) {
        return Err(TokenError::BadName(name.to_string()));
    }
    let mut secret = [0u8; 32];
    crate::random::fill(&mut secret).map_err(io_error(path))?;
    let token = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    let record = TokenRecord {
        name: name.to_string(),
        sha256: sha256_hex(token.as_bytes()),
        created: crate::audit::event::rfc3339(now),
    };
    update(path, |file| {
        if file.tokens.iter().any(|t| t.name == name) {
            return Err(TokenError::Exists(name.to_string()));
        }
        file.tokens.push(record);
        Ok(())
    })?;
    Ok(token)
}

/// Removes `name`'s token.
pub fn revoke(path: &Path, name: &str) -> Result<(), TokenError> {
    update(path, |file| {
        let before = file.tokens.len();
        file.tokens.retain(|t| t.name != name);
        if file.tokens.len() == before {
            return Err(TokenError::NotFound(name.to_string()));
        }
        Ok(())
    })
}

fn read(path: &Path) -> Result<TokenFile, TokenError> {
    // A FIFO or a device would block or never end: only a regular file is a store.
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
    {
        let not_a_file = io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
        return Err(io_error(path)(not_a_file));
    }
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| TokenError::Corrupt {
            path: path.to_path_buf(),
            source,
        }),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(TokenFile {
            version: 1,
            tokens: Vec::new(),
        }),
        Err(err) => Err(io_error(path)(err)),
    }
}

/// Read, change and atomically replace the store, holding its lock throughout.
fn update(
    path: &Path,
    change: impl FnOnce(&mut TokenFile) -> Result<(), TokenError>,
) -> Result<(), TokenError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::install::record::private_dir(dir).map_err(io_error(dir))?;
    let lock_path = path.with_extension("lock");
    let lock = open_lock(&lock_path).map_err(io_error(&lock_path))?;
    crate::lock::flock(&lock, libc::LOCK_EX).map_err(io_error(&lock_path))?;
    let mut file = read(path)?;
    file.version = 1;
    change(&mut file)?;
    let text =
        serde_json::to_vec_pretty(&file).map_err(|err| io_error(path)(io::Error::other(err)))?;
    let temp = dir.join(format!(".tokens.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let written = crate::install::record::write_private(&temp, &text)
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.map_err(io_error(path))
}

fn open_lock(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// What identifies one version of the store file: re-read when it changes.
type Stamp = (u64, u64, i64, i64, u64);

/// The gateway's view of the store: hash → name, re-read whenever the file changes.
#[derive(Debug)]
pub struct TokenCache {
    path: PathBuf,
    stamp: Option<Stamp>,
    by_hash: HashMap<String, String>,
}

impl TokenCache {
    pub fn new(path: PathBuf) -> TokenCache {
        TokenCache {
            path,
            stamp: None,
            by_hash: HashMap::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many tokens the store holds now.
    pub fn count(&mut self) -> Result<usize, TokenError> {
        self.refresh()?;
        Ok(self.by_hash.len())
    }

    /// The name a presented token belongs to, if it is in the store now.
    pub fn verify(&mut self, token: &str) -> Result<Option<String>, TokenError> {
        self.refresh()?;
        Ok(self.by_hash.get(&sha256_hex(token.as_bytes())).cloned())
    }

    fn refresh(&mut self) -> Result<(), TokenError> {
        let stamp = match std::fs::metadata(&self.path) {
            Ok(meta) => Some((
                meta.dev(),
                meta.ino(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.len(),
            )),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(io_error(&self.path)(err)),
        };
        if stamp == self.stamp && stamp.is_some() {
            return Ok(());
        }
        let file = read(&self.path)?;
        self.by_hash = file
            .tokens
            .into_iter()
            .map(|record| (record.sha256, record.name))
            .collect();
        self.stamp = stamp;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_that_is_not_a_regular_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("tokens.json");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let err = list(&fifo).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let err = TokenCache::new(fifo).count().unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn create_list_verify_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("airlock/tokens.json");
        let mut cache = TokenCache::new(path.clone());
        assert_eq!(cache.count().unwrap(), 0);
        let token = create(&path, "alice", SystemTime::now()).unwrap();
        assert!(token.starts_with(TOKEN_PREFIX) && token.len() == TOKEN_PREFIX.len() + 43);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&token), "the token itself is never stored");
        assert!(text.contains(&sha256_hex(token.as_bytes())));
        assert_eq!(cache.verify(&token).unwrap().as_deref(), Some("alice"));
        assert_eq!(cache.verify("airlock_wrong").unwrap(), None);
        assert!(matches!(
            create(&path, "alice", SystemTime::now()),
            Err(TokenError::Exists(_))
        ));
        let bob = create(&path, "bob", SystemTime::now()).unwrap();
        assert_eq!(
            list(&path)
                .unwrap()
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>(),
            ["alice", "bob"]
        );
        revoke(&path, "alice").unwrap();
        assert_eq!(
            cache.verify(&token).unwrap(),
            None,
            "revoked: refused at once"
        );
        assert_eq!(cache.verify(&bob).unwrap().as_deref(), Some("bob"));
        assert!(matches!(
            revoke(&path, "alice"),
            Err(TokenError::NotFound(_))
        ));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn names_are_checked() {
        for good in ["alice", "ci-deploy", "bob@example.com", "a.b_c"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "a b", "a/b", "ü", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            create(&dir.path().join("t.json"), "a b", SystemTime::now()),
            Err(TokenError::BadName(_))
        ));
    }

    #[test]
    fn a_foreign_file_is_an_error_not_an_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(list(&path), Err(TokenError::Corrupt { .. })));
        assert!(TokenCache::new(path).verify("x").is_err());
    }
}
