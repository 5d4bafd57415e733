//! Sinks: an append-only JSON Lines file and/or stderr. Each event is one `write` of one whole
//! line, straight to the file descriptor (no user-space buffer), so a decision is on disk (in the
//! kernel's hands) before the call it records is forwarded, even if airlock dies right after.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::event::{Event, rfc3339};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot open the audit log {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the audit log {target}: {source}")]
    Write {
        target: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode an audit event: {0}")]
    Encode(#[from] serde_json::Error),
}

#[derive(Debug)]
enum Sink {
    File {
        file: File,
        path: PathBuf,
    },
    Stderr,
    /// In-memory, for tests and benchmarks.
    Memory(Vec<u8>),
}

/// Staging buffer capacity kept between commits; a burst may grow it, a lull gives it back.
const MAX_KEPT_CAPACITY: usize = 256 * 1024;

#[derive(Debug)]
pub struct AuditLog {
    sinks: Vec<Sink>,
    seq: u64,
    /// Encoded events staged and not yet written, whole lines.
    line: Vec<u8>,
}

impl AuditLog {
    /// Opens (creating, mode 0600, parents 0711) `path` for appending.
    ///
    /// Parents are 0711, not 0700: the default audit directory is airlock's state dir, under
    /// which servers' private home and tmp live, and a server running as another uid (nobody,
    /// when airlock runs as root) must be able to traverse to them. 0711 lets it pass through
    /// without listing anything; the log itself stays 0600.
    pub fn open_file(path: &Path) -> Result<AuditLog, AuditError> {
        let open_error = |source| AuditError::Open {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o711)
                .create(parent)
                .map_err(open_error)?;
        }
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(open_error)?;
        Ok(AuditLog::with_sinks(vec![Sink::File {
            file,
            path: path.to_path_buf(),
        }]))
    }

    pub fn stderr() -> AuditLog {
        AuditLog::with_sinks(vec![Sink::Stderr])
    }

    pub fn memory() -> AuditLog {
        AuditLog::with_sinks(vec![Sink::Memory(Vec::new())])
    }

    fn with_sinks(sinks: Vec<Sink>) -> AuditLog {
        AuditLog {
            sinks,
            seq: 0,
            line: Vec::with_capacity(512),
        }
    }

    /// Everything written to the in-memory sink so far (empty for other sinks).
    pub fn memory_contents(&self) -> &[u8] {
        self.sinks
            .iter()
            .find_map(|sink| match sink {
                Sink::Memory(buffer) => Some(buffer.as_slice()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Stamps `ts` and `seq` and writes the event as one line to every sink (together with any
    /// events staged before it, in order).
    pub fn record(&mut self, event: Event) -> Result<(), AuditError> {
        self.stage(event)?;
        self.commit()
    }

    /// Stamps `ts` and `seq` and encodes the event, but does not write it yet: the next
    /// [`AuditLog::commit`] (or `record`) writes every staged event in one `write`. This lets a
    /// session record the decisions of all the calls that arrived together with one syscall,
    /// still before any of them is forwarded.
    pub fn stage(&mut self, mut event: Event) -> Result<(), AuditError> {
        self.seq += 1;
        event.seq = self.seq;
        event.ts = rfc3339(SystemTime::now());
        let start = self.line.len();
        if let Err(err) = serde_json::to_writer(&mut self.line, &event) {
            self.line.truncate(start);
            return Err(err.into());
        }
        self.line.push(b'\n');
        Ok(())
    }

    /// Whether events are staged and not yet written.
    pub fn has_staged(&self) -> bool {
        !self.line.is_empty()
    }

    /// Writes every staged event, as whole lines, with one `write` per sink (no user-space
    /// buffer is left behind: when this returns Ok the events are in the kernel's hands). On an
    /// error the staged events are discarded; the caller must not forward what they record.
    pub fn commit(&mut self) -> Result<(), AuditError> {
        if self.line.is_empty() {
            return Ok(());
        }
        let result = self.write_staged();
        self.line.clear();
        if self.line.capacity() > MAX_KEPT_CAPACITY {
            self.line.shrink_to(MAX_KEPT_CAPACITY);
        }
        result
    }

    fn write_staged(&mut self) -> Result<(), AuditError> {
        for sink in &mut self.sinks {
            match sink {
                Sink::File { file, path } => {
                    file.write_all(&self.line)
                        .map_err(|source| AuditError::Write {
                            target: path.display().to_string(),
                            source,
                        })?
                }
                Sink::Stderr => {
                    std::io::stderr()
                        .lock()
                        .write_all(&self.line)
                        .map_err(|source| AuditError::Write {
                            target: "stderr".into(),
                            source,
                        })?
                }
                Sink::Memory(buffer) => buffer.extend_from_slice(&self.line),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::EventKind;

    #[test]
    fn staged_events_are_written_together_in_order_on_commit() {
        let mut log = AuditLog::memory();
        log.stage(Event::new(EventKind::Decision, "a")).unwrap();
        log.stage(Event::new(EventKind::Decision, "a")).unwrap();
        assert!(log.has_staged());
        assert!(log.memory_contents().is_empty());
        log.commit().unwrap();
        assert!(!log.has_staged());
        log.record(Event::new(EventKind::Outcome, "a")).unwrap();
        let text = String::from_utf8(log.memory_contents().to_vec()).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
    }

    #[test]
    fn appends_numbered_lines_to_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/airlock/audit.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"earlier\":true}\n").unwrap();
        let mut log = AuditLog::open_file(&path).unwrap();
        log.record(Event::new(EventKind::Spawn, "a")).unwrap();
        log.record(Event::new(EventKind::Exit, "a")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let second: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(second["seq"], 2);
        assert_eq!(second["event"], "exit");
        assert!(second["ts"].as_str().unwrap().ends_with('Z'));
        use std::os::unix::fs::PermissionsExt;
        let fresh = dir.path().join("fresh/dir/audit.jsonl");
        AuditLog::open_file(&fresh).unwrap();
        assert_eq!(
            std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
