#![no_main]
//! See `airlock::fuzzing::framing` for what this target checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| airlock::fuzzing::framing(data));
