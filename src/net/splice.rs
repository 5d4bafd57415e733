//! Relaying between two TCP sockets without copying through user space: each direction moves
//! bytes socket → pipe → socket with `splice(2)`, so airlock touches no payload and holds no
//! buffer per connection (the pipe's pages are the kernel's). Half-closes are passed on like the
//! copying path ([`super::relay::relay_counted`]), which stays the fallback (a pipe cannot be
//! made) and the path for anything that is not a socket.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::Interest;
use tokio::net::TcpStream;

/// The pipe between the two sockets: as large as the kernel grants an unprivileged process by
/// default, so one splice moves what a socket buffer holds.
const PIPE_BYTES: usize = 1 << 20;

struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

fn pipe() -> io::Result<Pipe> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two fds into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created by pipe2 and are owned by nobody else.
    let pipe = unsafe {
        Pipe {
            read: OwnedFd::from_raw_fd(fds[0]),
            write: OwnedFd::from_raw_fd(fds[1]),
        }
    };
    // Best effort: a smaller pipe only means more splices.
    // SAFETY: F_SETPIPE_SZ takes an integer argument.
    unsafe {
        libc::fcntl(
            pipe.write.as_raw_fd(),
            libc::F_SETPIPE_SZ,
            PIPE_BYTES as libc::c_int,
        )
    };
    Ok(pipe)
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: splice takes two fds we hold open and null offsets (both are a pipe or a socket).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Relays both ways until both directions ended; (bytes client → upstream, bytes upstream →
/// client, the first error). `None` when the pipes cannot be made (the caller copies instead).
pub async fn relay_spliced(
    client: &TcpStream,
    upstream: &TcpStream,
) -> Option<(u64, u64, Option<io::Error>)> {
    let (up_pipe, down_pipe) = match (pipe(), pipe()) {
        (Ok(up), Ok(down)) => (up, down),
        _ => return None,
    };
    let ((up, up_error), (down, down_error)) = tokio::join!(
        one_way(client, upstream, &up_pipe),
        one_way(upstream, client, &down_pipe),
    );
    Some((up as u64, down as u64, up_error.or(down_error)))
}

async fn one_way(from: &TcpStream, to: &TcpStream, pipe: &Pipe) -> (usize, Option<io::Error>) {
    let mut total = 0usize;
    loop {
        let filled = loop {
            let read = from
                .async_io(Interest::READABLE, || {
                    splice(from.as_raw_fd(), pipe.write.as_raw_fd(), PIPE_BYTES)
                })
                .await;
            match read {
                Ok(n) => break n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    let _ = shutdown_write(to);
                    return (total, Some(err));
                }
            }
        };
        if filled == 0 {
            return (total, shutdown_write(to).err());
        }
        let mut left = filled;
        while left > 0 {
            let written = to
                .async_io(Interest::WRITABLE, || {
                    splice(pipe.read.as_raw_fd(), to.as_raw_fd(), left)
                })
                .await;
            match written {
                Ok(n) => {
                    left -= n;
                    total += n;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return (total, Some(err)),
            }
        }
    }
}

fn shutdown_write(stream: &TcpStream) -> io::Result<()> {
    match socket2::SockRef::from(stream).shutdown(std::net::Shutdown::Write) {
        Err(err) if err.raw_os_error() == Some(libc::ENOTCONN) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (connected, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        (connected.unwrap(), accepted.unwrap().0)
    }

    #[tokio::test]
    async fn relays_both_ways_with_counts_and_half_closes() {
        let (mut server, client) = pair().await;
        let (upstream, mut remote) = pair().await;
        let relay = tokio::spawn(async move { relay_spliced(&client, &upstream).await.unwrap() });
        let big = vec![7u8; 3 << 20];
        let writer = {
            let big = big.clone();
            tokio::spawn(async move {
                server.write_all(&big).await.unwrap();
                server.shutdown().await.unwrap();
                let mut back = Vec::new();
                server.read_to_end(&mut back).await.unwrap();
                back
            })
        };
        let mut got = Vec::new();
        remote.read_to_end(&mut got).await.unwrap();
        assert_eq!(
            got.len(),
            big.len(),
            "the half-close reached the remote end"
        );
        remote.write_all(b"done").await.unwrap();
        remote.shutdown().await.unwrap();
        assert_eq!(writer.await.unwrap(), b"done");
        let (up, down, error) = relay.await.unwrap();
        assert_eq!((up, down), (big.len() as u64, 4));
        assert!(error.is_none(), "{error:?}");
    }
}
