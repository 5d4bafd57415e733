//! Stand-in addresses: the resolver answers an allowed name with an address from
//! [`STAND_IN_NET`], and the connect hand-over maps the address a connection was made to back to the name.
//!
//! One table per running server. The same name keeps its address while it is in the table, so a
//! client's cached answer stays right. The table is bounded (a server allowed `*` could ask for
//! millions of names): when full, the entry unused for longest is given up, but only if it has
//! been idle for [`MIN_IDLE_BEFORE_REUSE`]; otherwise the lookup fails (SERVFAIL) rather than
//! hand one name's address to another while a client may still hold it. Freed addresses are
//! reused last (the allocator walks the range in a circle).

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use super::addr::STAND_IN_NET;

/// How long an entry must have been unused before its address may go to another name.
pub const MIN_IDLE_BEFORE_REUSE: Duration = Duration::from_secs(600);
/// Names one server may hold at once.
pub const DEFAULT_CAPACITY: usize = 65_536;

/// The TTL of an answer: short, so that a client asks again (and the entry stays fresh) rather
/// than keep an address the table may have given up.
pub const ANSWER_TTL_SECS: u32 = 60;

#[derive(Debug)]
struct Entry {
    name: String,
    last_used: Instant,
}

#[derive(Debug)]
pub struct StandIns {
    base: u32,
    /// Usable offsets are 1..size-1 (the range's first and last addresses are not handed out).
    size: u32,
    capacity: usize,
    next: u32,
    by_name: HashMap<String, u32>,
    by_offset: HashMap<u32, Entry>,
    /// (last use, offset), oldest first.
    lru: BTreeSet<(Instant, u32)>,
}

impl Default for StandIns {
    fn default() -> Self {
        StandIns::with_capacity(DEFAULT_CAPACITY)
    }
}

