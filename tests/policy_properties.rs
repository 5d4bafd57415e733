//! Property tests for the policy engine's invariants:
//! deny wins across any layering; a project layer never widens a decision; an org lock always
//! holds; path normalisation never lets `..` climb out of a prefix; any spelling of a path (or of
//! its argument key) that a server resolves into a denied prefix is denied.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;

use airlock::paths::{is_under, normalize};
use airlock::policy::reading::PathContext;
use airlock::policy::{Action, Call, Layer, LayerSource, Policy, load};
use proptest::prelude::*;

const SERVERS: [&str; 3] = ["fs", "git", "web"];
const TOOLS: [&str; 4] = ["read_file", "write_file", "exec", "list"];

fn server_part() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("fs".to_string()),
        Just("git".to_string()),
        Just("web".to_string()),
        Just("*".to_string()),
        Just("f?".to_string())
    ]
}

fn tool_part() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("read_file".to_string())),
        Just(Some("write_*".to_string())),
        Just(Some("*".to_string())),
        Just(Some("exec".to_string())),
        Just(Some("*_file".to_string())),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    (server_part(), tool_part(), any::<bool>()).prop_map(|(server, tool, alias)| {
        let prefix = if alias && tool.is_some() {
            "mcp__"
        } else {
            "mcp:"
        };
        match tool {
            Some(tool) => format!("{prefix}{server}__{tool}"),
            None => format!("mcp:{server}"),
        }
    })
}

fn action_name() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("allow"), Just("ask"), Just("deny")]
}

/// A `[tools]` section with arbitrary lists and maybe a default.
#[derive(Debug, Clone)]
struct ToolsSection {
    default: Option<&'static str>,
    allow: Vec<String>,
    ask: Vec<String>,
    deny: Vec<String>,
}

