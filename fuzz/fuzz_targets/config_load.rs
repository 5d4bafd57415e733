#![no_main]
//! See `airlock::fuzzing::config_load` for what this target checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| airlock::fuzzing::config_load(data));
