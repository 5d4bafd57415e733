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
const VALUE_OPTIONS: [&str; 16] = [
    "--from",
    "--with",
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

/// Reads `program args...`.
pub fn anatomy(program: &str, args: &[String]) -> Anatomy {
    let base = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    let base_stem = base.split('.').next().unwrap_or(base);
    let launcher = if PACKAGE_RUNNERS.contains(&base) {
        Launcher::PackageRunner
    } else if INTERPRETERS
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
}
