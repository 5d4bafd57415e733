//! What the audit log costs per tool call: one `decision` record staged and committed (one
//! write), then one `outcome` record (a second write), as `run` does for every call.
//!
//! Run: `cargo bench --bench audit`. Three writers, each to its own fresh file in the same run:
//! - `raw append`: the same two lines, pre-encoded, each with one `write` to an `O_APPEND` file:
//!   the floor any file-backed audit log pays;
//! - `airlock, one writer`: `AuditLog::open_file` (encode, stamp, chain under `flock`, checkpoint);
//! - `airlock, two writers`: two `AuditLog`s on one file taking turns, so every commit finds the
//!   other's line last and reads it back to link to it (the shared-log path).
//!
//! Each sample times a batch of calls; the median and p99 per call are over the samples.
//!
//! And what redacting a call's arguments for the `decision` record costs, against copying them
//! (the floor of any redaction): a `write_file` call with 4,000 bytes of content.
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a failed unwrap is a failed run

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use airlock::audit::{AuditLog, Event, EventKind, Outcome, Redactor};
use serde_json::json;

#[path = "common/summary.rs"]
mod summary_line;

const SAMPLES: usize = 101;
const BATCH: usize = 500;

fn decision(id: u64) -> Event {
    let mut event = Event::new(EventKind::Decision, "fs");
    event.tool = Some("write_file".into());
    event.decision = Some("allow".into());
    event.rule = Some("tools.default".into());
    event.layer = Some("builtin".into());
    event.source = Some("builtin:default.toml".into());
    event.request_id = Some(id.into());
    event.args = Some(json!({"path": "/home/me/notes/today.md", "content": "Buy milk."}));
    event
}

fn outcome(id: u64) -> Event {
    let mut event = Event::new(EventKind::Outcome, "fs");
    event.tool = Some("write_file".into());
    event.request_id = Some(id.into());
    event.outcome = Some(Outcome::Ok);
    event.duration_ms = Some(0.123);
    event
}

/// Per-call times in ns: (median, p99).
fn measure(mut call: impl FnMut(u64)) -> (f64, f64) {
    let mut id = 0;
    for _ in 0..BATCH {
        id += 1;
        call(id);
    }
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        for _ in 0..BATCH {
            id += 1;
            call(id);
        }
        samples.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    samples.sort_by(f64::total_cmp);
    (samples[SAMPLES / 2], samples[SAMPLES * 99 / 100])
}

fn airlock_call(log: &mut AuditLog, id: u64) {
    log.stage(decision(id)).unwrap();
    log.commit().unwrap();
    log.record(outcome(id)).unwrap();
}

fn raw(dir: &Path) -> (f64, f64) {
    // Lines of the size airlock writes, encoded once.
    let mut sample = AuditLog::memory();
    airlock_call(&mut sample, 1);
    let text = String::from_utf8(sample.memory_contents().to_vec()).unwrap();
    let mut lines = text.lines().map(|l| format!("{l}\n"));
    let (first, second) = (lines.next().unwrap(), lines.next().unwrap());
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join("raw.jsonl"))
        .unwrap();
    measure(|_| {
        file.write_all(first.as_bytes()).unwrap();
        file.write_all(second.as_bytes()).unwrap();
    })
}

fn one_writer(dir: &Path) -> (f64, f64) {
    let mut log = AuditLog::open_file(&dir.join("one.jsonl")).unwrap();
    measure(|id| airlock_call(&mut log, id))
}

fn two_writers(dir: &Path) -> (f64, f64) {
    let path = dir.join("two.jsonl");
    let mut logs = [
        AuditLog::open_file(&path).unwrap(),
        AuditLog::open_file(&path).unwrap(),
    ];
    measure(|id| airlock_call(&mut logs[(id % 2) as usize], id))
}

/// Redacting a `write_file` call's arguments against copying them: (redact, copy), each
/// (median, p99) in ns.
fn redaction() -> ((f64, f64), (f64, f64)) {
    let redactor = Redactor::new([]).unwrap();
    let args = json!({
        "path": "/home/me/projects/airlock/src/main.rs",
        "content": "fn main() { let x = 1; }\n".repeat(160),
    });
    let redact = measure(|_| {
        std::hint::black_box(redactor.redact(std::hint::black_box(&args)));
    });
    let copy = measure(|_| {
        std::hint::black_box(std::hint::black_box(&args).clone());
    });
    (redact, copy)
}

fn main() {
    summary_line::machine_state();
    let (redact, copy) = redaction();
    println!(
        "redacting a write_file call's arguments (4,000-byte content): p50 {:.0} ns (p99 {:.0}); copying them {:.0} ns (p99 {:.0})",
        redact.0, redact.1, copy.0, copy.1
    );
    summary_line::summary(
        "redact a call's arguments, 4,000-byte content, p50 (`audit`)",
        &format!("{:.2} µs", redact.0 / 1000.0),
        &format!("{:.2} µs copying them", copy.0 / 1000.0),
        &format!("{:.1}×", redact.0 / copy.0),
        "-",
        None,
    );
    let dir = tempfile::tempdir_in(
        std::env::var_os("AIRLOCK_BENCH_DIR").unwrap_or_else(|| "target".into()),
    )
    .unwrap();
    // Rotate the order over rounds so no writer always runs on a warmer cache or disk.
    let mut results: Vec<(&str, Vec<(f64, f64)>)> = vec![
        ("raw append (2 writes)", Vec::new()),
        ("airlock, one writer", Vec::new()),
        ("airlock, two writers", Vec::new()),
    ];
    for round in 0..3 {
        for offset in 0..3 {
            let which = (round + offset) % 3;
            let figure = match which {
                0 => raw(dir.path()),
                1 => one_writer(dir.path()),
                _ => two_writers(dir.path()),
            };
            results[which].1.push(figure);
        }
    }
    println!("audit write cost per tool call (decision + outcome), median of 3 rounds:");
    println!("| writer | p50 ns | p99 ns |");
    println!("|---|---|---|");
    let mut medians = Vec::new();
    for (name, figures) in &mut results {
        figures.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (p50, p99) = figures[figures.len() / 2];
        println!("| {name} | {p50:.0} | {p99:.0} |");
        medians.push(p50);
    }
    let ratio = medians[1] / medians[0];
    summary_line::summary(
        "audit write per call, p50 (`audit`)",
        &format!("{:.2} µs", medians[1] / 1000.0),
        &format!("{:.2} µs raw append", medians[0] / 1000.0),
        &format!("{ratio:.2}×; shared log {:.2} µs", medians[2] / 1000.0),
        "-",
        None,
    );
}
