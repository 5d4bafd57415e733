#![no_main]
//! See `airlock::fuzzing::path_normalize` for what this target checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| airlock::fuzzing::path_normalize(data));
