//! Connections and the setup commands (AUTH, DBSIZE, INFO): connect, authenticate, send one
//! command and read its one reply. Not the hot path: replies here are small and copied.

use std::net::{SocketAddr, ToSocketAddrs};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use quiver_resp::encode_command;

use crate::error::{Error, Result};
use crate::net::resp::ReplyScanner;

/// Largest reply a setup command may return (INFO is a few KiB).
pub const SETUP_REPLY_MAX: usize = 1 << 20;
/// Read buffer of a setup command.
const SETUP_READ_BUF: usize = 4096;

/// Resolves `host:port` to one address (synchronously: before the runtime starts, so the
/// runtime needs no blocking pool).
pub fn resolve(host: &str, port: u16, display: &str) -> Result<SocketAddr> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::Connect {
            addr: display.to_string(),
            source: e,
            hint: "",
        })?
        .next()
        .ok_or_else(|| Error::Connect {
            addr: display.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
            hint: "",
        })
}

/// A connected, authenticated socket with Nagle off (requests must leave as soon as written).
pub async fn connect(addr: SocketAddr, display: &str, password: Option<&str>) -> Result<TcpStream> {
    let mut s = TcpStream::connect(addr).await.map_err(|e| Error::Connect {
        addr: display.to_string(),
        hint: if e.kind() == std::io::ErrorKind::ConnectionRefused {
            " (is the server running on that port?)"
        } else {
            ""
        },
        source: e,
    })?;
    s.set_nodelay(true).map_err(|e| Error::Net {
        addr: display.to_string(),
        what: "TCP_NODELAY",
        source: e,
    })?;
    if let Some(pw) = password {
        let reply = command(&mut s, display, "AUTH", &[b"AUTH", pw.as_bytes()]).await?;
        if let SetupReply::Error(text) = reply {
            return Err(Error::ServerReply {
                addr: display.to_string(),
                what: "AUTH",
                reply: text,
            });
        }
    }
    Ok(s)
}

/// A setup command's reply, as far as setup needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupReply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    /// Null, an aggregate, or a RESP3 type: setup does not look inside.
    Other,
}

/// Sends one command and reads its one reply.
pub async fn command(
    s: &mut TcpStream,
    display: &str,
    what: &'static str,
    args: &[&[u8]],
) -> Result<SetupReply> {
    let net = |e| Error::Net {
        addr: display.to_string(),
        what,
        source: e,
    };
    let mut out = Vec::new();
    encode_command(&mut out, args);
    s.write_all(&out).await.map_err(net)?;
    let mut got: Vec<u8> = Vec::new();
    let mut buf = [0u8; SETUP_READ_BUF];
    let mut scanner = ReplyScanner::new();
    let mut done = false;
    while !done {
        let n = s.read(&mut buf).await.map_err(net)?;
        if n == 0 {
            return Err(net(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )));
        }
        scanner
            .feed(&buf[..n], |_, _| done = true)
            .map_err(|e| Error::Protocol {
                addr: display.to_string(),
                reason: e.to_string(),
            })?;
        got.extend_from_slice(&buf[..n]);
        if got.len() > SETUP_REPLY_MAX {
            return Err(Error::Protocol {
                addr: display.to_string(),
                reason: format!("a reply to {what} longer than {SETUP_REPLY_MAX} bytes"),
            });
        }
    }
    Ok(parse_setup_reply(&got))
}

/// Interprets one complete reply (the scanner has checked its framing).
fn parse_setup_reply(b: &[u8]) -> SetupReply {
    let line_end = b.windows(2).position(|w| w == b"\r\n").unwrap_or(b.len());
    let line = String::from_utf8_lossy(&b[1.min(b.len())..line_end]).into_owned();
    match b.first() {
        Some(b'+') => SetupReply::Simple(line),
        Some(b'-') => SetupReply::Error(line),
        Some(b':') => line
            .parse()
            .map(SetupReply::Integer)
            .unwrap_or(SetupReply::Other),
        Some(b'$') | Some(b'=') => match line.parse::<usize>() {
            Ok(len) if b.len() >= line_end + 2 + len => {
                SetupReply::Bulk(b[line_end + 2..line_end + 2 + len].to_vec())
            }
            _ => SetupReply::Other,
        },
        _ => SetupReply::Other,
    }
}

/// The server's key count (DBSIZE).
pub async fn dbsize(s: &mut TcpStream, display: &str) -> Result<u64> {
    match command(s, display, "DBSIZE", &[b"DBSIZE"]).await? {
        SetupReply::Integer(n) if n >= 0 => Ok(n as u64),
        other => Err(Error::ServerReply {
            addr: display.to_string(),
            what: "DBSIZE",
            reply: format!("{other:?}"),
        }),
    }
}

/// `quiver` if the server's INFO names a Quiver version, `redis` if it names a Redis one,
/// else `unknown`.
pub async fn detect_system(s: &mut TcpStream, display: &str) -> Result<String> {
    let info = match command(s, display, "INFO", &[b"INFO", b"server"]).await? {
        SetupReply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        _ => String::new(),
    };
    Ok(if info.contains("quiver_version:") {
        "quiver"
    } else if info.contains("redis_version:") {
        "redis"
    } else {
        "unknown"
    }
    .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_replies_parse() {
        assert_eq!(
            parse_setup_reply(b"+OK\r\n"),
            SetupReply::Simple("OK".into())
        );
        assert_eq!(
            parse_setup_reply(b"-WRONGPASS invalid\r\n"),
            SetupReply::Error("WRONGPASS invalid".into())
        );
        assert_eq!(parse_setup_reply(b":1234\r\n"), SetupReply::Integer(1234));
        assert_eq!(
            parse_setup_reply(b"$5\r\na\r\nbc\r\n"),
            SetupReply::Bulk(b"a\r\nbc".to_vec())
        );
        assert_eq!(parse_setup_reply(b"$-1\r\n"), SetupReply::Other);
        assert_eq!(parse_setup_reply(b"*0\r\n"), SetupReply::Other);
    }
}
