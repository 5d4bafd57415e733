//! The `airlock` binary: everything lives in the library; this only maps the outcome to an exit code.

fn main() -> std::process::ExitCode {
    airlock::cli::main()
}
