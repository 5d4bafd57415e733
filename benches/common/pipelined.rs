//! Pipelined throughput: calls written while earlier answers are still on their way, at most
//! [`IN_FLIGHT`] unanswered, the way a busy host drives a server. Pipelined throughput on a
//! 2-core VM swings by ±30 % from run to run (scheduling, vCPU wake-ups), so every peer of a
//! bench is measured [`ROUNDS`] times in a rotating order and the medians are compared.

use std::io::{BufRead, Write};
use std::time::Instant;

pub const IN_FLIGHT: usize = 64;
pub const ROUNDS: usize = 5;

/// Answers per second for `calls` calls made by `call(id)` (one line each, with its newline).
/// Lines that are not answers (a server's notifications) are read past.
pub fn throughput(
    to_peer: &mut impl Write,
    from_peer: &mut impl BufRead,
    calls: usize,
    call: impl Fn(usize) -> Vec<u8>,
) -> f64 {
    let started = Instant::now();
    let mut line = String::new();
    let (mut sent, mut received) = (0, 0);
    while received < calls {
        while sent < calls && sent - received < IN_FLIGHT {
            to_peer.write_all(&call(sent)).expect("write");
            sent += 1;
        }
        line.clear();
        let read = from_peer.read_line(&mut line).expect("read");
        assert!(read > 0, "the peer closed its output");
        if line.contains("\"id\"") && !line.contains("\"method\"") {
            received += 1;
        }
    }
    calls as f64 / started.elapsed().as_secs_f64()
}

/// Measures every peer `ROUNDS` times, rotating which goes first; each peer's samples, sorted.
pub fn rotating(measures: &mut [&mut dyn FnMut() -> f64]) -> Vec<Vec<f64>> {
    let count = measures.len();
    let mut samples = vec![Vec::with_capacity(ROUNDS); count];
    for round in 0..ROUNDS {
        for turn in 0..count {
            let peer = (round + turn) % count;
            samples[peer].push(measures[peer]());
        }
    }
    for values in &mut samples {
        values.sort_by(f64::total_cmp);
    }
    samples
}

/// The median of sorted samples.
pub fn median(sorted: &[f64]) -> f64 {
    sorted[sorted.len() / 2]
}

/// `lowest–highest` of sorted samples, for the report.
pub fn spread(sorted: &[f64]) -> String {
    format!("{:.0}–{:.0}", sorted[0], sorted[sorted.len() - 1])
}
