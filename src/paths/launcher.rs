//! How a server's command line reads: which word names the server (the package a runner fetches,
//! the script or module an interpreter runs) and where the server's own arguments begin. One
//! reading for every rule that needs it: the derived server name, and the paths on the server's
//! own command line that are granted (pure).

use std::path::Path;

/// Launchers whose first positional argument names the package that is the server.
pub const PACKAGE_RUNNERS: [&str; 6] = ["npx", "bunx", "uvx", "pipx", "pnpx", "dlx"];
/// Interpreters whose first positional argument is the server's script (or `-m module`).
pub const INTERPRETERS: [&str; 9] = [
    "node", "python", "python3", "deno", "bun", "ruby", "perl", "php", "uv",
];
/// Subcommands of launchers that come before the package or script.
const SUBCOMMANDS: [&str; 5] = ["run", "exec", "x", "dlx", "tool"];
/// Options of launchers that take a value (so the value is not the package or script).
const VALUE_OPTIONS: [&str; 21] = [
    "--from",
    "--with",
    "--with-editable",
    "--with-requirements",
    // uv's: the project's directory (`uv --directory ~/weather run weather.py`, the official
    // quickstart) and its pyproject, and an env file.
    "--directory",
    "--project",
    "--env-file",
    "--python",
    "-p",
    "--package",
    "--spec",
    "-c",
    "--cwd",
    "-r",
    "--require",
    "--import",
    "--loader",
    "-X",
    "-W",
    "--index",
    "--default-index",
];

/// What kind of program starts the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// `npx`, `uvx`, `bunx`, `pipx run`, ...: the server is a package.
    PackageRunner,
    /// `node`, `python3`, `uv run`, `deno run`, ...: the server is a script or module.
    Interpreter,
    /// The server is the program itself.
    Program,
}

/// The reading of one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anatomy {
    pub launcher: Launcher,
    /// Index (into the arguments, not counting the program) of the word that names the server:
    /// the package, the script, or the module after `-m`.
    pub server_word: Option<usize>,
    /// The server word is a module (`python -m NAME`).
    pub module: bool,
}

impl Anatomy {
    /// Index of the first of the server's own arguments: after the package, script or module;
    /// all of them for a plain program; none when a launcher names no server.
    pub fn own_arguments_start(&self, count: usize) -> usize {
        match (self.launcher, self.server_word) {
            (Launcher::Program, _) => 0,
            (_, Some(word)) => word + 1,
            (_, None) => count,
        }
    }
}

/// The program's file name, and its name up to the first dot.
fn base_names(program: &str) -> (&str, &str) {
    let base = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    (base, base.split('.').next().unwrap_or(base))
}

/// Reads `program args...`. A command that `uv run` starts (`uv run --with mcp python
/// server.py`, `uv run mcp run server.py`) is read in turn: its script names the server.
pub fn anatomy(program: &str, args: &[String]) -> Anatomy {
    let outer = anatomy_of_one(program, args);
    let (_, stem) = base_names(program);
    if stem != "uv" || outer.module {
        return outer;
    }
    let Some(word) = outer.server_word else {
        return outer;
    };
    let (_, inner_stem) = base_names(&args[word]);
    let runs_a_command =
        (INTERPRETERS.contains(&inner_stem) || inner_stem == "mcp") && !args[word].ends_with(".py");
    if !runs_a_command {
        return outer;
    }
    let inner = anatomy_of_one(&args[word], &args[word + 1..]);
    match inner.server_word {
        Some(inner_word) if inner.launcher == Launcher::Interpreter => Anatomy {
            launcher: Launcher::Interpreter,
            server_word: Some(word + 1 + inner_word),
            module: inner.module,
        },
        _ => outer,
    }
}

/// The value of one of uv's own options (`--directory`, `--project`) when `program` is uv.
/// `args` must be uv's own words only, up to the script it runs: an option of the same name
/// after the script is the server's, not uv's (`uv run server.py --project /etc`).
pub fn uv_option(program: &str, args: &[String], name: &str) -> Option<String> {
    (base_names(program).1 == "uv")
        .then(|| option_value(args, name))
        .flatten()
}

/// The value of `--NAME VALUE` or `--NAME=VALUE` among `args` (before a `--`).
pub fn option_value(args: &[String], name: &str) -> Option<String> {
    let mut words = args.iter();
    let with_equals = format!("{name}=");
    while let Some(word) = words.next() {
        if word == name {
            return words.next().cloned();
        }
        if let Some(value) = word.strip_prefix(&with_equals) {
            return Some(value.to_string());
        }
        if word == "--" {
            break;
        }
    }
    None
}

