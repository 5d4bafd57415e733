//! Fuzz target bodies: each takes arbitrary bytes, drives one parser of untrusted input and
//! asserts its invariants (a panic is a finding).
//!
//! They live in the library so that the cargo-fuzz targets in `fuzz/` and the CI smoke test
//! (`tests/fuzz_smoke.rs`, seed corpora plus generated inputs) run exactly the same checks.
//! Assertions here are the point of the module, so they panic on purpose.

#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::Value;

use crate::config;
use crate::mcp::{self, Frame, LineReader};
use crate::paths::{is_under, normalize};
use crate::policy::{Call, Layer, LayerSource, load};

/// Splits fuzz input into NUL-separated text fields (lossy UTF-8).
fn fields(data: &[u8], count: usize) -> Vec<String> {
    let mut parts: Vec<String> = data
        .splitn(count, |&b| b == 0)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    parts.resize(count, String::new());
    parts
}

/// Server config loaders (TOML and `mcpServers` JSON, chosen by content): never panic; what
/// loads is valid and its per-server policy blocks load or fail cleanly.
pub fn config_load(data: &[u8]) {
    let text = String::from_utf8_lossy(data).into_owned();
    let lookup = |name: &str| (name == "TOKEN").then(|| "sk-0123456789abcdef".to_string());
    match config::parse(Path::new("fuzz.toml"), text, &lookup) {
        Ok(loaded) => {
            for server in &loaded.servers {
                assert!(
                    config::check_server_name(&server.name, &loaded.separator).is_ok(),
                    "invalid name {:?} loaded",
                    server.name
                );
                for value in server.env.values().chain(server.headers.values()) {
                    if value.secret {
                        assert!(
                            value.value.len() < 12 || !value.display().contains(&value.value),
                            "secret shown unmasked"
                        );
                    }
                }
            }
            let _ = load(&[], &loaded.policy_overrides());
        }
        Err(err) => assert!(!err.message.is_empty()),
    }
}

/// Policy parse + compile + decide with an arbitrary call. Input: policy text, NUL, server, NUL,
/// tool, NUL, arguments JSON. The policy is tried as the user layer, and as a project layer over a
/// fixed user layer, where it must never widen any decision.
pub fn policy_decide(data: &[u8]) {
    let parts = fields(data, 4);
    let (policy_text, server, tool) = (&parts[0], &parts[1], &parts[2]);
    let arguments: Option<Value> = serde_json::from_str(&parts[3]).ok();
    let call = Call {
        server,
        tool,
        arguments: arguments.as_ref(),
        identity: None,
    };

    let user = LayerSource {
        layer: Layer::User,
        path: "user.toml".into(),
        text: policy_text.clone(),
    };
    if let Ok(policy) = load(&[user], &[]) {
        let first = policy.decide(&call);
        assert_eq!(first, policy.decide(&call), "decide must be deterministic");
        let _ = policy.tools.lists_tool(server, tool);
    }

    let base_text =
        "version = 1\n[tools]\ndefault = \"ask\"\nallow = [\"mcp:fs__read_*\"]\n".to_string();
    let base = LayerSource {
        layer: Layer::User,
        path: "user.toml".into(),
        text: base_text,
    };
    let project = LayerSource {
        layer: Layer::Project,
        path: "project.toml".into(),
        text: policy_text.clone(),
    };
    let without = load(std::slice::from_ref(&base), &[]).expect("the fixed base policy loads");
    if let Ok(with) = load(&[base, project], &[]) {
        for (server, tool) in [
            (server.as_str(), tool.as_str()),
            ("fs", "read_file"),
            ("fs", "write_file"),
        ] {
            let call = Call {
                server,
                tool,
                arguments: arguments.as_ref(),
                identity: None,
            };
            assert!(
                with.decide(&call).action >= without.decide(&call).action,
                "a project layer widened {server}__{tool}"
            );
        }
    }
}

/// Path normalisation: idempotent, never leaves `.`/`..` in an absolute result, and a normalised
/// path under a prefix really is below it.
pub fn path_normalize(data: &[u8]) {
    let parts = fields(data, 2);
    let (path, prefix) = (&parts[0], &parts[1]);
    let normalized = normalize(path);
    assert_eq!(
        normalize(&normalized),
        normalized,
        "not idempotent for {path:?}"
    );
    if path.starts_with('/') {
        assert!(normalized.starts_with('/'));
        assert!(
            !normalized.split('/').any(|c| c == ".." || c == "."),
            "{path:?} -> {normalized:?}"
        );
    }
    if is_under(&normalized, prefix) && prefix.starts_with('/') {
        let prefix = normalize(prefix);
        assert!(
            normalized.starts_with(&prefix),
            "{normalized:?} under {prefix:?}"
        );
    }
}

/// Framing + message classification of what a hostile server (or host) writes: frames respect the
/// line limit and contain no newline; every frame parses or is rejected without a panic.
pub fn framing(data: &[u8]) {
    let max_line_bytes = 1 + usize::from(data.first().copied().unwrap_or(0));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut reader = LineReader::new(data, max_line_bytes);
        let mut lines = 0usize;
        while let Ok(Some(frame)) = reader.next_frame().await {
            lines += 1;
            assert!(lines <= data.len() + 1, "more frames than bytes");
            match frame {
                Frame::Line(line) => {
                    assert!(
                        !line.is_empty() && line.len() <= max_line_bytes && !line.contains(&b'\n')
                    );
                    if let Ok(value) = serde_json::from_slice::<Value>(&line) {
                        classify_deeply(&value);
                    }
                }
                Frame::Oversized { bytes } => assert!(bytes > max_line_bytes),
            }
        }
    });
}

fn classify_deeply(value: &Value) {
    match mcp::classify(value) {
        Ok(mcp::Class::Batch(items)) => {
            for item in items {
                let _ = mcp::classify(item);
            }
        }
        Ok(
            mcp::Class::Request { id, .. } | mcp::Class::Response { id } | mcp::Class::Error { id },
        ) => {
            let _ = mcp::id_key(id);
        }
        Ok(mcp::Class::Notification { .. }) => {}
        Err(_) => {
            let _ = mcp::salvage_id(value);
        }
    }
}

/// The sandbox resolver (`net::resolver::respond`, over `net::dns`): any packet a server sends
/// gets no answer or an answer that parses back with the query's id; an allowed name is answered
/// with a stand-in address, anything else never with an address.
pub fn dns_query(data: &[u8]) {
    use crate::net::allow::{AllowEntry, AllowList, NetRule};
    use crate::net::{dns, resolver, standin::StandIns};
    let allow = AllowList {
        entries: ["api.github.com", "*.example.org"]
            .iter()
            .map(|text| AllowEntry {
                rule: NetRule::parse(text).unwrap(),
                origin: "fuzz".into(),
            })
            .collect(),
    };
    let mut table = StandIns::with_capacity(16);
    let Some(reply) = resolver::respond(data, &allow, &mut table, std::time::Instant::now()) else {
        return;
    };
    let answer = dns::parse_answer(&reply.packet).expect("an answer that does not parse");
    assert_eq!(&data[..2], &reply.packet[..2], "the id is echoed");
    for address in &answer.addresses {
        assert!(crate::net::addr::STAND_IN_NET.contains((*address).into()));
        let name = answer.name.as_deref().unwrap_or_default();
        assert!(allow.resolves(name), "{name} got an address");
    }
}
