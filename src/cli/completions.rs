//! `airlock completions SHELL` and `airlock man`: shell completions and the man page, generated
//! from the same clap definitions that parse the command line, so they can never drift from it.
//!
//! Both print to stdout (these commands carry no MCP session). Packagers run them after the build
//! (`.ci/build-deb` does, for the `.deb`); users can run them themselves, e.g.
//! `airlock completions bash > ~/.local/share/bash-completion/completions/airlock`.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, CommandFactory, ValueEnum};

use super::{Cli, CliError};

/// The shells airlock writes completions for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Print shell completions for airlock (bash, zsh or fish) to stdout.
#[derive(Debug, Args)]
#[command(after_help = "Install them where your shell looks:\n  \
    airlock completions bash > ~/.local/share/bash-completion/completions/airlock\n  \
    airlock completions zsh  > ~/.local/share/zsh/site-functions/_airlock   (a directory on $fpath)\n  \
    airlock completions fish > ~/.config/fish/completions/airlock.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print airlock's man page (roff, section 1) to stdout.
#[derive(Debug, Args)]
#[command(after_help = "Read it at once:  airlock man | man -l -\n\
    Install it:       airlock man > ~/.local/share/man/man1/airlock.1")]
pub struct ManArgs {}

/// The CLI definition without its hidden (internal) subcommands, which some generators would
/// otherwise offer.
fn public_command() -> clap::Command {
    let full = Cli::command();
    let mut public = clap::Command::new("airlock")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true);
    if let Some(about) = full.get_about() {
        public = public.about(about.clone());
    }
    public.subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// The completion script for `shell`, generated from the CLI definition.
pub fn completion_script(shell: Shell) -> Vec<u8> {
    let mut command = public_command();
    let mut out = Vec::new();
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(generator, &mut command, "airlock", &mut out);
    out
}

/// The man page: the top-level page with every visible subcommand's options as its own section.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let command = public_command();
    let man = clap_mangen::Man::new(command.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    let visible: Vec<&clap::Command> = command
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .collect();
    // One page for everything (each subcommand is a section below), so the list names sections
    // rather than separate airlock-NAME(1) pages.
    out.extend_from_slice(b".SH COMMANDS\n");
    for sub in &visible {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        out.extend_from_slice(
            format!(
                ".TP\n\\fBairlock {}\\fR\n{}\n",
                sub.get_name(),
                roff_escape(&about)
            )
            .as_bytes(),
        );
    }
    for sub in visible {
        let name = sub.get_name().to_string();
        let full = format!("airlock {name}");
        let sub_man = clap_mangen::Man::new(sub.clone().bin_name(full.clone()).display_name(full));
        out.extend_from_slice(format!(".SH \"AIRLOCK {}\"\n", name.to_uppercase()).as_bytes());
        let mut section = Vec::new();
        sub_man.render_synopsis_section(&mut section)?;
        sub_man.render_description_section(&mut section)?;
        sub_man.render_options_section(&mut section)?;
        sub_man.render_extra_section(&mut section)?;
        // Each rendered block starts with its own `.SH`; demote them to `.SS` under this section.
        let text = String::from_utf8_lossy(&section).replace(".SH ", ".SS ");
        out.extend_from_slice(text.as_bytes());
    }
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// Escapes text for a roff body line: backslashes, and a leading `.` or `'` (control characters).
fn roff_escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

fn print(bytes: &[u8]) -> Result<ExitCode, CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|err| CliError::Failure(anyhow::anyhow!("cannot write to stdout: {err}")))?;
    Ok(ExitCode::SUCCESS)
}

pub fn completions(args: CompletionsArgs) -> Result<ExitCode, CliError> {
    print(&completion_script(args.shell))
}

pub fn man(_args: ManArgs) -> Result<ExitCode, CliError> {
    let page = man_page()
        .map_err(|err| CliError::Failure(anyhow::anyhow!("cannot render the man page: {err}")))?;
    print(&page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = String::from_utf8(completion_script(shell)).unwrap();
            for sub in ["run", "serve", "check", "explain", "completions"] {
                assert!(script.contains(sub), "{shell:?} script lacks {sub}");
            }
            assert!(!script.contains("__confine"), "hidden commands stay hidden");
        }
    }

    #[test]
    fn the_man_page_covers_each_visible_subcommand() {
        let page = String::from_utf8(man_page().unwrap()).unwrap();
        assert!(page.starts_with(".ie") || page.contains(".TH airlock"));
        assert!(page.contains(".SH \"AIRLOCK RUN\""));
        assert!(page.contains("\\-\\-tool\\-timeout"));
        assert!(!page.contains("__confine"));
    }
}
