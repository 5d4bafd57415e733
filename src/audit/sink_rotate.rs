//! The rotation of a shared log file, done by the writer that finds it at its size, under its
//! lock (the rules: [`super::rotate`]; the design: `docs/run.md`, "Rotation").
//!
//! The order keeps every moment safe for the other writers and for `verify`. The new file and
//! its checkpoint are prepared under a hidden name first, and the closed file gets its dated
//! name as a second link, both before the `rotated` record is written: a failure there leaves
//! the log as it was, and this process carries on without rotating. Then the `rotated` record
//! and the closed file's checkpoint, then the new checkpoint and the new file take their places
//! by `rename` (the checkpoint first, so a writer that opens the new file never pairs it with
//! the old checkpoint), and only then is the lock let go.
//!
//! The new file and checkpoint get the owner and mode of the ones they replace, so a log that
//! belongs to a user is not taken from them by a rotation airlock does as root. A rotation that
//! stopped after its `rotated` record (a crash) is finished by the next writer, when the file it
//! prepared is there and links to that record ([`SharedFile::finish_rotation`]).

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{AuditError, AuditLog, SharedFile, Sink, stamp_into};
use crate::audit::chain::{self, Checkpoint};
use crate::audit::event::{Event, EventKind};
use crate::audit::rotate;
use crate::lock::flock;

/// The records that close one file and open the next, encoded, and their numbers.
struct Handover<'a> {
    renamed_to: &'a Path,
    closing: &'a [u8],
    closing_seq: u64,
    opening: &'a [u8],
    opening_seq: u64,
    session: &'a str,
}

