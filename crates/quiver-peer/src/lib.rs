//! `quiver-peer`: how a Quiver process talks RESP to its peers (the router to the nodes, a
//! chain's member to the next): connections pooled per node address, and a batch of commands
//! sent on one connection as one write whose replies are framed as they arrive (kept as the
//! node's bytes, never decoded and encoded again).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use quiver_resp::limits::ReplyLimits;
use quiver_resp::scan::{Event, ScanError, Scanner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Longest wait for a node to accept a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for a batch's replies. A node holds a write to a range being handed over for
/// up to 10 s (`quiver_node::exec::FROZEN_WAIT_MAX`) before it answers TRYAGAIN, so this is longer.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections kept per node and protocol; more are closed when given back.
pub const IDLE_PER_NODE_MAX: usize = 64;
/// Bytes read per call at least.
const READ_CHUNK: usize = 64 * 1024;

/// Why a node could not be reached or answered nonsense. The connection is dropped; the
/// commands of the batch get an error naming the node (a write among them may or may not
/// have been applied, as when a client loses its own connection).
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("cannot connect to node {addr}: {source}")]
    Connect {
        addr: Arc<str>,
        #[source]
        source: std::io::Error,
    },
    #[error("connecting to node {addr} timed out")]
    ConnectTimeout { addr: Arc<str> },
    #[error("node {addr}: {source}")]
    Io {
        addr: Arc<str>,
        #[source]
        source: std::io::Error,
    },
    #[error("node {addr} closed the connection")]
    Closed { addr: Arc<str> },
    #[error("node {addr} sent no reply within {} s", REPLY_TIMEOUT.as_secs())]
    Timeout { addr: Arc<str> },
    #[error("node {addr} sent a malformed reply: {source}")]
    Protocol {
        addr: Arc<str>,
        #[source]
        source: ScanError,
    },
    #[error("node {addr} refused the connection's setup (READONLY, HELLO 3): {text}")]
    Setup { addr: Arc<str>, text: String },
}

impl PeerError {
    /// Whether the error came before the caller's request could reach the node (connecting,
    /// or setting the connection up): none of it ran there, so it may be sent again.
    pub fn before_request(&self) -> bool {
        matches!(
            self,
            PeerError::Connect { .. } | PeerError::ConnectTimeout { .. } | PeerError::Setup { .. }
        )
    }

    /// The node's address.
    pub fn addr(&self) -> &Arc<str> {
        match self {
            PeerError::Connect { addr, .. }
            | PeerError::ConnectTimeout { addr }
            | PeerError::Io { addr, .. }
            | PeerError::Closed { addr }
            | PeerError::Timeout { addr }
            | PeerError::Protocol { addr, .. }
            | PeerError::Setup { addr, .. } => addr,
        }
    }
}

/// One reply of a batch: where its bytes are in [`Replies::buf`], and for an array of
/// scalars (an MGET's, a KEYS') where each element's bytes are.
#[derive(Clone, Debug)]
pub struct RawReply {
    pub range: Range<usize>,
    /// Indices into [`Replies::elements`]; `None` for anything but an array of scalars.
    pub elements: Option<Range<usize>>,
}

/// The replies of a batch, in order, over the bytes they came in.
#[derive(Debug, Default)]
pub struct Replies {
    pub buf: Bytes,
    pub replies: Vec<RawReply>,
    pub elements: Vec<Range<usize>>,
}

impl Replies {
    pub fn bytes(&self, i: usize) -> &[u8] {
        &self.buf[self.replies[i].range.clone()]
    }

    /// The text of an error reply (`-MOVED 12 h:p` gives `MOVED 12 h:p`), or `None`.
    pub fn error(&self, i: usize) -> Option<&[u8]> {
        let b = self.bytes(i);
        (b.first() == Some(&b'-')).then(|| &b[1..b.len() - 2])
    }

    /// The value of an integer reply.
    pub fn integer(&self, i: usize) -> Option<i64> {
        let b = self.bytes(i);
        (b.first() == Some(&b':')).then(|| quiver_resp::int::parse_integer(&b[1..b.len() - 2]))?
    }

    /// The elements of an array-of-scalars reply, each as its bytes.
    pub fn element_ranges(&self, i: usize) -> Option<&[Range<usize>]> {
        self.replies[i].elements.clone().map(|r| &self.elements[r])
    }
}

/// A connection to one node.
pub struct PeerConn {
    pub addr: Arc<str>,
    resp3: bool,
    stream: TcpStream,
    /// Reply bytes not yet framed (empty between batches: a node sends nothing unasked).
    buf: BytesMut,
}

