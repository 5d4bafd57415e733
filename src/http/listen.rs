//! Where `airlock serve --listen` listens: `ADDR:PORT` (TCP) or `unix:PATH`, and whether that
//! address is reachable only from this machine.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// A parsed `--listen` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    /// A unix domain socket: reachable by whoever the file's permissions let in.
    Unix(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenError {
    #[error(
        "`{0}` is not an address to listen on: write ADDR:PORT (`127.0.0.1:8080`, `[::1]:8080`, `localhost:8080`) or unix:PATH"
    )]
    Malformed(String),
    #[error("`unix:` needs an absolute path, e.g. unix:/run/airlock/mcp.sock")]
    RelativeSocket,
}

impl ListenAddr {
    /// Parses `ADDR:PORT`, `[V6]:PORT`, `localhost:PORT` or `unix:/absolute/path`.
    pub fn parse(text: &str) -> Result<ListenAddr, ListenError> {
        if let Some(path) = text.strip_prefix("unix:") {
            let path = PathBuf::from(path);
            if !path.is_absolute() {
                return Err(ListenError::RelativeSocket);
            }
            return Ok(ListenAddr::Unix(path));
        }
        if let Some(port) = text.strip_prefix("localhost:") {
            // `localhost` means loopback here, never a name resolved through /etc/hosts or DNS.
            let port = port
                .parse::<u16>()
                .map_err(|_| ListenError::Malformed(text.to_string()))?;
            return Ok(ListenAddr::Tcp(SocketAddr::from(([127, 0, 0, 1], port))));
        }
        text.parse::<SocketAddr>()
            .map(ListenAddr::Tcp)
            .map_err(|_| ListenError::Malformed(text.to_string()))
    }

    /// True when only this machine can connect: a loopback IP, or a unix socket.
    pub fn is_local(&self) -> bool {
        match self {
            ListenAddr::Tcp(addr) => is_loopback(addr.ip()),
            ListenAddr::Unix(_) => true,
        }
    }
}

/// Loopback, including IPv4-mapped IPv6 loopback (`::ffff:127.0.0.1`).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "{addr}"),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling() {
        assert_eq!(
            ListenAddr::parse("127.0.0.1:8080").unwrap(),
            ListenAddr::Tcp("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            ListenAddr::parse("[::1]:9").unwrap(),
            ListenAddr::Tcp("[::1]:9".parse().unwrap())
        );
        assert_eq!(
            ListenAddr::parse("localhost:80").unwrap(),
            ListenAddr::Tcp("127.0.0.1:80".parse().unwrap())
        );
        assert_eq!(
            ListenAddr::parse("unix:/run/a.sock").unwrap(),
            ListenAddr::Unix("/run/a.sock".into())
        );
        assert_eq!(
            ListenAddr::parse("unix:a.sock"),
            Err(ListenError::RelativeSocket)
        );
        for bad in ["8080", "example.com:80", "127.0.0.1", "localhost:x", ""] {
            assert!(ListenAddr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_loopback_and_unix_sockets_are_local() {
        for local in [
            "127.0.0.1:1",
            "127.9.9.9:1",
            "[::1]:1",
            "[::ffff:127.0.0.1]:1",
            "unix:/x",
        ] {
            assert!(ListenAddr::parse(local).unwrap().is_local(), "{local}");
        }
        for remote in [
            "0.0.0.0:1",
            "[::]:1",
            "192.168.1.2:1",
            "[::ffff:10.0.0.1]:1",
        ] {
            assert!(!ListenAddr::parse(remote).unwrap().is_local(), "{remote}");
        }
    }
}
