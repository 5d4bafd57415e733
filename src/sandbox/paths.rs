//! airlock's own directories and the file-system facts about a command, gathered before the pure
//! planner runs (this module reads the disk; [`super::plan`] does not).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::paths::{UserDirs, VarSource};

/// Where airlock keeps its own things. None of it is ever granted to a server except the
/// server's private `servers/<name>/{home,tmp}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AirlockDirs {
    /// `$XDG_STATE_HOME/airlock` (default `~/.local/state/airlock`).
    pub state_dir: PathBuf,
    /// `$XDG_CONFIG_HOME/airlock` (default `~/.config/airlock`).
    pub config_dir: Option<PathBuf>,
    pub audit_path: Option<PathBuf>,
    /// The user's real home (for `~` in grants; never granted itself).
    pub home: Option<PathBuf>,
    /// Policy files that were loaded (never granted).
    pub policy_files: Vec<PathBuf>,
    /// Parent of the per-server private dirs; `None` = `state_dir/servers`.
    pub servers_dir: Option<PathBuf>,
    /// The organisation's policy directory (`$AIRLOCK_ORG_POLICY_DIR`, default `/etc/airlock`):
    /// never granted, even when it holds no policy yet (a file planted there would become one).
    #[serde(default)]
    pub org_policy_dir: Option<PathBuf>,
    /// airlock's own executable, links resolved, and the link `PATH` finds to it (a host that
    /// starts `"command": "airlock"` starts that): no server may write either (a host would
    /// start what it wrote there, unconfined).
    #[serde(default)]
    pub programs: Vec<PathBuf>,
    /// The server config a gateway (or `check`, `test`) was started from: never granted, as a
    /// policy file is not (a server that rewrote it would change what starts next time, and
    /// how confined).
    #[serde(default)]
    pub config_files: Vec<PathBuf>,
    /// The MCP hosts' own config files of this user (Claude Desktop's, `~/.cursor/mcp.json`,
    /// ...), with the host's name: never granted, since a server that rewrote one would be
    /// started unwrapped by its host next time.
    #[serde(default)]
    pub host_configs: Vec<(String, PathBuf)>,
}

/// airlock's own executable (links resolved) and, when `PATH` finds this binary as `airlock`
/// through a link, that link (its directory resolved, the link itself kept).
fn own_programs(env: &(impl VarSource + ?Sized)) -> Vec<PathBuf> {
    let Ok(this) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return Vec::new();
    };
    let path_var = env.var("PATH").map(std::ffi::OsString::from);
    let link = crate::paths::resolve_command("airlock", path_var.as_deref(), Path::new("/"))
        .ok()
        .filter(|found| std::fs::canonicalize(found).is_ok_and(|found| found == this))
        .and_then(|found| {
            let dir = std::fs::canonicalize(found.parent()?).ok()?;
            Some(dir.join(found.file_name()?))
        })
        .filter(|link| *link != this);
    std::iter::once(this).chain(link).collect()
}

/// The hosts' user-scope config files where this environment puts them, and where the default
/// places are too (a `CODEX_HOME` that airlock's environment names must not un-protect
/// `~/.codex/config.toml`, which Codex reads when it is started without it).
fn host_configs(env: &(impl VarSource + ?Sized)) -> Vec<(String, PathBuf)> {
    use crate::install::{HostEnv, hosts};
    let named = HostEnv::from_env(env, Path::new("/"));
    let defaults = HostEnv {
        codex_home: None,
        ..named.clone()
    };
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for (host, path) in hosts::user_files(&named)
        .into_iter()
        .chain(hosts::user_files(&defaults))
    {
        if !files.iter().any(|(_, have)| *have == path) {
            files.push((host.to_string(), path));
        }
    }
    files
}

impl AirlockDirs {
    /// Reads `HOME`, `XDG_STATE_HOME` and `XDG_CONFIG_HOME` from the given environment.
    ///
    /// When airlock runs as root without `XDG_STATE_HOME`, the private dirs go under
    /// `/var/lib/airlock/servers`: the server runs as nobody, who cannot traverse `/root` (0700).
    /// Without any home at all, the state dir is `/var/lib/airlock`.
    pub fn from_env(env: &(impl VarSource + ?Sized), is_root: bool) -> Self {
        let user = UserDirs::from_env(env);
        let state_dir = user
            .state_dir()
            .unwrap_or_else(|| PathBuf::from("/var/lib/airlock"));
        let servers_dir = (is_root && user.xdg_state_home.is_none())
            .then(|| PathBuf::from("/var/lib/airlock/servers"));
        AirlockDirs {
            state_dir,
            config_dir: user.config_dir(),
            audit_path: None,
            home: user.home,
            policy_files: Vec::new(),
            servers_dir,
            // Where policy discovery looks (`policy::discover`).
            org_policy_dir: Some(
                crate::policy::discover::org_dir_from(env)
                    .unwrap_or_else(|| PathBuf::from(crate::policy::discover::DEFAULT_ORG_DIR)),
            ),
            programs: own_programs(env),
            config_files: Vec::new(),
            host_configs: host_configs(env),
        }
    }

