//! Property: any single edit of an audit log written by airlock's own sink (two sessions
//! appending to one file through the real file sink, with its checkpoint) is detected by
//! `verify`: a byte changed, inserted or removed anywhere, a line deleted, duplicated or moved,
//! two lines swapped, the tail cut at any point, and records forged after the end, chained as
//! airlock would chain them (only the checkpoint can tell those).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::OnceLock;

use airlock::audit::chain::{Checkpoint, append_linked, checkpoint_path, line_hash};
use airlock::audit::verify::{Tamper, verify};
use airlock::audit::{AuditLog, Event, EventKind, Outcome};
use proptest::prelude::*;

/// A log of 24 records from two interleaved sessions, and its checkpoint.
fn log() -> &'static (Vec<u8>, Checkpoint) {
    static LOG: OnceLock<(Vec<u8>, Checkpoint)> = OnceLock::new();
    LOG.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut a = AuditLog::open_file(&path).unwrap();
        let mut b = AuditLog::open_file(&path).unwrap();
        for round in 0..6u64 {
            for (log, server) in [(&mut a, "fs"), (&mut b, "git")] {
                let mut decision = Event::new(EventKind::Decision, server);
                decision.tool = Some("read".into());
                decision.decision = Some("allow".into());
                decision.request_id = Some(round.into());
                decision.args = Some(serde_json::json!({"path": format!("/d/{round}")}));
                log.stage(decision).unwrap();
                log.commit().unwrap();
                let mut outcome = Event::new(EventKind::Outcome, server);
                outcome.outcome = Some(Outcome::Ok);
                outcome.duration_ms = Some(0.25);
                log.record(outcome).unwrap();
            }
        }
        let bytes = std::fs::read(&path).unwrap();
        let checkpoint =
            Checkpoint::parse(&std::fs::read(checkpoint_path(&path)).unwrap()).unwrap();
        (bytes, checkpoint)
    })
}

#[derive(Debug, Clone)]
enum Edit {
    ChangeByte {
        at: usize,
        to: u8,
    },
    InsertByte {
        at: usize,
        byte: u8,
    },
    RemoveByte {
        at: usize,
    },
    DeleteLine {
        line: usize,
    },
    DuplicateLine {
        line: usize,
    },
    MoveLine {
        from: usize,
        to: usize,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    Truncate {
        keep: usize,
    },
    /// Well-formed records, linked to the log's last line, appended without the checkpoint.
    AppendForged {
        records: usize,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, to)| Edit::ChangeByte { at, to }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Edit::InsertByte { at, byte }),
        any::<usize>().prop_map(|at| Edit::RemoveByte { at }),
        any::<usize>().prop_map(|line| Edit::DeleteLine { line }),
        any::<usize>().prop_map(|line| Edit::DuplicateLine { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(from, to)| Edit::MoveLine { from, to }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines { a, b }),
        any::<usize>().prop_map(|keep| Edit::Truncate { keep }),
        (1..4usize).prop_map(|records| Edit::AppendForged { records }),
    ]
}

/// Applies `edit`; `None` when it changes nothing (a byte set to itself, a line swapped with
/// itself or moved to where it is).
fn apply(log: &[u8], edit: &Edit) -> Option<Vec<u8>> {
    let mut bytes = log.to_vec();
    let mut lines: Vec<Vec<u8>> = log
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    let n = lines.len();
    match *edit {
        Edit::ChangeByte { at, to } => {
            let at = at % bytes.len();
            if bytes[at] == to {
                return None;
            }
            bytes[at] = to;
        }
        Edit::InsertByte { at, byte } => bytes.insert(at % (bytes.len() + 1), byte),
        Edit::RemoveByte { at } => {
            bytes.remove(at % bytes.len());
        }
        Edit::Truncate { keep } => bytes.truncate(keep % bytes.len()),
        Edit::AppendForged { records } => {
            let last = lines[n - 1].strip_suffix(b"\n").unwrap_or(&lines[n - 1]);
            let mut prev = line_hash(last);
            for seq in 1..=records {
                let body = format!(
                    r#"{{"ts":"2026-11-25T13:40:00Z","session":"deadbeefdeadbeef","seq":{seq},"event":"decision","server":"fs","tool":"read","decision":"allow"}}"#
                );
                prev = append_linked(&mut bytes, body.as_bytes(), &prev);
            }
        }
        Edit::DeleteLine { line } => {
            lines.remove(line % n);
            return Some(lines.concat());
        }
        Edit::DuplicateLine { line } => {
            let copy = lines[line % n].clone();
            lines.insert(line % n, copy);
            return Some(lines.concat());
        }
        Edit::MoveLine { from, to } => {
            let moved = lines.remove(from % n);
            let to = to % n;
            if to == from % n {
                return None;
            }
            lines.insert(to, moved);
            return Some(lines.concat());
        }
        Edit::SwapLines { a, b } => {
            if a % n == b % n {
                return None;
            }
            lines.swap(a % n, b % n);
            return Some(lines.concat());
        }
    }
    Some(bytes)
}

#[test]
fn the_untouched_log_verifies() {
    let (bytes, checkpoint) = log();
    let report = verify(bytes, Some(checkpoint));
    assert_eq!(report.problem, None);
    assert_eq!((report.records, report.sessions), (24, 2));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_single_edit_is_detected(edit in edit()) {
        let (bytes, checkpoint) = log();
        if let Some(tampered) = apply(bytes, &edit) {
            prop_assume!(&tampered != bytes);
            let report = verify(&tampered, Some(checkpoint));
            prop_assert!(report.problem.is_some(), "{edit:?} went unseen");
            if let Edit::AppendForged { records } = edit {
                // The chain alone accepts them; the checkpoint names them.
                prop_assert_eq!(verify(&tampered, None).problem, None);
                let problem = report.problem.unwrap();
                prop_assert_eq!(problem.kind, Tamper::Appended);
                prop_assert_eq!(problem.line, 25);
                prop_assert_eq!(report.uncovered, records);
            }
        }
    }
}
