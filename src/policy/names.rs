//! Tool patterns meet the server names airlock knows.
//!
//! The product's one-line description writes calls as `server_tool`, so people write
//! `deny = ["mcp:fs_write_file"]`. Read literally that is a whole-server pattern for a server
//! named `fs_write_file`, and the deny would match nothing. When the declared server names (a
//! config's, or the one `airlock run` serves) make one reading the only sensible one, it is read
//! that way; when two readings are possible, loading fails and names them, so a deny or ask never
//! silently falls away.

use super::Policy;
use super::pattern::{Glob, ToolPattern};
use super::rules::{ToolEntry, ToolRules};
use crate::diagnostic::{SourceError, SourceWarning};

/// How a pattern is read against the known server names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// As written (it has `__`, or nothing better fits, or no names are known).
    AsWritten,
    /// `mcp:a_b` read as `mcp:a__b`: `a` is a known server and no server is named `a_b`.
    Split(ToolPattern),
    /// More than one reading fits: a load error lists them.
    Ambiguous(Vec<ToolPattern>),
}

/// The part after `mcp:` or `mcp__`.
fn body(written: &str) -> &str {
    written
        .strip_prefix("mcp:")
        .or_else(|| written.strip_prefix("mcp__"))
        .unwrap_or(written)
}

/// Reads `written` (already parsed as `parsed`) against `known` server names. Pure.
pub fn resolve(written: &str, parsed: &ToolPattern, known: &[&str]) -> Resolution {
    let body = body(written);
    if known.is_empty() || body.contains("__") {
        return Resolution::AsWritten;
    }
    let mut readings = Vec::new();
    if known.iter().any(|name| parsed.server.matches(name)) {
        readings.push(parsed.clone());
    }
    for (index, _) in body.match_indices('_') {
        let (server, tool) = (&body[..index], &body[index + 1..]);
        if tool.is_empty() || server.contains(['*', '?']) || !known.contains(&server) {
            continue;
        }
        readings.push(ToolPattern {
            server: Glob::Literal(server.to_string()),
            tool: Glob::parse(tool),
        });
    }
    match readings.len() {
        0 => Resolution::AsWritten,
        1 if readings[0] == *parsed => Resolution::AsWritten,
        1 => Resolution::Split(readings.remove(0)),
        _ => Resolution::Ambiguous(readings),
    }
}

/// How a pattern reads, for people: `every tool of server "github"`, `tool "write_file" of
/// server "fs"`, `tools "read_*" of servers "*"`.
pub fn describe(pattern: &ToolPattern) -> String {
    let server = match &pattern.server {
        Glob::Literal(name) => format!("server {name:?}"),
        glob => format!("servers {:?}", glob.to_string()),
    };
    match &pattern.tool {
        Glob::Wildcard(tokens) if tokens.len() == 1 && pattern.tool.matches("") => {
            format!("every tool of {server}")
        }
        Glob::Literal(tool) => format!("tool {tool:?} of {server}"),
        glob => format!("tools {:?} of {server}", glob.to_string()),
    }
}

