use super::*;
use crate::audit::chain::checkpoint_path;
use crate::audit::{AuditLog, Event, EventKind};

/// A log written by two interleaved sessions (a, b): a1 a2 b1 a3 b2 a4 b3 a5, and its checkpoint.
fn two_session_log() -> (Vec<u8>, Checkpoint) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut a = AuditLog::open_file(&path).unwrap();
    let mut b = AuditLog::open_file(&path).unwrap();
    for who in ["a", "a", "b", "a", "b", "a", "b", "a"] {
        let log = if who == "a" { &mut a } else { &mut b };
        let mut event = Event::new(EventKind::Decision, who);
        event.tool = Some("echo".into());
        log.record(event).unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    let checkpoint = Checkpoint::parse(&std::fs::read(checkpoint_path(&path)).unwrap()).unwrap();
    (bytes, checkpoint)
}

fn lines(log: &[u8]) -> Vec<Vec<u8>> {
    log.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn join(lines: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

fn problem_of(log: &[u8], checkpoint: &Checkpoint) -> Problem {
    verify(log, Some(checkpoint))
        .problem
        .unwrap_or_else(|| panic!("not detected:\n{}", String::from_utf8_lossy(log)))
}

#[test]
fn an_untouched_log_of_two_sessions_verifies() {
    let (log, checkpoint) = two_session_log();
    let report = verify(&log, Some(&checkpoint));
    assert_eq!(report.problem, None);
    assert_eq!(report.records, 8);
    assert_eq!(report.sessions, 2);
    assert!(report.checkpoint_checked);
    assert_eq!(verify(b"", None).problem, None);
}

#[test]
fn one_edited_byte_is_reported_at_its_line() {
    let (log, checkpoint) = two_session_log();
    let mut lines = lines(&log);
    // Line 4 is a3, followed by b2: which session's record follows does not matter.
    let at = lines[3].iter().position(|b| *b == b'e').unwrap();
    lines[3][at] = b'f';
    let found = problem_of(&join(&lines), &checkpoint);
    assert_eq!((found.line, found.kind), (4, Tamper::Edited), "{found:?}");
    // An edit of the last line is caught by the checkpoint.
    let mut lines = self::lines(&log);
    let last = lines.len() - 1;
    lines[last][10] ^= 1;
    let found = problem_of(&join(&lines), &checkpoint);
    assert_eq!((found.line, found.kind), (8, Tamper::Edited), "{found:?}");
}

#[test]
fn a_deleted_line_is_reported_as_deleted() {
    let (log, checkpoint) = two_session_log();
    // a2 (line 2) deleted: b1 follows a1 now, and a's numbering jumps at a3.
    let mut lines = lines(&log);
    lines.remove(1);
    let found = problem_of(&join(&lines), &checkpoint);
    assert_eq!(found.kind, Tamper::Deleted, "{found:?}");
    assert_eq!(found.line, 2);
    // b2 (line 5) deleted: a4 follows a3, the gap is in b's numbering further on.
    let mut lines = self::lines(&log);
    lines.remove(4);
    let found = problem_of(&join(&lines), &checkpoint);
    assert_eq!(found.kind, Tamper::Deleted, "{found:?}");
    assert!(found.message.contains("jumps from #1 to #3"), "{found:?}");
    // The first line deleted.
    let mut lines = self::lines(&log);
    lines.remove(0);
    assert_eq!(problem_of(&join(&lines), &checkpoint).kind, Tamper::Deleted);
}

#[test]
fn swapped_lines_are_reported_as_reordered() {
    let (log, checkpoint) = two_session_log();
    let mut lines = lines(&log);
    lines.swap(2, 3);
    let found = problem_of(&join(&lines), &checkpoint);
    assert_eq!(
        (found.line, found.kind),
        (3, Tamper::Reordered),
        "{found:?}"
    );
}

#[test]
fn duplicated_and_blank_lines_are_reported_as_inserted() {
    let (log, checkpoint) = two_session_log();
    let mut lines = lines(&log);
    let copy = lines[2].clone();
    lines.insert(3, copy);
    let found = problem_of(&join(&lines), &checkpoint);
    assert_eq!(found.kind, Tamper::Inserted, "{found:?}");
    // Line 4 is a copy of line 3: either may be called the inserted one.
    assert_eq!(found.line, 3);
    let mut lines = self::lines(&log);
    lines.insert(5, Vec::new());
    let found = problem_of(&join(&lines), &checkpoint);
    assert_eq!((found.line, found.kind), (6, Tamper::Inserted), "{found:?}");
}

#[test]
fn a_cut_tail_is_caught_by_the_checkpoint_only() {
    let (log, checkpoint) = two_session_log();
    let lines = lines(&log);
    let shorter = join(&lines[..6]);
    assert_eq!(
        verify(&shorter, None).problem,
        None,
        "the chain alone cannot see it"
    );
    let found = problem_of(&shorter, &checkpoint);
    assert_eq!(found.kind, Tamper::Truncated, "{found:?}");
    assert!(found.message.contains("#5"), "{found:?}");
    let mid_line = &log[..log.len() - 20];
    assert_eq!(problem_of(mid_line, &checkpoint).kind, Tamper::Truncated);
}

#[test]
fn lines_written_before_chaining_are_counted_but_not_proven() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, "{\"seq\":1,\"event\":\"spawn\"}\n").unwrap();
    AuditLog::open_file(&path)
        .unwrap()
        .record(Event::new(EventKind::Exit, "s"))
        .unwrap();
    let log = std::fs::read(&path).unwrap();
    let checkpoint = Checkpoint::parse(&std::fs::read(checkpoint_path(&path)).unwrap()).unwrap();
    let report = verify(&log, Some(&checkpoint));
    assert_eq!(report.problem, None);
    assert_eq!((report.unchained, report.records), (1, 1));
    // Editing the unchained line still breaks the link of the first chained record.
    let mut edited = log.clone();
    edited[3] = b'x';
    assert_eq!(problem_of(&edited, &checkpoint).line, 1);
}

