//! What `install` may not take from a project's own host file as it stands. A project file
//! (`.mcp.json`, `.cursor/mcp.json`, ...) comes with the repository: its entries are the
//! project's writing, not the user's, and after install the host starts airlock with them. So an
//! entry there may not choose how airlock confines its server:
//!
//! - its `env` is set by the host on the program it starts, which is airlock: variables that
//!   steer airlock itself (`AIRLOCK_*`, the dynamic loader's `LD_*`, `HOME` and `XDG_*`, which
//!   decide where airlock reads its user policy and keeps its log) are refused, and so are those
//!   that steer the programs airlock runs unconfined before the sandbox (to read the user's
//!   registry settings: `PATH`, `NODE_*`, `PYTHON*`, npm's, uv's, bun's and deno's own), a
//!   variables file the host reads (`envFile`), and a key that is no variable name (`--allow-env`
//!   reads `*` and `,`);
//! - its command may not be a runner of its own (`./node_modules/.bin/npx`): airlock runs the
//!   npm beside an npx, unconfined, to read the registry settings;
//! - an `airlock run` wrapper it already has may carry only what install itself writes
//!   (`--name`, and `--allow-env` for the entry's own `env` keys): a `--policy`, `--audit`,
//!   `--trust` or any grant of the project's choosing is refused;
//! - an `airlock serve` entry may only serve a gateway config of the user's own airlock config
//!   directory (where `install --gateway` writes them).
//!
//! A refused entry makes the install of that file stop before anything is written, naming the
//! entry and the fix. Pure.

use std::path::Path;

use super::entry::{AirlockUse, EntryFacts, Shape, airlock_use};

/// Whether environment variable `key` steers airlock rather than (only) its server.
pub fn steers_airlock(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    [
        "AIRLOCK_",
        "LD_",
        "XDG_",
        "MIMALLOC_",
        "NODE_",
        "PYTHON",
        "NPM_CONFIG_",
        "UV_",
        "BUN_",
        "DENO_",
        "COREPACK_",
    ]
    .iter()
    .any(|prefix| upper.starts_with(prefix))
        || matches!(
            upper.as_str(),
            "HOME" | "GLIBC_TUNABLES" | "PATH" | "CODEX_HOME" | "BASH_ENV" | "ENV"
        )
}

/// Whether `key` is a variable name `--allow-env` reads as that one name.
pub fn is_variable_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Runners whose program airlock reads a sibling of (npx: the npm beside it).
const RUNNERS: [&str; 5] = ["npx", "uvx", "uv", "bunx", "pnpx"];

/// The options of an `airlock run` command line (`run` up to its `--`) that install does not
/// write, given the keys the entry's `env` sets.
fn options_not_installs(options: &[String], env_keys: &[String]) -> Vec<String> {
    let mut foreign = Vec::new();
    let mut at = 0;
    while at < options.len() {
        let option = options[at].as_str();
        let (flag, value) = match option.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_string())),
            None => (option, None),
        };
        let takes_next = value.is_none() && matches!(flag, "--name" | "--allow-env");
        let value = if takes_next {
            at += 1;
            options.get(at).cloned()
        } else {
            value
        };
        match (flag, value) {
            ("--name", Some(_)) => {}
            ("--allow-env", Some(names)) => foreign.extend(
                names
                    .split(',')
                    .filter(|name| !env_keys.iter().any(|key| key == name))
                    .map(|name| format!("--allow-env={name}")),
            ),
            _ => foreign.push(option.to_string()),
        }
        at += 1;
    }
    foreign
}