impl PeerConn {
    /// Connects to `addr` with nothing sent: the caller's commands are the first (a chain's
    /// sender authenticates first; a probe's PING counts whatever the answer).
    pub async fn open(addr: Arc<str>) -> Result<PeerConn, PeerError> {
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&*addr)).await {
            Err(_) => return Err(PeerError::ConnectTimeout { addr }),
            Ok(Err(source)) => return Err(PeerError::Connect { addr, source }),
            Ok(Ok(s)) => s,
        };
        let _ = stream.set_nodelay(true);
        Ok(PeerConn {
            addr,
            resp3: false,
            stream,
            buf: BytesMut::with_capacity(READ_CHUNK),
        })
    }

    /// Connects to `addr` as a READONLY connection (a node that is a replica of a key's chain
    /// serves its reads: the multiget planner sends keys to replicas); with `resp3`, switches
    /// it to RESP3 (HELLO 3) so that replies come in the protocol the router's client speaks.
    pub async fn connect(addr: Arc<str>, resp3: bool) -> Result<PeerConn, PeerError> {
        let mut conn = PeerConn::open(addr).await?;
        conn.resp3 = resp3;
        let mut hello = BytesMut::new();
        quiver_resp::request::encode_command(&mut hello, &[b"READONLY"]);
        if resp3 {
            quiver_resp::request::encode_command(&mut hello, &[b"HELLO", b"3"]);
        }
        let n = 1 + usize::from(resp3);
        let r = conn.send(&hello, n).await?;
        if let Some(text) = (0..n).find_map(|i| r.error(i)) {
            return Err(PeerError::Setup {
                addr: conn.addr.clone(),
                text: String::from_utf8_lossy(text).into_owned(),
            });
        }
        Ok(conn)
    }

    /// Whether the node closed the connection (or sent something unasked) while it was idle:
    /// a node that exited, or was killed, did so before a request written now could reach
    /// it. Never waits.
    fn is_stale(&self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.try_read(&mut byte) {
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            Ok(_) => true,
        }
    }

    /// The connection's two halves, for a caller that writes and reads on schedules of its
    /// own (a chain's sender streams its messages and reads their answers as they come).
    pub fn into_split(self) -> (PeerReader, OwnedWriteHalf) {
        let (rd, wr) = self.stream.into_split();
        let reader = PeerReader {
            addr: self.addr,
            rd,
            buf: self.buf,
        };
        (reader, wr)
    }

    /// Writes `request` (`n` encoded commands) and reads their `n` replies. Writing and
    /// reading go on together: a node answering a long batch writes replies before it has
    /// read all of it, and would stop reading once its replies fill the socket.
    pub async fn send(&mut self, request: &[u8], n: usize) -> Result<Replies, PeerError> {
        let addr = self.addr.clone();
        let (mut rd, mut wr) = self.stream.split();
        let buf = &mut self.buf;
        let write = async {
            wr.write_all(request).await.map_err(|source| PeerError::Io {
                addr: addr.clone(),
                source,
            })
        };
        let read = read_replies(&mut rd, buf, n, &addr);
        match tokio::time::timeout(REPLY_TIMEOUT, async { tokio::try_join!(write, read) }).await {
            Err(_) => Err(PeerError::Timeout { addr }),
            Ok(Err(e)) => Err(e),
            Ok(Ok(((), replies))) => Ok(replies),
        }
    }
}

/// The reading half of a [`PeerConn`] ([`PeerConn::into_split`]), with the bytes read ahead.
pub struct PeerReader {
    addr: Arc<str>,
    rd: OwnedReadHalf,
    buf: BytesMut,
}

impl PeerReader {
    /// The next `n` replies, as they arrive (no time bound: the caller sets its own).
    pub async fn next(&mut self, n: usize) -> Result<Replies, PeerError> {
        read_replies(&mut self.rd, &mut self.buf, n, &self.addr).await
    }
}

