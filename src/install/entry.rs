//! One server entry of a host's config, seen the same way whatever the file format, and the pure
//! decision of what `install` or `uninstall` does to it.

use std::path::Path;

/// What an entry is, as far as airlock is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A local server the host starts: its command, arguments and the names of its `env` keys.
    Stdio {
        command: String,
        args: Vec<String>,
        env_keys: Vec<String>,
        /// The `env` keys whose value is an absolute path (`/...` or `~/...`): the server is not
        /// granted the path by its being named there, which `install` says.
        /// `env` entries whose value looks like a path: name and value.
        path_env: Vec<(String, String)>,
        /// A file the host reads more variables from (VS Code's `envFile`), if the entry names one.
        env_file: Option<String>,
    },
    /// A server the host reaches over the network.
    Remote(RemoteFacts),
    /// Something airlock does not understand; left alone, with the reason.
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFacts {
    pub url: String,
    /// Legacy HTTP+SSE rather than Streamable HTTP.
    pub sse: bool,
    pub headers: Vec<(String, String)>,
    /// The entry's keys a gateway's server config cannot carry (switched off: `disabled`, or
    /// `enabled = false`; Codex's tool filters, headers from variables, timeouts): moving it would
    /// connect a server the user switched off, or drop what the user set, without a word.
    pub not_carried: Vec<String>,
}

/// One entry of one server map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFacts {
    /// 0 for the file's main server map, more for the others (Claude Code's per-project maps).
    pub map: usize,
    /// Where the map is, for humans: `mcpServers`, `projects./home/me/app.mcpServers`.
    pub map_label: String,
    pub name: String,
    pub shape: Shape,
}

/// What to do to an entry. The editors of each format carry it out on the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Keep(Kept),
    /// `command` becomes `command`; `prepend` goes in front of the existing `args`.
    Wrap {
        command: String,
        prepend: Vec<String>,
    },
    /// An `airlock run` wrapper whose airlock is gone: `command` becomes this airlock, the
    /// arguments stay.
    Repoint {
        command: String,
    },
    /// `command` becomes `command`; the first `drop` arguments go.
    Unwrap {
        command: String,
        drop: usize,
    },
    /// The entry leaves this file (a remote server moved behind the gateway, or airlock's
    /// own gateway entry on uninstall).
    Remove,
}

/// Why an entry stays as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    AlreadyWrapped,
    /// Wrapped by another airlock binary that is still there: the user's choice, left alone.
    WrappedByOther(String),
    /// An `airlock serve` entry: airlock already sits in front of everything behind it.
    Gateway,
    /// A remote server, left alone (no `--gateway`).
    Remote,
    /// A remote server outside the file's main server map (`--gateway` moves only those).
    RemoteNotMain,
    /// A remote server `--gateway` cannot move (say, a header that only the host can fill).
    RemoteUnmovable(String),
    NotUnderstood(String),
    /// Uninstall: not wrapped by airlock.
    NotWrapped,
    /// Uninstall: wrapped, but not by the install being undone.
    NotOurs,
    /// A project file's entry install may not take as it stands ([`super::project`]): the
    /// install of that file stops, nothing written.
    Refused(String),
}

/// How airlock occurs in an entry's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AirlockUse {
    /// `airlock run ... -- CMD ARGS`: `args[inner]` is the server's own command.
    Run {
        inner: usize,
    },
    Serve,
}

/// Whether `command args` already goes through airlock: a program whose name starts with
/// `airlock` (a release asset may be `airlock-x86_64-linux`) and whose arguments are airlock's
/// own (`run ... -- CMD`, `serve`), or `this` (the running airlock's own path, which install
/// writes, whatever the binary is called).
pub fn airlock_use(command: &str, args: &[String], this: &str) -> Option<AirlockUse> {
    let program = Path::new(command).file_name()?.to_str()?;
    // `airlock-v2`, `airlock-x86_64-linux`: a release asset kept under its own name.
    if !program.starts_with("airlock") && command != this {
        return None;
    }
    match args.first().map(String::as_str) {
        Some("run") => {
            let separator = args.iter().position(|arg| arg == "--")?;
            (separator + 1 < args.len()).then_some(AirlockUse::Run {
                inner: separator + 1,
            })
        }
        Some("serve") => Some(AirlockUse::Serve),
        _ => None,
    }
}

/// A valid airlock server name from a host's entry key: characters outside `[A-Za-z0-9_.-]`
/// become `-`, no `__`, at most 64 characters.
pub fn server_name(key: &str) -> String {
    crate::config::sanitize_server_name(key)
}

