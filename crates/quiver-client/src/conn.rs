//! A blocking connection: one TCP socket, requests written whole, replies
//! read in order.
//!
//! # The reconnect rule
//!
//! With [`ClientOptions::reconnect`] set, a request is sent on a fresh
//! connection (at most one reconnect per call) only when *none of its bytes
//! can have reached the server*:
//!
//! * the connection was dropped by an earlier error (timeout, reset, ...);
//! * before writing, a non-blocking peek shows the idle connection was
//!   closed or reset by the server (e.g. `CLIENT KILL`, an idle timeout, a
//!   restart), or that it sent unsolicited bytes;
//! * the very first `write` of the request fails with a disconnect error
//!   having accepted zero bytes.
//!
//! Once any byte of a request has been handed to the socket, a failure is
//! returned to the caller (the connection is dropped, the next call
//! reconnects): the server may have applied the command, and a silent retry
//! could apply it twice (`INCR`, a `BATCH`). This holds for reads too, even
//! of idempotent commands, so the rule stays one sentence.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::resp::{encode_command, Parser, Value};

/// Connect timeout of [`ClientOptions::new`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes asked of the socket per `read` call.
const READ_CHUNK: usize = 64 * 1024;
/// Request and reply buffers grown past this are released after the call,
/// so one huge reply does not pin its memory for the connection's life.
const KEEP_BUFFER: usize = 1024 * 1024;

/// How to reach and talk to the server.
#[derive(Clone)]
pub struct ClientOptions {
    /// `host:port`, resolved on every (re)connect.
    pub addr: String,
    /// `None`: the operating system's connect timeout.
    pub connect_timeout: Option<Duration>,
    /// Longest wait for one `read` call (not for a whole reply); `None`
    /// waits forever. Must not be zero.
    pub read_timeout: Option<Duration>,
    /// Longest wait for one `write` call; `None` waits forever. Must not be zero.
    pub write_timeout: Option<Duration>,
    /// Sent with `AUTH <password>` on every (re)connect.
    pub password: Option<String>,
    /// Reconnect under the rule in the module documentation.
    pub reconnect: bool,
    /// Send `HELLO 3` on connect, so the server replies in RESP3.
    pub resp3: bool,
    /// Send `READONLY` on every (re)connect, after `AUTH` and `HELLO`: a cluster node then
    /// serves this connection's reads of the slots it is a replica of (writes are still
    /// redirected to the master). A server that refuses it (a standalone one) fails the
    /// connect.
    pub readonly: bool,
}

impl ClientOptions {
    /// Options for `addr`: [`DEFAULT_CONNECT_TIMEOUT`], no read or write
    /// timeout, no password, reconnect on, RESP2, no `READONLY`.
    pub fn new(addr: impl Into<String>) -> Self {
        ClientOptions {
            addr: addr.into(),
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            read_timeout: None,
            write_timeout: None,
            password: None,
            reconnect: true,
            resp3: false,
            readonly: false,
        }
    }
}

/// The password is not printed.
impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("addr", &self.addr)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("reconnect", &self.reconnect)
            .field("resp3", &self.resp3)
            .field("readonly", &self.readonly)
            .finish()
    }
}

/// A blocking connection to a Quiver (or Redis) server.
///
/// Error replies come back as `Err` ([`Error::Server`] and friends) and
/// leave the connection usable. Connection failures ([`Error::is_connection_error`])
/// drop the socket; see the module documentation for what happens next.
pub struct Connection {
    options: ClientOptions,
    /// `None` after a connection failure, until the next reconnect.
    stream: Option<TcpStream>,
    parser: Parser,
    /// Reply bytes received and not parsed yet.
    read_buf: BytesMut,
    /// The request being built, kept between calls for its allocation.
    write_buf: BytesMut,
    /// Where `read` puts bytes before they are appended to `read_buf`:
    /// reading into a reused buffer avoids zeroing fresh memory per read.
    scratch: Box<[u8]>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("options", &self.options)
            .field("connected", &self.stream.is_some())
            .finish_non_exhaustive()
    }
}

/// A failed write: how many bytes the socket had accepted, and why it stopped.
struct WriteFailure {
    sent: usize,
    error: io::Error,
}

impl WriteFailure {
    fn into_send_failure(self) -> SendFailure {
        SendFailure {
            unsent: self.sent == 0,
            error: Error::from_io(self.error),
        }
    }
}

