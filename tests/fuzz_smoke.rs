//! CI's fuzz smoke: the cargo-fuzz target bodies (`airlock::fuzzing`) over the committed seed
//! corpora, byte-level mutations of every seed, and random inputs. The long runs are
//! `cargo fuzz run <target>` (README "Fuzzing"); this keeps every target exercised on each push.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};

use airlock::fuzzing;
use proptest::prelude::*;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 5] = [
    ("framing", fuzzing::framing),
    ("config_load", fuzzing::config_load),
    ("policy_decide", fuzzing::policy_decide),
    ("path_normalize", fuzzing::path_normalize),
    ("dns_query", fuzzing::dns_query),
];

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("seed corpus {}: {err}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no seeds for {target}");
    paths
        .iter()
        .map(|path| std::fs::read(path).unwrap())
        .collect()
}

/// Deterministic mutations: truncations, single-byte flips and splices of every seed.
fn mutations(seed: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let step = (seed.len() / 40).max(1);
    for cut in (0..seed.len()).step_by(step) {
        out.push(seed[..cut].to_vec());
        for byte in [0u8, b'\n', b'"', b'[', b'}', b'=', 0xff] {
            let mut flipped = seed.to_vec();
            flipped[cut] = byte;
            out.push(flipped);
        }
        let mut doubled = seed[..cut].to_vec();
        doubled.extend_from_slice(&seed[cut / 2..]);
        out.push(doubled);
    }
    out
}

#[test]
fn every_target_survives_its_seeds_and_their_mutations() {
    for (name, target) in TARGETS {
        let mut runs = 0;
        for seed in seeds(name) {
            target(&seed);
            for mutated in mutations(&seed) {
                target(&mutated);
                runs += 1;
            }
        }
        assert!(runs > 50, "{name}: only {runs} mutated inputs");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn targets_survive_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        for (_, target) in TARGETS {
            target(&data);
        }
    }

    #[test]
    fn policy_targets_survive_toml_shaped_noise(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("version = 1".to_string()),
                Just("[tools]".to_string()),
                Just("[sandbox]".to_string()),
                Just("[[tools.rule]]".to_string()),
                "[a-z_]{1,12} = \"[a-z:_*?/.]{0,16}\"",
                "[a-z_]{1,12} = \\[\"mcp:[a-z*?]{1,4}__[a-z*?]{0,6}\"\\]",
                "[a-z_]{1,12} = -?[0-9]{1,6}",
            ],
            0..12,
        ),
        server in "[a-z?*]{0,6}",
        tool in "[a-z_?*]{0,8}",
    ) {
        let text = lines.join("\n");
        let mut input = text.clone().into_bytes();
        input.extend_from_slice(format!("\0{server}\0{tool}\0{{\"path\":\"/tmp/../x\"}}").as_bytes());
        fuzzing::policy_decide(&input);
        fuzzing::config_load(text.replace("[tools]", "[servers.x]").as_bytes());
    }
}