impl ToolsSection {
    fn render(&self, locked: bool) -> String {
        let list = |items: &[String]| {
            items
                .iter()
                .map(|i| format!("{i:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut text = format!(
            "version = 1\n[tools]\nallow = [{}]\nask = [{}]\ndeny = [{}]\n",
            list(&self.allow),
            list(&self.ask),
            list(&self.deny)
        );
        if let Some(default) = self.default {
            text.push_str(&format!("default = {default:?}\n"));
        }
        if locked {
            text.push_str("locked = true\n");
        }
        text
    }
}

fn tools_section() -> impl Strategy<Value = ToolsSection> {
    (
        proptest::option::of(action_name()),
        proptest::collection::vec(pattern(), 0..4),
        proptest::collection::vec(pattern(), 0..3),
        proptest::collection::vec(pattern(), 0..3),
    )
        .prop_map(|(default, allow, ask, deny)| ToolsSection {
            default,
            allow,
            ask,
            deny,
        })
}

fn source(layer: Layer, text: String) -> LayerSource {
    LayerSource {
        layer,
        path: PathBuf::from(format!("/policies/{layer}.toml")),
        text,
    }
}

fn every_call() -> impl Iterator<Item = (&'static str, &'static str)> {
    SERVERS
        .iter()
        .flat_map(|s| TOOLS.iter().map(move |t| (*s, *t)))
}

fn decide(policy: &Policy, server: &str, tool: &str) -> Action {
    policy
        .decide(&Call {
            server,
            tool,
            arguments: None,
            identity: None,
        })
        .action
}

/// Glob semantics re-implemented independently (recursive, obviously correct, slow).
fn reference_glob(pattern: &[char], name: &[char]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some('*'), _) => {
            reference_glob(&pattern[1..], name)
                || (!name.is_empty() && reference_glob(pattern, &name[1..]))
        }
        (Some('?'), Some(_)) => reference_glob(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => reference_glob(&pattern[1..], &name[1..]),
        _ => false,
    }
}

fn reference_matches(pattern: &str, server: &str, tool: &str) -> bool {
    let body = pattern
        .strip_prefix("mcp:")
        .or_else(|| pattern.strip_prefix("mcp__"))
        .unwrap_or(pattern);
    let (server_glob, tool_glob) = body.split_once("__").unwrap_or((body, "*"));
    let chars = |s: &str| s.chars().collect::<Vec<_>>();
    reference_glob(&chars(server_glob), &chars(server))
        && reference_glob(&chars(tool_glob), &chars(tool))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the layering, a call that any layer denies is denied, and one that any layer
    /// asks about (and none denies) is asked.
    #[test]
    fn deny_wins_across_any_layering(
        org in tools_section(),
        user in tools_section(),
        project_deny in proptest::collection::vec(pattern(), 0..3),
    ) {
        let project = ToolsSection { default: None, allow: vec![], ask: vec![], deny: project_deny };
        let sources = [
            source(Layer::Org, org.render(false)),
            source(Layer::User, user.render(false)),
            source(Layer::Project, project.render(false)),
        ];
        let policy = load(&sources, &[]).expect("org/user and a deny-only project always load");
        for (server, tool) in every_call() {
            let denied = org.deny.iter().chain(&user.deny).chain(&project.deny).any(|p| reference_matches(p, server, tool));
            let asked = org.ask.iter().chain(&user.ask).any(|p| reference_matches(p, server, tool));
            let allowed = org.allow.iter().chain(&user.allow).any(|p| reference_matches(p, server, tool));
            let decision = decide(&policy, server, tool);
            if denied {
                prop_assert_eq!(decision, Action::Deny, "{}__{} must be denied", server, tool);
            } else if asked {
                prop_assert_eq!(decision, Action::Ask, "{}__{} must be asked", server, tool);
            } else if allowed {
                prop_assert_eq!(decision, Action::Allow, "{}__{} must be allowed", server, tool);
            }
        }
    }

    /// Adding a project layer never makes any call's decision less strict; a project layer that
    /// tries to is refused at load.
    #[test]
    fn a_project_layer_never_widens(org in tools_section(), user in tools_section(), project in tools_section()) {
        let base = [source(Layer::Org, org.render(false)), source(Layer::User, user.render(false))];
        let without = load(&base, &[]).expect("org+user load");
        let mut with_project = base.to_vec();
        with_project.push(source(Layer::Project, project.render(false)));
        match load(&with_project, &[]) {
            Ok(with) => {
                for (server, tool) in every_call() {
                    prop_assert!(decide(&with, server, tool) >= decide(&without, server, tool), "{}__{} widened", server, tool);
                }
            }
            Err(err) => prop_assert!(err.message.contains("may only narrow"), "unexpected error: {}", err),
        }
    }

    /// With the org's tools section locked, no user layer can loosen any decision, and a refusal
    /// names both files.
    #[test]
    fn an_org_lock_on_tools_always_holds(org in tools_section(), user in tools_section()) {
        let locked = [source(Layer::Org, org.render(true))];
        let org_only = load(&locked, &[]).expect("org alone loads");
        let mut layered = locked.to_vec();
        layered.push(source(Layer::User, user.render(false)));
        match load(&layered, &[]) {
            Ok(with_user) => {
                for (server, tool) in every_call() {
                    prop_assert!(decide(&with_user, server, tool) >= decide(&org_only, server, tool));
                }
            }
            Err(err) => {
                prop_assert!(err.message.contains("locks"), "unexpected error: {}", err);
                let text = err.to_string();
                prop_assert!(text.contains("/policies/org.toml") && text.contains("/policies/user.toml"), "names both files: {}", text);
            }
        }
    }

    /// With the org's sandbox locked, no user layer reaches further than the org allows.
    #[test]
    fn an_org_lock_on_the_sandbox_always_holds(
        org_ports in proptest::collection::vec(1u16..6, 0..3),
        org_processes in 16u64..512,
        user_network in prop_oneof![
            Just("\"none\"".to_string()),
            Just("\"host\"".to_string()),
            proptest::collection::vec(1u16..8, 0..3).prop_map(|p| format!("{p:?}")),
        ],
        user_processes in 1u64..1024,
        user_write in proptest::collection::vec(prop_oneof![Just("/data"), Just("/home"), Just("/tmp/x")], 0..2),
    ) {
        let org = format!(
            "version = 1\n[sandbox]\nlocked = true\nnetwork = {org_ports:?}\nwrite = [\"/data\"]\n[sandbox.limits]\nprocesses = {org_processes}\n"
        );
        let user = format!(
            "version = 1\n[sandbox]\nnetwork = {user_network}\nwrite = {user_write:?}\n[sandbox.limits]\nprocesses = {user_processes}\n"
        );
        let org_only = load(&[source(Layer::Org, org.clone())], &[]).expect("org loads");
        match load(&[source(Layer::Org, org), source(Layer::User, user)], &[]) {
            Ok(merged) => {
                prop_assert!(!merged.sandbox.network.value.is_wider_than(&org_only.sandbox.network.value));
                prop_assert!(merged.sandbox.limits.processes.value <= org_processes);
                for grant in &merged.sandbox.write {
                    prop_assert_eq!(grant.value.as_str(), "/data");
                }
            }
            Err(err) => prop_assert!(err.message.contains("locks"), "unexpected error: {}", err),
        }
    }

    /// Normalisation agrees with an independent stack resolution, and `..` never escapes a prefix.
    #[test]
    fn normalisation_never_climbs_out_of_a_prefix(
        segments in proptest::collection::vec(
            prop_oneof![Just(".."), Just("."), Just(""), Just("a"), Just("tmp"), Just("etc")],
            0..10,
        ),
    ) {
        let path = format!("/tmp/{}", segments.join("/"));
        let normalized = normalize(&path);
        prop_assert!(!normalized.split('/').any(|c| c == ".." || c == "."), "{} -> {}", path, normalized);

        let mut stack: Vec<&str> = vec!["tmp"];
        for segment in &segments {
            match *segment {
                "" | "." => {}
                ".." => {
                    stack.pop();
                }
                name => stack.push(name),
            }
        }
        let really_under_tmp = stack.first() == Some(&"tmp");
        prop_assert_eq!(is_under(&normalized, "/tmp"), really_under_tmp, "{} -> {}", path, normalized);
        prop_assert_eq!(normalized, format!("/{}", stack.join("/")));
    }

    /// Any spelling that a server resolves into `/etc/...` meets a `deny prefix /etc/` rule:
    /// relative to its working directory, from its HOME, as a `file:` URL (with or without
    /// `localhost`), percent-encoded, with `.`/`..` detours, under any case or padding of the key.
    #[test]
    fn any_spelling_into_a_denied_prefix_is_denied(
        components in proptest::collection::vec("[a-z]{1,6}", 1..4),
        detours in proptest::collection::vec(any::<bool>(), 0..4),
        spelling in 0..6usize,
        extra_ups in 0..3usize,
        encode in proptest::collection::vec(any::<bool>(), 0..32),
        key_case in proptest::collection::vec(any::<bool>(), 4),
        key_pad in prop_oneof![Just(""), Just(" "), Just("\t")],
    ) {
        let mut tail = String::new();
        for (index, component) in components.iter().enumerate() {
            if detours.get(index).copied().unwrap_or(false) {
                tail.push_str("x/../");
            }
            tail.push_str(component);
            tail.push('/');
        }
        tail.pop();
        let ups = |n: usize| "../".repeat(n + extra_ups);
        let percent = |text: &str| -> String {
            text.chars()
                .enumerate()
                .map(|(i, c)| if encode.get(i).copied().unwrap_or(false) { format!("%{:02X}", c as u32) } else { c.to_string() })
                .collect()
        };
        // cwd /data/notes (2 deep), HOME /state/servers/fs/home (4 deep).
        let value = match spelling {
            0 => format!("/etc/./{tail}"),
            1 => format!("{}etc/{tail}", ups(2)),
            2 => format!("~/{}etc/{tail}", ups(4)),
            3 => format!("file://{}", percent(&format!("/etc/{tail}"))),
            4 => format!("file://localhost{}", percent(&format!("/etc/{tail}"))),
            _ => percent(&format!("/etc/{tail}")),
        };
        let key: String = "path"
            .chars()
            .zip(&key_case)
            .map(|(c, upper)| if *upper { c.to_ascii_uppercase() } else { c })
            .collect();
        let key = format!("{key_pad}{key}{key_pad}");
        let policy = load(
            &[source(Layer::User, "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__read_file\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/etc/\"\n".to_string())],
            &[],
        ).unwrap();
        let mut arguments = serde_json::Map::new();
        arguments.insert(key.clone(), serde_json::Value::String(value.clone()));
        let arguments = serde_json::Value::Object(arguments);
        let context = PathContext {
            home: Some(PathBuf::from("/state/servers/fs/home")),
            cwd: Some(PathBuf::from("/data/notes")),
            bases: vec![PathBuf::from("/srv/given")],
            fallback_cwd: None,
            user_homes: vec![PathBuf::from("/home/me")],
            };
        let decision = policy.decide_in(
            &Call { server: "fs", tool: "read_file", arguments: Some(&arguments), identity: None },
            &context,
        );
        prop_assert_eq!(decision.action, Action::Deny, "{:?}: {:?}", key, value);
    }
}