/// Reads until `n` complete replies are in `buf`, then takes them out of it (a batch's
/// replies, and a [`PeerReader`]'s).
async fn read_replies<R: AsyncReadExt + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    n: usize,
    addr: &Arc<str>,
) -> Result<Replies, PeerError> {
    let mut scanner = Scanner::new(ReplyLimits::default());
    let mut replies = Vec::with_capacity(n);
    let mut elements = Vec::new();
    let mut pos = 0;
    let mut start = 0;
    let mut first_element = 0;
    let mut flat = true;
    loop {
        // Frame what has arrived; an aggregate's end comes in a step of its own, after its
        // last element's, with no bytes.
        while replies.len() < n {
            let step = scanner
                .step(&buf[pos..])
                .map_err(|source| PeerError::Protocol {
                    addr: addr.clone(),
                    source,
                })?;
            pos += step.consumed;
            let Some(event) = step.event else { break };
            let depth = scanner.depth();
            let done = match event {
                Event::Start { .. } => {
                    if depth > 1 {
                        flat = false;
                    }
                    false
                }
                Event::End { .. } => depth == 0,
                Event::Line { .. } | Event::Blob { .. } | Event::Null { .. } => {
                    if depth == 1 {
                        elements.push(pos - event.item_len()..pos);
                    }
                    depth == 0
                }
            };
            if done {
                let is_array = buf[start] == b'*';
                replies.push(RawReply {
                    range: start..pos,
                    elements: (is_array && flat).then_some(first_element..elements.len()),
                });
                if !(is_array && flat) {
                    elements.truncate(first_element);
                }
                start = pos;
                first_element = elements.len();
                flat = true;
            }
        }
        if replies.len() == n {
            break;
        }
        buf.reserve(READ_CHUNK);
        match rd.read_buf(buf).await {
            Ok(0) => return Err(PeerError::Closed { addr: addr.clone() }),
            Ok(_) => {}
            Err(source) => {
                return Err(PeerError::Io {
                    addr: addr.clone(),
                    source,
                })
            }
        }
    }
    let buf = buf.split_to(pos).freeze();
    Ok(Replies {
        buf,
        replies,
        elements,
    })
}

/// A node's address and whether its connections speak RESP3.
type PoolKey = (Arc<str>, bool);

/// Idle connections by node address and protocol.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<PoolKey, Vec<PeerConn>>>,
}

impl Pool {
    /// An idle connection to `addr` that the node has not closed, or a new one (so that a
    /// node that died while its connections were idle is seen as unreachable, not as one that
    /// failed during a request).
    pub async fn get(&self, addr: &Arc<str>, resp3: bool) -> Result<PeerConn, PeerError> {
        let key = (addr.clone(), resp3);
        // Bounded: each round takes one of at most IDLE_PER_NODE_MAX connections.
        loop {
            let idle = self.idle.lock().get_mut(&key).and_then(Vec::pop);
            match idle {
                Some(c) if c.is_stale() => continue,
                Some(c) => return Ok(c),
                None => return PeerConn::connect(addr.clone(), resp3).await,
            }
        }
    }

    /// Gives back a connection whose batch completed (one that failed is dropped instead).
    pub fn put(&self, conn: PeerConn) {
        let mut idle = self.idle.lock();
        let list = idle.entry((conn.addr.clone(), conn.resp3)).or_default();
        if list.len() < IDLE_PER_NODE_MAX {
            list.push(conn);
        }
    }

    /// Closes the idle connections to nodes no longer in the topology.
    pub fn retain(&self, addrs: &[Arc<str>]) {
        self.idle
            .lock()
            .retain(|(addr, _), _| addrs.iter().any(|a| a == addr));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A node that answers READONLY on each connection, then closes it after `keep` ms.
    async fn node(keep: u64) -> (Arc<str>, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: Arc<str> = listener.local_addr().unwrap().to_string().into();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(b"+OK\r\n").await;
                    tokio::time::sleep(Duration::from_millis(keep)).await;
                });
            }
        });
        (addr, accepted)
    }

    /// An idle connection the node closed is not handed out again: a request sent on it
    /// would fail as if the node had died during it.
    #[tokio::test]
    async fn the_pool_drops_an_idle_connection_the_node_closed() {
        let (addr, accepted) = node(0).await;
        let pool = Pool::default();
        let conn = pool.get(&addr, false).await.unwrap();
        pool.put(conn);
        // Bounded: the node closes at once; the FIN arrives within the loop's time.
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let conn = pool.get(&addr, false).await.unwrap();
            let fresh = accepted.load(std::sync::atomic::Ordering::SeqCst) > 1;
            pool.put(conn);
            if fresh {
                return;
            }
        }
        panic!("the closed connection was handed out again and again");
    }

    #[tokio::test]
    async fn the_pool_keeps_an_idle_connection_the_node_keeps() {
        let (addr, accepted) = node(60_000).await;
        let pool = Pool::default();
        for _ in 0..3 {
            let conn = pool.get(&addr, false).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            pool.put(conn);
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn only_errors_before_the_request_may_be_sent_again() {
        let addr: Arc<str> = "127.0.0.1:1".into();
        let refused = PeerError::Connect {
            addr: addr.clone(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        assert!(refused.before_request());
        assert_eq!(refused.addr(), &addr);
        let closed = PeerError::Closed { addr: addr.clone() };
        assert!(!closed.before_request());
        assert!(!PeerError::Timeout { addr }.before_request());
    }
}
