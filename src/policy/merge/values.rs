//! Reading single policy values: version, network, run_as, requirements, path templates and
//! environment names, each checked with the position and fix of a bad value.

use toml::Spanned;

use super::*;
use crate::diagnostic::SourceError;
use crate::policy::file::PolicyFile;
use crate::policy::{Feature, Network, Requirement, RunAs};

pub(super) fn parse_version(ctx: &Ctx<'_>, file: &PolicyFile) -> Result<(), SourceError> {
    match &file.version {
        Some(version) if *version.get_ref() == 1 => Ok(()),
        Some(version) => Err(ctx
            .error(
                &version.span(),
                format!("unsupported policy version {}", version.get_ref()),
            )
            .with_fix("set `version = 1`")),
        None => Err(SourceError::new(
            ctx.path,
            Some(LineCol { line: 1, column: 1 }),
            "missing `version`",
        )
        .with_fix("add `version = 1` as the first line")),
    }
}

pub(super) fn parse_network(
    ctx: &Ctx<'_>,
    value: &Spanned<toml::Value>,
) -> Result<Network, SourceError> {
    let declared = crate::policy::network::parse(value.get_ref())
        .map_err(|err| ctx.error(&value.span(), err.message).with_fix(err.fix))?;
    Ok(declared.with_origin(&ctx.origin(&value.span())))
}

pub(super) fn parse_run_as(
    ctx: &Ctx<'_>,
    value: &Spanned<toml::Value>,
) -> Result<RunAs, SourceError> {
    match value.get_ref() {
        toml::Value::String(name) if name == "nobody" => Ok(RunAs::Nobody),
        toml::Value::String(name) if name == "root" => Ok(RunAs::Root),
        toml::Value::Integer(0) => Ok(RunAs::Root),
        toml::Value::Integer(65534) => Ok(RunAs::Nobody),
        toml::Value::Integer(uid) => u32::try_from(*uid)
            .map(RunAs::Uid)
            .map_err(|_| ctx.error(&value.span(), "`run_as` uid is out of range")),
        _ => Err(ctx
            .error(
                &value.span(),
                "`run_as` must be \"nobody\", \"root\" or a numeric uid",
            )
            .with_fix("write run_as = \"nobody\"")),
    }
}

pub(super) fn parse_requirement(
    ctx: &Ctx<'_>,
    text: &Spanned<String>,
) -> Result<Requirement, SourceError> {
    let raw = text.get_ref().trim();
    let (name, min_version) = match raw.split_once(">=") {
        Some((name, version)) => {
            let version = version.trim().parse::<u32>().map_err(|_| {
                ctx.error(
                    &text.span(),
                    format!("requirement {raw:?} has a bad version"),
                )
                .with_fix("write for example \"landlock>=6\"")
            })?;
            (name.trim(), Some(version))
        }
        None => (raw, None),
    };
    let feature = match name {
        "landlock" => Feature::Landlock,
        "seccomp" => Feature::Seccomp,
        "userns" | "user_namespaces" => Feature::UserNamespaces,
        _ => {
            return Err(ctx
                .error(&text.span(), format!("unknown requirement {raw:?}"))
                .with_fix("use \"landlock\", \"landlock>=N\", \"seccomp\" or \"userns\""));
        }
    };
    if min_version.is_some() && feature != Feature::Landlock {
        return Err(ctx
            .error(
                &text.span(),
                format!("only landlock takes a version (in {raw:?})"),
            )
            .with_fix(format!("write \"{name}\"")));
    }
    Ok(Requirement {
        feature,
        min_version,
        text: raw.to_string(),
    })
}

pub(super) fn check_path_template(
    ctx: &Ctx<'_>,
    key: &str,
    path: &Spanned<String>,
) -> Result<(), SourceError> {
    let raw = path.get_ref();
    if raw.starts_with('/') || raw.starts_with('~') || raw.starts_with("${") {
        Ok(())
    } else {
        Err(ctx
            .error(&path.span(), format!("`{key}` path {raw:?} is relative"))
            .with_fix("write an absolute path, or one starting with `~` or `${env:NAME}`"))
    }
}

pub(super) fn check_env_name(ctx: &Ctx<'_>, name: &Spanned<String>) -> Result<(), SourceError> {
    let raw = name.get_ref();
    let stem = raw.strip_suffix('*').unwrap_or(raw);
    let valid = !stem.is_empty()
        && stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !stem.starts_with(|c: char| c.is_ascii_digit());
    if valid {
        Ok(())
    } else {
        Err(ctx
            .error(
                &name.span(),
                format!("`env` entry {raw:?} is not a variable name"),
            )
            .with_fix("write a name like \"LANG\", or a prefix glob like \"LC_*\""))
    }
}