impl StandIns {
    pub fn with_capacity(capacity: usize) -> StandIns {
        let base = match STAND_IN_NET.addr {
            IpAddr::V4(v4) => u32::from(v4),
            IpAddr::V6(_) => 0,
        };
        let size = 1u32 << (32 - u32::from(STAND_IN_NET.prefix));
        StandIns {
            base,
            size,
            capacity: capacity.min(size as usize - 2),
            next: 1,
            by_name: HashMap::new(),
            by_offset: HashMap::new(),
            lru: BTreeSet::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The stand-in for `name` (already checked against the allow list), or `None` when the
    /// table is full of entries used recently.
    pub fn assign(&mut self, name: &str, now: Instant) -> Option<Ipv4Addr> {
        if let Some(&offset) = self.by_name.get(name) {
            self.touch(offset, now);
            return Some(self.address(offset));
        }
        if self.by_name.len() >= self.capacity && !self.evict_idle(now) {
            return None;
        }
        let offset = self.free_offset();
        self.by_name.insert(name.to_string(), offset);
        self.by_offset.insert(
            offset,
            Entry {
                name: name.to_string(),
                last_used: now,
            },
        );
        self.lru.insert((now, offset));
        Some(self.address(offset))
    }

    /// The name `ip` stands in for, if it was handed out (and marks it used).
    pub fn name_of(&mut self, ip: IpAddr, now: Instant) -> Option<String> {
        let offset = self.offset_of(ip)?;
        let name = self.by_offset.get(&offset)?.name.clone();
        self.touch(offset, now);
        Some(name)
    }

    /// Whether `ip` is in the stand-in range at all (handed out or not).
    pub fn is_stand_in(ip: IpAddr) -> bool {
        STAND_IN_NET.contains(ip)
    }

    fn offset_of(&self, ip: IpAddr) -> Option<u32> {
        match super::addr::canonical(ip) {
            IpAddr::V4(v4) if STAND_IN_NET.contains(IpAddr::V4(v4)) => {
                Some(u32::from(v4) - self.base)
            }
            _ => None,
        }
    }

    fn address(&self, offset: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.base + offset)
    }

    fn touch(&mut self, offset: u32, now: Instant) {
        if let Some(entry) = self.by_offset.get_mut(&offset) {
            self.lru.remove(&(entry.last_used, offset));
            entry.last_used = entry.last_used.max(now);
            self.lru.insert((entry.last_used, offset));
        }
    }

    fn evict_idle(&mut self, now: Instant) -> bool {
        let Some(&(last_used, offset)) = self.lru.first() else {
            return false;
        };
        if now.saturating_duration_since(last_used) < MIN_IDLE_BEFORE_REUSE {
            return false;
        }
        self.lru.remove(&(last_used, offset));
        if let Some(entry) = self.by_offset.remove(&offset) {
            self.by_name.remove(&entry.name);
        }
        true
    }

    fn free_offset(&mut self) -> u32 {
        // Terminates: fewer than size - 2 offsets are taken (capacity is below that).
        loop {
            let offset = self.next;
            self.next = if self.next + 2 >= self.size {
                1
            } else {
                self.next + 1
            };
            if !self.by_offset.contains_key(&offset) {
                return offset;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_address_and_maps_back() {
        let now = Instant::now();
        let mut table = StandIns::default();
        let a = table.assign("api.github.com", now).unwrap();
        let b = table.assign("example.org", now).unwrap();
        assert_ne!(a, b);
        assert_eq!(table.assign("api.github.com", now), Some(a));
        assert!(STAND_IN_NET.contains(IpAddr::V4(a)));
        assert_eq!(
            table.name_of(IpAddr::V4(a), now).as_deref(),
            Some("api.github.com")
        );
        let mapped: IpAddr = format!("::ffff:{b}").parse().unwrap();
        assert_eq!(table.name_of(mapped, now).as_deref(), Some("example.org"));
        assert_eq!(table.name_of("198.18.200.1".parse().unwrap(), now), None);
        assert_eq!(table.name_of("10.0.0.1".parse().unwrap(), now), None);
    }

    #[test]
    fn a_full_table_gives_up_only_idle_entries() {
        let start = Instant::now();
        let mut table = StandIns::with_capacity(2);
        let first = table.assign("a.example", start).unwrap();
        table
            .assign("b.example", start + Duration::from_secs(1))
            .unwrap();
        assert_eq!(
            table.assign("c.example", start + Duration::from_secs(2)),
            None
        );
        let later = start + MIN_IDLE_BEFORE_REUSE + Duration::from_secs(1);
        let third = table.assign("c.example", later).unwrap();
        assert_ne!(third, first, "a freed address is not reused at once");
        assert_eq!(table.name_of(IpAddr::V4(first), later), None);
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn use_keeps_an_entry_alive() {
        let start = Instant::now();
        let mut table = StandIns::with_capacity(2);
        let a = table.assign("a.example", start).unwrap();
        table.assign("b.example", start).unwrap();
        let later = start + MIN_IDLE_BEFORE_REUSE + Duration::from_secs(1);
        table.name_of(IpAddr::V4(a), later);
        table.assign("c.example", later).unwrap();
        assert_eq!(
            table.name_of(IpAddr::V4(a), later).as_deref(),
            Some("a.example")
        );
        assert_eq!(table.assign("b.example", later).map(|_| ()), None);
    }

    #[test]
    fn the_range_edges_are_never_handed_out() {
        let now = Instant::now();
        let mut table = StandIns::with_capacity(usize::MAX);
        assert_eq!(table.capacity, (1 << 17) - 2);
        table.next = table.size - 2;
        let last = table.assign("x.example", now).unwrap();
        let wrapped = table.assign("y.example", now).unwrap();
        assert_eq!(last, Ipv4Addr::new(198, 19, 255, 254));
        assert_eq!(wrapped, Ipv4Addr::new(198, 18, 0, 1));
    }
}
