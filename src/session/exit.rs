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
    let text = match (summary.code, summary.signal) {
        (Some(code), _) => {
            detail["code"] = json!(code);
            match summary.helper_step {
                Some(step) => format!("the sandbox could not be set up: step {step} failed"),
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
}
