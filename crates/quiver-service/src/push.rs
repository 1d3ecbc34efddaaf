//! Messages the server sends a connection outside its replies: CLIENT TRACKING's
//! invalidations. Any thread may queue one for any connection ([`Pushes::send`]); the
//! connection's own loop writes them between its replies (`conn`, and a node's runs after each
//! step), as RESP3 pushes (`>`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::output::Output;
use crate::reply::Reply;

/// Most messages waiting for one connection. A connection that lets more pile up does not read
/// what it is sent: it is closed, as Redis closes a client past its output buffer limit.
pub const PUSHES_PENDING_MAX: usize = 100_000;

/// One message for a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Push {
    /// These keys changed (`None`: every key, after FLUSHDB or FLUSHALL).
    Invalidate(Option<Vec<Bytes>>),
    /// The client that this connection's invalidations were redirected to is gone (its id).
    RedirectBroken(u64),
}

impl Push {
    /// The message as Redis 7 sends it.
    pub fn reply(&self) -> Reply {
        match self {
            Push::Invalidate(keys) => Reply::Push(vec![
                Reply::Bulk(Bytes::from_static(b"invalidate")),
                match keys {
                    Some(keys) => Reply::Array(keys.iter().cloned().map(Reply::Bulk).collect()),
                    None => Reply::Null,
                },
            ]),
            Push::RedirectBroken(id) => Reply::Push(vec![
                Reply::Bulk(Bytes::from_static(b"tracking-redir-broken")),
                Reply::Integer(*id as i64),
            ]),
        }
    }
}

/// A connection's queue of messages.
#[derive(Default)]
pub struct Pushes {
    queue: Mutex<VecDeque<Push>>,
    /// Something is queued: the connection's loop looks without taking the lock otherwise.
    pending: AtomicBool,
    /// Wakes the connection's loop while it waits for its client.
    pub notify: Notify,
}

impl Pushes {
    /// Queues `push`; false when the queue is full (nothing queued: the caller closes the
    /// connection).
    pub fn send(&self, push: Push) -> bool {
        let mut queue = self.queue.lock();
        if queue.len() >= PUSHES_PENDING_MAX {
            return false;
        }
        queue.push_back(push);
        self.pending.store(true, Ordering::SeqCst);
        drop(queue);
        self.notify.notify_one();
        true
    }

    /// Writes what is queued into `out` (RESP3 connections; a RESP2 connection cannot take
    /// pushes, and Redis sends it none: they are dropped).
    pub fn deliver(&self, out: &mut Output<'_>, resp3: bool) {
        if !self.pending.load(Ordering::SeqCst) {
            return;
        }
        let taken = {
            let mut queue = self.queue.lock();
            self.pending.store(false, Ordering::SeqCst);
            std::mem::take(&mut *queue)
        };
        if resp3 {
            for push in taken {
                out.push(&push.reply());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_encode_as_redis_sends_them() {
        let keys = Push::Invalidate(Some(vec![Bytes::from_static(b"k")]));
        assert_eq!(
            &keys.reply().to_bytes(true)[..],
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert_eq!(
            &Push::Invalidate(None).reply().to_bytes(true)[..],
            b">2\r\n$10\r\ninvalidate\r\n_\r\n"
        );
        assert_eq!(
            &Push::RedirectBroken(7).reply().to_bytes(true)[..],
            b">2\r\n$21\r\ntracking-redir-broken\r\n:7\r\n"
        );
    }

    #[test]
    fn a_full_queue_refuses_more() {
        let pushes = Pushes::default();
        for _ in 0..PUSHES_PENDING_MAX {
            assert!(pushes.send(Push::Invalidate(None)));
        }
        assert!(!pushes.send(Push::Invalidate(None)));
    }
}
