//! Hash maps for the bookkeeping done on every message: calls in flight by id, tools by name.
//!
//! std's maps hash with SipHash, built to resist collision attacks by anyone who can choose the
//! keys, at several times the cost of a fast hash on short keys; a `tools/call` passes about a
//! dozen lookups in these maps. foldhash (the default of hashbrown, the table std's maps are
//! built on, and already in the tree through it) is seeded at random per process like std's, so
//! keys a host or server chooses cannot be aimed at one bucket without learning the seed; and
//! every map here is bounded by the calls one peer may have in flight or the tools one server
//! lists, so the worst case is a slower lookup, not unbounded work.

/// A `HashMap` with foldhash.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// A `HashSet` with foldhash.
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
