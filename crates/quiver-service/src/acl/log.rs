//! ACL LOG: the last `acllog-max-len` security events, as Redis 7.0 keeps them — failed
//! AUTH / HELLO logins, and commands and keys refused by a user's rules (NOPERM). An event
//! like one already logged (same reason, context, object and user) within a minute counts
//! on that entry, which becomes the newest, instead of adding one.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Events like an entry within this long are counted on it (Redis's grouping time).
pub const GROUPING: Duration = Duration::from_secs(60);
/// Redis's default `acllog-max-len`.
pub const ACL_LOG_LEN_DEFAULT: usize = 128;

#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    /// `auth`, `command` or `key`.
    pub reason: &'static str,
    /// `toplevel` (Quiver refuses before running or queueing, never inside EXEC).
    pub context: &'static str,
    /// The command (`set`, `config|get`), the key, or `AUTH`.
    pub object: String,
    pub username: String,
    pub at: Instant,
    /// The client's CLIENT LIST line.
    pub client_info: String,
}

#[derive(Default)]
pub struct AclLog {
    entries: Mutex<VecDeque<LogEntry>>,
}

impl AclLog {
    /// Logs an event of `reason` on `object` by `username` from the client `client_info`,
    /// keeping the newest `len_max` entries (`acllog-max-len` now).
    pub fn add(
        &self,
        (reason, object): (&'static str, String),
        username: String,
        client_info: String,
        len_max: usize,
    ) {
        let mut entries = self.entries.lock();
        let now = Instant::now();
        let like = entries.iter().position(|e| {
            e.reason == reason
                && e.object == object
                && e.username == username
                && now.duration_since(e.at) < GROUPING
        });
        let entry = match like.and_then(|i| entries.remove(i)) {
            Some(mut e) => {
                e.count += 1;
                e.at = now;
                e.client_info = client_info;
                e
            }
            None => LogEntry {
                count: 1,
                reason,
                context: "toplevel",
                object,
                username,
                at: now,
                client_info,
            },
        };
        entries.push_front(entry);
        entries.truncate(len_max);
    }

    /// The newest `count` entries (all for `None`).
    pub fn newest(&self, count: Option<usize>) -> Vec<LogEntry> {
        let entries = self.entries.lock();
        entries
            .iter()
            .take(count.unwrap_or(entries.len()))
            .cloned()
            .collect()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_events_count_on_one_entry_the_newest() {
        let log = AclLog::default();
        log.add(("auth", "AUTH".into()), "bob".into(), "c1".into(), 128);
        log.add(("command", "set".into()), "bob".into(), "c1".into(), 128);
        log.add(("auth", "AUTH".into()), "bob".into(), "c2".into(), 128);
        let e = log.newest(None);
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[0].reason, e[0].count, e[0].client_info.as_str()),
            ("auth", 2, "c2")
        );
        assert_eq!((e[1].reason, e[1].count), ("command", 1));
        assert_eq!(log.newest(Some(1)).len(), 1);
        log.reset();
        assert!(log.newest(None).is_empty());
    }
}
