//! Layering, locks and load errors, through the public `load`.

use std::path::PathBuf;

use serde_json::json;

use super::*;
use crate::diagnostic::LineCol;

fn layer(layer: Layer, name: &str, text: &str) -> LayerSource {
    LayerSource {
        layer,
        path: PathBuf::from(name),
        text: text.to_string(),
    }
}

fn org(text: &str) -> LayerSource {
    layer(Layer::Org, "/etc/airlock/policy.toml", text)
}

fn user(text: &str) -> LayerSource {
    layer(Layer::User, "/home/me/.config/airlock/policy.toml", text)
}

fn project(text: &str) -> LayerSource {
    layer(Layer::Project, "/repo/.airlock/policy.toml", text)
}

#[path = "merge_error_tests.rs"]
mod load_errors;

fn decide(policy: &Policy, server: &str, tool: &str) -> Decision {
    policy.decide(&Call {
        server,
        tool,
        arguments: None,
        identity: None,
    })
}

#[test]
fn the_builtin_default_alone_is_confined_and_allows_tools() {
    let policy = load(&[], &[]).unwrap();
    assert_eq!(policy.sandbox.network.value, Network::None);
    assert_eq!(policy.sandbox.run_as.value, RunAs::Nobody);
    assert_eq!(decide(&policy, "fs", "read").action, Action::Allow);
    assert_eq!(decide(&policy, "fs", "read").layer, Layer::Builtin);
    assert!(
        policy
            .launch
            .allows_command(std::path::Path::new("/usr/bin/npx"))
    );
    assert!(
        !policy
            .launch
            .allows_command(std::path::Path::new("/bin/sh"))
    );
}

#[test]
fn a_user_list_replaces_the_builtin_list_and_later_layers_union() {
    let policy = load(
        &[
            org("version = 1\n[launch]\nallow_commands = [\"node\"]\n"),
            user("version = 1\n[launch]\nallow_commands = [\"deno\"]\n"),
        ],
        &[],
    )
    .unwrap();
    let commands: Vec<&str> = policy
        .launch
        .allow_commands
        .iter()
        .map(|c| c.value.as_str())
        .collect();
    assert_eq!(commands, ["node", "deno"]);
    assert_eq!(policy.launch.allow_commands[0].origin.layer, Layer::Org);
    assert_eq!(policy.launch.allow_commands[1].origin.line, Some(3));
}

#[test]
fn deny_in_any_layer_beats_allow_in_a_higher_one() {
    let policy = load(
        &[
            org("version = 1\n[tools]\nallow = [\"mcp:fs\"]\n"),
            project("version = 1\n[tools]\ndeny = [\"mcp:fs__delete_file\"]\n"),
        ],
        &[],
    )
    .unwrap();
    let decision = decide(&policy, "fs", "delete_file");
    assert_eq!(decision.action, Action::Deny);
    assert_eq!(decision.layer, Layer::Project);
    assert_eq!(decision.source, "/repo/.airlock/policy.toml:3");
    assert_eq!(decide(&policy, "fs", "read_file").action, Action::Allow);
}

#[test]
fn the_org_default_stands_unless_made_stricter() {
    let sources = [
        org("version = 1\n[tools]\ndefault = \"ask\"\n"),
        user("version = 1\n[tools]\ndefault = \"allow\"\n"),
    ];
    let policy = load(&sources, &[]).unwrap();
    assert_eq!(decide(&policy, "x", "y").action, Action::Ask);
    assert_eq!(decide(&policy, "x", "y").layer, Layer::Org);
    let sources = [
        org("version = 1\n[tools]\ndefault = \"ask\"\n"),
        user("version = 1\n[tools]\ndefault = \"deny\"\n"),
    ];
    assert_eq!(
        decide(&load(&sources, &[]).unwrap(), "x", "y").action,
        Action::Deny
    );
}

fn load_error(sources: &[LayerSource]) -> crate::diagnostic::SourceError {
    load(sources, &[]).expect_err("should be refused")
}