/// Why [`Connection::send`] failed, and whether the request may have reached the server.
#[derive(Debug)]
pub(crate) struct SendFailure {
    pub(crate) error: Error,
    /// No byte of the request was handed to a socket (the connect failed, or the first write
    /// took nothing): the request was certainly not applied and may be sent elsewhere.
    pub(crate) unsent: bool,
}

impl Connection {
    /// Connects to `addr` (`host:port`) with [`ClientOptions::new`].
    pub fn connect(addr: &str) -> Result<Connection> {
        Connection::connect_with(ClientOptions::new(addr))
    }

    /// Connects, then authenticates (`AUTH`), switches to RESP3 (`HELLO 3`)
    /// and sends `READONLY` as the options say.
    pub fn connect_with(options: ClientOptions) -> Result<Connection> {
        let mut conn = Connection {
            options,
            stream: None,
            parser: Parser::new(),
            read_buf: BytesMut::new(),
            write_buf: BytesMut::new(),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        };
        conn.open()?;
        Ok(conn)
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// True while a socket is open (it may still have been closed by the
    /// server without our knowing).
    pub fn is_connected(&self) -> bool {
        self.stream.is_some()
    }

    /// Sends one command and returns its reply. An error reply is returned
    /// as `Err` ([`Error::Server`], [`Error::NoAuth`], ...).
    pub fn command(&mut self, args: &[&[u8]]) -> Result<Value> {
        let mut request = std::mem::take(&mut self.write_buf);
        request.clear();
        encode_command(&mut request, args);
        let result = self.round_trip(&request, 1);
        self.write_buf = reuse(request);
        // round_trip returns one reply per command: the error cannot happen.
        let reply = result?
            .pop()
            .ok_or_else(|| Error::Protocol("no reply to the command".into()))?;
        into_result(reply)
    }

    /// Starts a pipeline: commands queued on it are sent in one write and
    /// their replies read in order by [`Pipeline::execute`].
    pub fn pipeline(&mut self) -> Pipeline<'_> {
        Pipeline {
            conn: self,
            request: BytesMut::new(),
            count: 0,
        }
    }