/// Why install may not take this entry of a project file as it stands, if it may not.
/// `this`: the running airlock's path; `gateway_configs`: the directory of the user's own
/// gateway configs.
pub fn refusal(facts: &EntryFacts, this: &str, gateway_configs: &Path) -> Option<String> {
    let Shape::Stdio {
        command,
        args,
        env_keys,
        ..
    } = &facts.shape
    else {
        return None;
    };
    let steering: Vec<&str> = env_keys
        .iter()
        .map(String::as_str)
        .filter(|key| steers_airlock(key) || !is_variable_name(key))
        .collect();
    if !steering.is_empty() {
        return Some(format!(
            "its env sets {}, which the host would set on airlock itself and which steer it (where its policy, log and org policy are, what it loads). Fix: take {} out of the entry in the project's file, or declare the server in your user config instead",
            steering.join(", "),
            if steering.len() == 1 { "it" } else { "them" }
        ));
    }
    if let Shape::Stdio {
        env_file: Some(file),
        ..
    } = &facts.shape
    {
        return Some(format!(
            "it names a variables file ({file}) that the host would read into airlock's own environment. Fix: take `envFile` out of the entry in the project's file, or declare the server in your user config instead"
        ));
    }
    let program = Path::new(command);
    let runner = program
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| RUNNERS.contains(&name));
    if runner && program.components().count() > 1 {
        return Some(format!(
            "its command is a runner of the project's choosing ({command}): airlock would run the programs beside it, outside the sandbox, to read your registry settings. Fix: write its bare name ({}) so your PATH finds it",
            program
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
        ));
    }
    match airlock_use(command, args, this)? {
        AirlockUse::Run { inner } => {
            let foreign = options_not_installs(&args[1..inner - 1], env_keys);
            (!foreign.is_empty()).then(|| format!(
                "it is already wrapped in airlock with options a project's file may not choose: {}. Fix: in the project's file, replace the entry's command line with the server's own (what follows its `--`) and install again, or declare the server in your user config if you chose those options",
                foreign.join(" ")
            ))
        }
        AirlockUse::Serve => {
            // Only plain components after the directory: `..` would lead out of it.
            let inside = |config: &str| {
                Path::new(config)
                    .strip_prefix(gateway_configs)
                    .is_ok_and(|rest| {
                        rest.components()
                            .all(|part| matches!(part, std::path::Component::Normal(_)))
                    })
            };
            let own = matches!(args.as_slice(),
                [_, flag, config] if flag == "--config" && inside(config));
            (!own).then(|| format!(
                "it starts an airlock gateway with a configuration the project chose ({}). Fix: remove the entry from the project's file, and serve the servers from your user config (`airlock install --gateway` writes one under {})",
                args.join(" "),
                gateway_configs.display()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(command: &str, args: &[&str], env: &[&str]) -> EntryFacts {
        EntryFacts {
            map: 0,
            map_label: "mcpServers".into(),
            name: "notes".into(),
            shape: Shape::Stdio {
                command: command.into(),
                args: args.iter().map(|a| a.to_string()).collect(),
                env_keys: env.iter().map(|k| k.to_string()).collect(),
                path_env: Vec::new(),
                env_file: None,
            },
        }
    }

    #[test]
    fn a_project_entry_may_not_steer_airlock_or_choose_its_options() {
        let this = "/usr/bin/airlock";
        let configs = Path::new("/home/u/.config/airlock/hosts");
        let refused = |facts: &EntryFacts| refusal(facts, this, configs);
        // Install's own shape, for the entry's own env keys: fine.
        for args in [
            &["run", "--name", "notes", "--", "python3", "s.py"][..],
            &["run", "--name=notes", "--allow-env=TOKEN", "--", "python3"],
            &[
                "run",
                "--name",
                "notes",
                "--allow-env",
                "TOKEN",
                "--",
                "python3",
            ],
        ] {
            assert_eq!(refused(&stdio(this, args, &["TOKEN"])), None, "{args:?}");
        }
        assert_eq!(refused(&stdio("npx", &["-y", "server"], &["TOKEN"])), None);
        // Options of the project's choosing, wherever its airlock is.
        for (command, args) in [
            (this, &["run", "--policy", "./p.toml", "--", "python3"][..]),
            (
                "/opt/old/airlock",
                &["run", "--name", "n", "--audit", "-", "--", "x"],
            ),
            ("./tools/airlock", &["run", "--trust", "--", "x"]),
            (
                this,
                &["run", "--allow-env=AWS_SECRET_ACCESS_KEY", "--", "x"],
            ),
            (this, &["run", "--allow-write", "/", "--", "x"]),
        ] {
            let why = refused(&stdio(command, args, &["TOKEN"])).expect("refused");
            assert!(why.contains("may not choose"), "{why}");
        }
        for key in [
            "AIRLOCK_ORG_POLICY_DIR",
            "LD_PRELOAD",
            "HOME",
            "XDG_CONFIG_HOME",
            "PATH",
            "NODE_OPTIONS",
            "PYTHONPATH",
            "npm_config_registry",
            "CODEX_HOME",
            "G*",
            "X,AWS_SECRET_ACCESS_KEY",
        ] {
            let why = refused(&stdio("npx", &["server"], &["TOKEN", key])).expect("refused");
            assert!(why.contains(key) && !why.contains("TOKEN"), "{why}");
        }
        // A gateway: only one serving the user's own config.
        let own = "/home/u/.config/airlock/hosts/claude-code-1.toml";
        assert_eq!(
            refused(&stdio(this, &["serve", "--config", own], &[])),
            None
        );
        assert!(refused(&stdio(this, &["serve", "--config", "./gw.toml"], &[])).is_some());
        let escaping = "/home/u/.config/airlock/hosts/../../../proj/gw.toml";
        assert!(refused(&stdio(this, &["serve", "--config", escaping], &[])).is_some());
        // A runner of the project's own: airlock would run the npm beside it unconfined.
        let own_npx = refused(&stdio("./node_modules/.bin/npx", &["-y", "s"], &[]));
        assert!(own_npx.is_some_and(|why| why.contains("runner")));
        assert_eq!(refused(&stdio("npx", &["-y", "s"], &[])), None);
        // A variables file the host reads into airlock's environment.
        let mut with_file = stdio("npx", &["s"], &[]);
        if let Shape::Stdio { env_file, .. } = &mut with_file.shape {
            *env_file = Some("${workspaceFolder}/.env".into());
        }
        assert!(refused(&with_file).is_some_and(|why| why.contains("envFile")));
        assert!(
            refused(&stdio(
                this,
                &["serve", "--config", own, "--policy", "p"],
                &[]
            ))
            .is_some()
        );
    }
}
