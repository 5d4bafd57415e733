//! The install step: a server started as `npx -y PKG`, `uvx PKG`, `bunx PKG` or
//! `deno run npm:PKG` works on the first try, with nothing to write, while the server itself never
//! has the network.
//!
//! When the package is not cached, airlock first runs an install step, confined like the server
//! (same sandbox, same uid), whose only network is the package registry the user's own
//! configuration names (read at run time, [`registry`]) and whose only lasting write is airlock's
//! private copy of the cache ([`layers`]): a new overlay layer above the user's real cache, which
//! is never written. The server then starts with the policy's network (default none) and sees
//! the real cache with every finished install layer above it. Each install is audited (`install`
//! event: package, version, integrity hash, registry, layer); its connections are audited like a
//! server's (`net_connect`/`net_close`).
//!
//! Pure: which runner and packages a command line names ([`detect`], [`npm`], [`uv`], [`bun`],
//! [`deno`]), the registry entries ([`registry::host_port`]). Effects: [`step::ensure`].

pub mod bun;
pub mod deno;
mod failure;
pub mod layers;
pub mod npm;
pub mod registry;
pub mod step;
pub mod uv;

use std::path::Path;

use crate::sandbox::{HostFacts, PlanRequest};

/// The command an install step runs once the package is in place: by absolute path, so that no
/// bin of the package (or of a dependency) named `true` runs instead.
pub const TRUE: &str = "/bin/true";
/// The most airlock reads of a lock file or a package's registry metadata that an install left
/// (a confined install wrote it; a package with thousands of versions has metadata of several
/// MiB).
pub const MAX_METADATA_BYTES: u64 = 64 * 1024 * 1024;

pub use step::{FetchError, Fetched, Sink, ensure};

/// A package runner airlock fetches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// `npx [-y] [-p PKG]... PKG ...`: these package specs, installed in `_npx/<hash>`.
    Npx { packages: Vec<String> },
    /// `uvx [--from SPEC] [--with W]... PKG ...` (or `uv tool run ...`).
    Uvx(uv::Uvx),
    /// `bunx [--bun] PKG ...` (or `bun x ...`): installed in `.bunx-<uid>/<spec>`.
    Bunx(bun::Bunx),
    /// `deno run [OPTIONS] npm:SPEC ...`: this spec, in `npm/<registry>/<name>` of deno's cache.
    Deno { spec: String },
}

impl Runner {
    pub fn name(&self) -> &'static str {
        match self {
            Runner::Npx { .. } => "npx",
            Runner::Uvx(_) => "uvx",
            Runner::Bunx(_) => "bunx",
            Runner::Deno { .. } => "deno",
        }
    }

    /// The runtime cache it fills (the profile's overlay name).
    pub fn cache(&self) -> &'static str {
        match self {
            Runner::Npx { .. } => "npm",
            Runner::Uvx(_) => "uv",
            Runner::Bunx(_) => "bun",
            Runner::Deno { .. } => "deno",
        }
    }

    pub fn packages(&self) -> Vec<String> {
        match self {
            Runner::Npx { packages } => packages.clone(),
            Runner::Uvx(uvx) => uvx.packages(),
            Runner::Bunx(bunx) => vec![bunx.spec.clone()],
            Runner::Deno { spec } => vec![spec.clone()],
        }
    }

    /// The package whose version and integrity are audited.
    pub fn package(&self) -> String {
        match self {
            Runner::Npx { packages } => packages
                .first()
                .map(|spec| npm::package_name(spec).to_string())
                .unwrap_or_default(),
            Runner::Uvx(uvx) => uvx.name().to_string(),
            Runner::Bunx(bunx) => bunx.name().to_string(),
            Runner::Deno { spec } => npm::package_name(spec).to_string(),
        }
    }

    /// The directory name of this spec's store ([`layers`]): the record key made safe for a
    /// file name (letters, digits, `.`, `_`, `-`; `@` dropped, `/` and spaces as `+`, anything
    /// else `_`, at most 64 of them) and 12 hex digits of the key's SHA-256, so two keys that
    /// read alike on disk are still two stores.
    pub fn store_name(&self) -> String {
        let key = self.key();
        let readable: String = key
            .chars()
            .filter(|c| *c != '@')
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
                '/' | ' ' => '+',
                _ => '_',
            })
            .take(64)
            .collect();
        let digest = crate::hash::sha256_hex(key.as_bytes());
        format!("{}-{}", readable.trim_start_matches('.'), &digest[..12])
    }

    /// What a finished install of this is recorded under.
    pub fn key(&self) -> String {
        let mut key = self.name().to_string();
        for package in self.packages() {
            key.push(' ');
            key.push_str(&package);
        }
        if let Runner::Uvx(uv::Uvx {
            python: Some(python),
            ..
        }) = self
        {
            key.push_str(" --python ");
            key.push_str(python);
        }
        key
    }
}