/// Why a rotation stopped, and whether the log was left as it was.
enum Failed {
    /// Nothing of the log changed: carry on writing to the same file.
    Before(String),
    /// The `rotated` record is written: the log cannot go on without the new file.
    After(String),
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl AuditLog {
    /// Rotates the file of sink `index`, whose lock [`SharedFile::seal`] kept, and lets go of
    /// it. A rotation that fails before the log changed is given up for this process (a
    /// warning says why); one that fails after is an error, as a failed write is.
    pub(super) fn rotate(&mut self, index: usize) -> Result<(), AuditError> {
        let Sink::File(shared) = &self.sinks[index] else {
            return Ok(());
        };
        let log = shared.path.clone();
        // A name no rotated file has yet: dates are to the microsecond, and the clock may step.
        let mut at = SystemTime::now();
        let mut renamed_to = rotate::rotated_path(&log, at);
        while renamed_to.exists() {
            at += Duration::from_micros(1);
            renamed_to = rotate::rotated_path(&log, at);
        }
        let mut closing = Event::new(EventKind::Rotated, "airlock");
        closing.detail = Some(serde_json::json!({
            "renamed_to": file_name(&renamed_to),
            "continues_in": file_name(&log),
        }));
        // The retention this rotation applies, on record: `verify --all` tells a file that
        // retention deleted from one deleted by hand (`rotate::why_gone`).
        let keep = shared.rotation.map_or(0, |rotation| rotation.keep);
        let mut opening = Event::new(EventKind::Continued, "airlock");
        opening.detail = Some(serde_json::json!({
            "continues": file_name(&renamed_to),
            "keep_rotated": keep,
        }));
        let (mut closing_line, mut opening_line) = (Vec::new(), Vec::new());
        let stamped = stamp_into(&mut closing_line, &self.session, self.seq + 1, &closing)
            .and_then(|()| stamp_into(&mut opening_line, &self.session, self.seq + 2, &opening));
        if let Err(err) = stamped {
            // The lock [`SharedFile::seal`] kept is let go on every way out.
            if let Sink::File(shared) = &self.sinks[index] {
                let _ = flock(&shared.file, libc::LOCK_UN);
            }
            return Err(err);
        }
        let handover = Handover {
            renamed_to: &renamed_to,
            closing: &closing_line,
            closing_seq: self.seq + 1,
            opening: &opening_line,
            opening_seq: self.seq + 2,
            session: &self.session,
        };
        let Sink::File(shared) = &mut self.sinks[index] else {
            return Ok(());
        };
        let result = shared.rotate(&handover);
        let _ = flock(&shared.file, libc::LOCK_UN);
        match result {
            Ok(()) => {
                self.seq += 2;
                shared.remove_beyond_keep();
                Ok(())
            }
            Err(Failed::Before(why)) => {
                tracing::warn!(
                    "cannot rotate the audit log {}: {why}; it goes on growing in this session",
                    log.display()
                );
                shared.rotation = None;
                Ok(())
            }
            Err(Failed::After(why)) => {
                // Its `rotated` record is written: nothing more may go into this file. The
                // prepared file stays, for the next writer to finish the rotation with.
                let why = format!(
                    "its rotation stopped half-way ({why}). Fix: start airlock again: the next airlock to write the log finishes the rotation from {}; do not move the log away meanwhile",
                    rotate::staging_path(&log).display()
                );
                shared.broken = Some(why.clone());
                Err(AuditError::Rotate { path: log, why })
            }
        }
    }
}

impl SharedFile {
    /// Finishes a rotation that stopped after its `rotated` record `closing` (the last line of
    /// this file, which is `end` bytes long): the file it prepared (and its checkpoint, unless
    /// that already took its place) is put at the log's path, if it is there and its first
    /// record goes on from that line. The closed file's checkpoint is rewritten first to cover
    /// its `rotated` record (a crash may have come before that write). Err says why not, and
    /// the fix.
    pub(super) fn finish_rotation(&mut self, closing: &[u8], end: u64) -> Result<(), String> {
        let staged = rotate::staging_path(&self.path);
        let staged_checkpoint = chain::checkpoint_path(&staged);
        let move_away = "Fix: move the log and its checkpoint away (airlock starts a new log there; the records so far stay in the file moved)";
        let closing_hash = chain::line_hash(closing);
        let prepared = match File::open(&staged) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "it ends in a `rotated` record and nothing took its place: a rotation stopped half-way, and the file it prepared ({}) is not there to finish it. {move_away}",
                    staged.display()
                ));
            }
            Err(err) => {
                return Err(format!(
                    "it ends in a `rotated` record and nothing took its place; the file prepared to finish that rotation cannot be read ({}: {err})",
                    staged.display()
                ));
            }
        };
        #[derive(serde::Deserialize)]
        struct Detail {
            renamed_to: String,
        }
        #[derive(serde::Deserialize)]
        struct Marker {
            session: String,
            seq: u64,
            detail: Detail,
        }
        let Ok(marker) = serde_json::from_slice::<Marker>(closing) else {
            return Err(format!(
                "it ends in a `rotated` record that cannot be read. {move_away}"
            ));
        };
        let renamed_to = &marker.detail.renamed_to;
        // The prepared file must go on from this very record, under the closed file's dated
        // name, and be the log owner's: anything else is not this rotation's to finish.
        let links = rotate::first_line(&prepared)
            .ok()
            .and_then(|line| rotate::continues(&line))
            .is_some_and(|link| link.last_line == closing_hash && link.name == *renamed_to);
        let same_owner = match (prepared.metadata(), self.file.metadata()) {
            (Ok(a), Ok(b)) => (a.uid(), a.gid()) == (b.uid(), b.gid()),
            _ => false,
        };
        if !links || !same_owner {
            return Err(format!(
                "it ends in a `rotated` record and nothing took its place; {} does not go on from it. {move_away}",
                staged.display()
            ));
        }
        // The closed file keeps its history only under its dated name: without that name,
        // putting the prepared file in place would unlink the last name of those records.
        let dated = self.path.with_file_name(renamed_to);
        let still_named = !renamed_to.contains('/')
            && File::open(&dated)
                .and_then(|file| rotate::identity(&file))
                .is_ok_and(|id| rotate::identity(&self.file).is_ok_and(|closed| closed == id));
        if !still_named {
            return Err(format!(
                "it ends in a `rotated` record and nothing took its place, and its dated name {} is not this file: finishing the rotation would lose it. {move_away}",
                dated.display()
            ));
        }
        let closed = Checkpoint {
            bytes: end,
            last: closing_hash,
            session: marker.session.clone(),
            seq: marker.seq,
        };
        // Not through a link: the dated checkpoint is airlock's own file.
        if let Ok(file) = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(chain::checkpoint_path(&dated))
        {
            let _ = file.write_all_at(&closed.encode(), 0);
        }
        let failed = |err: std::io::Error| {
            format!(
                "it ends in a `rotated` record and nothing took its place; finishing that rotation failed: {err}. Fix: rename {} over the log (and {} over its checkpoint, if it is there)",
                staged.display(),
                staged_checkpoint.display()
            )
        };
        if staged_checkpoint.exists() {
            std::fs::rename(&staged_checkpoint, chain::checkpoint_path(&self.path))
                .map_err(failed)?;
        }
        std::fs::rename(&staged, &self.path).map_err(failed)?;
        tracing::warn!(
            "the audit log {} was left half-way through a rotation; finished it",
            self.path.display()
        );
        Ok(())
    }

    /// Deletes rotated-looking names that are a second name of this (live) file: what a crash
    /// between naming a full file and closing it leaves. Under the log's lock.
    fn remove_stale_names(&self) {
        let Ok(live) = rotate::identity(&self.file) else {
            return;
        };
        let directory = match self.path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Ok(entries) = std::fs::read_dir(&directory) else {
            return;
        };
        let names = entries
            .filter_map(Result::ok)
            .map(|entry| entry.file_name());
        for stale in rotate::rotated_siblings(&self.path, names) {
            let same = File::open(&stale)
                .and_then(|file| rotate::identity(&file))
                .is_ok_and(|id| id == live);
            if same {
                remove_quietly(&[&stale, &chain::checkpoint_path(&stale)]);
            }
        }
    }

    /// Closes this file with `handover.closing` and puts a new one at the log's path, opened by
    /// `handover.opening`; this process then writes there. Called with the lock held; on
    /// success it is let go, on a failure it is still held.
    fn rotate(&mut self, handover: &Handover<'_>) -> Result<(), Failed> {
        let prev = self.last_hash();
        let mut closing = Vec::with_capacity(handover.closing.len() + 80);
        let closing_hash = chain::append_linked(&mut closing, handover.closing, &prev);
        let mut opening = Vec::with_capacity(handover.opening.len() + 80);
        let opening_hash = chain::append_linked(&mut opening, handover.opening, &closing_hash);
        let staged = rotate::staging_path(&self.path);
        let staged_checkpoint = chain::checkpoint_path(&staged);
        let checkpoint = Checkpoint {
            bytes: opening.len() as u64,
            last: opening_hash,
            session: handover.session.to_string(),
            seq: handover.opening_seq,
        };
        let (next, next_checkpoint) =
            prepare(&staged, &staged_checkpoint, &opening, &checkpoint, self).map_err(|err| {
                remove_quietly(&[&staged, &staged_checkpoint]);
                Failed::Before(format!("preparing {}: {err}", staged.display()))
            })?;
        let checkpoint_path = chain::checkpoint_path(&self.path);
        self.remove_stale_names();
        let renamed_checkpoint = chain::checkpoint_path(handover.renamed_to);
        let linked = std::fs::hard_link(&self.path, handover.renamed_to).and_then(|()| {
            std::fs::hard_link(&checkpoint_path, &renamed_checkpoint).inspect_err(|_| {
                remove_quietly(&[handover.renamed_to]);
            })
        });
        if let Err(err) = linked {
            remove_quietly(&[&staged, &staged_checkpoint]);
            return Err(Failed::Before(format!(
                "naming it {}: {err}",
                handover.renamed_to.display()
            )));
        }
        let after = |what: &str, err: std::io::Error| Failed::After(format!("{what}: {err}"));
        if let Err(err) = (&self.file).write_all(&closing) {
            // Nothing of the record written: the log is as it was, and the rotation undone.
            let unchanged = (&self.file)
                .seek(SeekFrom::End(0))
                .is_ok_and(|now| now == self.end);
            if unchanged {
                remove_quietly(&[
                    handover.renamed_to,
                    &renamed_checkpoint,
                    &staged,
                    &staged_checkpoint,
                ]);
                return Err(Failed::Before(format!(
                    "writing its `rotated` record: {err}"
                )));
            }
            return Err(after("writing its `rotated` record", err));
        }
        self.end += closing.len() as u64;
        let closed = Checkpoint {
            bytes: self.end,
            last: closing_hash,
            session: handover.session.to_string(),
            seq: handover.closing_seq,
        };
        self.checkpoint
            .write_all_at(&closed.encode(), 0)
            .map_err(|err| after("rewriting its checkpoint", err))?;
        std::fs::rename(&staged_checkpoint, &checkpoint_path)
            .map_err(|err| after("putting the new checkpoint in place", err))?;
        std::fs::rename(&staged, &self.path)
            .map_err(|err| after("putting the new file in place", err))?;
        // The closed file's lock goes with it; the new one is taken at the next commit, as any
        // writer takes it.
        let closed_file = std::mem::replace(&mut self.file, next);
        let _ = flock(&closed_file, libc::LOCK_UN);
        self.checkpoint = next_checkpoint;
        self.end = opening.len() as u64;
        self.last = opening_hash;
        self.unhashed = None;
        Ok(())
    }

    /// Deletes the oldest rotated files (with their checkpoints) beyond `audit.keep_rotated`:
    /// the files of the log's chain ([`rotate::chain_of`]), so a file that only has a rotated
    /// file's name is never counted or deleted. A file that cannot be deleted is left, with a
    /// warning. Counted from the file this rotation started (the `continued` record of which
    /// says this `keep`), not from whatever file the log's path names by now: another writer
    /// may have rotated again since the lock was let go, and `verify --all` reads the records.
    fn remove_beyond_keep(&self) {
        let Some(rotation) = self.rotation else {
            return;
        };
        let started = match self.file.try_clone() {
            Ok(file) => file,
            Err(err) => {
                tracing::warn!("cannot read {}: {err}", self.path.display());
                return;
            }
        };
        let rotated = match rotate::chain_from(started, &self.path) {
            Ok(history) => history.rotated,
            Err(err) => {
                tracing::warn!("cannot read {}: {err}", self.path.display());
                return;
            }
        };
        for old in rotate::beyond_keep(&rotated, rotation.keep) {
            for path in [old.clone(), chain::checkpoint_path(old)] {
                if let Err(err) = std::fs::remove_file(&path)
                    && err.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!(
                        "cannot delete the rotated audit file {}: {err}",
                        path.display()
                    );
                }
            }
        }
    }
}