/// The `--name` of an `airlock run` command line (`run --name NAME ...` or `--name=NAME`,
/// before its `--`), if it has one.
pub fn run_name(args: &[String]) -> Option<&str> {
    let own = args
        .iter()
        .position(|arg| arg == "--")
        .map_or(args, |end| &args[..end]);
    own.iter()
        .enumerate()
        .find_map(|(at, arg)| match arg.strip_prefix("--name=") {
            Some(name) => Some(name),
            None if arg == "--name" => own.get(at + 1).map(String::as_str),
            None => None,
        })
}

/// The `--name` each entry of one install gets, unique among the entries that start different
/// commands: a name is what a server's pins, policy patterns and audit records go by, so "my
/// server" and "my-server" (both `my-server` once made a valid name) must not share one. The
/// second gets `my-server-2`. Entries that start the same command line keep one name (one
/// server declared in two projects). Fed every entry in file order.
#[derive(Debug, Default)]
pub struct UniqueNames {
    /// Name taken, and the command line (the server's own) it was taken for.
    taken: std::collections::HashMap<String, Vec<String>>,
}

impl UniqueNames {
    /// Reserves the name of an entry airlock already wraps (`this`: the running airlock's
    /// path), before any new entry is named: a new entry above it in the file must not take it.
    pub fn reserve(&mut self, facts: &EntryFacts, this: &str) {
        let Shape::Stdio { command, args, .. } = &facts.shape else {
            return;
        };
        if let (Some(AirlockUse::Run { inner }), Some(name)) =
            (airlock_use(command, args, this), run_name(args))
        {
            self.taken
                .entry(name.to_string())
                .or_insert_with(|| args[inner..].to_vec());
        }
    }

    /// Notes the name a new wrap gives and, when another command line holds it, changes it to the
    /// first free `NAME-N`.
    pub fn settle(&mut self, facts: &EntryFacts, action: &mut Action) {
        // An entry airlock wraps already has its name from `reserve`.
        let (Shape::Stdio { command, args, .. }, Action::Wrap { prepend, .. }) =
            (&facts.shape, action)
        else {
            return;
        };
        let line: Vec<String> = std::iter::once(command.clone())
            .chain(args.iter().cloned())
            .collect();
        let Some(slot) = prepend
            .iter()
            .position(|arg| arg == "--name")
            .map(|at| at + 1)
            .filter(|at| *at < prepend.len())
        else {
            return;
        };
        let base = prepend[slot].clone();
        let mut name = base.clone();
        let mut n = 1;
        while self.taken.get(&name).is_some_and(|other| *other != line) {
            n += 1;
            let suffix = format!("-{n}");
            let stem: String = base.chars().take(64 - suffix.len()).collect();
            name = format!("{stem}{suffix}");
        }
        self.taken.insert(name.clone(), line);
        prepend[slot] = name;
    }
}

/// The arguments `airlock run` gets in front of the server's own command line.
pub fn run_prefix(name: &str, env_keys: &[String]) -> Vec<String> {
    let mut prefix = vec!["run".to_string(), "--name".to_string(), server_name(name)];
    // A key that is no variable name would be read as more than one (`*`, `,`): never passed.
    let env_keys: Vec<&str> = env_keys
        .iter()
        .map(String::as_str)
        .filter(|key| super::project::is_variable_name(key))
        .collect();
    if !env_keys.is_empty() {
        // The host still sets these variables (the entry keeps its `env`); airlock passes exactly
        // these names on to the confined server, which otherwise gets a cleared environment.
        prefix.push(format!("--allow-env={}", env_keys.join(",")));
    }
    prefix.push("--".to_string());
    prefix
}

/// Why an entry with neither a `command` nor a url is left alone, with a did-you-mean for a
/// misspelt key (`comand`), the same one `airlock check` gives. Pure.
pub fn neither_command_nor_url<'a>(keys: impl Iterator<Item = &'a str>) -> String {
    const MEANT: [&str; 4] = ["command", "url", "httpUrl", "serverUrl"];
    let hints: Vec<String> = keys
        .filter(|key| !MEANT.contains(key))
        .filter_map(|key| {
            crate::diagnostic::did_you_mean_quoted(key, &MEANT, &|name| format!("{name:?}"))
                .map(|hint| format!("the key {key:?}: {hint}"))
        })
        .collect();
    if hints.is_empty() {
        "neither a `command` nor a url".into()
    } else {
        format!("neither a `command` nor a url ({})", hints.join("; "))
    }
}

