//! The floor of any stdio proxy: two trivial byte-forwarding proxies, run by re-executing the
//! bench binary itself with `AIRLOCK_BENCH_PROXY` set, so a bench can tell airlock's own cost
//! apart from the two pipe hops (host → proxy → server and back) every proxy adds.

use std::io::Write;
use std::process::{Command, Stdio};

/// Set (to `threads` or `tokio`) when the bench binary runs as a floor proxy; the arguments are
/// the server command.
pub const PROXY_ENV: &str = "AIRLOCK_BENCH_PROXY";

/// Runs the proxy and returns `true` when this process was started as one.
pub fn run_as_proxy_if_asked() -> bool {
    let Ok(kind) = std::env::var(PROXY_ENV) else {
        return false;
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (program, args) = argv.split_first().expect("proxy: a server command");
    match kind.as_str() {
        "threads" => proxy_threads(program, args),
        _ => proxy_tokio(program, args),
    }
    true
}

/// The floor proxy, blocking threads: each direction is one thread in `read` → `write_all`.
fn proxy_threads(program: &str, args: &[String]) {
    use std::io::Read;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut to_server = child.stdin.take().expect("stdin");
    let mut from_server = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        let mut stdout = std::io::stdout().lock();
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from_server.read(&mut buf) {
            if stdout
                .write_all(&buf[..n])
                .and_then(|()| stdout.flush())
                .is_err()
            {
                break;
            }
        }
    });
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = stdin.read(&mut buf) {
        if to_server.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    drop(to_server);
    let _ = child.wait();
}

/// The floor proxy, one tokio current-thread loop (airlock's shape): a task per direction, each
/// `read` → `write_all` on non-blocking pipes.
fn proxy_tokio(program: &str, args: &[String]) {
    use std::os::fd::{AsFd, BorrowedFd};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::unix::pipe;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let mut to_server = child.stdin.take().expect("stdin");
        let mut from_server = child.stdout.take().expect("stdout");
        let fd = |f: BorrowedFd<'_>| f.try_clone_to_owned().expect("dup");
        let mut host_in =
            pipe::Receiver::from_owned_fd(fd(std::io::stdin().as_fd())).expect("stdin pipe");
        let mut host_out =
            pipe::Sender::from_owned_fd(fd(std::io::stdout().as_fd())).expect("stdout pipe");
        let up = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                if host_out.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        });
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = host_in.read(&mut buf).await {
            if to_server.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        drop(to_server);
        let _ = child.wait().await;
        let _ = up.await;
    });
}
