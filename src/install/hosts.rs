//! What airlock knows about each MCP host: where its config files are on Linux, which format
//! they are in, where the server map sits inside them, and which keys make an entry remote.
//! Data only; docs/hosts.md explains each row and where it comes from.

/// A config file format, and how airlock edits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON, or JSON with comments and trailing commas (Zed, VS Code): edited by splicing text.
    Json,
    /// TOML (Codex CLI): edited with `toml_edit`, which keeps comments and layout.
    Toml,
}

/// Whose file it is: the user's (everywhere) or one project's (the current directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    User,
    Project,
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scope::User => "user",
            Scope::Project => "project",
        })
    }
}

/// The directory a host file is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// `$HOME`.
    Home,
    /// `$XDG_CONFIG_HOME`, else `$HOME/.config` (Electron apps and Zed follow it on Linux).
    XdgConfig,
    /// `$CODEX_HOME`, else `$HOME/.codex`.
    CodexHome,
    /// The project directory (the current directory, or `--project DIR`).
    Project,
}

/// One config file of a host.
#[derive(Debug, Clone, Copy)]
pub struct HostFile {
    pub scope: Scope,
    pub base: Base,
    pub relative: &'static str,
    pub format: Format,
    /// Key paths of the server maps in the file, first the main one. `*` stands for every key
    /// at that level (Claude Code keeps per-project servers under `projects.<dir>.mcpServers`).
    pub server_maps: &'static [&'static [&'static str]],
}

/// One MCP host.
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// What the user types: `airlock install cursor`.
    pub id: &'static str,
    pub name: &'static str,
    pub files: &'static [HostFile],
    /// Keys whose string value makes an entry a remote server (besides a `type` of http/sse).
    pub remote_keys: &'static [&'static str],
    /// Remote keys that mean the legacy HTTP+SSE transport rather than Streamable HTTP.
    pub sse_keys: &'static [&'static str],
}

const MCP_SERVERS: &[&[&str]] = &[&["mcpServers"]];

/// Every host `airlock install` knows, in the order `airlock install` lists them.
pub const HOSTS: &[Host] = &[
    Host {
        id: "claude-desktop",
        name: "Claude Desktop",
        files: &[HostFile {
            scope: Scope::User,
            base: Base::XdgConfig,
            relative: "Claude/claude_desktop_config.json",
            format: Format::Json,
            server_maps: MCP_SERVERS,
        }],
        remote_keys: &["url"],
        sse_keys: &[],
    },
    Host {
        id: "claude-code",
        name: "Claude Code",
        files: &[
            HostFile {
                scope: Scope::User,
                base: Base::Home,
                relative: ".claude.json",
                format: Format::Json,
                server_maps: &[&["mcpServers"], &["projects", "*", "mcpServers"]],
            },
            HostFile {
                scope: Scope::Project,
                base: Base::Project,
                relative: ".mcp.json",
                format: Format::Json,
                server_maps: MCP_SERVERS,
            },
        ],
        remote_keys: &["url"],
        sse_keys: &[],
    },
    Host {
        id: "cursor",
        name: "Cursor",
        files: &[
            HostFile {
                scope: Scope::User,
                base: Base::Home,
                relative: ".cursor/mcp.json",
                format: Format::Json,
                server_maps: MCP_SERVERS,
            },
            HostFile {
                scope: Scope::Project,
                base: Base::Project,
                relative: ".cursor/mcp.json",
                format: Format::Json,
                server_maps: MCP_SERVERS,
            },
        ],
        remote_keys: &["url"],
        sse_keys: &[],
    },
    Host {
        id: "vscode",
        name: "VS Code",
        files: &[
            HostFile {
                scope: Scope::User,
                base: Base::XdgConfig,
                relative: "Code/User/mcp.json",
                format: Format::Json,
                server_maps: &[&["servers"]],
            },
            HostFile {
                scope: Scope::User,
                base: Base::XdgConfig,
                relative: "Code/User/settings.json",
                format: Format::Json,
                server_maps: &[&["mcp", "servers"]],
            },
            HostFile {
                scope: Scope::Project,
                base: Base::Project,
                relative: ".vscode/mcp.json",
                format: Format::Json,
                server_maps: &[&["servers"]],
            },
        ],
        remote_keys: &["url"],
        sse_keys: &[],
    },
    Host {
        id: "windsurf",
        name: "Windsurf",
        files: &[HostFile {
            scope: Scope::User,
            base: Base::Home,
            relative: ".codeium/windsurf/mcp_config.json",
            format: Format::Json,
            server_maps: MCP_SERVERS,
        }],
        remote_keys: &["serverUrl", "url"],
        sse_keys: &[],
    },
    Host {
        id: "gemini",
        name: "Gemini CLI",
        files: &[
            HostFile {
                scope: Scope::User,
                base: Base::Home,
                relative: ".gemini/settings.json",
                format: Format::Json,
                server_maps: MCP_SERVERS,
            },
            HostFile {
                scope: Scope::Project,
                base: Base::Project,
                relative: ".gemini/settings.json",
                format: Format::Json,
                server_maps: MCP_SERVERS,
            },
        ],
        remote_keys: &["httpUrl", "url"],
        // Gemini CLI: `url` is SSE, `httpUrl` is Streamable HTTP.
        sse_keys: &["url"],
    },
    Host {
        id: "codex",
        name: "Codex CLI",
        files: &[
            HostFile {
                scope: Scope::User,
                base: Base::CodexHome,
                relative: "config.toml",
                format: Format::Toml,
                server_maps: &[&["mcp_servers"]],
            },
            HostFile {
                scope: Scope::Project,
                base: Base::Project,
                relative: ".codex/config.toml",
                format: Format::Toml,
                server_maps: &[&["mcp_servers"]],
            },
        ],
        remote_keys: &["url"],
        sse_keys: &[],
    },
    Host {
        id: "zed",
        name: "Zed",
        files: &[
            HostFile {
                scope: Scope::User,
                base: Base::XdgConfig,
                relative: "zed/settings.json",
                format: Format::Json,
                server_maps: &[&["context_servers"]],
            },
            HostFile {
                scope: Scope::Project,
                base: Base::Project,
                relative: ".zed/settings.json",
                format: Format::Json,
                server_maps: &[&["context_servers"]],
            },
        ],
        remote_keys: &["url"],
        sse_keys: &[],
    },
];