/// Creates the next file at `staged` holding `opening` (its first line), and its checkpoint,
/// each with the owner and mode of the one of `current` it replaces.
fn prepare(
    staged: &Path,
    staged_checkpoint: &Path,
    opening: &[u8],
    checkpoint: &Checkpoint,
    current: &SharedFile,
) -> std::io::Result<(File, File)> {
    remove_quietly(&[staged, staged_checkpoint]);
    let mut next = OpenOptions::new()
        .append(true)
        .read(true)
        .create_new(true)
        .mode(0o600)
        .open(staged)?;
    like(&next, &current.file)?;
    next.write_all(opening)?;
    let next_checkpoint = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(staged_checkpoint)?;
    like(&next_checkpoint, &current.checkpoint)?;
    next_checkpoint.write_all_at(&checkpoint.encode(), 0)?;
    Ok((next, next_checkpoint))
}

/// Gives `new` the owner, group and permission bits of `old`. Fails when they cannot be given
/// (an ordinary user rotating a log another user owns): the rotation then does not happen,
/// rather than leave a log its owner can no longer open.
fn like(new: &File, old: &File) -> std::io::Result<()> {
    let old = old.metadata()?;
    let have = new.metadata()?;
    if (have.uid(), have.gid()) != (old.uid(), old.gid()) {
        std::os::unix::fs::fchown(new, Some(old.uid()), Some(old.gid())).map_err(|err| {
            std::io::Error::new(
                err.kind(),
                format!(
                    "giving it the log's owner (uid {}, gid {}): {err}; only root or that user can rotate this log",
                    old.uid(),
                    old.gid()
                ),
            )
        })?;
    }
    new.set_permissions(std::fs::Permissions::from_mode(old.mode() & 0o777))
}

fn remove_quietly(paths: &[&Path]) {
    for path in paths {
        let _ = std::fs::remove_file(path);
    }
}
