//! The statistics the benches report: nearest-rank percentiles of sorted samples, medians of
//! rounds, durations in microseconds.
#![allow(dead_code)] // each bench uses its own part

use std::time::Duration;

/// The sample at rank `p` (0.0–1.0) of `sorted` (ascending), rounded to the nearest rank.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> T {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The median of `values` (sorted in place; the upper one of an even count).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