/// The runner a server's command is, if airlock fetches for it: by the program's name (or its
/// link target's), `npx`, `uvx`, `bunx`, `deno`, or `uv tool run`/`uv tool x`, `bun x`.
pub fn detect(program: &Path, canonical: Option<&Path>, args: &[String]) -> Option<Runner> {
    let names: Vec<&str> = [Some(program), canonical]
        .into_iter()
        .flatten()
        .filter_map(|path| path.file_name()?.to_str())
        .collect();
    let is = |name: &str| names.contains(&name);
    if is("npx") || is("npx-cli.js") {
        return npm::packages(args).map(|packages| Runner::Npx { packages });
    }
    if is("uvx") {
        return uv::parse(args).map(Runner::Uvx);
    }
    if is("uv")
        && args.first().map(String::as_str) == Some("tool")
        && matches!(args.get(1).map(String::as_str), Some("run" | "x"))
    {
        return uv::parse(&args[2..]).map(Runner::Uvx);
    }
    if is("bunx") {
        return bun::parse(args, false).map(Runner::Bunx);
    }
    if is("bun") && args.first().map(String::as_str) == Some("x") {
        return bun::parse(&args[1..], true).map(Runner::Bunx);
    }
    if is("deno") {
        return deno::parse(args).map(|spec| Runner::Deno { spec });
    }
    None
}

/// What to do when a `bunx PKG`, `bun x PKG` or `deno run ... npm:PKG` server airlock did not
/// fetch for fails (a command line it could not read with certainty, or no private cache view):
/// its package must already be in the runner's cache, which the server reads but cannot fill (it
/// has no network). `None` for any other command. Pure.
pub fn unfetched_hint(program: &Path, args: &[String]) -> Option<String> {
    let name = program.file_name()?.to_str()?;
    let first_word = |words: &[String]| words.iter().find(|word| !word.starts_with('-')).cloned();
    let (package, cache, again) = match name {
        "bunx" => {
            let package = first_word(args)?;
            let again = format!("bunx {package}");
            (package, "bun's cache", again)
        }
        "bun" if args.first().map(String::as_str) == Some("x") => {
            let package = first_word(&args[1..])?;
            let again = format!("bunx {package}");
            (package, "bun's cache", again)
        }
        "deno" => {
            let package = args.iter().find(|word| word.starts_with("npm:"))?.clone();
            let again = format!("deno {}", args.join(" "));
            (package, "deno's cache", again)
        }
        _ => return None,
    };
    Some(format!(
        "airlock did not install {package} for this command line; if it is not in {cache} yet, run `{again}` once outside airlock (it fills the cache, which the server reads), then start the server again"
    ))
}

/// What an install step needs: the runner, and the server's own plan request and host facts
/// (the install is planned as the server is, with the install's command and network).
#[derive(Debug, Clone)]
pub struct FetchPlan {
    pub runner: Runner,
    pub request: PlanRequest,
    pub host: HostFacts,
    /// The user's real cache (the overlay's lowest layer): a package there needs no install.
    pub real_cache: std::path::PathBuf,
    /// The uid the server and its install run as (bunx keeps packages per uid).
    pub uid: u32,
}

impl FetchPlan {
    /// The private copy of the cache this install writes to.
    pub fn store(&self) -> layers::Store {
        layers::Store::new(
            &self.request.dirs.servers_dir(),
            &self.request.server,
            self.runner.cache(),
            &self.runner.store_name(),
        )
    }