/// Whether `env` entry `key = value` names one file or directory by absolute path. Not `PATH`,
/// and not a list (`a:b`): the same rule as `run`'s warning (`sandbox::ungranted_env_paths`),
/// since the sandbox gives every server the system's programs and a search list is not one
/// file a grant could cover. Pure.
pub fn looks_like_path(key: &str, value: &str) -> bool {
    key != "PATH"
        && !value.contains(':')
        && ((value.starts_with('/') && value.len() > 1) || value.starts_with("~/"))
}

/// What `install` does to one entry. `airlock` is the command the host will start; `locate`
/// gives the file a command path is (`None`: not there; a wrapper pointing at a removed
/// airlock is broken), so that two spellings of one binary count as the same.
pub fn decide_install(
    facts: &EntryFacts,
    airlock: &str,
    gateway: bool,
    locate: &dyn Fn(&str) -> Option<std::path::PathBuf>,
) -> Action {
    let same_airlock = |command: &str| {
        command == airlock || locate(command).is_some_and(|found| locate(airlock) == Some(found))
    };
    match &facts.shape {
        Shape::Stdio {
            command,
            args,
            env_keys,
            ..
        } => match airlock_use(command, args, airlock) {
            Some(AirlockUse::Run { .. }) if same_airlock(command) => {
                Action::Keep(Kept::AlreadyWrapped)
            }
            Some(AirlockUse::Run { .. })
                if Path::new(command).is_absolute() && locate(command).is_none() =>
            {
                Action::Repoint {
                    command: airlock.to_string(),
                }
            }
            Some(AirlockUse::Run { .. }) => Action::Keep(Kept::WrappedByOther(command.clone())),
            Some(AirlockUse::Serve) => Action::Keep(Kept::Gateway),
            None => {
                let mut prepend = run_prefix(&facts.name, env_keys);
                prepend.push(command.clone());
                Action::Wrap {
                    command: airlock.to_string(),
                    prepend,
                }
            }
        },
        Shape::Remote(remote) => {
            if !gateway {
                Action::Keep(Kept::Remote)
            } else if facts.map != 0 {
                Action::Keep(Kept::RemoteNotMain)
            } else if let Some(reason) = unmovable(remote) {
                Action::Keep(Kept::RemoteUnmovable(reason))
            } else {
                Action::Remove
            }
        }
        Shape::Unknown(reason) => Action::Keep(Kept::NotUnderstood(reason.clone())),
    }
}

/// Why a remote entry cannot move behind `airlock serve`, if it cannot.
fn unmovable(remote: &RemoteFacts) -> Option<String> {
    if !remote.not_carried.is_empty() {
        return Some(format!(
            "the gateway cannot carry its {} (a switched-off server would be connected, a setting dropped)",
            remote.not_carried.join(", ")
        ));
    }
    let host_only = |value: &str| value.contains("${input:") || value.contains("${workspace");
    if host_only(&remote.url) {
        return Some("its url uses a variable only the host can fill".into());
    }
    remote
        .headers
        .iter()
        .find(|(_, value)| host_only(value))
        .map(|(key, _)| format!("header {key:?} uses a variable only the host can fill"))
}

/// How an install records an entry it wrapped: its key in the file's main server map, and its
/// map's place with its key in any other (Claude Code's per-project maps), so an uninstall
/// unwraps that entry only, not a wrapper of the user's own under the same key in another map
/// (a review found one removed, and its server left running with no airlock).
pub fn recorded_as(facts: &EntryFacts) -> String {
    if facts.map == 0 {
        facts.name.clone()
    } else {
        format!("{}{MAP_SEPARATOR}{}", facts.map_label, facts.name)
    }
}

/// Between a map's place and a key in [`recorded_as`]: no key or map label has it.
const MAP_SEPARATOR: char = '\u{1f}';

/// Whether the install record `wrapped` names this entry. A record written before entries of
/// other maps were recorded with their map (`keys_with_maps` false) holds keys alone: then a key
/// names it in any map.
fn recorded(wrapped: &[String], keys_with_maps: bool, facts: &EntryFacts) -> bool {
    if keys_with_maps || facts.map == 0 {
        let this = recorded_as(facts);
        wrapped.contains(&this)
    } else {
        wrapped.contains(&facts.name)
    }
}

/// Which entries an uninstall undoes.
#[derive(Debug, Clone, Copy)]
pub struct UninstallScope<'a> {
    /// The names the install being undone wrapped; `None`: every `airlock run` entry.
    pub wrapped: Option<&'a [String]>,
    /// Whether those names carry their map ([`recorded_as`]); records written before do not.
    pub keys_with_maps: bool,
    /// The name of the gateway entry that install added, if any.
    pub gateway: Option<&'a str>,
    /// The running airlock's own path (see [`airlock_use`]).
    pub airlock: &'a str,
}

