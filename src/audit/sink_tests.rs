use super::*;
use crate::audit::EventKind;

fn parse_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

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
    let records = parse_lines(&text);
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert!(records.iter().all(|r| r["session"] == log.session()));
    // Each line links to the one before it.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(records[0]["prev"], "0".repeat(64));
    for pair in lines.windows(2) {
        let prev = crate::hash::sha256_hex(pair[0].as_bytes());
        assert!(
            pair[1].ends_with(&format!("\"prev\":\"{prev}\"}}")),
            "{}",
            pair[1]
        );
    }
    assert!(lines[0].starts_with(r#"{"ts":""#));
}

fn servers_in_order(log: &AuditLog) -> Vec<String> {
    let text = String::from_utf8(log.memory_contents().to_vec()).unwrap();
    parse_lines(&text)
        .iter()
        .map(|r| r["server"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn only_decisions_are_written_before_a_held_outcome() {
    let mut log = AuditLog::memory();
    log.hold(Event::new(EventKind::Outcome, "held"));
    assert!(log.held_until().is_some());
    log.defer(Event::new(EventKind::Decision, "decision"));
    log.commit().unwrap();
    assert_eq!(
        servers_in_order(&log),
        ["decision"],
        "the outcome is still held"
    );
    assert!(!log.has_staged(), "a held outcome is not staged");
    // Anything else releases it first: an exit is never written before an outcome.
    log.defer(Event::new(EventKind::Exit, "exit"));
    assert_eq!(log.held_until(), None);
    log.commit().unwrap();
    log.hold(Event::new(EventKind::Outcome, "held again"));
    log.record(Event::new(EventKind::Dropped, "dropped"))
        .unwrap();
    assert_eq!(
        servers_in_order(&log),
        ["decision", "held", "exit", "held again", "dropped"]
    );
    let seqs: Vec<u64> = parse_lines(&String::from_utf8_lossy(log.memory_contents()))
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5], "seq follows the file's order");
}

#[test]
fn a_held_outcome_is_written_when_released_or_when_the_log_is_dropped() {
    let mut log = AuditLog::memory();
    log.hold(Event::new(EventKind::Outcome, "a"));
    log.release_held();
    log.commit().unwrap();
    assert_eq!(servers_in_order(&log), ["a"]);

    // Whether or not it was encoded yet (`encode_held`).
    for encoded in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open_file(&path).unwrap();
        log.hold(Event::new(EventKind::Outcome, "held at the end"));
        if encoded {
            log.encode_held().unwrap();
        }
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let servers: Vec<String> = parse_lines(&text)
            .iter()
            .map(|r| r["server"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(servers, ["held at the end"], "encoded: {encoded}");
    }
}

#[test]
fn an_encoded_held_outcome_waits_for_the_next_decision_and_goes_out_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open_file(&path).unwrap();
    log.hold(Event::new(EventKind::Outcome, "outcome 1"));
    log.encode_held().unwrap();
    assert!(
        !log.has_staged(),
        "encoded, it still waits for a reason to be written"
    );
    // A write with nothing else to write leaves it waiting (no lock, no seek, no checkpoint).
    log.write_unsealed().unwrap();
    log.seal().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    assert!(log.held_until().is_some(), "still due within HOLD_AT_MOST");
    log.defer(Event::new(EventKind::Decision, "decision 2"));
    log.write_unsealed().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let records = parse_lines(&text);
    let servers: Vec<&str> = records
        .iter()
        .map(|r| r["server"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["outcome 1", "decision 2"], "the outcome first");
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2]);
    assert_eq!(log.held_until(), None, "nothing is held any more");
    log.seal().unwrap();
    let checkpoint = std::fs::read_to_string(dir.path().join("audit.jsonl.checkpoint")).unwrap();
    assert!(
        checkpoint.contains(&format!("\"bytes\":{}", text.len())),
        "the checkpoint covers both: {checkpoint}"
    );
}

#[test]
fn held_outcomes_are_encoded_only_behind_nothing_else() {
    let mut log = AuditLog::memory();
    // Something not yet written stays first: the outcome is not encoded ahead of it.
    log.defer(Event::new(EventKind::Exit, "exit"));
    log.hold(Event::new(EventKind::Outcome, "outcome"));
    log.encode_held().unwrap();
    log.commit().unwrap();
    assert_eq!(
        servers_in_order(&log),
        ["exit"],
        "the outcome is still held"
    );
    assert!(log.held_until().is_some());
    log.encode_held().unwrap();
    // Any other record releases it, in its place.
    log.record(Event::new(EventKind::Dropped, "dropped"))
        .unwrap();
    assert_eq!(servers_in_order(&log), ["exit", "outcome", "dropped"]);
    assert_eq!(log.held_until(), None);
}

#[test]
fn deferred_events_keep_their_place_before_anything_staged_after_them() {
    let mut log = AuditLog::memory();
    log.defer(Event::new(EventKind::Outcome, "first"));
    assert!(log.has_staged());
    log.stage(Event::new(EventKind::Dropped, "second")).unwrap();
    log.commit().unwrap();
    log.defer(Event::new(EventKind::Outcome, "third"));
    let written = |log: &AuditLog| {
        log.memory_contents()
            .iter()
            .filter(|b| **b == b'\n')
            .count()
    };
    assert_eq!(written(&log), 2, "a deferred event waits for the commit");
    log.commit().unwrap();
    assert!(!log.has_staged());
    let text = String::from_utf8(log.memory_contents().to_vec()).unwrap();
    let records = parse_lines(&text);
    let order: Vec<(&str, u64)> = records
        .iter()
        .map(|r| (r["server"].as_str().unwrap(), r["seq"].as_u64().unwrap()))
        .collect();
    assert_eq!(order, [("first", 1), ("second", 2), ("third", 3)]);
}

#[test]
fn appends_numbered_chained_lines_to_a_private_file_and_keeps_a_checkpoint() {
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
    let records = parse_lines(&text);
    assert_eq!(records[2]["seq"], 2);
    assert_eq!(records[2]["event"], "exit");
    assert!(records[2]["ts"].as_str().unwrap().ends_with('Z'));
    // The first record links to the line that was there before.
    assert_eq!(
        records[1]["prev"],
        crate::hash::sha256_hex(lines[0].as_bytes())
    );
    let checkpoint =
        Checkpoint::parse(&std::fs::read(chain::checkpoint_path(&path)).unwrap()).unwrap();
    assert_eq!(checkpoint.bytes, text.len() as u64);
    assert_eq!(checkpoint.last, chain::line_hash(lines[2].as_bytes()));
    assert_eq!(checkpoint.seq, 2);
    use std::os::unix::fs::PermissionsExt;
    let fresh = dir.path().join("fresh/dir/audit.jsonl");
    AuditLog::open_file(&fresh).unwrap();
    for file in [fresh.clone(), chain::checkpoint_path(&fresh)] {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    }
}

#[test]
fn an_unsealed_write_holds_the_lock_and_the_seal_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let checkpoint = || Checkpoint::parse(&std::fs::read(chain::checkpoint_path(&path)).unwrap());
    let other_writer_can_lock = || {
        // flock locks belong to the open file description: another open of the log is
        // another writer.
        let other = File::open(&path).unwrap();
        crate::lock::flock(&other, libc::LOCK_EX | libc::LOCK_NB).is_ok()
    };
    let mut log = AuditLog::open_file(&path).unwrap();
    log.record(Event::new(EventKind::Spawn, "a")).unwrap();
    assert_eq!(checkpoint().unwrap().seq, 1);
    log.stage(Event::new(EventKind::Decision, "a")).unwrap();
    log.write_unsealed().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.lines().count(),
        2,
        "the record is written before the seal"
    );
    assert_eq!(
        checkpoint().unwrap().seq,
        1,
        "the checkpoint waits for the seal"
    );
    assert!(!other_writer_can_lock(), "the lock is held until the seal");
    log.seal().unwrap();
    let sealed = checkpoint().unwrap();
    assert_eq!((sealed.seq, sealed.bytes), (2, text.len() as u64));
    assert!(other_writer_can_lock());
    // Whatever writes next seals first, and so does dropping the log.
    log.stage(Event::new(EventKind::Decision, "a")).unwrap();
    log.write_unsealed().unwrap();
    log.record(Event::new(EventKind::Outcome, "a")).unwrap();
    assert_eq!(checkpoint().unwrap().seq, 4);
    // Several records in one write, the last one's hash taken at the seal.
    for _ in 0..3 {
        log.stage(Event::new(EventKind::Decision, "a")).unwrap();
    }
    log.write_unsealed().unwrap();
    drop(log);
    let sealed = checkpoint().unwrap();
    assert_eq!(sealed.seq, 7);
    assert!(other_writer_can_lock());
    let text = std::fs::read(&path).unwrap();
    let last_line = text[..text.len() - 1]
        .rsplit(|b| *b == b'\n')
        .next()
        .unwrap();
    assert_eq!(sealed.last, chain::line_hash(last_line));
    let report = crate::audit::verify::verify(&text, Some(&sealed));
    assert_eq!(report.problem, None);
    assert_eq!((report.records, report.uncovered), (7, 0));
}

#[test]
fn two_logs_on_one_file_form_one_chain_and_a_torn_tail_gets_its_own_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut first = AuditLog::open_file(&path).unwrap();
    let mut second = AuditLog::open_file(&path).unwrap();
    first.record(Event::new(EventKind::Spawn, "a")).unwrap();
    second.record(Event::new(EventKind::Spawn, "b")).unwrap();
    first.record(Event::new(EventKind::Exit, "a")).unwrap();
    // A writer that died mid-line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"torn")
        .unwrap();
    second.record(Event::new(EventKind::Exit, "b")).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert_eq!(lines[3], "{\"torn");
    for pair in lines.windows(2) {
        let prev = crate::hash::sha256_hex(pair[0].as_bytes());
        if pair[1] != "{\"torn" {
            assert!(
                pair[1].ends_with(&format!("\"prev\":\"{prev}\"}}")),
                "{text}"
            );
        }
    }
    assert_ne!(first.session(), second.session());
}

#[test]
fn a_log_whose_directory_is_a_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, "").unwrap();
    let err = AuditLog::open_file(&file.join("audit.jsonl")).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!("{} is a file, not a directory", file.display())),
        "{text}"
    );
}
