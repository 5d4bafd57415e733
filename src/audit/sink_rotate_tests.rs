//! Rotation of a shared log file: the chain across files, other writers following, what is kept.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::*;
use crate::audit::EventKind;
use crate::audit::verify::{Tamper, last_line_hash, verify};

fn rotation(at_bytes: u64, keep: usize) -> Rotation {
    Rotation { at_bytes, keep }
}

/// A record of about 300 bytes for server `server`.
fn event(server: &str) -> Event {
    let mut event = Event::new(EventKind::Decision, server);
    event.reason = Some("x".repeat(200));
    event
}

/// `records` records of server `a` written to `log` by one airlock process that rotates it
/// as `rotation` says.
fn write_rotating(log: &Path, rotation: Rotation, records: usize) {
    let mut writer = AuditLog::open_file(log).unwrap();
    writer.rotate_at(rotation);
    for _ in 0..records {
        writer.record(event("a")).unwrap();
    }
}

/// The rotated files beside `log`, oldest first.
fn rotated(log: &Path) -> Vec<PathBuf> {
    let names = std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name());
    rotate::rotated_siblings(log, names)
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Every file verifies against its checkpoint, and each file's first record links to the last
/// line of the file before it: one chain from the first file through the log.
fn assert_one_chain(files: &[PathBuf]) {
    let mut before: Option<&PathBuf> = None;
    for file in files {
        let bytes = std::fs::read(file).unwrap();
        let checkpoint =
            Checkpoint::parse(&std::fs::read(chain::checkpoint_path(file)).unwrap()).unwrap();
        let report = verify(&bytes, Some(&checkpoint));
        assert_eq!(report.problem, None, "{}", file.display());
        match (before, &report.continues) {
            (Some(previous), Some(continuation)) => {
                assert_eq!(
                    continuation.from,
                    previous.file_name().unwrap().to_str().unwrap()
                );
                let previous_bytes = std::fs::read(previous).unwrap();
                assert_eq!(
                    last_line_hash(&previous_bytes),
                    Some(continuation.last_line)
                );
                assert_eq!(
                    records(previous).last().unwrap()["event"],
                    "rotated",
                    "{}",
                    previous.display()
                );
            }
            (None, _) => {}
            (Some(_), None) => panic!("{} does not go on from a rotated file", file.display()),
        }
        before = Some(file);
    }
}

#[test]
fn a_full_file_is_rotated_and_its_chain_goes_on_in_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    write_rotating(&log_path, rotation(2_000, 0), 30);
    let mut files = rotated(&log_path);
    assert!(files.len() >= 3, "{files:?}");
    for file in &files {
        let size = std::fs::metadata(file).unwrap().len();
        assert!(size < 2_000 + 1_000, "{}: {size}", file.display());
    }
    files.push(log_path.clone());
    assert_one_chain(&files);
    // The session's records run on across the files without a gap, rotation records included.
    let seqs: Vec<u64> = files
        .iter()
        .flat_map(|file| records(file))
        .map(|record| record["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let decisions = files
        .iter()
        .flat_map(|file| records(file))
        .filter(|record| record["event"] == "decision")
        .count();
    assert_eq!(decisions, 30);
}

#[test]
fn another_writer_follows_the_rotation_and_nothing_lands_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    let mut rotating = AuditLog::open_file(&log_path).unwrap();
    rotating.rotate_at(rotation(2_000, 0));
    // This one never rotates itself (an airlock with another policy, or `airlock confine`).
    let mut other = AuditLog::open_file(&log_path).unwrap();
    for _ in 0..20 {
        rotating.record(event("rotating")).unwrap();
        other.record(event("other")).unwrap();
    }
    drop((rotating, other));
    let mut files = rotated(&log_path);
    assert!(files.len() >= 3, "{files:?}");
    files.push(log_path.clone());
    assert_one_chain(&files);
    let servers: Vec<String> = files
        .iter()
        .flat_map(|file| records(file))
        .filter(|record| record["event"] == "decision")
        .map(|record| record["server"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<&str> = (0..20).flat_map(|_| ["rotating", "other"]).collect();
    assert_eq!(servers, expected);
}

#[test]
fn only_keep_rotated_files_are_kept_with_their_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    write_rotating(&log_path, rotation(1_000, 2), 30);
    let files = rotated(&log_path);
    assert_eq!(files.len(), 2, "{files:?}");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names.len(),
        6,
        "two rotated files, the log, three checkpoints: {names:?}"
    );
    // The oldest kept file goes on from one that is gone; the chain from it on is whole.
    let mut chain = files.clone();
    chain.push(log_path);
    assert_one_chain(&chain);
    let first = records(&files[0]);
    assert_eq!(first[0]["event"], "continued");
    assert!(
        !dir.path()
            .join(first[0]["detail"]["continues"].as_str().unwrap())
            .exists()
    );
}