    /// `GET key`: the value, or `None` if the key does not exist.
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let reply = self.command(&[b"GET", key.as_ref()])?;
        optional_bulk("GET", reply)
    }

    /// `MGET key...`: one entry per key, in order. No keys: no round trip.
    pub fn multi_get<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
        args.push(b"MGET");
        args.extend(keys.iter().map(AsRef::as_ref));
        let items = match self.command(&args)? {
            Value::Array(items) if items.len() == keys.len() => items,
            other => {
                return Err(unexpected(
                    "MGET",
                    "an array with one entry per key",
                    &other,
                ))
            }
        };
        items
            .into_iter()
            .map(|item| optional_bulk("MGET", item))
            .collect()
    }

    /// `SET key value`.
    pub fn set(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let reply = self.command(&[b"SET", key.as_ref(), value.as_ref()])?;
        expect_ok("SET", reply)
    }

    /// `MSET key value ...`: all pairs in one command. No pairs: no round trip.
    pub fn multi_set<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, pairs: &[(K, V)]) -> Result<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(pairs.len() * 2 + 1);
        args.push(b"MSET");
        for (key, value) in pairs {
            args.push(key.as_ref());
            args.push(value.as_ref());
        }
        let reply = self.command(&args)?;
        expect_ok("MSET", reply)
    }

    /// `DEL key`: whether the key existed.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        let reply = self.command(&[b"DEL", key.as_ref()])?;
        Ok(count("DEL", reply)? > 0)
    }

    /// `DEL key...`: how many of the keys existed. No keys: no round trip.
    pub fn multi_delete<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
        args.push(b"DEL");
        args.extend(keys.iter().map(AsRef::as_ref));
        let reply = self.command(&args)?;
        count("DEL", reply)
    }

    /// `EXISTS key`.
    pub fn exists(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        let reply = self.command(&[b"EXISTS", key.as_ref()])?;
        Ok(count("EXISTS", reply)? > 0)
    }

    /// `INCR key`: the new value.
    pub fn incr(&mut self, key: impl AsRef<[u8]>) -> Result<i64> {
        match self.command(&[b"INCR", key.as_ref()])? {
            Value::Integer(n) => Ok(n),
            other => Err(unexpected("INCR", "an integer", &other)),
        }
    }

    /// `SCAN cursor [MATCH pattern] [COUNT count]`: the next cursor (0 when
    /// the scan is complete) and a page of keys.
    pub fn scan(
        &mut self,
        cursor: u64,
        pattern: Option<&[u8]>,
        count: Option<usize>,
    ) -> Result<(u64, Vec<Bytes>)> {
        let cursor = cursor.to_string();
        let count = count.map(|c| c.to_string());
        let mut args: Vec<&[u8]> = vec![b"SCAN", cursor.as_bytes()];
        if let Some(pattern) = pattern {
            args.extend([b"MATCH".as_slice(), pattern]);
        }
        if let Some(count) = &count {
            args.extend([b"COUNT".as_slice(), count.as_bytes()]);
        }
        let reply = self.command(&args)?;
        let shape = "an array of a cursor and an array of keys";
        let Value::Array(mut parts) = reply else {
            return Err(unexpected("SCAN", shape, &reply));
        };
        let (Some(Value::Array(keys)), Some(Value::Bulk(next)), None) =
            (parts.pop(), parts.pop(), parts.pop())
        else {
            return Err(Error::UnexpectedReply(format!("SCAN: expected {shape}")));
        };
        let next = std::str::from_utf8(&next)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::UnexpectedReply(format!("SCAN: invalid cursor {next:?}")))?;
        let keys = keys
            .into_iter()
            .map(|key| match key {
                Value::Bulk(key) => Ok(key),
                other => Err(unexpected("SCAN", "bulk string keys", &other)),
            })
            .collect::<Result<_>>()?;
        Ok((next, keys))
    }

    /// `INFO [section]`: the report text.
    pub fn info(&mut self, section: Option<&str>) -> Result<String> {
        let reply = match section {
            Some(section) => self.command(&[b"INFO", section.as_bytes()])?,
            None => self.command(&[b"INFO"])?,
        };
        match reply {
            // RESP2 sends a bulk string, RESP3 a verbatim `txt:` string.
            Value::Bulk(text) | Value::Verbatim { text, .. } => {
                Ok(String::from_utf8_lossy(&text).into_owned())
            }
            other => Err(unexpected("INFO", "a bulk string", &other)),
        }
    }

    /// `PING`: succeeds on `+PONG`.
    pub fn ping(&mut self) -> Result<()> {
        match self.command(&[b"PING"])? {
            Value::Simple(s) if s == "PONG" => Ok(()),
            other => Err(unexpected("PING", "+PONG", &other)),
        }
    }

    /// Sends `request` (holding `count` commands) and reads `count` replies,
    /// error replies included as [`Value::Error`]. Applies the reconnect rule.
    fn round_trip(&mut self, request: &[u8], count: usize) -> Result<Vec<Value>> {
        self.send(request).map_err(|failure| failure.error)?;
        self.receive(count)
    }

    /// Writes all of `request` (whole commands), applying the reconnect rule, without reading
    /// the replies: [`Connection::receive`] reads them. The cluster client writes to every
    /// node first and reads afterwards, so the nodes work on their shares at the same time.
    pub(crate) fn send(&mut self, request: &[u8]) -> Result<(), SendFailure> {
        // Before the first write nothing of the request can have reached the server.
        let unsent = |error: Error| SendFailure {
            error,
            unsent: true,
        };
        let mut reconnected = false;
        if self.stream.is_none() {
            if !self.options.reconnect {
                return Err(unsent(Error::NotConnected));
            }
            self.open().map_err(unsent)?;
            reconnected = true;
        } else if self.options.reconnect && !self.idle_connection_is_alive() {
            // Closed while idle: nothing of this request was written yet.
            self.open().map_err(unsent)?;
            reconnected = true;
        }
        match self.write_request(request) {
            Ok(()) => Ok(()),
            Err(failure)
                if failure.sent == 0
                    && self.options.reconnect
                    && !reconnected
                    && is_disconnect(&failure.error) =>
            {
                // The socket took none of the request: it cannot have been applied.
                self.open().map_err(unsent)?;
                self.write_request(request).map_err(|failure| {
                    self.close();
                    failure.into_send_failure()
                })
            }
            Err(failure) => {
                self.close();
                Err(failure.into_send_failure())
            }
        }
    }

    /// Reads `count` replies to what [`Connection::send`] wrote, error replies included as
    /// [`Value::Error`]. A failure closes the connection (the replies left are lost with it).
    pub(crate) fn receive(&mut self, count: usize) -> Result<Vec<Value>> {
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            match self.read_reply() {
                Ok(reply) => replies.push(reply),
                Err(e) => {
                    self.close();
                    return Err(e);
                }
            }
        }
        if self.read_buf.capacity() > KEEP_BUFFER && self.read_buf.is_empty() {
            self.read_buf = BytesMut::new();
        }
        Ok(replies)
    }

    /// Opens a new socket, replacing any old one, and runs the handshake.
    fn open(&mut self) -> Result<()> {
        self.close();
        self.stream = Some(open_stream(&self.options)?);
        if let Err(e) = self.handshake() {
            self.close();
            return Err(e);
        }
        Ok(())
    }

    /// `AUTH`, `HELLO 3` and `READONLY`, as configured.
    fn handshake(&mut self) -> Result<()> {
        if let Some(password) = self.options.password.clone() {
            match self.handshake_command(&[b"AUTH", password.as_bytes()])? {
                Value::Simple(_) => {}
                // Any refusal of AUTH is an authentication failure, whatever
                // its code (`WRONGPASS`, or `ERR` on servers without ACLs).
                Value::Error(text) => {
                    return Err(match Error::from_reply(text) {
                        Error::Server(text) => Error::AuthFailed(text),
                        e => e,
                    })
                }
                other => return Err(unexpected("AUTH", "+OK", &other)),
            }
        }
        if self.options.resp3 {
            match self.handshake_command(&[b"HELLO", b"3"])? {
                Value::Map(_) | Value::Array(_) => {}
                Value::Error(text) => return Err(Error::from_reply(text)),
                other => return Err(unexpected("HELLO", "a map", &other)),
            }
        }
        // On every connect, not once per `Connection`: the flag belongs to the server's
        // connection, and a reconnect starts a new one.
        if self.options.readonly {
            match self.handshake_command(&[b"READONLY"])? {
                Value::Simple(_) => {}
                Value::Error(text) => return Err(Error::from_reply(text)),
                other => return Err(unexpected("READONLY", "+OK", &other)),
            }
        }
        Ok(())
    }

    /// One command on the socket just opened: no reconnect logic.
    fn handshake_command(&mut self, args: &[&[u8]]) -> Result<Value> {
        let mut request = BytesMut::new();
        encode_command(&mut request, args);
        self.write_request(&request)
            .map_err(|failure| Error::from_io(failure.error))?;
        self.read_reply()
    }

    /// Closes the socket and forgets any partial reply.
    fn close(&mut self) {
        self.stream = None;
        self.parser.reset();
        self.read_buf.clear();
    }

    /// Checks, without blocking, that the server has neither closed the
    /// idle connection nor sent bytes nobody asked for.
    fn idle_connection_is_alive(&mut self) -> bool {
        let Some(stream) = &self.stream else {
            return false;
        };
        if !self.read_buf.is_empty() || stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut probe = [0u8; 1];
        // WouldBlock: open and silent. Ok(0): closed. Ok(_): unsolicited
        // bytes, which would be taken for the next reply. Err: reset.
        let alive =
            matches!(stream.peek(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        stream.set_nonblocking(false).is_ok() && alive
    }

    /// Writes all of `request`, counting the bytes the socket accepted.
    fn write_request(&mut self, request: &[u8]) -> Result<(), WriteFailure> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(WriteFailure {
                sent: 0,
                error: io::ErrorKind::NotConnected.into(),
            });
        };
        let mut sent = 0;
        while sent < request.len() {
            match stream.write(&request[sent..]) {
                Ok(0) => {
                    return Err(WriteFailure {
                        sent,
                        error: io::ErrorKind::WriteZero.into(),
                    })
                }
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(WriteFailure { sent, error }),
            }
        }
        Ok(())
    }

    /// Reads until one whole reply has been parsed.
    fn read_reply(&mut self) -> Result<Value> {
        loop {
            if let Some(reply) = self.parser.parse(&mut self.read_buf)? {
                return Ok(reply);
            }
            let stream = self.stream.as_mut().ok_or(Error::NotConnected)?;
            match stream.read(&mut self.scratch) {
                Ok(0) => return Err(Error::ConnectionClosed),
                Ok(n) => self.read_buf.extend_from_slice(&self.scratch[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::from_io(e)),
            }
        }
    }
}