fn anatomy_of_one(program: &str, args: &[String]) -> Anatomy {
    let (base, base_stem) = base_names(program);
    // The Python SDK's `mcp run server.py` (what `mcp install` writes) runs a script.
    let sdk_runner = base_stem == "mcp" && args.first().map(String::as_str) == Some("run");
    let launcher = if PACKAGE_RUNNERS.contains(&base) {
        Launcher::PackageRunner
    } else if sdk_runner
        || INTERPRETERS
            .iter()
            .any(|i| base_stem == *i || base.starts_with(i))
    {
        Launcher::Interpreter
    } else {
        return Anatomy {
            launcher: Launcher::Program,
            server_word: None,
            module: false,
        };
    };
    let mut index = 0;
    while index < args.len() {
        let arg = args[index].as_str();
        if arg == "-m" && index + 1 < args.len() {
            return Anatomy {
                launcher,
                server_word: Some(index + 1),
                module: true,
            };
        }
        if VALUE_OPTIONS.contains(&arg) {
            index += 2;
            continue;
        }
        if arg.starts_with('-') || SUBCOMMANDS.contains(&arg) {
            index += 1;
            continue;
        }
        return Anatomy {
            launcher,
            server_word: Some(index),
            module: false,
        };
    }
    Anatomy {
        launcher,
        server_word: None,
        module: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(line: &str) -> (Option<String>, Vec<String>) {
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        let reading = anatomy(&words[0], &words[1..]);
        let args = &words[1..];
        let own = args[reading.own_arguments_start(args.len())..].to_vec();
        (reading.server_word.map(|i| args[i].clone()), own)
    }

    #[test]
    fn the_servers_own_arguments_follow_the_package_script_or_module() {
        assert_eq!(
            start("npx -y @modelcontextprotocol/server-filesystem /d ~/e"),
            (
                Some("@modelcontextprotocol/server-filesystem".into()),
                vec!["/d".into(), "~/e".into()]
            )
        );
        assert_eq!(
            start("uvx --from mcp-server-git==1 mcp-server-git --repository ."),
            (
                Some("mcp-server-git".into()),
                vec!["--repository".into(), ".".into()]
            )
        );
        assert_eq!(
            start("/usr/bin/python3 -m mcp_server_time --tz UTC"),
            (
                Some("mcp_server_time".into()),
                vec!["--tz".into(), "UTC".into()]
            )
        );
        assert_eq!(
            start("node --import ./hook.mjs build/index.js /srv"),
            (Some("build/index.js".into()), vec!["/srv".into()])
        );
        assert_eq!(
            start("/opt/github-mcp-server stdio /x"),
            (None, vec!["stdio".into(), "/x".into()])
        );
        assert_eq!(start("npx -y"), (None, vec![]));
    }

    #[test]
    fn uvs_own_options_are_read_in_both_spellings_and_only_for_uv() {
        let words =
            |line: &str| -> Vec<String> { line.split_whitespace().map(String::from).collect() };
        let dir = |program: &str, line: &str| uv_option(program, &words(line), "--directory");
        assert_eq!(
            dir("/usr/bin/uv", "--directory /p/w run w.py"),
            Some("/p/w".into())
        );
        assert_eq!(dir("uv", "--directory=rel run w.py"), Some("rel".into()));
        assert_eq!(dir("uvx", "--directory /p x"), None);
        assert_eq!(dir("node", "s.js --directory /p"), None);
        assert_eq!(dir("uv", "run -- x --directory /p"), None);
    }

    #[test]
    fn a_command_uv_runs_is_read_for_its_script() {
        // The official quickstart: the project's directory is an option's value, not the script.
        assert_eq!(
            start("uv --directory /p/weather run weather.py"),
            (Some("weather.py".into()), vec![])
        );
        assert_eq!(
            start("uv run --with mcp python /p/a/server.py --flag"),
            (Some("/p/a/server.py".into()), vec!["--flag".into()])
        );
        // What the Python SDK's `mcp install` writes.
        assert_eq!(
            start("uv run --with mcp[cli] mcp run /p/b/server.py"),
            (Some("/p/b/server.py".into()), vec![])
        );
        assert_eq!(
            start("/p/.venv/bin/mcp run /p/c/server.py"),
            (Some("/p/c/server.py".into()), vec![])
        );
        assert_eq!(
            start("uv run python -m weather /d"),
            (Some("weather".into()), vec!["/d".into()])
        );
        // A script uv runs directly stays the server word.
        assert_eq!(
            start("uv run server.py /d"),
            (Some("server.py".into()), vec!["/d".into()])
        );
        // A program named like a server is not an SDK runner without `run`.
        assert_eq!(
            start("/usr/local/bin/mcp-server-git --repository /r"),
            (None, vec!["--repository".into(), "/r".into()])
        );
    }
}
