//! How a server ended, for the audit log, the host's error texts, and `airlock run`'s exit
//! status (pure).

use serde_json::{Value, json};

use crate::process::{EndedBy, ExitSummary};

/// The `exit` event's detail (`ended_by`, `code` or `signal`, `confine_failed_at`) and a short
/// text for error messages.
pub fn exit_detail(summary: &ExitSummary) -> (Value, String) {
    let mut detail = json!({"ended_by": format!("{:?}", summary.ended_by).to_lowercase()});
    if let Some(step) = summary.helper_step {
        detail["confine_failed_at"] = json!(step);
    }
    if let Some(message) = &summary.helper_message {
        detail["confine_message"] = json!(message);
    }
    let text = match (summary.code, summary.signal) {
        (Some(code), _) => {
            detail["code"] = json!(code);
            match summary.helper_step {
                Some(_) => sandbox_failure(code, summary.helper_message.as_deref()),
                None => format!("exit code {code}"),
            }
        }
        (None, Some(signal)) => {
            detail["signal"] = json!(signal);
            format!("killed by signal {signal}")
        }
        _ => "unknown status".into(),
    };
    (detail, text)
}

/// How a server ended, as the exit event tells it. The kill sequence reports `StdinClosed` for
/// any process gone by its first step, including one that was gone before it began (the
/// sandbox's helper outlives the server by a moment, so its supervisor cannot tell). airlock
/// closes a server's input first (the kill sequence, the host's EOF in `run`) only while the
/// server's output is open; so when that output had ended before airlock asked for the stop
/// (or airlock never asked), the server ended by itself: a crash, or it quit.
pub fn ended_by(reported: EndedBy, stopped_while_output_open: bool) -> EndedBy {
    match reported {
        EndedBy::StdinClosed if !stopped_while_output_open => EndedBy::Exited,
        other => other,
    }
}

/// One sentence for a sandbox that could not be set up: the step, the helper's own words, and
/// what to change (the helper's fix when it gave one, else the step's).
pub fn sandbox_failure(code: i32, helper_message: Option<&str>) -> String {
    let Some(step) = crate::sandbox::confine::Step::from_code(code) else {
        return format!("exit code {code}");
    };
    let why = helper_message
        .and_then(|line| line.strip_prefix(step.name()))
        .map(|rest| rest.trim_start_matches(':').trim())
        .or(helper_message)
        .filter(|why| !why.is_empty());
    let mut text = format!(
        "the sandbox could not be set up: its `{}` step failed",
        step.name()
    );
    if let Some(why) = why {
        text.push_str(": ");
        text.push_str(why.trim_end_matches('.'));
    }
    let gave_fix = why.is_some_and(|why| why.to_ascii_lowercase().contains("fix:"));
    if !gave_fix {
        text.push_str(". Fix: ");
        text.push_str(step.fix());
    }
    text
}

/// `airlock run`'s exit status: the server's own (its code, or 128 + signal) whenever it ended
/// by itself, even when the host went away at the same moment; 0 only when airlock had to signal
/// it. A confine-helper failure is never masked: the sandbox did not come up, and the host's
/// launcher must see that.
pub fn run_status(summary: &ExitSummary) -> u8 {
    let signalled = matches!(summary.ended_by, EndedBy::Sigterm | EndedBy::Sigkill);
    if signalled && summary.helper_step.is_none() {
        return 0;
    }
    match (summary.code, summary.signal) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(code: Option<i32>, signal: Option<i32>, ended_by: EndedBy) -> ExitSummary {
        ExitSummary {
            status: None,
            code,
            signal,
            ended_by,
            helper_step: None,
            helper_message: None,
            last_words: None,
        }
    }

    #[test]
    fn the_servers_own_status_unless_airlock_had_to_signal_it() {
        assert_eq!(run_status(&summary(Some(3), None, EndedBy::StdinClosed)), 3);
        assert_eq!(run_status(&summary(Some(143), None, EndedBy::Sigterm)), 0);
        assert_eq!(run_status(&summary(None, Some(9), EndedBy::Sigkill)), 0);
        assert_eq!(
            run_status(&summary(None, Some(6), EndedBy::StdinClosed)),
            134
        );
        let mut failed = summary(Some(92), None, EndedBy::Sigterm);
        failed.helper_step = Some("landlock");
        assert_eq!(run_status(&failed), 92, "a confine failure is never masked");
        let (detail, text) = exit_detail(&failed);
        assert_eq!(detail["confine_failed_at"], "landlock");
        assert!(text.contains("sandbox"));
    }

    #[test]
    fn a_server_that_exits_before_airlock_closed_its_input_exited_by_itself() {
        assert_eq!(
            ended_by(EndedBy::StdinClosed, false),
            EndedBy::Exited,
            "a crash: its output ended before airlock stopped it"
        );
        assert_eq!(
            ended_by(EndedBy::StdinClosed, true),
            EndedBy::StdinClosed,
            "airlock closed its input first (the host's EOF)"
        );
        assert_eq!(ended_by(EndedBy::Sigkill, true), EndedBy::Sigkill);
        assert_eq!(ended_by(EndedBy::Sigterm, false), EndedBy::Sigterm);
    }

    #[test]
    fn a_sandbox_failure_is_one_sentence_with_the_step_the_reason_and_a_fix() {
        let mut failed = summary(Some(102), None, EndedBy::StdinClosed);
        failed.helper_step = Some("execve");
        failed.helper_message = Some("execve: /opt/x: Permission denied (EACCES)".into());
        let (detail, text) = exit_detail(&failed);
        assert_eq!(
            detail["confine_message"],
            "execve: /opt/x: Permission denied (EACCES)"
        );
        assert!(
            text.starts_with("the sandbox could not be set up: its `execve` step failed: /opt/x: Permission denied (EACCES). Fix: "),
            "{text}"
        );
        // The helper's own fix is not doubled.
        let own = sandbox_failure(104, Some("cache overlay: mount: EINVAL; fix: upgrade"));
        assert_eq!(own.matches("ix:").count(), 1, "{own}");
        // Without the helper's words the step and its fix still stand.
        let bare = sandbox_failure(100, None);
        assert!(
            bare.contains("`landlock`") && bare.contains("Fix: "),
            "{bare}"
        );
    }
}
