//! `policy::decide` at 1,000 rules: median and p99 time per decision.
//!
//! Run: `cargo bench --bench decide`. Three rule sets, 1,000 rules each:
//! - realistic: 100 servers × 10 rules (literal and glob tools, allow/ask/deny, argument rules);
//! - worst case: 1,000 rules whose server part is a wildcard, so the index cannot narrow them.
//!
//! For each, calls that match a rule and calls that fall through to the default. Each sample times a batch of decisions; the median and p99 are over 301 samples.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use airlock::policy::{Call, Layer, LayerSource, Policy, load};
use serde_json::json;

const SAMPLES: usize = 301;
const BATCH: usize = 2_000;

fn realistic_policy() -> Policy {
    let mut text = String::from("version = 1\n[tools]\ndefault = \"ask\"\n");
    let mut allow = Vec::new();
    let mut deny = Vec::new();
    let mut ask = Vec::new();
    for server in 0..100 {
        for rule in 0..8 {
            let pattern = match rule % 4 {
                0 => format!("mcp:srv{server}__read_{rule}"),
                1 => format!("mcp:srv{server}__list_*"),
                2 => format!("mcp:srv{server}__write_{rule}?"),
                _ => format!("mcp:srv{server}__get_{rule}"),
            };
            match rule % 3 {
                0 => allow.push(pattern),
                1 => deny.push(pattern),
                _ => ask.push(pattern),
            }
        }
    }
    let quote = |items: &[String]| {
        items
            .iter()
            .map(|i| format!("{i:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    text.push_str(&format!(
        "allow = [{}]\nask = [{}]\ndeny = [{}]\n",
        quote(&allow),
        quote(&ask),
        quote(&deny)
    ));
    for server in 0..100 {
        for rule in 0..2 {
            text.push_str(&format!(
                "[[tools.rule]]\ntool = \"mcp:srv{server}__write_file{rule}\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/home/user/notes\"\nnegate = true\n"
            ));
        }
    }
    compile(text, 1_000)
}

fn worst_case_policy() -> Policy {
    let patterns: Vec<String> = (0..1_000)
        .map(|i| format!("\"mcp:*__tool_{i}_*\""))
        .collect();
    let text = format!("version = 1\n[tools]\ndeny = [{}]\n", patterns.join(", "));
    compile(text, 1_000)
}

fn compile(text: String, expected_rules: usize) -> Policy {
    let source = LayerSource {
        layer: Layer::User,
        path: PathBuf::from("bench.toml"),
        text,
    };
    let policy = load(&[source], &[]).expect("bench policy loads");
    assert_eq!(
        policy.tools.entries().len(),
        expected_rules,
        "the bench must really hold 1,000 rules"
    );
    policy
}

/// Nanoseconds per decision: (median, p99).
fn measure(policy: &Policy, call: &Call<'_>) -> (f64, f64) {
    for _ in 0..BATCH {
        black_box(policy.decide(black_box(call)));
    }
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..BATCH {
                black_box(policy.decide(black_box(call)));
            }
            start.elapsed().as_nanos() as f64 / BATCH as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    (samples[SAMPLES / 2], samples[SAMPLES * 99 / 100])
}

#[path = "common/summary.rs"]
mod summary_line;
use summary_line::{machine_state, summary};

fn main() {
    let realistic = realistic_policy();
    let worst = worst_case_policy();
    let inside = json!({"path": "/home/user/notes/today.md"});
    let escape = json!({"path": "/home/user/notes/../.ssh/id_ed25519"});
    let cases: [(&str, &Policy, Call<'_>); 6] = [
        (
            "realistic, literal rule hit",
            &realistic,
            Call {
                server: "srv57",
                tool: "read_4",
                arguments: None,
                identity: None,
            },
        ),
        (
            "realistic, glob rule hit",
            &realistic,
            Call {
                server: "srv57",
                tool: "list_files",
                arguments: None,
                identity: None,
            },
        ),
        (
            "realistic, argument rule (path escape)",
            &realistic,
            Call {
                server: "srv57",
                tool: "write_file1",
                arguments: Some(&escape),
                identity: None,
            },
        ),
        (
            "realistic, argument rule (inside)",
            &realistic,
            Call {
                server: "srv57",
                tool: "write_file1",
                arguments: Some(&inside),
                identity: None,
            },
        ),
        (
            "worst case, 1,000 wildcard-server globs, no match",
            &worst,
            Call {
                server: "fs",
                tool: "read_file",
                arguments: None,
                identity: None,
            },
        ),
        (
            "worst case, 1,000 wildcard-server globs, match",
            &worst,
            Call {
                server: "fs",
                tool: "tool_731_x",
                arguments: None,
                identity: None,
            },
        ),
    ];
    println!("policy::decide with 1,000 rules (target: median <= 2 us)");
    println!("{:<52} {:>12} {:>12}", "case", "median", "p99");
    let mut worst_median: f64 = 0.0;
    for (name, policy, call) in &cases {
        let (median, p99) = measure(policy, call);
        println!("{name:<52} {:>9.0} ns {:>9.0} ns", median, p99);
        worst_median = worst_median.max(median);
    }
    machine_state();
    summary(
        "policy::decide, 1,000 rules (slowest case's median)",
        &format!("{:.2} µs", worst_median / 1000.0),
        "-",
        "-",
        "≤ 2 µs",
        Some(worst_median <= 2000.0),
    );
}
