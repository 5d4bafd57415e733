//! The `airlock` binary: everything lives in the library; this only maps the outcome to an exit code.

/// mimalloc instead of glibc's allocator: a call through airlock makes many short-lived
/// allocations (the host's request as a JSON tree, the gate's reading of it, two audit records),
/// and glibc's `malloc`/`free` were about a quarter of `run`'s CPU. Measured with `cargo bench
/// --bench run` (docs/performance.md): pipelined throughput 0.63-0.78x the byte-copy proxy with
/// glibc, 0.72-1.05x with mimalloc, alternating runs of one session. Its arenas would double airlock's RSS under transparent huge pages, which
/// airlock therefore turns off for itself (`process::huge_pages`). The library, its tests and
/// fuzz targets keep the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    airlock::cli::main()
}
