//! Where the audit log goes: `--audit`, else the policy's `audit.path`, else
//! `$XDG_STATE_HOME/airlock/audit.jsonl` (`~/.local/state/airlock/audit.jsonl`). An org policy
//! that sets `audit.path` pins it: a different `--audit` is refused, never silently obeyed.

use std::path::PathBuf;

use crate::policy::{AuditPolicy, Layer};

/// The process environment the default depends on, passed in so tests control it.
#[derive(Debug, Clone, Default)]
pub struct AuditEnv {
    pub xdg_state_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
}

impl AuditEnv {
    pub fn from_env() -> AuditEnv {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        AuditEnv {
            xdg_state_home: var("XDG_STATE_HOME"),
            home: var("HOME"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTarget {
    File(PathBuf),
    /// `--audit -`: JSON Lines on stderr.
    Stderr,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "--audit {requested} conflicts with the organisation's audit log {pinned} (set in {origin}); \
         the org policy pins it. Fix: drop --audit"
    )]
    PinnedByOrg {
        requested: String,
        pinned: String,
        origin: String,
    },
    #[error(
        "no audit log location: neither XDG_STATE_HOME nor HOME is set. Fix: pass --audit FILE"
    )]
    NoDefault,
    #[error("audit.path {0:?} cannot be expanded: {1}")]
    Template(String, String),
}

/// Expands a leading `~` and `${env:NAME}` / `${NAME}` in a policy path template.
fn expand(
    template: &str,
    env: &AuditEnv,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, TargetError> {
    let bad = |why: &str| TargetError::Template(template.to_string(), why.to_string());
    let mut text = String::new();
    let mut rest = template;
    if rest == "~" || rest.starts_with("~/") {
        let home = env.home.as_ref().ok_or_else(|| bad("HOME is not set"))?;
        text.push_str(&home.to_string_lossy());
        rest = &rest[1..];
    }
    while let Some(start) = rest.find("${") {
        text.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| bad("unterminated ${"))?;
        let name = after[..end].strip_prefix("env:").unwrap_or(&after[..end]);
        let value = lookup(name).ok_or_else(|| bad(&format!("{name} is not set")))?;
        text.push_str(&value);
        rest = &after[end + 1..];
    }
    text.push_str(rest);
    Ok(PathBuf::from(text))
}

/// Resolves the audit target. Pure apart from `lookup` (the environment for `${env:NAME}`).
pub fn resolve_target(
    cli: Option<&str>,
    policy: &AuditPolicy,
    env: &AuditEnv,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<AuditTarget, TargetError> {
    let from_policy = match &policy.path {
        Some(path) => Some((expand(&path.value, env, lookup)?, path)),
        None => None,
    };
    if let Some(requested) = cli {
        if let Some((pinned, sourced)) = &from_policy
            && sourced.origin.layer == Layer::Org
            && std::path::Path::new(requested) != pinned.as_path()
        {
            return Err(TargetError::PinnedByOrg {
                requested: requested.to_string(),
                pinned: pinned.display().to_string(),
                origin: sourced.origin.to_string(),
            });
        }
        return Ok(if requested == "-" {
            AuditTarget::Stderr
        } else {
            AuditTarget::File(PathBuf::from(requested))
        });
    }
    if let Some((path, _)) = from_policy {
        return Ok(AuditTarget::File(path));
    }
    let base = env
        .xdg_state_home
        .clone()
        .or_else(|| env.home.as_ref().map(|home| home.join(".local/state")))
        .ok_or(TargetError::NoDefault)?;
    Ok(AuditTarget::File(base.join("airlock").join("audit.jsonl")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Origin, Sourced};

    fn policy(path: Option<(&str, Layer)>) -> AuditPolicy {
        AuditPolicy {
            path: path.map(|(value, layer)| Sourced {
                value: value.to_string(),
                origin: Origin {
                    layer,
                    file: PathBuf::from("/etc/airlock/policy.toml"),
                    line: Some(3),
                },
            }),
            redact: Vec::new(),
        }
    }

    fn env() -> AuditEnv {
        AuditEnv {
            xdg_state_home: None,
            home: Some(PathBuf::from("/home/u")),
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn default_is_under_the_state_dir() {
        let got = resolve_target(None, &policy(None), &env(), &no_env).unwrap();
        assert_eq!(
            got,
            AuditTarget::File(PathBuf::from("/home/u/.local/state/airlock/audit.jsonl"))
        );
        let xdg = AuditEnv {
            xdg_state_home: Some(PathBuf::from("/s")),
            home: None,
        };
        assert_eq!(
            resolve_target(None, &policy(None), &xdg, &no_env).unwrap(),
            AuditTarget::File(PathBuf::from("/s/airlock/audit.jsonl"))
        );
        assert_eq!(
            resolve_target(None, &policy(None), &AuditEnv::default(), &no_env),
            Err(TargetError::NoDefault)
        );
    }

    #[test]
    fn policy_path_expands_and_cli_overrides_a_user_policy() {
        let user = policy(Some(("~/logs/${env:WHO}.jsonl", Layer::User)));
        let lookup = |name: &str| (name == "WHO").then(|| "me".to_string());
        assert_eq!(
            resolve_target(None, &user, &env(), &lookup).unwrap(),
            AuditTarget::File(PathBuf::from("/home/u/logs/me.jsonl"))
        );
        assert_eq!(
            resolve_target(Some("/tmp/a.jsonl"), &user, &env(), &lookup).unwrap(),
            AuditTarget::File(PathBuf::from("/tmp/a.jsonl"))
        );
        assert_eq!(
            resolve_target(Some("-"), &user, &env(), &lookup).unwrap(),
            AuditTarget::Stderr
        );
    }

    #[test]
    fn org_pinned_path_refuses_a_different_cli_path() {
        let org = policy(Some(("/var/log/airlock.jsonl", Layer::Org)));
        let err = resolve_target(Some("/tmp/mine.jsonl"), &org, &env(), &no_env).unwrap_err();
        assert!(
            err.to_string().contains("/etc/airlock/policy.toml:3"),
            "{err}"
        );
        assert_eq!(
            resolve_target(Some("/var/log/airlock.jsonl"), &org, &env(), &no_env).unwrap(),
            AuditTarget::File(PathBuf::from("/var/log/airlock.jsonl"))
        );
    }
}
