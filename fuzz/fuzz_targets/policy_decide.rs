#![no_main]
//! See `airlock::fuzzing::policy_decide` for what this target checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| airlock::fuzzing::policy_decide(data));
