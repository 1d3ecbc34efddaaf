//! Pub/Sub, as Redis 7.0: SUBSCRIBE / PSUBSCRIBE register a connection for channels and
//! patterns, PUBLISH sends each subscribed connection a `message` (and each connection with a
//! matching pattern a `pmessage`) through its queue of pushes (`push`), written by its own
//! loop: a RESP3 push, or, on a RESP2 connection (in subscribed mode: `admission`), an array.
//! A node's PUBLISH reaches the connections subscribed *on that node* (Redis Cluster
//! broadcasts it over the cluster bus; Quiver's nodes have none); the router has no Pub/Sub.
//! A connection that lets its queue fill is closed, as Redis closes a slow subscriber past
//! its output limit.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::clients::ClientInfo;
use crate::push::Push;

/// A subscribed connection.
#[derive(Clone)]
struct Subscriber {
    id: u64,
    info: Weak<ClientInfo>,
}

/// Who listens where.
#[derive(Default)]
pub struct PubSub {
    /// Channel -> its subscribers.
    channels: Mutex<HashMap<Bytes, Vec<Subscriber>>>,
    /// (pattern, subscriber), in subscription order.
    patterns: Mutex<Vec<(Bytes, Subscriber)>>,
}

impl PubSub {
    /// `info` listens to `channel` (the caller knows it did not yet).
    pub fn subscribe(&self, info: &Arc<ClientInfo>, channel: &Bytes) {
        let subscriber = Subscriber {
            id: info.id,
            info: Arc::downgrade(info),
        };
        self.channels
            .lock()
            .entry(channel.clone())
            .or_default()
            .push(subscriber);
    }

    /// Client `id` stops listening to `channel`.
    pub fn unsubscribe(&self, id: u64, channel: &[u8]) {
        let mut channels = self.channels.lock();
        if let Some(list) = channels.get_mut(channel) {
            list.retain(|s| s.id != id);
            if list.is_empty() {
                channels.remove(channel);
            }
        }
    }

    /// `info` listens to channels matching `pattern` (the caller knows it did not yet).
    pub fn psubscribe(&self, info: &Arc<ClientInfo>, pattern: &Bytes) {
        let subscriber = Subscriber {
            id: info.id,
            info: Arc::downgrade(info),
        };
        self.patterns.lock().push((pattern.clone(), subscriber));
    }

    pub fn punsubscribe(&self, id: u64, pattern: &[u8]) {
        self.patterns
            .lock()
            .retain(|(p, s)| !(s.id == id && p == pattern));
    }

    /// PUBLISH: sends `message` to `channel`'s subscribers and to those of matching patterns;
    /// how many received it.
    pub fn publish(&self, channel: &Bytes, message: &Bytes) -> usize {
        let mut sends: Vec<(Subscriber, Push)> = Vec::new();
        if let Some(list) = self.channels.lock().get(channel) {
            for s in list {
                let push = Push::Message {
                    channel: channel.clone(),
                    message: message.clone(),
                };
                sends.push((s.clone(), push));
            }
        }
        for (pattern, s) in self.patterns.lock().iter() {
            if quiver_resp::glob_match(pattern, channel) {
                let push = Push::PMessage {
                    pattern: pattern.clone(),
                    channel: channel.clone(),
                    message: message.clone(),
                };
                sends.push((s.clone(), push));
            }
        }
        let mut received = 0;
        for (s, push) in sends {
            let Some(to) = s.info.upgrade() else {
                continue;
            };
            received += 1;
            to.push(push);
        }
        received
    }

    /// PUBSUB CHANNELS: the channels with a subscriber, those matching `pattern` if given.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let channels = self.channels.lock();
        let mut found: Vec<Bytes> = channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| quiver_resp::glob_match(p, c)))
            .cloned()
            .collect();
        found.sort();
        found
    }

    /// Channels with a subscriber (INFO `pubsub_channels`).
    pub fn channel_count(&self) -> usize {
        self.channels.lock().len()
    }

    /// PUBSUB NUMSUB: the subscribers of `channel` (patterns not counted, as Redis).
    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.channels.lock().get(channel).map_or(0, Vec::len)
    }

    /// PUBSUB NUMPAT: the distinct patterns subscribed to.
    pub fn numpat(&self) -> usize {
        let patterns = self.patterns.lock();
        let mut distinct: Vec<&Bytes> = patterns.iter().map(|(p, _)| p).collect();
        distinct.sort();
        distinct.dedup();
        distinct.len()
    }
}
