//! One machine-readable line per headline figure, so `benches/all.sh` can gather every
//! benchmark's results into one table. Each bench keeps printing its own detailed table too.
//!
//! Format: `SUMMARY|<metric>|<airlock>|<direct>|<comparison>|<target>|<met: yes/no/->`.

/// Prints one summary line. `met` is `None` when the figure has no target.
pub fn summary(
    metric: &str,
    airlock: &str,
    direct: &str,
    comparison: &str,
    target: &str,
    met: Option<bool>,
) {
    let met = match met {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    };
    println!("SUMMARY|{metric}|{airlock}|{direct}|{comparison}|{target}|{met}");
}
