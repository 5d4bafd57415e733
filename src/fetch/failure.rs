//! What a failed install step says, and the fix it gives. Pure: texts in, texts out.
//!
//! The fix never steers a person into running an untrusted package's install scripts outside
//! the sandbox without saying so: a hostile package can fail its own install on purpose inside
//! airlock, and "run it outside airlock" would then run that script with the user's full rights.

use super::Runner;
use super::step::InstallFailed;

/// How a failed installer ended, after its status: the line of its stderr that says why, or,
/// without one, the hosts it tried to reach and was refused.
pub(super) fn why_it_ended(line: &str, refused: &[String]) -> String {
    match (line.is_empty(), refused.is_empty()) {
        (false, _) => format!(": {line}"),
        (true, false) => format!(
            " after it tried to reach {}, which the install step may not",
            refused.join(", ")
        ),
        (true, true) => String::new(),
    }
}

/// Filling the user's own package cache once outside airlock, which airlock then uses without
/// fetching: the route that always works, with what it costs said plainly.
pub(super) fn prime_fix(runner: &Runner) -> String {
    let command = match runner {
        Runner::Npx { packages } => format!("npx -y {}", packages.join(" ")),
        Runner::Uvx(uvx) => format!("uvx --from {} python -c pass", uvx.from),
        Runner::Bunx(bunx) => format!("bunx --package={} /bin/true", bunx.spec),
        Runner::Deno { spec } => format!("deno cache npm:{spec}"),
    };
    format!(
        "only for a package you trust, run `{command}` once outside airlock: it fills your own package cache, which airlock uses without fetching, but it runs the package's install scripts with your full rights and network"
    )
}

/// What to do about a failed install: a registry that answered it has no such package is a
/// name to check; an install that reached for other hosts (an install script fetching a
/// binary) is a package that cannot be fetched confined; only the rest is a network to check.
pub(super) fn install_fix(why: &InstallFailed, registries: &[String], runner: &Runner) -> String {
    let text = why.to_string();
    let not_found = [
        "E404",
        "npm error 404",
        "is not in this registry",
        "not found in the package registry",
        "No solution found",
    ]
    .iter()
    .any(|sign| text.contains(sign));
    if not_found {
        return format!(
            "check the package name and version ({}): {} answered that it has no such package (a typo, or a private package whose registry npm or uv is not configured for)",
            runner.packages().join(" "),
            registries.join(" and ")
        );
    }
    if let InstallFailed::Exited { refused, .. } = why
        && !refused.is_empty()
    {
        return format!(
            "the install step reaches only {}, and this install also reached for {} (an install script fetching more, or a dependency from elsewhere: the audit log has each refusal, step \"install\"); airlock does not give an install more network. {}",
            registries.join(" and "),
            refused.join(", "),
            prime_fix(runner)
        );
    }
    format!(
        "check that {} is reachable from this machine; or, {}",
        registries.join(" and "),
        prime_fix(runner)
    )
}

/// The line of a failed install's stderr that says what went wrong: npm's `request to ... failed`
/// or `npm error code`, uv's `×` and `╰─▶` lines; else the last line that is not a pointer to a
/// log file.
pub(super) fn telling_line(tail: &[String]) -> String {
    let clean = |line: &String| {
        line.trim()
            .trim_start_matches(['×', '╰', '─', '▶', '├', '│'])
            .trim()
            .to_string()
    };
    let uv_cause: Vec<String> = tail
        .iter()
        .filter(|line| line.trim_start().starts_with(['×', '├', '╰']))
        .map(clean)
        .collect();
    if !uv_cause.is_empty() {
        return uv_cause.join(": ");
    }
    let npm_reason = tail
        .iter()
        .find(|line| line.contains(" failed, reason:") || line.contains("npm error 404"))
        .or_else(|| tail.iter().find(|line| line.contains("npm error code")));
    npm_reason
        .or_else(|| {
            tail.iter()
                .rev()
                .find(|line| !line.contains("complete log"))
        })
        .map(clean)
        .unwrap_or_default()
}
