//! The server's complete environment: cleared, then what the policy passes, the private dirs,
//! the runtime profile's variables and the server's own entries.

use super::vars::Vars;
use super::{CacheOverlayPlan, NetMode, PlanRequest, RuntimeProfile};

/// The server's variables whose value is one absolute path the plan grants nothing for (not a
/// grant or under one, not the private dirs or a cache view): a server that keeps its data
/// where such a variable says (server-memory's `MEMORY_FILE_PATH`) fails there, or writes into
/// nothing that lasts. Only names come back: a value starting with `/` may as well be a secret.
/// Said, not granted: the path may as well be a credential the user would not hand over. Pure.
pub fn ungranted_env_paths(plan: &super::SandboxPlan) -> Vec<&str> {
    let text = |path: &std::path::Path| path.to_string_lossy().into_owned();
    let mut covered: Vec<String> = plan.fs.iter().map(|rule| text(&rule.path)).collect();
    covered.extend([text(&plan.private_home), text(&plan.private_tmp)]);
    for overlay in &plan.cache_overlays {
        covered.extend([text(&overlay.lower), text(&overlay.target)]);
    }
    plan.env
        .iter()
        .filter(|(name, value)| {
            name != "PATH"
                && value.starts_with('/')
                && !value.contains(':')
                && !covered
                    .iter()
                    .any(|granted| crate::paths::is_under(value, granted))
        })
        .map(|(name, _)| name.as_str())
        .collect()
}

pub(super) fn build_env(
    request: &PlanRequest,
    vars: &Vars<'_>,
    profile: Option<&RuntimeProfile>,
    network: &NetMode,
    cache_overlays: &[CacheOverlayPlan],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, name: &str, value: String| {
        env.retain(|(key, _)| key != name);
        env.push((name.to_string(), value));
    };
    for (name, value) in &request.parent_env {
        let passed = request
            .sandbox
            .env
            .iter()
            .any(|pattern| env_passes(&pattern.value, name, value));
        // HOME and TMPDIR always point at the private dirs, whatever the policy passes.
        if passed && name != "HOME" && name != "TMPDIR" {
            set(&mut env, name, value.clone());
        }
    }
    prefix_path(&mut env, &super::layouts::path_prefix(request));
    set(
        &mut env,
        "HOME",
        vars.private_home.to_string_lossy().into_owned(),
    );
    set(
        &mut env,
        "TMPDIR",
        vars.private_tmp.to_string_lossy().into_owned(),
    );
    if let Some(profile) = profile {
        // A package airlock's install step fetches (npx, uvx, bunx, deno's npm:) runs from the
        // cache unless the server may reach any name (`host`, or the port-list form): with a
        // list of names its runner, online, would wait on a registry the list refuses (uvx
        // re-checks its index even when the package is cached) and fail after its retries. Any
        // other command (`uv run --with`, which no install step serves) keeps the network the
        // list gives it, registry included when listed.
        let offline = match network {
            NetMode::None => true,
            NetMode::Egress(egress) => {
                let installed_by_airlock = crate::fetch::detect(
                    &request.program,
                    request.resolved.program_canonical.as_deref(),
                    &request.args,
                )
                .is_some();
                installed_by_airlock
                    && !request.fetches_packages
                    && !egress
                        .allow
                        .rules()
                        .any(|rule| rule.target == crate::net::allow::Target::AnyName)
            }
            NetMode::Host => false,
        };
        for (name, template) in profile
            .env_pairs()
            .chain(profile.network_env_pairs(offline))
        {
            if let Some(value) = vars.expand(template) {
                set(&mut env, name, value);
            }
        }
        // The cache variable names the server's view (the overlay), never the real cache.
        for planned in cache_overlays {
            let var = profile
                .cache_overlays
                .iter()
                .find(|overlay| overlay.name == planned.name)
                .and_then(|overlay| overlay.env.as_deref());
            if let Some(var) = var {
                set(&mut env, var, planned.target.to_string_lossy().into_owned());
            }
        }
    }
    for (name, value) in &request.env {
        set(&mut env, name, value.clone());
    }
    env
}

/// Variables of a login session whose names read like credentials but are not ones a host
/// passes for a server (the shell's directory, the agent and X sockets).
const SESSION_PLUMBING: [&str; 4] = ["PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY"];

