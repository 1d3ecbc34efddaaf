//! Messages the server sends a connection outside its replies: CLIENT TRACKING's
//! invalidations and Pub/Sub's messages. Any thread may queue one for any connection
//! ([`Pushes::send`]); the connection's own loop writes them between its replies (`conn`, and
//! a node's runs after each step), as RESP3 pushes (`>`), or as RESP2 arrays to a connection
//! in subscribed mode.

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
    /// PUBLISH to a channel the connection subscribed to.
    Message { channel: Bytes, message: Bytes },
    /// PUBLISH to a channel matching a pattern the connection subscribed to.
    PMessage {
        pattern: Bytes,
        channel: Bytes,
        message: Bytes,
    },
}

/// The channel RESP2 connections subscribe to for CLIENT TRACKING's invalidations (REDIRECT).
pub const TRACKING_CHANNEL: &[u8] = b"__redis__:invalidate";

/// How a connection takes pushes.
#[derive(Clone, Copy, Debug)]
pub struct Receiver {
    pub resp3: bool,
    /// RESP2: subscribed to [`TRACKING_CHANNEL`], it takes invalidations as its messages.
    pub tracking_channel: bool,
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
            Push::Message { channel, message } => Reply::Push(vec![
                Reply::Bulk(Bytes::from_static(b"message")),
                Reply::Bulk(channel.clone()),
                Reply::Bulk(message.clone()),
            ]),
            Push::PMessage {
                pattern,
                channel,
                message,
            } => Reply::Push(vec![
                Reply::Bulk(Bytes::from_static(b"pmessage")),
                Reply::Bulk(pattern.clone()),
                Reply::Bulk(channel.clone()),
                Reply::Bulk(message.clone()),
            ]),
        }
    }

    /// The message as `to` takes it, if at all: RESP3 takes every one; RESP2 takes Pub/Sub's,
    /// and invalidations as messages of [`TRACKING_CHANNEL`] once subscribed to it (Redis's
    /// REDIRECT to a RESP2 connection); anything else is dropped, as Redis sends it nothing.
    fn reply_for(&self, to: Receiver) -> Option<Reply> {
        match self {
            _ if to.resp3 => Some(self.reply()),
            Push::Message { .. } | Push::PMessage { .. } => Some(self.reply()),
            Push::Invalidate(keys) if to.tracking_channel => Some(Reply::Push(vec![
                Reply::Bulk(Bytes::from_static(b"message")),
                Reply::Bulk(Bytes::from_static(TRACKING_CHANNEL)),
                match keys {
                    Some(keys) => Reply::Array(keys.iter().cloned().map(Reply::Bulk).collect()),
                    None => Reply::Null,
                },
            ])),
            Push::Invalidate(_) | Push::RedirectBroken(_) => None,
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

    /// Writes what is queued into `out`, as `to` takes it (`Push::reply_for`).
    pub fn deliver(&self, out: &mut Output<'_>, to: Receiver) {
        if !self.pending.load(Ordering::SeqCst) {
            return;
        }
        let taken = {
            let mut queue = self.queue.lock();
            self.pending.store(false, Ordering::SeqCst);
            std::mem::take(&mut *queue)
        };
        for reply in taken.iter().filter_map(|p| p.reply_for(to)) {
            out.push(&reply, to.resp3);
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