    /// Whether the package is in the server's cache view already (a few `stat`s).
    pub fn is_cached(&self) -> bool {
        step::is_cached(self, &self.store())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn npx_and_uvx_command_lines_are_fetched_for() {
        let npx = detect(
            Path::new("/usr/bin/npx"),
            Some(Path::new("/usr/lib/node_modules/npm/bin/npx-cli.js")),
            &words("-y @modelcontextprotocol/server-filesystem /d"),
        )
        .unwrap();
        assert_eq!(npx.cache(), "npm");
        assert_eq!(npx.package(), "@modelcontextprotocol/server-filesystem");
        assert_eq!(npx.key(), "npx @modelcontextprotocol/server-filesystem");
        let uvx = detect(
            Path::new("/home/me/.local/bin/uvx"),
            None,
            &words("mcp-server-time"),
        )
        .unwrap();
        assert_eq!(uvx.cache(), "uv");
        assert_eq!(uvx.key(), "uvx mcp-server-time");
        let uv = detect(
            Path::new("/x/uv"),
            None,
            &words("tool run --python 3.12 mcp-server-time"),
        )
        .unwrap();
        assert_eq!(uv.key(), "uvx mcp-server-time --python 3.12");
        assert_eq!(
            detect(Path::new("/usr/bin/node"), None, &words("server.js")),
            None
        );
        assert_eq!(
            detect(Path::new("/usr/bin/npx"), None, &words("--no pkg")),
            None
        );
        let bunx = detect(
            Path::new("/home/me/.bun/bin/bunx"),
            Some(Path::new("/home/me/.bun/bin/bun")),
            &words("--bun @scope/server@1 /d"),
        )
        .unwrap();
        assert_eq!(bunx.cache(), "bun");
        assert_eq!(bunx.key(), "bunx @scope/server@1");
        assert_eq!(bunx.package(), "@scope/server");
        let bun_x = detect(Path::new("/usr/bin/bun"), None, &words("x pkg")).unwrap();
        assert_eq!(
            bun_x,
            Runner::Bunx(bun::Bunx {
                spec: "pkg".into(),
                bun_x: true
            })
        );
        assert_eq!(
            detect(Path::new("/usr/bin/bun"), None, &words("server.ts")),
            None
        );
        let deno = detect(
            Path::new("/usr/bin/deno"),
            None,
            &words("run -A npm:@scope/server@1 /d"),
        )
        .unwrap();
        assert_eq!(deno.cache(), "deno");
        assert_eq!(deno.key(), "deno @scope/server@1");
        assert_eq!(deno.package(), "@scope/server");
        assert_eq!(
            detect(Path::new("/usr/bin/deno"), None, &words("run server.ts")),
            None
        );
    }

    #[test]
    fn runners_airlock_does_not_fetch_for_say_how_to_fill_their_cache() {
        let hint = |program: &str, line: &str| unfetched_hint(Path::new(program), &words(line));
        let bunx = hint("/home/me/.bun/bin/bunx", "--bun @scope/server /d").unwrap();
        assert!(
            bunx.contains("airlock did not install @scope/server for this command line; if it is not in bun's cache")
                && bunx.contains("run `bunx @scope/server` once outside airlock"),
            "{bunx}"
        );
        let bun_x = hint("/usr/bin/bun", "x pkg").unwrap();
        assert!(bun_x.contains("run `bunx pkg`"), "{bun_x}");
        let deno = hint("/usr/bin/deno", "run -A npm:@scope/server@1 /d").unwrap();
        assert!(
            deno.contains("airlock did not install npm:@scope/server@1 for this command line; if it is not in deno's cache")
                && deno.contains("run `deno run -A npm:@scope/server@1 /d`"),
            "{deno}"
        );
        assert_eq!(hint("/usr/bin/deno", "run server.ts"), None);
        assert_eq!(hint("/usr/bin/bun", "server.ts"), None);
        assert_eq!(hint("/usr/bin/npx", "-y pkg"), None);
    }
}