/// Commands queued for one write; see [`Connection::pipeline`].
///
/// [`Pipeline::execute`] returns `Err` only when the connection failed (the
/// replies, and which commands were applied, are then unknown). Otherwise it
/// returns one `Result` per command, in order: `Ok(value)`, or `Err` for an
/// error reply ([`Error::Server`], ...), which does not stop the commands
/// after it.
#[derive(Debug)]
pub struct Pipeline<'c> {
    conn: &'c mut Connection,
    request: BytesMut,
    count: usize,
}

impl Pipeline<'_> {
    /// Queues one command.
    pub fn command(&mut self, args: &[&[u8]]) -> &mut Self {
        encode_command(&mut self.request, args);
        self.count += 1;
        self
    }

    /// Commands queued so far.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Sends every queued command in one write and reads all the replies.
    /// An empty pipeline makes no round trip.
    pub fn execute(self) -> Result<Vec<Result<Value>>> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        let replies = self.conn.round_trip(&self.request, self.count)?;
        Ok(replies.into_iter().map(into_result).collect())
    }
}

/// Resolves the address and connects to the first of its socket addresses
/// that accepts.
fn open_stream(options: &ClientOptions) -> Result<TcpStream> {
    let invalid = |reason: String| Error::InvalidAddress {
        addr: options.addr.clone(),
        reason,
    };
    let addrs: Vec<SocketAddr> = options
        .addr
        .to_socket_addrs()
        .map_err(|e| invalid(e.to_string()))?
        .collect();
    let mut last_error = None;
    for addr in addrs {
        let connected = match options.connect_timeout {
            Some(timeout) => TcpStream::connect_timeout(&addr, timeout),
            None => TcpStream::connect(addr),
        };
        match connected {
            Ok(stream) => {
                // Requests are written whole; Nagle would only delay them.
                stream.set_nodelay(true)?;
                stream.set_read_timeout(options.read_timeout)?;
                stream.set_write_timeout(options.write_timeout)?;
                return Ok(stream);
            }
            Err(e) => last_error = Some(e),
        }
    }
    Err(match last_error {
        Some(e) => Error::from_io(e),
        None => invalid("resolves to no socket address".into()),
    })
}