/// What `uninstall` does to one entry.
pub fn decide_uninstall(facts: &EntryFacts, scope: UninstallScope<'_>) -> Action {
    let Shape::Stdio { command, args, .. } = &facts.shape else {
        return Action::Keep(Kept::NotWrapped);
    };
    match airlock_use(command, args, scope.airlock) {
        Some(AirlockUse::Run { inner }) => {
            let ours = scope
                .wrapped
                .is_none_or(|names| recorded(names, scope.keys_with_maps, facts));
            if ours {
                Action::Unwrap {
                    command: args[inner].clone(),
                    drop: inner + 1,
                }
            } else {
                Action::Keep(Kept::NotOurs)
            }
        }
        Some(AirlockUse::Serve) if facts.map == 0 && scope.gateway == Some(&facts.name) => {
            Action::Remove
        }
        Some(AirlockUse::Serve) => Action::Keep(Kept::NotOurs),
        None => Action::Keep(Kept::NotWrapped),
    }
}

/// The command line a host starts after the action (for tests and the dry-run summary).
pub fn apply_to_argv(command: &str, args: &[String], action: &Action) -> (String, Vec<String>) {
    match action {
        Action::Wrap {
            command: new,
            prepend,
        } => {
            let mut all = prepend.clone();
            all.extend_from_slice(args);
            (new.clone(), all)
        }
        Action::Unwrap { command: new, drop } => {
            (new.clone(), args.get(*drop..).unwrap_or_default().to_vec())
        }
        Action::Repoint { command: new } => (new.clone(), args.to_vec()),
        _ => (command.to_string(), args.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(name: &str, command: &str, args: &[&str], env: &[&str]) -> EntryFacts {
        EntryFacts {
            map: 0,
            map_label: "mcpServers".into(),
            name: name.into(),
            shape: Shape::Stdio {
                command: command.into(),
                args: args.iter().map(|a| a.to_string()).collect(),
                env_keys: env.iter().map(|a| a.to_string()).collect(),
                path_env: Vec::new(),
                env_file: None,
            },
        }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn install_wraps_a_stdio_server_and_keeps_its_command_line_after_the_separator() {
        let facts = stdio("fs", "npx", &["-y", "pkg", "/d"], &["TOKEN", "LOG"]);
        let action = decide_install(&facts, "/usr/bin/airlock", false, &|c| Some(c.into()));
        let (command, args) = apply_to_argv("npx", &strings(&["-y", "pkg", "/d"]), &action);
        assert_eq!(command, "/usr/bin/airlock");
        assert_eq!(
            args,
            strings(&[
                "run",
                "--name",
                "fs",
                "--allow-env=TOKEN,LOG",
                "--",
                "npx",
                "-y",
                "pkg",
                "/d"
            ])
        );
    }

    #[test]
    fn an_entry_with_a_misspelt_command_key_is_told_what_was_meant() {
        assert_eq!(
            neither_command_nor_url(["comand", "args"].into_iter()),
            "neither a `command` nor a url (the key \"comand\": did you mean \"command\"?)"
        );
        assert_eq!(
            neither_command_nor_url(["args", "env"].into_iter()),
            "neither a `command` nor a url"
        );
    }

    #[test]
    fn install_never_wraps_twice_and_uninstall_reverses_it() {
        let original = stdio("my server", "python3", &["s.py"], &[]);
        let action = decide_install(&original, "/opt/airlock", false, &|c| Some(c.into()));
        let (command, args) = apply_to_argv("python3", &strings(&["s.py"]), &action);
        assert_eq!(args[..3], strings(&["run", "--name", "my-server"]));
        let wrapped = stdio(
            "my server",
            &command,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            &[],
        );
        assert_eq!(
            decide_install(&wrapped, "/opt/airlock", false, &|c| Some(c.into())),
            Action::Keep(Kept::AlreadyWrapped)
        );
        // The airlock it was wrapped with is gone (moved, uninstalled): pointed at this one,
        // its arguments kept. Another airlock still there is the user's choice.
        assert_eq!(
            decide_install(&wrapped, "/usr/local/bin/airlock", false, &|_| None),
            Action::Repoint {
                command: "/usr/local/bin/airlock".into()
            }
        );
        assert_eq!(
            decide_install(&wrapped, "/usr/local/bin/airlock", false, &|c| Some(
                c.into()
            )),
            Action::Keep(Kept::WrappedByOther("/opt/airlock".into()))
        );
        let scope = UninstallScope {
            wrapped: None,
            keys_with_maps: true,
            gateway: None,
            airlock: "/usr/local/bin/airlock",
        };
        let undo = decide_uninstall(&wrapped, scope);
        assert_eq!(
            apply_to_argv(&command, &args, &undo),
            ("python3".to_string(), strings(&["s.py"]))
        );
    }

    #[test]
    fn uninstall_touches_only_what_the_install_wrapped() {
        let hand_made = stdio("mine", "airlock", &["run", "--", "node", "x.js"], &[]);
        let names = strings(&["other"]);
        let scope = UninstallScope {
            wrapped: Some(&names),
            keys_with_maps: true,
            gateway: None,
            airlock: "/usr/local/bin/airlock",
        };
        assert_eq!(
            decide_uninstall(&hand_made, scope),
            Action::Keep(Kept::NotOurs)
        );
        let plain = stdio("other", "node", &["x.js"], &[]);
        assert_eq!(
            decide_uninstall(&plain, scope),
            Action::Keep(Kept::NotWrapped)
        );
        // The same key in another map (Claude Code's per-project servers) is another entry.
        let wrapped = stdio("g", "airlock", &["run", "--", "node", "x.js"], &[]);
        let mut in_project = wrapped.clone();
        in_project.map = 1;
        in_project.map_label = "projects./app.mcpServers".into();
        let names = vec![recorded_as(&wrapped), "other-map\u{1f}x".to_string()];
        let scope = UninstallScope {
            wrapped: Some(&names),
            ..scope
        };
        assert!(matches!(
            decide_uninstall(&wrapped, scope),
            Action::Unwrap { .. }
        ));
        assert_eq!(
            decide_uninstall(&in_project, scope),
            Action::Keep(Kept::NotOurs)
        );
        // A record of keys alone (written before) still names the key in any map.
        let legacy = strings(&["g"]);
        let scope = UninstallScope {
            wrapped: Some(&legacy),
            keys_with_maps: false,
            ..scope
        };
        assert!(matches!(
            decide_uninstall(&in_project, scope),
            Action::Unwrap { .. }
        ));
    }

    #[test]
    fn remote_servers_stay_unless_routed_through_the_gateway() {
        let remote = |url: &str, map| EntryFacts {
            map,
            map_label: "mcpServers".into(),
            name: "linear".into(),
            shape: Shape::Remote(RemoteFacts {
                not_carried: Vec::new(),
                url: url.into(),
                sse: false,
                headers: vec![],
            }),
        };
        let plain = remote("https://mcp.example/mcp", 0);
        assert_eq!(
            decide_install(&plain, "airlock", false, &|c| Some(c.into())),
            Action::Keep(Kept::Remote)
        );
        assert_eq!(
            decide_install(&plain, "airlock", true, &|c| Some(c.into())),
            Action::Remove
        );
        assert_eq!(
            decide_install(&remote("https://x/mcp", 1), "airlock", true, &|c| Some(
                c.into()
            )),
            Action::Keep(Kept::RemoteNotMain)
        );
        assert!(matches!(
            decide_install(
                &remote("https://${input:host}/mcp", 0),
                "airlock",
                true,
                &|c| Some(c.into())
            ),
            Action::Keep(Kept::RemoteUnmovable(_))
        ));
    }

    #[test]
    fn airlock_is_recognised_by_its_basename_and_subcommand() {
        let args = strings(&["run", "--name", "x", "--", "npx", "pkg"]);
        assert_eq!(
            airlock_use("/home/me/.cargo/bin/airlock", &args, "/opt/airlock"),
            Some(AirlockUse::Run { inner: 4 })
        );
        // A release asset under its own name is airlock too; another program is not.
        assert_eq!(
            airlock_use("/opt/airlock-v2", &args, "/opt/airlock"),
            Some(AirlockUse::Run { inner: 4 })
        );
        assert_eq!(airlock_use("/usr/bin/npx", &args, "/opt/airlock"), None);
        // The running binary is recognised by its path, whatever its name.
        assert_eq!(
            airlock_use(
                "/opt/airlock-x86_64-linux",
                &args,
                "/opt/airlock-x86_64-linux"
            ),
            Some(AirlockUse::Run { inner: 4 })
        );
        assert_eq!(
            airlock_use("airlock", &strings(&["run", "--"]), "/opt/airlock"),
            None
        );
        assert_eq!(
            airlock_use(
                "airlock",
                &strings(&["serve", "--config", "x"]),
                "/opt/airlock"
            ),
            Some(AirlockUse::Serve)
        );
    }
}
