//! The control socket: each running gateway listens on `<state_dir>/gateways/<pid>.sock` (the
//! directory 0700, the socket 0600: owner only). A client writes one request line (`status` or
//! `reload`; nothing within a second means `status`), and the gateway answers one JSON document
//! and closes. `airlock status` and `airlock reload` talk to every socket in that directory.
//!
//! One socket per gateway because several hosts may each run their own `airlock serve`.

use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// Where the sockets of running gateways live.
pub fn gateways_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("gateways")
}

/// A bound control socket; the file is removed on drop.
#[derive(Debug)]
pub struct ControlSocket {
    pub path: PathBuf,
    pub listener: std::os::unix::net::UnixListener,
}

impl ControlSocket {
    /// Creates the owner-only directory and binds `<pid>.sock` in it.
    pub fn bind(state_dir: &Path) -> io::Result<ControlSocket> {
        let dir = gateways_dir(state_dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let path = dir.join(format!("{}.sock", std::process::id()));
        // A socket left by a crashed gateway whose pid is reused now.
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        Ok(ControlSocket { path, listener })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What a client asks a gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Status,
    /// Re-read the config and policies (as SIGHUP does).
    Reload,
}

impl Request {
    fn line(self) -> &'static [u8] {
        match self {
            Request::Status => b"status\n",
            Request::Reload => b"reload\n",
        }
    }
}

/// Reads a client's request line (a client that says nothing within a second asks for the
/// status, as clients before requests did).
pub async fn read_request(stream: tokio::net::UnixStream) -> (Request, tokio::net::UnixStream) {
    use tokio::io::AsyncReadExt;
    let mut stream = stream;
    let mut line = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut line)).await;
    let request = match read {
        Ok(Ok(n)) if line[..n].starts_with(b"reload") => Request::Reload,
        _ => Request::Status,
    };
    (request, stream)
}

/// What one socket answered.
#[derive(Debug)]
pub struct GatewayReport {
    pub socket: PathBuf,
    pub status: io::Result<Value>,
}

/// Asks every gateway in `state_dir`. Sockets nobody listens on (a gateway that was killed)
/// are removed.
pub fn query_all(state_dir: &Path, timeout: Duration) -> io::Result<Vec<GatewayReport>> {
    ask_all(state_dir, Request::Status, timeout)
}

/// Sends `request` to every gateway in `state_dir`. Sockets nobody listens on are removed.
pub fn ask_all(
    state_dir: &Path,
    request: Request,
    timeout: Duration,
) -> io::Result<Vec<GatewayReport>> {
    let dir = gateways_dir(state_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut sockets: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "sock"))
        .collect();
    sockets.sort();
    let mut reports = Vec::new();
    for socket in sockets {
        match query(&socket, request, timeout) {
            Ok(status) => reports.push(GatewayReport {
                socket,
                status: Ok(status),
            }),
            Err(err) if err.kind() == io::ErrorKind::ConnectionRefused => {
                let _ = std::fs::remove_file(&socket);
            }
            Err(err) => reports.push(GatewayReport {
                socket,
                status: Err(err),
            }),
        }
    }
    Ok(reports)
}

fn query(socket: &Path, request: Request, timeout: Duration) -> io::Result<Value> {
    let mut stream = std::os::unix::net::UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(request.line())?;
    let mut text = String::new();
    stream.take(16 * 1024 * 1024).read_to_string(&mut text)?;
    serde_json::from_str(&text).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}
