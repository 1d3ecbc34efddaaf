//! A member's sender: forwards the chain's messages to the successor and learns their
//! commits from its answers.
//!
//! One task per stream and generation (a new version or successor starts a new one; the old
//! one sees the generation change and ends). On each connection it sends every message not
//! yet known committed, in order, pipelined (the successor skips those it already applied but
//! still answers them once committed, so the answers — one per message, in order — commit
//! them here). Writing and reading go on in two futures: the successor answers a message only
//! once it is committed, and would stop reading if its answers were not read.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;

use crate::chain::wire::encode_apply;
use crate::chain::Stream;
use quiver_peer::{PeerConn, PeerError};

/// Messages written at once at most.
const SEND_BATCH_MAX: usize = 256;
/// How often an idle sender looks at its generation (a change also wakes it).
const IDLE_CHECK: Duration = Duration::from_millis(50);
/// First pause after a failed connection, doubled up to the maximum.
const RETRY_DELAY_MIN: Duration = Duration::from_millis(20);
const RETRY_DELAY_MAX: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
enum SendError {
    #[error("{0}")]
    Connect(PeerError),
    #[error("{0}")]
    Write(std::io::Error),
    #[error("{0}")]
    Read(PeerError),
    #[error("the successor refused: {0}")]
    Refused(String),
}

/// Forwards `stream` while its generation is the one it had when called.
pub async fn run(stream: Arc<Stream>, password: Option<String>) {
    let generation = stream.generation();
    let mut delay = RETRY_DELAY_MIN;
    let mut failures: u64 = 0;
    loop {
        if stream.generation() != generation {
            return;
        }
        let Some(addr) = stream.role().successor else {
            return;
        };
        match session(&stream, generation, &addr, password.as_deref()).await {
            Ok(()) => return,
            Err(e) => {
                failures += 1;
                // The first failure and then every 32nd: a dead successor is retried until
                // the chain is repaired.
                if failures == 1 || failures % 32 == 0 {
                    tracing::warn!(slots = %stream.slots, successor = %addr, error = %e, failures,
                        "chain: cannot forward to the successor");
                }
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = stream.wake.notified() => {}
                }
                delay = (delay * 2).min(RETRY_DELAY_MAX);
            }
        }
    }
}

/// One connection's life: `Ok` when the generation changed.
async fn session(
    stream: &Stream,
    generation: u64,
    addr: &str,
    password: Option<&str>,
) -> Result<(), SendError> {
    let conn = PeerConn::open(addr.into())
        .await
        .map_err(SendError::Connect)?;
    let (mut rd, mut wr) = conn.into_split();
    // Per request written and not yet answered, the message it carries (0: AUTH).
    let in_flight: Mutex<VecDeque<u64>> = Mutex::new(VecDeque::new());
    let reader = async {
        loop {
            let replies = rd.next(1).await.map_err(SendError::Read)?;
            let seq = in_flight.lock().pop_front().unwrap_or(0);
            if let Some(text) = replies.error(0) {
                return Err(SendError::Refused(
                    String::from_utf8_lossy(text).into_owned(),
                ));
            }
            if seq > 0 {
                stream.commit(seq);
            }
        }
    };
    let writer = async {
        let mut out = BytesMut::new();
        if let Some(p) = password {
            in_flight.lock().push_back(0);
            quiver_resp::request::encode_command(&mut out, &[b"AUTH", p.as_bytes()]);
        }
        // Everything not known committed goes again.
        let mut sent = stream.figures().1;
        loop {
            if stream.generation() != generation {
                return Ok(());
            }
            let (version, msgs) = stream.after(sent, SEND_BATCH_MAX);
            if msgs.is_empty() && out.is_empty() {
                tokio::select! {
                    _ = stream.wake.notified() => {}
                    _ = tokio::time::sleep(IDLE_CHECK) => {}
                }
                continue;
            }
            for m in &msgs {
                encode_apply(&mut out, stream.slots, version, m);
            }
            if let Some(last) = msgs.last() {
                sent = last.seq;
                in_flight.lock().extend(msgs.iter().map(|m| m.seq));
            }
            wr.write_all(&out).await.map_err(SendError::Write)?;
            out.clear();
        }
    };
    tokio::select! {
        r = reader => r,
        w = writer => w,
    }
}
