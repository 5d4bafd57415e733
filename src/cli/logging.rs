//! airlock's own log on stderr (stdout is the MCP channel in `run` and `serve`): human text,
//! coloured only when stderr is a terminal and `NO_COLOR` is unset or empty, or JSON Lines
//! (`--log-format json`) for programs that collect logs.

use std::io::IsTerminal;

use clap::ValueEnum;

/// How airlock writes its log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Lines for people: `WARN message`, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object a line: `timestamp`, `level`, `message` and the event's fields.
    Json,
}

/// Colour only for a person looking at a terminal, and never when `NO_COLOR` is set to anything
/// but the empty string (the no-color.org convention). Pure, for the tests.
pub fn use_colour(stderr_is_terminal: bool, no_color: Option<&str>) -> bool {
    stderr_is_terminal && no_color.is_none_or(str::is_empty)
}

/// Installs the log subscriber. Levels come from `AIRLOCK_LOG` (default `warn`).
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Through the stderr queue, which writes directly outside a session and never blocks in
        // one (a host that does not read airlock's stderr must not freeze the event loop).
        .with_writer(crate::session::stderr_queue::QueueWriter::default)
        .with_target(false);
    let _ = match format {
        LogFormat::Text => {
            let no_color = std::env::var("NO_COLOR").ok();
            builder
                .with_ansi(use_colour(
                    std::io::stderr().is_terminal(),
                    no_color.as_deref(),
                ))
                .try_init()
        }
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_needs_a_terminal_and_no_no_color() {
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some("")));
        assert!(!use_colour(true, Some("1")));
        assert!(!use_colour(false, None));
        assert!(!use_colour(false, Some("")));
    }
}