/// The closest known server name to `name` as a hint, else the list of known names.
pub fn closest_hint(name: &str, known: &[&str]) -> String {
    match crate::diagnostic::closest(name, known.iter().copied()) {
        Some(best) => format!("did you mean {best:?}?"),
        None if known.is_empty() => "no server is declared".to_string(),
        None => format!(
            "declared: {}",
            known
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// When the pattern's server part names no known server: what to tell the user (the closest
/// known name, or the list). `None` when it names one, or matches one through a wildcard.
pub fn undeclared(pattern: &ToolPattern, known: &[&str]) -> Option<String> {
    if known.iter().any(|name| pattern.server.matches(name)) {
        return None;
    }
    let written = pattern.server.to_string();
    let hint = closest_hint(&written, known);
    let what = match &pattern.server {
        Glob::Literal(_) => format!("names server {written:?}, which no loaded config declares"),
        Glob::Wildcard(_) => format!("server part {written:?} matches no declared server"),
    };
    Some(format!("{what} ({hint})"))
}

/// `mcp:x` and `mcp:x__y` for humans, joined: `mcp:fs__write_file or mcp:fs_write__file`.
fn alternatives(readings: &[ToolPattern]) -> String {
    readings
        .iter()
        .map(|reading| match &reading.tool {
            Glob::Wildcard(tokens) if tokens.len() == 1 && reading.tool.matches("") => {
                format!("mcp:{}", reading.server)
            }
            _ => reading.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Re-reads one entry; `Err` for an ambiguous pattern.
fn reread(entry: &mut ToolEntry, known: &[&str]) -> Result<(), SourceError> {
    let Some(written) = entry.written.as_ref().filter(|w| w.global) else {
        return Ok(());
    };
    match resolve(&written.text, &entry.pattern, known) {
        Resolution::AsWritten => Ok(()),
        Resolution::Split(pattern) => {
            entry.reading = Some(format!(
                "read as {pattern}: {:?} is a server here and none is named {:?}",
                pattern.server.to_string(),
                entry.pattern.server.to_string()
            ));
            entry.pattern = pattern;
            Ok(())
        }
        Resolution::Ambiguous(readings) => Err(SourceError::new(
            &entry.origin.file,
            Some(written.at),
            format!(
                "{} can be read as {}: with these server names it is ambiguous, and {} must not \
                 silently miss the tools it was meant for",
                entry.rule,
                readings
                    .iter()
                    .map(|r| format!(
                        "{} ({})",
                        alternatives(std::slice::from_ref(r)),
                        describe(r)
                    ))
                    .collect::<Vec<_>>()
                    .join(" or "),
                match entry.action {
                    super::Action::Allow => "an allow",
                    super::Action::Ask => "an ask",
                    super::Action::Deny => "a deny",
                }
            ),
        )
        .with_fix(format!(
            "write the one you mean, with `__` between server and tool: {}",
            alternatives(&readings)
        ))),
    }
}

/// Re-reads every pattern of the global tool lists against the server names airlock knows (a
/// config's servers, or the one `airlock run` serves): the one-underscore spelling becomes
/// server and tool where only one reading fits. Every ambiguous pattern is reported at once.
pub fn apply(mut policy: Policy, known: &[&str]) -> Result<Policy, SourceError> {
    let default = policy.tools.default_action().clone();
    let tools = std::mem::replace(&mut policy.tools, ToolRules::new(Vec::new(), default));
    let (mut entries, default) = tools.into_parts();
    let mut errors: Vec<SourceError> = entries
        .iter_mut()
        .filter_map(|entry| reread(entry, known).err())
        .collect();
    errors.sort_by(|a, b| {
        let key = |e: &SourceError| (e.file.clone(), e.position.map(|p| (p.line, p.column)));
        key(a).cmp(&key(b))
    });
    if let Some(error) = SourceError::all(errors) {
        return Err(error);
    }
    policy.tools = ToolRules::new(entries, default);
    Ok(policy)
}

/// A warning for every pattern of the global tool lists that names a server none of `known`
/// is, with the closest known name (for `airlock check`).
pub fn undeclared_warnings(policy: &Policy, known: &[&str]) -> Vec<SourceWarning> {
    warnings_for_written(policy, |entry| {
        let problem = undeclared(&entry.pattern, known)?;
        Some(format!("{} {problem}", entry.rule))
    })
}

/// A warning for every pattern of the global tool lists whose server part is close to the name
/// of a server this session runs (`here`) without being one (`mcp:filesystm__write_file` beside
/// `filesystem`): such a rule does nothing, and a deny that falls away silently loosens what its
/// author meant. Names that are not close stay quiet: a policy shared by many hosts names servers
/// a session does not run (`airlock check` lists those). Pure.
pub fn misspelt_warnings(policy: &Policy, here: &[&str]) -> Vec<SourceWarning> {
    warnings_for_written(policy, |entry| {
        let Glob::Literal(named) = &entry.pattern.server else {
            return None;
        };
        if here.contains(&named.as_str()) {
            return None;
        }
        let meant = likely_misspelt(named, here)?;
        Some(format!(
            "{} names server {named:?}, which is not one here: did you mean {meant:?}? \
             A rule for a server that is not here does nothing",
            entry.rule
        ))
    })
}

/// The name of `here` that `named` is likely a misspelling of: one edit away, or two when both
/// are long (`filesystm`, `fielsystem` for `filesystem`). Tighter than a did-you-mean hint, since
/// this one speaks up unasked: `github` and `gitlab` are two servers, not a typo.
fn likely_misspelt<'a>(named: &str, here: &[&'a str]) -> Option<&'a str> {
    here.iter()
        .copied()
        .map(|name| (crate::diagnostic::edit_distance(named, name), name))
        .filter(|(distance, name)| {
            let long = named.chars().count() >= 8 && name.chars().count() >= 8;
            *distance == 1 || (*distance == 2 && long)
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// A warning at each pattern written in the global tool lists that `problem` finds one in, in
/// file and position order.
fn warnings_for_written(
    policy: &Policy,
    problem: impl Fn(&ToolEntry) -> Option<String>,
) -> Vec<SourceWarning> {
    let mut warnings: Vec<SourceWarning> = policy
        .tools
        .entries()
        .iter()
        .filter_map(|entry| {
            let written = entry.written.as_ref().filter(|w| w.global)?;
            let message = problem(entry)?;
            Some(SourceWarning::new(
                &entry.origin.file,
                Some(written.at),
                message,
            ))
        })
        .collect();
    warnings.sort_by(|a, b| {
        let key = |w: &SourceWarning| (w.file.clone(), w.position.map(|p| (p.line, p.column)));
        key(a).cmp(&key(b))
    });
    warnings
}

/// When `airlock run` named its server after its command (no `--name`): the servers the
/// policy's written rules name, if none of them is this one. A policy written for `fs` then
/// silently misses `server-filesystem`, the name the command gave; the caller says so.
/// `None` when a rule names this server (or matches it through a wildcard), or when no rule is
/// written at all.
pub fn rules_name_only_others(policy: &Policy, name: &str) -> Option<Vec<String>> {
    let written: Vec<&ToolEntry> = policy
        .tools
        .entries()
        .iter()
        .filter(|entry| entry.written.as_ref().is_some_and(|w| w.global))
        .collect();
    if written
        .iter()
        .any(|entry| entry.pattern.server.matches(name))
    {
        return None;
    }
    let mut others: Vec<String> = written
        .iter()
        .map(|entry| entry.pattern.server.to_string())
        .collect();
    others.sort();
    others.dedup();
    (!others.is_empty()).then_some(others)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(written: &str, known: &[&str]) -> Resolution {
        resolve(written, &ToolPattern::parse(written).unwrap(), known)
    }

    fn pattern(text: &str) -> ToolPattern {
        ToolPattern::parse(text).unwrap()
    }

    #[test]
    fn one_underscore_reads_as_server_and_tool_when_the_server_is_known() {
        assert_eq!(
            read("mcp:fs_write_file", &["fs", "github"]),
            Resolution::Split(pattern("mcp:fs__write_file"))
        );
        assert_eq!(
            read("mcp__fs_write_*", &["fs"]),
            Resolution::Split(pattern("mcp:fs__write_*"))
        );
    }

    #[test]
    fn what_already_means_something_stays() {
        // A declared server of that very name, `__`, unknown names, or no names at all.
        assert_eq!(read("mcp:fs_write", &["fs_write"]), Resolution::AsWritten);
        assert_eq!(read("mcp:fs__write_file", &["fs"]), Resolution::AsWritten);
        assert_eq!(read("mcp:gh_create", &["fs"]), Resolution::AsWritten);
        assert_eq!(read("mcp:fs_write_file", &[]), Resolution::AsWritten);
        assert_eq!(read("mcp:*", &["fs"]), Resolution::AsWritten);
    }

    #[test]
    fn two_possible_readings_are_ambiguous() {
        let Resolution::Ambiguous(readings) = read("mcp:fs_write_file", &["fs", "fs_write"]) else {
            panic!("expected ambiguity");
        };
        assert_eq!(
            readings,
            vec![pattern("mcp:fs__write_file"), pattern("mcp:fs_write__file")]
        );
        // The whole-server reading counts as one of them.
        assert!(matches!(
            read("mcp:fs_write", &["fs", "fs_write"]),
            Resolution::Ambiguous(_)
        ));
    }

    #[test]
    fn undeclared_servers_get_the_closest_name_or_the_list() {
        let known = ["filesystem", "github"];
        assert_eq!(undeclared(&pattern("mcp:github__x"), &known), None);
        assert_eq!(undeclared(&pattern("mcp:git*"), &known), None);
        let typo = undeclared(&pattern("mcp:filesytem__read"), &known).unwrap();
        assert!(typo.contains("did you mean \"filesystem\""), "{typo}");
        let far = undeclared(&pattern("mcp:fs__read"), &known).unwrap();
        assert!(
            far.contains("declared: \"filesystem\", \"github\""),
            "{far}"
        );
        assert!(
            undeclared(&pattern("mcp:x*"), &known)
                .unwrap()
                .contains("matches no declared")
        );
    }

    fn policy(text: &str) -> Policy {
        let source = crate::policy::LayerSource {
            layer: crate::policy::Layer::User,
            path: std::path::PathBuf::from("user.toml"),
            text: text.to_string(),
        };
        crate::policy::load(&[source], &[]).unwrap()
    }

    #[test]
    fn applying_names_rereads_denies_and_reports_every_ambiguity() {
        let loaded =
            policy("version = 1\n[tools]\ndeny = [\"mcp:fs_write_file\", \"mcp:github\"]\n");
        let call = |p: &Policy, server, tool| {
            p.decide(&crate::policy::Call {
                server,
                tool,
                arguments: None,
                identity: None,
            })
            .action
        };
        // As written, the deny misses fs's write_file; read against the names, it catches it.
        assert_eq!(
            call(&loaded, "fs", "write_file"),
            crate::policy::Action::Allow
        );
        let applied = apply(loaded.clone(), &["fs", "github"]).unwrap();
        assert_eq!(
            call(&applied, "fs", "write_file"),
            crate::policy::Action::Deny
        );
        let summary = &applied.tools.summaries()[0];
        assert_eq!(summary.reads_as, "tool \"write_file\" of server \"fs\"");
        assert!(
            summary
                .reading
                .as_deref()
                .unwrap()
                .starts_with("read as mcp:fs__write_file")
        );

        let two = policy(
            "version = 1\n[tools]\ndeny = [\"mcp:fs_write_file\"]\nask = [\"mcp:fs_write\"]\n",
        );
        let err = apply(two, &["fs", "fs_write"]).unwrap_err();
        let all = err.clone().flatten();
        assert_eq!(all.len(), 2, "{err}");
        assert_eq!(all[0].position.map(|p| (p.line, p.column)), Some((3, 9)));
        assert!(
            all[0].message.contains(
                "mcp:fs__write_file (tool \"write_file\" of server \"fs\") or mcp:fs_write__file"
            ),
            "{}",
            all[0].message
        );
        assert!(
            all[1].message.contains("an ask must not"),
            "{}",
            all[1].message
        );
        assert_eq!(
            all[1].fix.as_deref(),
            Some(
                "write the one you mean, with `__` between server and tool: mcp:fs_write or mcp:fs__write"
            )
        );
    }

    #[test]
    fn undeclared_servers_are_warned_about_where_they_are_written() {
        let loaded = policy(
            "version = 1\n[tools]\nallow = [\"mcp:*\"]\ndeny = [\"mcp:filesystem__write_file\"]\n",
        );
        let warnings = undeclared_warnings(&loaded, &["fs"]);
        assert_eq!(warnings.len(), 1);
        let shown = warnings[0].to_string();
        assert!(shown.starts_with("user.toml:4:9: tools.deny \"mcp:filesystem__write_file\" names server \"filesystem\""), "{shown}");
        assert!(shown.contains("declared: \"fs\""), "{shown}");
    }

    #[test]
    fn only_rules_for_a_name_close_to_a_server_here_are_taken_for_misspellings() {
        let loaded = policy(
            "version = 1\n[tools]\ndeny = [\"mcp:filesystm__write_file\", \"mcp:github__delete_repo\", \"mcp:filesystem__move_file\", \"mcp:file*\"]\n",
        );
        let warnings = misspelt_warnings(&loaded, &["filesystem", "everything"]);
        // Two servers whose names differ by two letters are two servers.
        let shared = policy("version = 1\n[tools]\ndeny = [\"mcp:github__delete_repo\"]\n");
        assert!(misspelt_warnings(&shared, &["gitlab"]).is_empty());
        let transposed = policy("version = 1\n[tools]\ndeny = [\"mcp:fielsystem__write_file\"]\n");
        assert_eq!(misspelt_warnings(&transposed, &["filesystem"]).len(), 1);
        let shown: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "user.toml:3:9: tools.deny \"mcp:filesystm__write_file\" names server \"filesystm\", which is not one here: did you mean \"filesystem\"? A rule for a server that is not here does nothing"
            ]
        );
        assert!(misspelt_warnings(&loaded, &[]).is_empty());
    }

    #[test]
    fn descriptions_say_what_a_pattern_covers() {
        assert_eq!(
            describe(&pattern("mcp:github")),
            "every tool of server \"github\""
        );
        assert_eq!(
            describe(&pattern("mcp:fs__write_file")),
            "tool \"write_file\" of server \"fs\""
        );
        assert_eq!(
            describe(&pattern("mcp:*__exec*")),
            "tools \"exec*\" of servers \"*\""
        );
    }

    #[test]
    fn a_policy_whose_rules_all_name_other_servers_is_noticed() {
        let policy = |text: &str| {
            let source = crate::policy::LayerSource {
                layer: crate::policy::Layer::User,
                path: std::path::PathBuf::from("policy.toml"),
                text: format!("version = 1\n[tools]\n{text}\n"),
            };
            crate::policy::load(&[source], &[]).unwrap()
        };
        let written_for_fs = policy("deny = [\"mcp:fs__write_file\", \"mcp:git*\"]");
        assert_eq!(
            rules_name_only_others(&written_for_fs, "server-filesystem"),
            Some(vec!["fs".to_string(), "git*".to_string()])
        );
        assert_eq!(rules_name_only_others(&written_for_fs, "fs"), None);
        assert_eq!(rules_name_only_others(&written_for_fs, "github"), None);
        let everyone = policy("deny = [\"mcp:fs__write_file\", \"mcp:*__delete_*\"]");
        assert_eq!(rules_name_only_others(&everyone, "server-filesystem"), None);
        assert_eq!(
            rules_name_only_others(&policy(""), "server-filesystem"),
            None
        );
    }
}
