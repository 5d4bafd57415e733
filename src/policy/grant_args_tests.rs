//! `sandbox.grant_args`: what paths on a server's command line are granted, layer by layer.

use std::path::PathBuf;

use super::*;

fn source(layer: Layer, name: &str, text: &str) -> LayerSource {
    LayerSource {
        layer,
        path: PathBuf::from(name),
        text: text.to_string(),
    }
}

fn org(text: &str) -> LayerSource {
    source(Layer::Org, "/etc/airlock/policy.toml", text)
}

fn user(text: &str) -> LayerSource {
    source(Layer::User, "/home/me/.config/airlock/policy.toml", text)
}

fn project(text: &str) -> LayerSource {
    source(Layer::Project, "/repo/.airlock/policy.toml", text)
}

#[test]
fn directories_on_the_command_line_are_granted_by_default_and_any_layer_may_narrow() {
    let policy = load(&[], &[]).unwrap();
    assert_eq!(policy.sandbox.grant_args.value, GrantArgs::Write);
    assert_eq!(policy.sandbox.grant_args.origin.layer, Layer::Builtin);
    let policy = load(
        &[project("version = 1\n[sandbox]\ngrant_args = \"read\"\n")],
        &[],
    )
    .unwrap();
    assert_eq!(policy.sandbox.grant_args.value, GrantArgs::Read);
    let policy = load(
        &[user("version = 1\n[sandbox]\ngrant_args = \"none\"\n")],
        &[],
    )
    .unwrap();
    assert_eq!(policy.sandbox.grant_args.value, GrantArgs::None);
}

#[test]
fn a_project_may_not_raise_it_and_a_bad_value_points_at_itself() {
    let err = load(
        &[
            user("version = 1\n[sandbox]\ngrant_args = \"read\"\n"),
            project("version = 1\n[sandbox]\ngrant_args = \"write\"\n"),
        ],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("/repo/.airlock/policy.toml:3") && err.contains("only narrow"),
        "{err}"
    );
    let err = load(
        &[user("version = 1\n[sandbox]\ngrant_args = \"all\"\n")],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("policy.toml:3") && err.contains("write"),
        "{err}"
    );
}

#[test]
fn an_org_lock_on_the_sandbox_grants_only_what_the_org_says() {
    // The org locks [sandbox] without a word on grant_args: naming a directory must not widen
    // the locked write list, so nothing is granted from the command line.
    let locked = "version = 1\n[sandbox]\nlocked = true\nwrite = []\n";
    let policy = load(&[org(locked), user("version = 1\n")], &[]).unwrap();
    assert_eq!(policy.sandbox.grant_args.value, GrantArgs::None);
    assert_eq!(policy.sandbox.grant_args.origin.layer, Layer::Org);
    // The org says read: that stands, and a user cannot raise it.
    let org_read = "version = 1\n[sandbox]\nlocked = true\ngrant_args = \"read\"\n";
    let policy = load(&[org(org_read)], &[]).unwrap();
    assert_eq!(policy.sandbox.grant_args.value, GrantArgs::Read);
    let err = load(
        &[
            org(org_read),
            user("version = 1\n[sandbox]\ngrant_args = \"write\"\n"),
        ],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("locks") && err.contains("/etc/airlock/policy.toml"),
        "{err}"
    );
}

fn flag(kind: command_line::Flag, values: &[&str]) -> command_line::CommandLineGrants {
    let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    command_line::CommandLineGrants::flag(kind, &values).unwrap()
}

#[test]
fn allow_flags_add_to_the_config_layer_and_keep_the_builtin_lists() {
    use command_line::Flag;
    let read = flag(Flag::Read, &["/srv/data,~/docs"]);
    let write = flag(Flag::Write, &["/tmp/out"]);
    let env = flag(Flag::Env, &["GITHUB_TOKEN", "LOG_*"]);
    let overrides = [
        read.as_override("fs"),
        write.as_override("fs"),
        env.as_override("fs"),
    ];
    let policy = load(&[], &overrides).unwrap();
    let sandbox = policy.sandbox_for("fs");
    let values = |list: &[Sourced<String>]| -> Vec<String> {
        list.iter().map(|entry| entry.value.clone()).collect()
    };
    assert_eq!(values(&sandbox.read), ["/srv/data", "~/docs"]);
    assert_eq!(values(&sandbox.write), ["/tmp/out"]);
    // --allow-env adds: the default names stay.
    let env = values(&sandbox.env);
    assert_eq!(env[..4], ["PATH", "LANG", "TZ", "TERM"]);
    assert!(env.contains(&"LC_MESSAGES".to_string()), "{env:?}");
    assert_eq!(env[env.len() - 2..], ["GITHUB_TOKEN", "LOG_*"]);
    assert_eq!(sandbox.write[0].origin.file, PathBuf::from("--allow-write"));
    assert_eq!(sandbox.write[0].origin.layer, Layer::Config);
    // Other servers get none of it.
    assert!(policy.sandbox_for("other").write.is_empty());
}

#[test]
fn an_org_lock_wins_over_every_allow_flag() {
    use command_line::Flag;
    let locked = org("version = 1\n[sandbox]\nlocked = true\n");
    for (kind, value) in [
        (Flag::Read, "/srv"),
        (Flag::Write, "/srv"),
        (Flag::Env, "TOKEN"),
        (Flag::Net, "example.org"),
    ] {
        let grants = flag(kind, &[value]);
        let err = load(std::slice::from_ref(&locked), &[grants.as_override("fs")])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&format!("{}:2:", kind.name())), "{err}");
        assert!(
            err.contains("locks") && err.contains("/etc/airlock/policy.toml"),
            "{err}"
        );
    }
    // A bad name points at the flag too.
    let err = load(&[], &[flag(Flag::Env, &["A=B"]).as_override("fs")])
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("--allow-env:2:"), "{err}");
}

/// Everything the digest covers is named where the digest is shown: the policy files by layer,
/// each command-line flag once, and the built-in default; a flag's grants change the digest.
#[test]
fn the_sources_name_every_input_of_the_digest_in_authority_order() {
    use command_line::Flag;
    let write = flag(Flag::Write, &["/tmp/out"]);
    let env = flag(Flag::Env, &["TOKEN"]);
    let files = [project("version = 1\n"), user("version = 1\n")];
    let policy = load(&files, &[write.as_override("fs"), env.as_override("fs")]).unwrap();
    assert_eq!(
        policy.source_names(),
        vec![
            "user /home/me/.config/airlock/policy.toml",
            "config --allow-write (command line)",
            "config --allow-env (command line)",
            "project /repo/.airlock/policy.toml",
            "builtin builtin:default.toml",
        ]
    );
    let without_flags = load(&files, &[]).unwrap();
    assert_ne!(policy.digest, without_flags.digest);
    assert_eq!(
        without_flags.source_names(),
        vec![
            "user /home/me/.config/airlock/policy.toml",
            "project /repo/.airlock/policy.toml",
            "builtin builtin:default.toml"
        ]
    );
}
