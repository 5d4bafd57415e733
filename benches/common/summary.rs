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

/// Prints the setting that dominates the pipe-hop floor on a KVM guest, so every set of figures
/// says which machine state it was taken in. With `guest_halt_poll_ns` at 0 an idle vCPU halts at
/// once and waking it costs tens of µs per hop; the kernel's default (200000) polls first.
pub fn machine_state() {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|text| text.trim().to_string())
            .unwrap_or_else(|_| "n/a".to_string())
    };
    let driver = read("/sys/devices/system/cpu/cpuidle/current_driver");
    let halt_poll = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
    println!("MACHINE|cpuidle driver {driver}, guest_halt_poll_ns {halt_poll}");
}