/// The host with this id (or a common alternative spelling). `claude` is none: Claude Code's
/// program is called `claude`, and Claude Desktop's users say it too ([`ambiguous`]).
pub fn find(id: &str) -> Option<&'static Host> {
    let id = id.to_ascii_lowercase();
    let canonical = match id.as_str() {
        "claude-desktop" | "claude_desktop" => "claude-desktop",
        "claude-code" | "claudecode" | "claude_code" => "claude-code",
        "code" | "vs-code" | "vscode" => "vscode",
        "gemini" | "gemini-cli" => "gemini",
        "codex" | "codex-cli" => "codex",
        other => other,
    };
    HOSTS.iter().find(|host| host.id == canonical)
}

/// The hosts a spelling could mean when it names more than one (`claude`).
pub fn ambiguous(id: &str) -> Option<[&'static str; 2]> {
    id.eq_ignore_ascii_case("claude")
        .then_some(["claude-desktop", "claude-code"])
}

/// Every user-scope config file of every host, where the environment puts them (whether they
/// exist or not): what a host starts comes from these, so no server may be granted them.
pub fn user_files(env: &super::HostEnv) -> Vec<(&'static str, std::path::PathBuf)> {
    HOSTS
        .iter()
        .flat_map(|host| host.files.iter().map(move |file| (host.name, file)))
        .filter(|(_, file)| file.scope == Scope::User)
        .filter_map(|(name, file)| Some((name, env.path_of(file)?)))
        .collect()
}

/// Every host id, for messages.
pub fn ids() -> Vec<&'static str> {
    HOSTS.iter().map(|host| host.id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_has_a_user_file_and_unique_id() {
        for host in HOSTS {
            assert!(
                host.files.iter().any(|f| f.scope == Scope::User),
                "{}",
                host.id
            );
            assert_eq!(HOSTS.iter().filter(|h| h.id == host.id).count(), 1);
            for file in host.files {
                assert!(!file.server_maps.is_empty());
                assert!(host.sse_keys.iter().all(|k| host.remote_keys.contains(k)));
            }
        }
        assert_eq!(find("VSCode").map(|h| h.id), Some("vscode"));
        assert_eq!(find("codex-cli").map(|h| h.id), Some("codex"));
        assert!(find("emacs").is_none());
        // Claude Code's program is `claude`: the bare word names no host, and says which two.
        assert!(find("claude").is_none());
        assert_eq!(ambiguous("Claude"), Some(["claude-desktop", "claude-code"]));
        assert_eq!(ambiguous("claude-code"), None);
    }
}
