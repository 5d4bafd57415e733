#![no_main]
//! See `airlock::fuzzing::dns_query` for what this target checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| airlock::fuzzing::dns_query(data));