    pub fn servers_dir(&self) -> PathBuf {
        self.servers_dir
            .clone()
            .unwrap_or_else(|| self.state_dir.join("servers"))
    }
}

/// Whether `dir` holds an executable `python3` or `python` (what a venv's `home =` names).
fn holds_python(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    ["python3", "python"].iter().any(|name| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// File-system facts about the command that decide its derived read grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedPaths {
    /// The program with every symlink resolved (`/usr/bin/npx` -> `.../npm/bin/npx-cli.js`,
    /// `venv/bin/python` -> the base interpreter).
    pub program_canonical: Option<PathBuf>,
    /// The virtualenv the program belongs to (the dir with `pyvenv.cfg`).
    pub venv_root: Option<PathBuf>,
    /// `home =` of `pyvenv.cfg`, canonicalised: the base interpreter's bin dir.
    pub venv_base: Option<PathBuf>,
    /// For `node script.js` / `python server.py`: what the script may read (see [`script_root`]),
    /// from the script's path with its symlinks resolved.
    pub script_root: Option<PathBuf>,
    /// The same from the script's path as written (absolute), when it differs: the server is
    /// given that path, so it must resolve in the server's root too.
    #[serde(default)]
    pub script_root_as_written: Option<PathBuf>,
    /// The script's path as written (absolute), when its symlinks resolve elsewhere: what
    /// [`Self::script_root`] was derived through.
    #[serde(default)]
    pub script_as_written: Option<PathBuf>,
    /// The script itself (with its symlinks resolved, and as written when that differs), when
    /// no directory of it may be granted: its directory is, or contains, the home
    /// (`python3 ~/server.py`). It is granted alone, and the plan says so.
    #[serde(default)]
    pub script_alone: Vec<PathBuf>,
    /// The Python project the server's code comes from, when it is not a script the root above
    /// covers: uv's `--directory`/`--project`, the project a `.venv` sits in (an editable
    /// install, `python -m pkg` from its checkout), the directory a `-m` module is found in.
    /// Granted read-only, never the home (see [`project_root`]).
    #[serde(default)]
    pub project_root: Option<PathBuf>,
    /// Index of the first of the server's own arguments (after the package, script or module;
    /// see `crate::paths::anatomy`).
    #[serde(default)]
    pub own_arguments_from: usize,
    /// The existing paths among the server's own arguments.
    #[serde(default)]
    pub arguments: Vec<super::arguments::ArgumentPath>,
    /// The program's interpreter and Homebrew prefix, if any.
    #[serde(default)]
    pub runtime: super::layouts::RuntimeFacts,
}

impl ResolvedPaths {
    /// Looks at the disk: canonical program, venv, the first non-flag argument if it is a
    /// script file, the paths among the server's own arguments, the program's interpreter.
    /// `env` is airlock's environment (its `PATH` finds a `#!/usr/bin/env NAME` interpreter).
    pub fn inspect(
        program: &Path,
        args: &[String],
        cwd: Option<&Path>,
        env: &[(String, String)],
        home: Option<&Path>,
    ) -> Self {
        let program_canonical = std::fs::canonicalize(program).ok().filter(|c| c != program);
        let venv_of = |path: &Path| {
            path.parent()
                .and_then(Path::parent)
                .filter(|dir| dir.join("pyvenv.cfg").is_file())
                .map(Path::to_path_buf)
        };
        let mut runtime = super::layouts::inspect(program, program_canonical.as_deref(), env, cwd);
        // The program's own venv, else the venv its interpreter lives in (a `uv tool` or `pipx`
        // script whose first line names the venv's python).
        let venv_root =
            venv_of(program).or_else(|| runtime.interpreter.as_deref().and_then(venv_of));
        let anatomy = crate::paths::anatomy(&program.to_string_lossy(), args);
        // uv changes into its `--directory` before it runs the script.
        let against_cwd = |path: &str| match cwd {
            Some(cwd) if !Path::new(path).is_absolute() => cwd.join(path),
            _ => PathBuf::from(path),
        };
        // uv's own words: up to the script or module it runs (the server's own options after it
        // are the server's, whatever their names).
        let program_text = program.to_string_lossy();
        let uv_words = &args[..anatomy.server_word.unwrap_or(args.len()).min(args.len())];
        let uv_option = |name: &str| {
            crate::paths::uv_option(&program_text, uv_words, name)
                .map(|dir| crate::paths::normalize_path(&against_cwd(&dir)))
        };
        let uv_directory = uv_option("--directory");
        let start_dir = uv_directory.as_deref().or(cwd);
        // The home as written and as it resolves: a script reached through a link to the home's
        // real path must not make the real home its root.
        let homes: Vec<PathBuf> = home
            .into_iter()
            .flat_map(|home| [Some(home.to_path_buf()), std::fs::canonicalize(home).ok()])
            .flatten()
            .collect();
        let module = anatomy
            .server_word
            .filter(|_| anatomy.module)
            .and_then(|word| args.get(word));
        let project_root = project_root(&ProjectFacts {
            uv_project: uv_directory.clone().or_else(|| uv_option("--project")),
            venv_root: venv_root.as_deref(),
            module: module.map(String::as_str),
            start_dir,
            homes: &homes,
        });
        // `uv run` in a project runs the project's own `.venv` (whatever venv uv itself was
        // installed in), whose interpreter must resolve; so does a program in no venv.
        let project_venv = project_root
            .as_ref()
            .map(|project| project.join(".venv"))
            .filter(|venv| venv.join("pyvenv.cfg").is_file());
        let runs_in_project = program.file_name().is_some_and(|name| name == "uv");
        let venv_root = if runs_in_project {
            project_venv.or(venv_root)
        } else {
            venv_root.or(project_venv)
        };
        let venv_root = venv_root.as_deref();
        let venv_base = venv_root.and_then(|root| {
            let cfg = crate::paths::read_small_text(&root.join("pyvenv.cfg"), 64 * 1024).ok()?;
            let home_line = cfg.lines().find_map(|line| {
                let (key, value) = line.split_once('=')?;
                (key.trim() == "home").then(|| value.trim().to_string())
            })?;
            // Only a directory that holds a Python interpreter: `pyvenv.cfg` is a file the server
            // may have written (a venv inside a write grant), and `home = ~/.ssh` would otherwise
            // become a read grant of a later start.
            std::fs::canonicalize(home_line)
                .ok()
                .filter(|dir| holds_python(dir))
        });
        // The venv and its base are granted as their entries but runtime-wide config.
        let base_prefix = venv_base
            .as_ref()
            .and_then(|base| super::grants::install_prefix(&base.join("python")));
        super::layouts::note_config_entries(
            &mut runtime,
            venv_root.into_iter().chain(base_prefix.as_deref()),
        );
        // Only an interpreter's server word (`node x.js`, `uv run x.py`) is a script: a
        // package runner's names a package, and for any other program a file on the command
        // line is data, which `grant_args` decides about.
        let script = anatomy
            .server_word
            .filter(|_| anatomy.launcher == crate::paths::Launcher::Interpreter && !anatomy.module)
            .and_then(|word| args.get(word))
            .map(|arg| match start_dir {
                Some(dir) if !Path::new(arg).is_absolute() => dir.join(arg),
                _ => PathBuf::from(arg),
            })
            .filter(|path| path.is_absolute() && path.is_file())
            .map(|path| crate::paths::normalize_path(&path));
        let canonical = script
            .as_ref()
            .and_then(|path| std::fs::canonicalize(path).ok());
        let has_package_json = |dir: &Path| dir.join("package.json").is_file();
        let resolved_root = canonical
            .as_ref()
            .and_then(|script| script_root(script, &homes, has_package_json));
        let script_as_written = script.filter(|script| Some(script) != canonical.as_ref());
        let written_root = script_as_written
            .as_ref()
            .and_then(|script| script_root(script, &homes, has_package_json))
            .filter(|root| Some(root) != resolved_root.as_ref());
        let script_alone = match (&canonical, &resolved_root) {
            (Some(canonical), None) => std::iter::once(canonical.clone())
                .chain(script_as_written.clone())
                .collect(),
            _ => Vec::new(),
        };
        let own_arguments_from = anatomy.own_arguments_start(args.len());
        let project_root = project_root.filter(|root| resolved_root.as_ref() != Some(root));
        ResolvedPaths {
            program_canonical,
            venv_root: venv_root.map(Path::to_path_buf),
            venv_base,
            script_root: resolved_root,
            script_root_as_written: written_root,
            script_as_written,
            script_alone,
            project_root,
            own_arguments_from,
            arguments: super::arguments::inspect(args, own_arguments_from, cwd, home),
            runtime,
        }
    }
}

/// What [`project_root`] looks at.
struct ProjectFacts<'a> {
    /// uv's `--directory` or `--project`, absolute.
    uv_project: Option<PathBuf>,
    venv_root: Option<&'a Path>,
    /// The module of `python -m MODULE`.
    module: Option<&'a str>,
    /// Where the server starts (uv's `--directory`, else its working directory).
    start_dir: Option<&'a Path>,
    /// The home as written and as it resolves.
    homes: &'a [PathBuf],
}