#[test]
fn a_rotation_that_cannot_start_leaves_the_log_whole_and_growing() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    // Where the next file would be prepared, something that is not a file.
    std::fs::create_dir_all(rotate::staging_path(&log_path).join("in-the-way")).unwrap();
    write_rotating(&log_path, rotation(1_000, 0), 10);
    assert!(rotated(&log_path).is_empty());
    let bytes = std::fs::read(&log_path).unwrap();
    let checkpoint =
        Checkpoint::parse(&std::fs::read(chain::checkpoint_path(&log_path)).unwrap()).unwrap();
    let report = verify(&bytes, Some(&checkpoint));
    assert_eq!((report.problem, report.records), (None, 10));
}

/// The state a rotation leaves when it stops right after its `rotated` record (a crash): the
/// closed file still at the log's path, the prepared file and checkpoint under their hidden
/// names. Returns the closed file's dated name.
fn stop_a_rotation_half_way(log_path: &Path) -> PathBuf {
    write_rotating(log_path, rotation(1_000, 0), 5);
    // The newest rotated file: the one the log goes on from.
    let closed = rotated(log_path).pop().unwrap();
    let staged = rotate::staging_path(log_path);
    std::fs::rename(log_path, &staged).unwrap();
    std::fs::rename(
        chain::checkpoint_path(log_path),
        chain::checkpoint_path(&staged),
    )
    .unwrap();
    std::fs::hard_link(&closed, log_path).unwrap();
    std::fs::hard_link(
        chain::checkpoint_path(&closed),
        chain::checkpoint_path(log_path),
    )
    .unwrap();
    closed
}

#[test]
fn the_next_writer_finishes_a_rotation_that_stopped_half_way() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    let closed = stop_a_rotation_half_way(&log_path);
    // A crash before the closed file's checkpoint was rewritten to cover its `rotated` record.
    let behind = Checkpoint {
        bytes: 0,
        last: GENESIS,
        session: "s".into(),
        seq: 0,
    };
    std::fs::write(chain::checkpoint_path(&closed), behind.encode()).unwrap();
    let mut log = AuditLog::open_file(&log_path).unwrap();
    log.record(event("after")).unwrap();
    drop(log);
    assert!(!rotate::staging_path(&log_path).exists());
    assert_one_chain(&[closed.clone(), log_path.clone()]);
    let last = records(&log_path).pop().unwrap();
    assert_eq!(last["server"], "after");
    assert_eq!(records(&closed).last().unwrap()["event"], "rotated");
}

#[test]
fn a_file_left_closed_with_nothing_to_finish_it_is_an_error_not_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    stop_a_rotation_half_way(&log_path);
    let staged = rotate::staging_path(&log_path);
    std::fs::remove_file(&staged).unwrap();
    let before = std::fs::read(&log_path).unwrap();
    let mut log = AuditLog::open_file(&log_path).unwrap();
    let err = log.record(event("b")).unwrap_err();
    assert!(matches!(err, AuditError::Rotate { .. }), "{err}");
    assert!(err.to_string().contains("nothing took its place"), "{err}");
    assert!(err.to_string().contains("Fix: move the log"), "{err}");
    drop(log);
    assert_eq!(std::fs::read(&log_path).unwrap(), before);
}

#[test]
fn only_the_logs_chain_counts_as_history_for_retention() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    // Names from the future (a clock that stepped back, or planted): not part of the chain.
    let planted = [
        dir.path().join("audit.2099-01-01T00-00-00.000000Z.jsonl"),
        dir.path().join("audit.2099-01-01T00-00-01.000000Z.jsonl"),
    ];
    for file in &planted {
        std::fs::write(file, "{\"event\":\"decision\"}\n").unwrap();
    }
    write_rotating(&log_path, rotation(1_000, 2), 20);
    assert!(
        planted.iter().all(|file| file.exists()),
        "not ours to delete"
    );
    let mut chain = rotate::chain_of(&log_path).unwrap().rotated;
    chain.push(log_path.clone());
    assert_eq!(
        chain.len(),
        3,
        "two rotated files kept, then the log: {chain:?}"
    );
    assert!(chain.iter().all(|file| !planted.contains(file)));
    assert_one_chain(&chain);
}