#[test]
fn a_locked_section_cannot_be_widened_and_the_error_names_both_files() {
    let locked = org("version = 1\n[sandbox]\nlocked = true\nnetwork = \"none\"\n");
    let err = load_error(&[
        locked.clone(),
        user("version = 1\n[sandbox]\nnetwork = \"host\"\n"),
    ]);
    let text = err.to_string();
    assert!(
        text.starts_with("/home/me/.config/airlock/policy.toml:3:11:"),
        "{text}"
    );
    assert!(text.contains("/etc/airlock/policy.toml"), "{text}");
    for widening in [
        "[sandbox]\nwrite = [\"/home/me\"]\n",
        "[sandbox]\nread = [\"/\"]\n",
        "[sandbox]\nenv = [\"AWS_SECRET_ACCESS_KEY\"]\n",
        "[sandbox]\nrun_as = \"root\"\n",
        "[sandbox.limits]\nprocesses = 100000\n",
    ] {
        let err = load_error(&[locked.clone(), user(&format!("version = 1\n{widening}"))]);
        assert!(
            err.message.contains("org policy locks"),
            "{widening}: {err}"
        );
    }
    // Narrowing a locked section is fine.
    load(
        &[
            locked,
            user("version = 1\n[sandbox.limits]\nprocesses = 16\n"),
        ],
        &[],
    )
    .unwrap();
}