#[test]
fn an_edited_link_is_blamed_on_its_own_line() {
    let (log, checkpoint) = two_session_log();
    for target in [3, 7] {
        let mut lines = lines(&log);
        let at = lines[target].len() - 10; // inside "prev":"..."
        lines[target][at] = if lines[target][at] == b'0' {
            b'1'
        } else {
            b'0'
        };
        let found = problem_of(&join(&lines), &checkpoint);
        assert_eq!(
            (found.line, found.kind),
            (target + 1, Tamper::Edited),
            "{found:?}"
        );
    }
}

#[test]
fn records_forged_after_the_checkpoint_are_named_and_counted() {
    let (log, checkpoint) = two_session_log();
    let mut forged = log.clone();
    let last = lines(&log).pop().unwrap();
    let mut prev = crate::audit::chain::line_hash(&last);
    for seq in 1..=2 {
        let body = format!(
            r#"{{"ts":"2026-11-25T13:40:00Z","session":"deadbeefdeadbeef","seq":{seq},"event":"decision","server":"a","decision":"allow"}}"#
        );
        prev = crate::audit::chain::append_linked(&mut forged, body.as_bytes(), &prev);
    }
    // The chain alone cannot tell them from real records.
    assert_eq!(verify(&forged, None).problem, None);
    let report = verify(&forged, Some(&checkpoint));
    assert_eq!(report.uncovered, 2);
    let problem = report.problem.unwrap();
    assert_eq!((problem.line, problem.kind), (9, Tamper::Appended));
    assert!(
        problem
            .message
            .starts_with("lines 9..10 (2 record(s)) come after the checkpoint's last record"),
        "{}",
        problem.message
    );
    assert_eq!(verify(&log, Some(&checkpoint)).uncovered, 0);
}
