//! Where the audit log goes: `--audit`, else the policy's `audit.path`, else
//! `$XDG_STATE_HOME/airlock/audit.jsonl` (`~/.local/state/airlock/audit.jsonl`). An org policy
//! that sets `audit.path` pins it: a different `--audit` is refused, never silently obeyed.

use std::path::PathBuf;

use crate::paths::{UserDirs, VarSource, expand_path};
use crate::policy::{AuditPolicy, Layer, Sourced};

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
        "--audit {requested} would move the audit log, and the organisation locks [audit] ({origin}). Fix: drop --audit"
    )]
    LockedByOrg { requested: String, origin: String },
    #[error(
        "no audit log location: neither XDG_STATE_HOME nor HOME is set. Fix: pass --audit FILE"
    )]
    NoDefault,
    #[error(
        "audit.path {template:?} ({origin}) cannot be expanded: {why}\n  fix: set it in airlock's environment, or write the path without it"
    )]
    Template {
        template: String,
        origin: String,
        why: String,
    },
}

/// Expands a leading `~` and `${env:NAME}` / `${NAME}` in a policy path template; an unset
/// name is an error (a log path with a hole in it would land somewhere unexpected).
fn expand(template: &Sourced<String>, env: &dyn VarSource) -> Result<PathBuf, TargetError> {
    let bad = |why: String| TargetError::Template {
        template: template.value.clone(),
        origin: template.origin.to_string(),
        why,
    };
    let template = template.value.as_str();
    let home = env.absolute_path("HOME");
    let lookup = |var: crate::paths::Var<'_>| env.var(var.name()).map(str::to_string);
    let expanded =
        expand_path(template, home.as_deref(), &lookup).map_err(|err| bad(err.to_string()))?;
    if let Some(name) = expanded.unset.first() {
        return Err(bad(format!("{name} is not set")));
    }
    Ok(PathBuf::from(expanded.value))
}

/// Resolves the audit target from `--audit`, the policy and the environment (`HOME`,
/// `XDG_STATE_HOME`, and the names `${env:NAME}` refers to). Pure.
pub fn resolve_target(
    cli: Option<&str>,
    policy: &AuditPolicy,
    env: &dyn VarSource,
) -> Result<AuditTarget, TargetError> {
    let from_policy = match &policy.path {
        Some(path) => Some((expand(path, env)?, path)),
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
        let requested_target = if requested == "-" {
            AuditTarget::Stderr
        } else {
            AuditTarget::File(PathBuf::from(requested))
        };
        // A locked `[audit]` without a path still keeps the log where it is by default: a
        // user may not send it to stderr or elsewhere instead.
        if let Some(lock) = &policy.locked {
            let effective = resolve_target(None, policy, env)?;
            if requested_target != effective {
                return Err(TargetError::LockedByOrg {
                    requested: requested.to_string(),
                    origin: lock.to_string(),
                });
            }
        }
        return Ok(requested_target);
    }
    if let Some((path, _)) = from_policy {
        return Ok(AuditTarget::File(path));
    }
    UserDirs::from_env(env)
        .default_audit_log()
        .map(AuditTarget::File)
        .ok_or(TargetError::NoDefault)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::EnvVars;
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
            rotate_mb: sourced_default(64),
            keep_rotated: sourced_default(8),
            locked: None,
        }
    }

    fn sourced_default(value: u64) -> Sourced<u64> {
        Sourced {
            value,
            origin: Origin {
                layer: Layer::Builtin,
                file: PathBuf::from("builtin:default.toml"),
                line: None,
            },
        }
    }

    fn env() -> EnvVars {
        EnvVars::from_pairs([("HOME", "/home/u"), ("WHO", "me")])
    }

    #[test]
    fn default_is_under_the_state_dir() {
        let got = resolve_target(None, &policy(None), &env()).unwrap();
        assert_eq!(
            got,
            AuditTarget::File(PathBuf::from("/home/u/.local/state/airlock/audit.jsonl"))
        );
        let xdg = EnvVars::from_pairs([("XDG_STATE_HOME", "/s")]);
        assert_eq!(
            resolve_target(None, &policy(None), &xdg).unwrap(),
            AuditTarget::File(PathBuf::from("/s/airlock/audit.jsonl"))
        );
        assert_eq!(
            resolve_target(None, &policy(None), &EnvVars::default()),
            Err(TargetError::NoDefault)
        );
    }

    #[test]
    fn policy_path_expands_and_cli_overrides_a_user_policy() {
        let user = policy(Some(("~/logs/${env:WHO}.jsonl", Layer::User)));
        assert_eq!(
            resolve_target(None, &user, &env()).unwrap(),
            AuditTarget::File(PathBuf::from("/home/u/logs/me.jsonl"))
        );
        assert_eq!(
            resolve_target(Some("/tmp/a.jsonl"), &user, &env()).unwrap(),
            AuditTarget::File(PathBuf::from("/tmp/a.jsonl"))
        );
        assert_eq!(
            resolve_target(Some("-"), &user, &env()).unwrap(),
            AuditTarget::Stderr
        );
    }

    #[test]
    fn org_pinned_path_refuses_a_different_cli_path() {
        let org = policy(Some(("/var/log/airlock.jsonl", Layer::Org)));
        let err = resolve_target(Some("/tmp/mine.jsonl"), &org, &env()).unwrap_err();
        assert!(
            err.to_string().contains("/etc/airlock/policy.toml:3"),
            "{err}"
        );
        assert_eq!(
            resolve_target(Some("/var/log/airlock.jsonl"), &org, &env()).unwrap(),
            AuditTarget::File(PathBuf::from("/var/log/airlock.jsonl"))
        );
    }

    #[test]
    fn a_locked_audit_section_keeps_the_log_where_it_is_without_a_path_too() {
        let mut locked = policy(None);
        locked.locked = Some(Origin {
            layer: Layer::Org,
            file: PathBuf::from("/etc/airlock/policy.toml"),
            line: Some(7),
        });
        for moved in ["-", "/tmp/elsewhere.jsonl"] {
            let err = resolve_target(Some(moved), &locked, &env()).unwrap_err();
            assert!(matches!(err, TargetError::LockedByOrg { .. }), "{err}");
            assert!(err.to_string().contains("policy.toml:7"), "{err}");
        }
        let default = resolve_target(None, &locked, &env()).unwrap();
        let AuditTarget::File(path) = &default else {
            panic!("{default:?}")
        };
        let same = path.display().to_string();
        assert_eq!(
            resolve_target(Some(&same), &locked, &env()).unwrap(),
            default
        );
    }
}