#[test]
fn locked_launch_and_tools_and_audit_hold() {
    let launch = org(
        "version = 1\n[launch]\nlocked = true\nallow_commands = [\"node\"]\nallow_trust = false\n",
    );
    assert!(
        load_error(&[
            launch.clone(),
            user("version = 1\n[launch]\nallow_commands = [\"bash\"]\n")
        ])
        .message
        .contains("locks")
    );
    assert!(
        load_error(&[launch, user("version = 1\n[launch]\nallow_trust = true\n")])
            .message
            .contains("locks")
    );
    let tools = org("version = 1\n[tools]\nlocked = true\ndefault = \"deny\"\n");
    assert!(
        load_error(&[
            tools.clone(),
            user("version = 1\n[tools]\nallow = [\"mcp:fs\"]\n")
        ])
        .message
        .contains("locks")
    );
    assert!(
        load_error(&[
            tools.clone(),
            user("version = 1\n[tools]\ndefault = \"allow\"\n")
        ])
        .message
        .contains("locks")
    );
    load(
        &[tools, user("version = 1\n[tools]\ndeny = [\"mcp:fs\"]\n")],
        &[],
    )
    .unwrap();
    let audit = org("version = 1\n[audit]\nlocked = true\npath = \"/var/log/airlock.jsonl\"\n");
    assert!(
        load_error(&[
            audit,
            user("version = 1\n[audit]\npath = \"/tmp/elsewhere\"\n")
        ])
        .message
        .contains("locks")
    );
    let redact =
        org("version = 1\n[audit]\nlocked = true\nredact = [\"(?i)bearer\\\\s+\\\\S+\"]\n");
    assert!(
        load_error(&[
            redact.clone(),
            user("version = 1\n[audit]\nredact = [\"(?s).+\"]\n")
        ])
        .message
        .contains("locks")
    );
    // Repeating what the org already redacts changes nothing, so it is not refused.
    let policy = load(
        &[
            redact,
            user("version = 1\n[audit]\nredact = [\"(?i)bearer\\\\s+\\\\S+\"]\n"),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(policy.audit.redact.len(), 1);
    // A user policy without a lock may add its own.
    let policy = load(
        &[user("version = 1\n[audit]\nredact = [\"acme-[0-9]+\"]\n")],
        &[],
    )
    .unwrap();
    assert_eq!(policy.audit.redact.len(), 1);
}

#[test]
fn the_project_layer_may_only_narrow() {
    for widening in [
        "[tools]\nallow = [\"mcp:fs\"]\n",
        "[tools]\ndefault = \"allow\"\n",
        "[[tools.rule]]\ntool = \"mcp:fs__x\"\naction = \"allow\"\nargument = \"p\"\nprefix = \"/\"\n",
        "[launch]\nallow_commands = [\"bash\"]\n",
        "[launch]\nallow_trust = true\n",
        "[sandbox]\nnetwork = [443]\n",
        "[sandbox]\nwrite = [\"~\"]\n",
        "[audit]\npath = \"/tmp/x\"\n",
        // A redaction hides what the log shows: `(?s).+` would blank every tool and argument.
        "[audit]\nredact = [\"(?s).+\"]\n",
    ] {
        let base = user("version = 1\n[tools]\ndefault = \"ask\"\n[launch]\nallow_trust = false\n");
        let err = load_error(&[base, project(&format!("version = 1\n{widening}"))]);
        assert!(err.message.contains("may only narrow"), "{widening}: {err}");
        assert!(err.file.ends_with(".airlock/policy.toml"));
    }
    let narrowed = load(
        &[project("version = 1\n[tools]\ndeny = [\"mcp:x\"]\ndefault = \"deny\"\n[sandbox.limits]\nprocesses = 8\n")],
        &[],
    )
    .unwrap();
    assert_eq!(decide(&narrowed, "y", "z").action, Action::Deny);
    assert_eq!(narrowed.sandbox.limits.processes.value, 8);
}

#[test]
fn locked_only_counts_in_org_files() {
    let err = load_error(&[user("version = 1\n[sandbox]\nlocked = true\n")]);
    assert_eq!(
        err.position,
        Some(LineCol {
            line: 3,
            column: 10
        })
    );
}

/// A wrong type inside an array (`deny = [5]`) is no entry of its own: it is set aside with the
/// entry holding it, and the file's other errors are still found.
#[test]
fn argument_rules_from_a_file_normalise_paths() {
    let policy = load(
        &[user(
            "version = 1\n[[tools.rule]]\ntool = \"mcp:fs__write_file\"\naction = \"deny\"\nargument = \"path\"\nprefix = \"/tmp/\"\nnegate = true\n",
        )],
        &[],
    )
    .unwrap();
    let escape = json!({"path": "/tmp/../etc/passwd"});
    let decision = policy.decide(&Call {
        server: "fs",
        tool: "write_file",
        arguments: Some(&escape),
        identity: None,
    });
    assert_eq!(decision.action, Action::Deny);
    assert!(
        decision.rule.contains("path not prefix \"/tmp/\""),
        "{}",
        decision.rule
    );
    let inside = json!({"path": "/tmp/a"});
    assert_eq!(
        policy
            .decide(&Call {
                server: "fs",
                tool: "write_file",
                arguments: Some(&inside),
                identity: None,
            })
            .action,
        Action::Allow
    );
}

#[test]
fn presets_all_load() {
    for name in presets::names() {
        let text = presets::named(name).unwrap();
        let layer_kind = if name == "org-example" {
            Layer::Org
        } else {
            Layer::User
        };
        load(&[layer(layer_kind, name, text)], &[])
            .unwrap_or_else(|err| panic!("preset {name}: {err}"));
    }
}

#[test]
fn the_digest_changes_with_any_layer() {
    let a = load(&[user("version = 1\n")], &[]).unwrap();
    let b = load(&[user("version = 1\n# comment\n")], &[]).unwrap();
    assert_ne!(a.digest, b.digest);
    assert_eq!(a.digest.len(), 64);
}

/// Two different sets of files whose bytes concatenate to the same stream (a path that ends where
/// the text begins, a file split in two) must not share a digest.
#[test]
fn the_digest_frames_each_field() {
    let text = "version = 1\n";
    let one = [layer(Layer::User, "/p/a", text)];
    let shifted = [layer(Layer::User, "/p/", &format!("a{text}"))];
    let split = [
        layer(Layer::User, "/p/a", "version"),
        layer(Layer::User, "", " = 1\n"),
    ];
    let digests: Vec<String> = [&one[..], &shifted[..], &split[..]]
        .iter()
        .map(|sources| super::merge::digest(sources, &[]))
        .collect();
    assert_ne!(digests[0], digests[1]);
    assert_ne!(digests[0], digests[2]);
    assert_ne!(digests[1], digests[2]);
}

#[test]
fn pins_default_to_enforce_and_trust_on_first_use() {
    let policy = load(&[], &[]).unwrap();
    assert_eq!(policy.pins.pinning.value, PinningMode::Enforce);
    assert_eq!(policy.pins.new_servers.value, NewServers::Trust);
    assert_eq!(policy.pins.pinning.origin.layer, Layer::Builtin);
    let relaxed = load(&[user("version = 1\n[pins]\npinning = \"warn\"\n")], &[]).unwrap();
    assert_eq!(relaxed.pins.pinning.value, PinningMode::Warn);
    assert_eq!(relaxed.pins.pinning.origin.line, Some(3));
}

#[test]
fn pins_loosen_only_where_the_layer_may_widen() {
    // The project layer may tighten, never loosen.
    let stricter = load(
        &[project(
            "version = 1\n[pins]\nnew_servers = \"quarantine\"\n",
        )],
        &[],
    )
    .unwrap();
    assert_eq!(stricter.pins.new_servers.value, NewServers::Quarantine);
    let err = load_error(&[project("version = 1\n[pins]\npinning = \"off\"\n")]);
    assert_eq!(
        err.position,
        Some(LineCol {
            line: 3,
            column: 11
        })
    );
    assert!(err.message.contains("may only narrow"), "{err}");
    // An org lock holds both keys.
    let locked = org(
        "version = 1\n[pins]\nlocked = true\npinning = \"enforce\"\nnew_servers = \"quarantine\"\n",
    );
    for loosening in [
        "pinning = \"warn\"",
        "pinning = \"off\"",
        "new_servers = \"trust\"",
    ] {
        let err = load_error(&[
            locked.clone(),
            user(&format!("version = 1\n[pins]\n{loosening}\n")),
        ]);
        assert!(
            err.message.contains("org policy locks"),
            "{loosening}: {err}"
        );
        assert!(
            err.to_string().contains("/etc/airlock/policy.toml"),
            "{err}"
        );
    }
    let same = load(
        &[locked, user("version = 1\n[pins]\npinning = \"enforce\"\n")],
        &[],
    )
    .unwrap();
    assert_eq!(same.pins.new_servers.value, NewServers::Quarantine);
    // Unknown values are load errors with their position.
    let err = load_error(&[user("version = 1\n[pins]\npinning = \"sometimes\"\n")]);
    assert_eq!(err.position.map(|p| p.line), Some(3), "{err}");
}

#[test]
fn gate_schema_defaults_to_warn_and_only_an_unlocked_layer_lowers_it() {
    let builtin = load(&[], &[]).unwrap();
    assert_eq!(builtin.gate_schema.value, SchemaMode::Warn);
    let user_off = load(
        &[user("version = 1\n[tools]\ngate_schema = \"off\"\n")],
        &[],
    )
    .unwrap();
    assert_eq!(user_off.gate_schema.value, SchemaMode::Off);
    let project_raises = load(
        &[project("version = 1\n[tools]\ngate_schema = \"enforce\"\n")],
        &[],
    )
    .unwrap();
    assert_eq!(project_raises.gate_schema.value, SchemaMode::Enforce);
    let project_lowers = load(
        &[
            user("version = 1\n[tools]\ngate_schema = \"enforce\"\n"),
            project("version = 1\n[tools]\ngate_schema = \"warn\"\n"),
        ],
        &[],
    );
    assert!(project_lowers.is_err());
    // Below the builtin default as well: a project policy may only raise it.
    let project_turns_off = load(
        &[project("version = 1\n[tools]\ngate_schema = \"off\"\n")],
        &[],
    )
    .unwrap_err();
    assert!(
        project_turns_off.to_string().contains("may only narrow"),
        "{project_turns_off}"
    );
    let locked_default = load(
        &[
            org("version = 1\n[tools]\nlocked = true\n"),
            user("version = 1\n[tools]\ngate_schema = \"off\"\n"),
        ],
        &[],
    );
    assert!(locked_default.is_err());
    let locked = load(
        &[
            org("version = 1\n[tools]\nlocked = true\ngate_schema = \"enforce\"\n"),
            user("version = 1\n[tools]\ngate_schema = \"off\"\n"),
        ],
        &[],
    )
    .unwrap_err();
    assert!(locked.to_string().contains("gate_schema"), "{locked}");
}

fn allow_net(policy: &Policy, server: &str) -> String {
    policy.sandbox_for(server).network.value.to_string()
}

#[test]
fn network_allow_lists_add_up_lock_and_narrow() {
    let config_block =
        command_line::CommandLineGrants::new(&["*.githubusercontent.com".into()]).unwrap();
    let base = user("version = 1\n[sandbox]\nnetwork = { allow = [\"api.github.com\"] }\n");
    let cli =
        command_line::CommandLineGrants::new(&["example.org:8443,10.1.2.3:5432".into()]).unwrap();
    let overrides = vec![config_block.as_override("gh"), cli.as_override("gh")];
    let policy = load(std::slice::from_ref(&base), &overrides).unwrap();
    assert_eq!(
        allow_net(&policy, "gh"),
        "allow [api.github.com, *.githubusercontent.com, example.org:8443, 10.1.2.3:5432]"
    );
    assert_eq!(allow_net(&policy, "other"), "allow [api.github.com]");
    let Network::Allow(rules) = &policy.sandbox_for("gh").network.value else {
        panic!("not an allow list");
    };
    assert_eq!(rules[3].origin.layer, Layer::Config);
    assert_eq!(rules[3].origin.file, PathBuf::from("--allow-net"));

    // The project layer narrows to a covered subset, for every server alike.
    let narrowing =
        project("version = 1\n[sandbox]\nnetwork = { allow = [\"api.github.com:443\"] }\n");
    let policy = load(&[base.clone(), narrowing], &overrides).unwrap();
    assert_eq!(allow_net(&policy, "gh"), "allow [api.github.com:443]");
    assert_eq!(allow_net(&policy, "other"), "allow [api.github.com:443]");
    let widening = project("version = 1\n[sandbox]\nnetwork = { allow = [\"evil.example\"] }\n");
    let err = load_error(&[base.clone(), widening]);
    assert!(
        err.message.contains("\"evil.example\"") && err.message.contains("may only narrow"),
        "{err}"
    );

    // An org lock: the command line may not add, but may repeat what the org allows.
    let locked =
        org("version = 1\n[sandbox]\nlocked = true\nnetwork = { allow = [\"api.github.com\"] }\n");
    let cli = command_line::CommandLineGrants::new(&["registry.example".into()]).unwrap();
    let err = load(std::slice::from_ref(&locked), &[cli.as_override("gh")]).unwrap_err();
    assert!(err.to_string().starts_with("--allow-net:2:"), "{err}");
    assert!(
        err.message.contains("locks") && err.message.contains("\"registry.example\""),
        "{err}"
    );
    let same = command_line::CommandLineGrants::new(&["api.github.com:443".into()]).unwrap();
    let policy = load(std::slice::from_ref(&locked), &[same.as_override("gh")]).unwrap();
    assert_eq!(allow_net(&policy, "gh"), "allow [api.github.com]");
    let bad = command_line::CommandLineGrants::new(&["exa mple.org".into()]).unwrap();
    let err = load(&[], &[bad.as_override("gh")]).unwrap_err();
    assert!(
        err.fix.as_deref().unwrap_or("").contains("host name"),
        "{err:?}"
    );
}

fn decide_as(policy: &Policy, server: &str, tool: &str, identity: Option<&str>) -> Decision {
    policy.decide(&Call {
        server,
        tool,
        arguments: None,
        identity,
    })
}

#[test]
fn identity_sections_apply_to_that_identitys_calls_only() {
    let policy = load(
        &[user(
            r#"
version = 1
[tools]
default = "allow"

[identities.bob]
deny = ["mcp:fs__write_*"]

[identities."ci-*"]
deny = ["mcp:github"]
allow = ["mcp:github__get_*"]
"#,
        )],
        &[],
    )
    .unwrap();
    let bob = decide_as(&policy, "fs", "write_file", Some("bob"));
    assert_eq!(bob.action, Action::Deny);
    assert_eq!(bob.rule, "identities.\"bob\".deny \"mcp:fs__write_*\"");
    assert_eq!(
        decide_as(&policy, "fs", "write_file", Some("alice")).action,
        Action::Allow
    );
    assert_eq!(
        decide_as(&policy, "fs", "write_file", None).action,
        Action::Allow,
        "stdio: no identity"
    );
    // Deny beats allow within an identity, as everywhere.
    assert_eq!(
        decide_as(&policy, "github", "get_issue", Some("ci-7")).action,
        Action::Deny
    );
    // An identity's deny does not hide the tool from everyone's listing.
    assert!(policy.tools.lists_tool("fs", "write_file"));
}

#[test]
fn identity_allows_are_widening_under_a_tools_lock() {
    let err = load_error(&[
        org("version = 1\n[tools]\nlocked = true\ndefault = \"deny\"\n"),
        user("version = 1\n[identities.alice]\nallow = [\"mcp:fs\"]\n"),
    ]);
    assert!(err.to_string().contains("locked"), "{err}");
    let unknown = load_error(&[user(
        "version = 1\n[identities.alice]\nallw = [\"mcp:fs\"]\n",
    )]);
    assert!(unknown.to_string().contains("unknown field"), "{unknown}");
}

#[test]
fn a_longer_kill_timeout_is_a_widening() {
    let user_longer = load(&[user("version = 1\n[sandbox]\nkill_timeout = 10\n")], &[]).unwrap();
    assert_eq!(user_longer.sandbox.kill_timeout.value, 10);
    // A project policy may shorten it, not lengthen it (a server with a write grant over the
    // project could plant the file).
    let shorter = load(
        &[
            user("version = 1\n[sandbox]\nkill_timeout = 10\n"),
            project("version = 1\n[sandbox]\nkill_timeout = 2\n"),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(shorter.sandbox.kill_timeout.value, 2);
    let longer = load(
        &[project("version = 1\n[sandbox]\nkill_timeout = 60\n")],
        &[],
    )
    .unwrap_err();
    assert!(longer.to_string().contains("may only narrow"), "{longer}");
    let locked = load(
        &[
            org("version = 1\n[sandbox]\nlocked = true\n"),
            user("version = 1\n[sandbox]\nkill_timeout = 30\n"),
        ],
        &[],
    );
    assert!(locked.is_err());
}