/// The names in airlock's environment that look like credentials (`API_KEY`, `GITHUB_TOKEN`)
/// and that the server's environment (`given`) does not have: what a host's `env` meant for the
/// server and airlock withheld. Names only, sorted. Pure.
pub fn withheld_credentials(
    parent_env: &[(String, String)],
    given: &[(String, String)],
) -> Vec<String> {
    let mut names: Vec<String> = parent_env
        .iter()
        .filter(|(name, value)| {
            (crate::secret::key_looks_secret(name) || crate::secret::any_token_shape(value))
                && !SESSION_PLUMBING.contains(&name.as_str())
        })
        .map(|(name, _)| name)
        .filter(|name| !given.iter().any(|(key, _)| key == *name))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Variables that tell a runtime which certificate authorities to trust. Behind a
/// TLS-inspecting proxy nothing connects without them: the install step gets the ones the user
/// set (`crate::fetch::step`); a server with network gets them only by `--allow-env`, and is
/// told so ([`withheld_tls_trust`]).
pub const TLS_TRUST: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "UV_NATIVE_TLS",
    "DENO_CERT",
    "DENO_TLS_CA_STORE",
];

/// The TLS trust variables of airlock's environment that a server with network does not get,
/// with their values (paths to certificate authorities, no secret): a server behind a
/// TLS-inspecting proxy cannot connect without them. Not passed by default, because a value is
/// a path the server would be granted to read, and whoever writes the host's config sets it.
pub fn withheld_tls_trust(
    parent_env: &[(String, String)],
    given: &[(String, String)],
) -> Vec<(String, String)> {
    TLS_TRUST
        .iter()
        .filter_map(|name| parent_env.iter().find(|(key, _)| key == name))
        .filter(|(name, _)| !given.iter().any(|(key, _)| key == name))
        .cloned()
        .collect()
}

/// Puts `dirs` in front of a passed-through `PATH` (each once). A policy that does not pass
/// `PATH` keeps it unset.
fn prefix_path(env: &mut [(String, String)], dirs: &[std::path::PathBuf]) {
    let Some((_, path)) = env.iter_mut().find(|(key, _)| key == "PATH") else {
        return;
    };
    let mut parts: Vec<String> = dirs
        .iter()
        .map(|dir| dir.to_string_lossy().into_owned())
        .collect();
    for part in path.split(':') {
        if !parts.iter().any(|have| have == part) {
            parts.push(part.to_string());
        }
    }
    *path = parts.join(":");
}

/// Whether `pattern` passes the variable `name` with `value`: [`env_name_matches`], and a family
/// passes no value in a token's shape either (`LC_X=ghp_...`: a review's finding).
pub fn env_passes(pattern: &str, name: &str, value: &str) -> bool {
    env_name_matches(pattern, name) && (pattern == name || !crate::secret::any_token_shape(value))
}

/// Whether `pattern` (of a policy's `sandbox.env`, or `--allow-env`) passes the variable `name`:
/// an exact name, or a `PREFIX_*` family (`LC_*` matches `LC_ALL`). A family never passes a name
/// that reads like a credential: `LC_*` is meant for the locale, not for `LC_GITHUB_TOKEN` (a
/// review found any `LC_`-named value reaching servers and the install step, the way ssh's
/// `AcceptEnv LC_*` is used to smuggle values). A credential passes by its own name only, and
/// one withheld is named on stderr ([`withheld_credentials`]).
pub fn env_name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix) && !crate::secret::key_looks_secret(name),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_passes_its_names_but_never_a_credential() {
        assert!(env_name_matches("LC_*", "LC_ALL"));
        assert!(env_name_matches("LC_*", "LC_MESSAGES"));
        assert!(!env_name_matches("LC_*", "LC_GITHUB_TOKEN"));
        assert!(!env_name_matches("LC_*", "LC_SECRET"));
        assert!(!env_name_matches("MYAPP_*", "MYAPP_API_KEY"));
        assert!(env_name_matches("MYAPP_API_KEY", "MYAPP_API_KEY"));
        assert!(!env_name_matches("LC_*", "LANG"));
        assert!(env_passes("LC_*", "LC_MESSAGES", "C"));
        assert!(!env_passes(
            "LC_*",
            "LC_X",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
        ));
        assert!(env_passes(
            "LC_X",
            "LC_X",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
        ));
        // A token's whole shape, not its first letters: a model name is no key.
        assert!(env_passes("MYAPP_*", "MYAPP_MODEL", "sk-large-v2"));
        assert!(env_passes("MYAPP_*", "MYAPP_CACHE", "hf_cache"));
    }

    #[test]
    fn withheld_credentials_are_named_and_nothing_else() {
        let pair = |name: &str| (name.to_string(), "value".to_string());
        let parent = [
            pair("PATH"),
            pair("GITHUB_TOKEN"),
            pair("API_KEY"),
            pair("OPENAI_API_KEY"),
            pair("LANG"),
            pair("PWD"),
            pair("SSH_AUTH_SOCK"),
        ];
        let given = [pair("PATH"), pair("OPENAI_API_KEY")];
        assert_eq!(
            withheld_credentials(&parent, &given),
            ["API_KEY", "GITHUB_TOKEN"]
        );
    }
}