#[test]
fn a_stale_second_name_of_the_live_log_is_removed_at_the_next_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open_file(&log_path).unwrap();
    log.record(event("a")).unwrap();
    // What a crash between naming the full file and closing it leaves.
    let stale = dir.path().join("audit.2026-01-01T00-00-00.000000Z.jsonl");
    std::fs::hard_link(&log_path, &stale).unwrap();
    assert!(
        rotate::chain_of(&log_path).unwrap().rotated.is_empty(),
        "not history"
    );
    log.rotate_at(rotation(1_000, 0));
    for _ in 0..5 {
        log.record(event("a")).unwrap();
    }
    drop(log);
    assert!(!stale.exists());
}

#[test]
fn a_log_reached_through_a_link_is_rotated_beside_its_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    let real = dir.path().join("real/audit.jsonl");
    let link = dir.path().join("audit.jsonl");
    std::fs::write(&real, "").unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    write_rotating(&link, rotation(1_000, 0), 8);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let mut chain = rotate::chain_of(&link).unwrap().rotated;
    chain.push(link.clone());
    assert!(chain.len() >= 2, "{chain:?}");
    assert!(
        chain[..chain.len() - 1]
            .iter()
            .all(|file| file.starts_with(dir.path().join("real")))
    );
}

#[test]
fn the_new_file_keeps_the_owner_and_mode_of_the_one_it_replaces() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("needs root (to give the log to another user)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open_file(&log_path).unwrap();
    log.record(event("a")).unwrap();
    for file in [log_path.clone(), chain::checkpoint_path(&log_path)] {
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    log.rotate_at(rotation(1_000, 0));
    for _ in 0..5 {
        log.record(event("a")).unwrap();
    }
    drop(log);
    assert!(!rotated(&log_path).is_empty());
    for file in [log_path.clone(), chain::checkpoint_path(&log_path)] {
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o777),
            (65534, 65534, 0o640),
            "{}",
            file.display()
        );
    }
}

#[test]
fn verify_refuses_a_record_after_a_files_rotated_record() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    write_rotating(&log_path, rotation(1_000, 0), 5);
    let closed = rotated(&log_path).remove(0);
    let lines = std::fs::read_to_string(&closed).unwrap();
    let last = lines.lines().last().unwrap();
    // A forged record chained to the `rotated` record, as a writer would chain it.
    let mut forged = Vec::new();
    chain::append_linked(
        &mut forged,
        br#"{"ts":"x","session":"f","seq":1,"event":"decision","server":"a"}"#,
        &chain::line_hash(last.as_bytes()),
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&closed)
        .unwrap()
        .write_all(&forged)
        .unwrap();
    let report = verify(&std::fs::read(&closed).unwrap(), None);
    let problem = report.problem.unwrap();
    assert_eq!(problem.kind, Tamper::Inserted);
    assert!(
        problem.message.contains("closed this file"),
        "{}",
        problem.message
    );
}

#[test]
fn a_continued_record_naming_another_file_neither_reads_nor_deletes_it() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open_file(&log_path).unwrap();
    log.rotate_at(rotation(1_000, 1));
    for _ in 0..4 {
        log.record(event("a")).unwrap();
    }
    assert_eq!(rotate::chain_of(&log_path).unwrap().rotated.len(), 1);
    let victim = dir.path().join("victim.db");
    std::fs::write(&victim, "precious\n").unwrap();
    let lookalike = dir.path().join("audit.2020-01-01T00-00-00.000000Z.jsonl");
    std::fs::write(&lookalike, "not the file linked to\n").unwrap();
    // The live file's first record rewritten to name each in turn, as a co-writer could.
    for named in ["victim.db", "audit.2020-01-01T00-00-00.000000Z.jsonl"] {
        let text = std::fs::read_to_string(&log_path).unwrap();
        let (first, rest) = text.split_once('\n').unwrap();
        let mut record: serde_json::Value = serde_json::from_str(first).unwrap();
        record["detail"]["continues"] = serde_json::Value::from(named);
        std::fs::write(&log_path, format!("{record}\n{rest}\n")).unwrap();
        assert!(
            rotate::chain_of(&log_path).unwrap().rotated.is_empty(),
            "{named}"
        );
    }
    for _ in 0..8 {
        log.record(event("a")).unwrap();
    }
    drop(log);
    assert!(victim.exists() && lookalike.exists());
}

#[test]
fn a_half_done_rotation_whose_dated_name_is_gone_is_not_finished() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    let closed = stop_a_rotation_half_way(&log_path);
    // Its dated name removed by hand (it looked like a duplicate of the log).
    std::fs::remove_file(&closed).unwrap();
    let before = std::fs::read(&log_path).unwrap();
    let mut log = AuditLog::open_file(&log_path).unwrap();
    let err = log.record(event("b")).unwrap_err();
    assert!(err.to_string().contains("would lose it"), "{err}");
    drop(log);
    assert_eq!(std::fs::read(&log_path).unwrap(), before);
    assert!(rotate::staging_path(&log_path).exists());
}