/// The Python project the server's code is in (looks at the disk): uv's project directory; the
/// project a virtualenv sits in (its parent holds `pyproject.toml`, `setup.py` or `setup.cfg`);
/// the start directory, when it is such a project, that a `-m` module is found in (`pkg/`,
/// `pkg.py`, `src/pkg/`). Never a home nor a directory holding one, `/`, or a system path.
fn project_root(facts: &ProjectFacts<'_>) -> Option<PathBuf> {
    let is_project = |dir: &Path| {
        ["pyproject.toml", "setup.py", "setup.cfg"]
            .iter()
            .any(|file| dir.join(file).is_file())
    };
    // A module name is dotted identifiers: nothing in it may walk the filesystem.
    let is_module_name = |module: &str| {
        module
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_'))
    };
    let holds_module = |dir: &Path, module: &str| {
        let top = module.split('.').next().unwrap_or(module);
        is_module_name(module)
            && is_project(dir)
            && (dir.join(top).is_dir()
                || dir.join(format!("{top}.py")).is_file()
                || dir.join("src").join(top).is_dir())
    };
    let found = facts
        .uv_project
        .clone()
        .filter(|dir| dir.is_dir())
        .or_else(|| {
            facts
                .venv_root
                .and_then(Path::parent)
                .filter(|dir| is_project(dir))
                .map(Path::to_path_buf)
        })
        .or_else(|| {
            let (module, dir) = (facts.module?, facts.start_dir?);
            holds_module(dir, module).then(|| dir.to_path_buf())
        })?;
    let found = crate::paths::normalize_path(&found);
    // Someone's home (another user's, when root runs airlock for itself) or a system path is
    // never a project root; a command-line path there is refused the same way. Judged as
    // written and where its links lead (`/tmp/p -> /etc`).
    let refused = |dir: &Path| {
        facts.homes.iter().any(|home| home.starts_with(dir))
            || dir.parent() == Some(Path::new("/home"))
            || dir == Path::new("/root")
            || dir.parent().is_none()
            || super::arguments::is_system_path(dir)
    };
    let resolved = std::fs::canonicalize(&found).unwrap_or_else(|_| found.clone());
    (!refused(&found) && !refused(&resolved)).then_some(found)
}

/// What a script may read: inside `node_modules`, the outermost `node_modules` dir (the package
/// and everything it `require`s); else the nearest ancestor with a `package.json` (the project,
/// its `node_modules` included); else the script's own directory. Never the home itself, nor a
/// directory holding it (`homes`: the home as written and as it resolves).
pub fn script_root(
    script: &Path,
    homes: &[PathBuf],
    has_package_json: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let mut outermost_node_modules = None;
    let mut current = PathBuf::new();
    for component in script.components() {
        current.push(component);
        if component.as_os_str() == "node_modules" && outermost_node_modules.is_none() {
            outermost_node_modules = Some(current.clone());
        }
    }
    if let Some(dir) = outermost_node_modules {
        return Some(dir);
    }
    let script_dir = script.parent()?;
    let stop = |dir: &Path| dir.parent().is_none() || homes.iter().any(|h| h.starts_with(dir));
    let mut dir = script_dir;
    loop {
        if stop(dir) {
            break;
        }
        if has_package_json(dir) {
            return Some(dir.to_path_buf());
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => break,
        }
    }
    (!stop(script_dir)).then(|| script_dir.to_path_buf())
}
