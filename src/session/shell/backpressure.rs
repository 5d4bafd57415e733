//! Backpressure without deadlock, as pure rules.
//!
//! Reading from the host, reading from a server and writing to either never wait on each other
//! in a cycle, memory stays bounded, and a stuck peer never freezes the other direction:
//!
//! - A server's output is read unless the host is not reading its own (the queue toward the host
//!   is over [`Limits::host_high`]): a host that does not take its answers gets no more of them
//!   read for it. Nothing else ever stops airlock reading a server, so a server blocked writing
//!   its output is always drained, and can go back to reading its input.
//! - The host's input is read unless the queue toward the host is over [`Limits::host_hard`]
//!   (only airlock's own answers can push it there, since server output stops at `host_high`).
//!   It never waits for a server: the host's EOF, its cancellations and the timers always get
//!   through.
//! - The queue toward each server is bounded by [`Limits::server_input`]; a request that finds it
//!   full (a server that stopped reading) is answered with an error at once, a notification
//!   dropped, instead of growing the queue or stalling the host.

/// The bounds of one session, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub host_high: usize,
    pub host_hard: usize,
    pub server_input: usize,
}

const MIB: usize = 1024 * 1024;

impl Limits {
    /// Bounds that hold at least a few messages of the largest size allowed.
    pub fn for_max_line(max_line_bytes: usize) -> Limits {
        Limits {
            host_high: MIB,
            host_hard: 2 * MIB + max_line_bytes,
            server_input: (16 * MIB).max(4 * max_line_bytes),
        }
    }
}

/// Whether servers' output is read now, given the bytes queued toward the host.
pub fn read_servers(host_queued: usize, limits: &Limits) -> bool {
    host_queued < limits.host_high
}

/// Whether the host's input is read now, given the bytes queued toward the host.
pub fn read_host(host_queued: usize, limits: &Limits) -> bool {
    host_queued < limits.host_hard
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_that_stops_reading_pauses_servers_first_and_itself_last() {
        let limits = Limits::for_max_line(4 * MIB);
        assert!(read_servers(0, &limits) && read_host(0, &limits));
        let slow_host = limits.host_high;
        assert!(!read_servers(slow_host, &limits));
        assert!(
            read_host(slow_host, &limits),
            "the host's EOF and cancels still get in"
        );
        assert!(!read_host(limits.host_hard, &limits));
    }

    #[test]
    fn a_server_queue_holds_several_of_the_largest_messages() {
        let limits = Limits::for_max_line(4 * MIB);
        assert_eq!(limits.server_input, 16 * MIB);
        assert!(Limits::for_max_line(8 * MIB).server_input >= 4 * 8 * MIB);
        // 16 concurrent calls with 200 KiB arguments fit without a refusal.
        assert!(16 * 200 * 1024 < limits.server_input);
    }
}