/// Errors meaning the peer is gone (as opposed to a timeout or a local problem).
fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected
    )
}

/// An emptied buffer, unless it grew too large to keep.
fn reuse(mut buf: BytesMut) -> BytesMut {
    if buf.capacity() > KEEP_BUFFER {
        return BytesMut::new();
    }
    buf.clear();
    buf
}

/// An error reply as `Err`, anything else as `Ok`.
pub(crate) fn into_result(reply: Value) -> Result<Value> {
    match reply {
        Value::Error(text) => Err(Error::from_reply(text)),
        other => Ok(other),
    }
}

pub(crate) fn unexpected(command: &str, expected: &str, got: &Value) -> Error {
    let mut shown = format!("{got:?}");
    // Enough to recognise the reply without flooding a log with a huge one.
    const SHOWN_MAX: usize = 100;
    if shown.len() > SHOWN_MAX {
        let cut = (0..=SHOWN_MAX)
            .rev()
            .find(|&i| shown.is_char_boundary(i))
            .unwrap_or(0);
        shown.truncate(cut);
        shown.push_str("...");
    }
    Error::UnexpectedReply(format!(
        "{command}: expected {expected}, got {} {shown}",
        got.kind()
    ))
}

pub(crate) fn optional_bulk(command: &str, reply: Value) -> Result<Option<Bytes>> {
    match reply {
        Value::Bulk(value) => Ok(Some(value)),
        Value::Null => Ok(None),
        other => Err(unexpected(command, "a bulk string or null", &other)),
    }
}

pub(crate) fn expect_ok(command: &str, reply: Value) -> Result<()> {
    match reply {
        Value::Simple(s) if s == "OK" => Ok(()),
        other => Err(unexpected(command, "+OK", &other)),
    }
}

pub(crate) fn count(command: &str, reply: Value) -> Result<u64> {
    match reply {
        Value::Integer(n) if n >= 0 => Ok(n as u64),
        other => Err(unexpected(command, "a non-negative integer", &other)),
    }
}
