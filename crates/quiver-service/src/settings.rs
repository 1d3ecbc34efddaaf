//! The settings CONFIG SET changes while serving (`cmd::config`): each is read where it is
//! used, on every use (one atomic load), so a change takes effect on open connections at
//! their next request or read — `maxclients` at the next accept, `timeout` at the next wait
//! for a request, the buffer limits at the next run, the slow log and the latency monitor at
//! the next command. The
//! rest of [`Config`] is fixed at start.

use std::sync::atomic::AtomicI64;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use std::path::Path;

use parking_lot::Mutex;
use toml_edit::{DocumentMut, Item, Value};

use crate::config::Config;
use crate::logging::LogLevel;

pub struct Live {
    maxclients: AtomicUsize,
    /// Seconds; 0: never.
    timeout: AtomicU64,
    client_query_buffer_limit: AtomicUsize,
    client_output_buffer_limit: AtomicUsize,
    /// Microseconds; negative: nothing is logged.
    slowlog_log_slower_than: AtomicI64,
    slowlog_max_len: AtomicUsize,
    /// Milliseconds; 0: the latency monitor is off.
    latency_monitor_threshold: AtomicU64,
    /// As CONFIG GET shows it (the `default` user's password is in `Users`).
    requirepass: Mutex<Option<String>>,
    proto_max_bulk_len: AtomicUsize,
    /// The most `proto-max-bulk-len` may be raised to while serving (a node's store was
    /// opened with the value at start, and holds no larger value).
    proto_max_bulk_len_ceiling: AtomicUsize,
    loglevel: Mutex<LogLevel>,
    acllog_max_len: AtomicUsize,
    /// Moved by every change, so that a connection waiting for a request under the old
    /// `timeout` waits again under the new one.
    changed: tokio::sync::watch::Sender<u64>,
}

impl Live {
    /// The settings as `config` starts them.
    pub fn of(config: &Config) -> Live {
        Live {
            maxclients: AtomicUsize::new(config.maxclients),
            timeout: AtomicU64::new(config.timeout),
            client_query_buffer_limit: AtomicUsize::new(config.client_query_buffer_limit),
            client_output_buffer_limit: AtomicUsize::new(config.client_output_buffer_limit),
            slowlog_log_slower_than: AtomicI64::new(config.slowlog_log_slower_than),
            slowlog_max_len: AtomicUsize::new(config.slowlog_max_len),
            latency_monitor_threshold: AtomicU64::new(config.latency_monitor_threshold),
            requirepass: Mutex::new(config.requirepass.clone()),
            proto_max_bulk_len: AtomicUsize::new(config.proto_max_bulk_len),
            proto_max_bulk_len_ceiling: AtomicUsize::new(i64::MAX as usize),
            loglevel: Mutex::new(config.loglevel),
            acllog_max_len: AtomicUsize::new(config.acllog_max_len),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Wakes at every change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn maxclients(&self) -> usize {
        self.maxclients.load(Relaxed)
    }

    pub fn timeout(&self) -> u64 {
        self.timeout.load(Relaxed)
    }

    pub fn client_query_buffer_limit(&self) -> usize {
        self.client_query_buffer_limit.load(Relaxed)
    }

    /// The most reply bytes a connection may hold (0 as set: no limit of its own, only
    /// `client-output-buffer-total-limit`).
    pub fn client_output_buffer_limit(&self) -> usize {
        match self.client_output_buffer_limit.load(Relaxed) {
            0 => usize::MAX,
            n => n,
        }
    }

    /// `client-output-buffer-limit`'s normal hard limit as set (0: none).
    pub fn client_output_buffer_limit_shown(&self) -> usize {
        self.client_output_buffer_limit.load(Relaxed)
    }

    pub fn slowlog_log_slower_than(&self) -> i64 {
        self.slowlog_log_slower_than.load(Relaxed)
    }

    pub fn slowlog_max_len(&self) -> usize {
        self.slowlog_max_len.load(Relaxed)
    }

    pub fn latency_monitor_threshold(&self) -> u64 {
        self.latency_monitor_threshold.load(Relaxed)
    }

    pub fn requirepass(&self) -> Option<String> {
        self.requirepass.lock().clone()
    }

    pub fn proto_max_bulk_len(&self) -> usize {
        self.proto_max_bulk_len.load(Relaxed)
    }

    pub fn proto_max_bulk_len_ceiling(&self) -> usize {
        self.proto_max_bulk_len_ceiling.load(Relaxed)
    }

    /// A node: its store holds values of at most `n` bytes (`proto-max-bulk-len` at start).
    pub fn limit_proto_max_bulk_len(&self, n: usize) {
        self.proto_max_bulk_len_ceiling.store(n, Relaxed);
    }

    pub fn loglevel(&self) -> LogLevel {
        *self.loglevel.lock()
    }

    pub fn acllog_max_len(&self) -> usize {
        self.acllog_max_len.load(Relaxed)
    }

    /// Applies one change (checked already: see `cmd::config`).
    pub fn set(&self, change: &Change) {
        match change {
            Change::MaxClients(n) => self.maxclients.store(*n, Relaxed),
            Change::Timeout(s) => self.timeout.store(*s, Relaxed),
            Change::ClientQueryBufferLimit(n) => self.client_query_buffer_limit.store(*n, Relaxed),
            Change::ClientOutputBufferLimit(n) => {
                self.client_output_buffer_limit.store(*n, Relaxed)
            }
            Change::SlowlogLogSlowerThan(us) => self.slowlog_log_slower_than.store(*us, Relaxed),
            Change::SlowlogMaxLen(n) => self.slowlog_max_len.store(*n, Relaxed),
            Change::LatencyMonitorThreshold(ms) => {
                self.latency_monitor_threshold.store(*ms, Relaxed)
            }
            Change::RequirePass(p) => *self.requirepass.lock() = p.clone(),
            Change::ProtoMaxBulkLen(n) => self.proto_max_bulk_len.store(*n, Relaxed),
            Change::LogLevel(level) => {
                *self.loglevel.lock() = *level;
                crate::logging::set_level(*level);
            }
            Change::AclLogMaxLen(n) => self.acllog_max_len.store(*n, Relaxed),
        }
        self.changed.send_modify(|n| *n += 1);
    }
}

impl Live {
    /// CONFIG REWRITE: writes the live settings into the settings file at `path`, atomically,
    /// with `more` (what serves has beyond them: key, value, whether it is not the default).
    /// A key the file has takes its live value in place (its comments and order kept); one it
    /// lacks is added when its value differs from the default; `requirepass` unset is
    /// removed. Everything else in the file stays as it is.
    pub fn rewrite(&self, path: &Path, more: &[(&str, Value, bool)]) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut doc: DocumentMut = text
            .parse()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let d = Config::default();
        let numbers: [(&str, i64, i64); 9] = [
            ("maxclients", self.maxclients() as i64, d.maxclients as i64),
            ("timeout", self.timeout() as i64, d.timeout as i64),
            (
                "client-query-buffer-limit",
                self.client_query_buffer_limit() as i64,
                d.client_query_buffer_limit as i64,
            ),
            (
                "client-output-buffer-limit",
                self.client_output_buffer_limit_shown() as i64,
                d.client_output_buffer_limit as i64,
            ),
            (
                "slowlog-log-slower-than",
                self.slowlog_log_slower_than(),
                d.slowlog_log_slower_than,
            ),
            (
                "slowlog-max-len",
                self.slowlog_max_len() as i64,
                d.slowlog_max_len as i64,
            ),
            (
                "latency-monitor-threshold",
                self.latency_monitor_threshold() as i64,
                d.latency_monitor_threshold as i64,
            ),
            (
                "proto-max-bulk-len",
                self.proto_max_bulk_len() as i64,
                d.proto_max_bulk_len as i64,
            ),
            (
                "acllog-max-len",
                self.acllog_max_len() as i64,
                d.acllog_max_len as i64,
            ),
        ];
        let level = self.loglevel();
        let service = numbers
            .into_iter()
            .map(|(key, live, default)| (key, Value::from(live), live != default))
            .chain([(
                "loglevel",
                Value::from(level.to_string()),
                level != d.loglevel,
            )]);
        for (key, value, changed) in service.chain(more.iter().cloned()) {
            if doc.contains_key(key) || changed {
                set_keeping_comments(&mut doc, key, value);
            }
        }
        match self.requirepass() {
            Some(p) => set_keeping_comments(&mut doc, "requirepass", Value::from(p)),
            None => {
                doc.remove("requirepass");
            }
        }
        crate::config::write_atomically(path, &doc.to_string())
    }
}

/// Sets top-level `key` of `doc` to `value`, keeping the comment after the old value.
fn set_keeping_comments(doc: &mut DocumentMut, key: &str, mut value: Value) {
    if let Some(old) = doc.get(key).and_then(Item::as_value) {
        *value.decor_mut() = old.decor().clone();
    }
    doc[key] = Item::Value(value);
}

/// A checked new value of one live setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    MaxClients(usize),
    Timeout(u64),
    ClientQueryBufferLimit(usize),
    /// The hard limit of the `normal` class (the only class Quiver's clients are in).
    ClientOutputBufferLimit(usize),
    SlowlogLogSlowerThan(i64),
    SlowlogMaxLen(usize),
    LatencyMonitorThreshold(u64),
    /// `None`: no password (CONFIG SET requirepass "").
    RequirePass(Option<String>),
    ProtoMaxBulkLen(usize),
    LogLevel(LogLevel),
    AclLogMaxLen(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The live values go where the file has their keys (comments kept), the others that
    /// differ from the defaults are added, an unset password leaves; the file reads back as
    /// the live settings, and what CONFIG SET does not change stays as written.
    #[test]
    fn rewrite_keeps_the_file_and_writes_the_live_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quiver.toml");
        let text = "# the node\nport = 7001\nmaxclients = 100   # a few\nrequirepass = \"old\"\n\
                    client-query-buffer-limit = \"2mb\"\n\n[rename-command]\nFLUSHALL = \"\"\n";
        std::fs::write(&path, text).unwrap();
        let config = Config::from_file(&path).unwrap();
        let live = Live::of(&config);
        for c in [
            Change::MaxClients(500),
            Change::Timeout(30),
            Change::RequirePass(None),
            Change::SlowlogMaxLen(7),
        ] {
            live.set(&c);
        }
        live.rewrite(&path, &[]).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(
            written.starts_with("# the node\nport = 7001\n"),
            "{written}"
        );
        assert!(
            written.contains("maxclients = 500   # a few\n"),
            "{written}"
        );
        assert!(!written.contains("requirepass"), "{written}");
        assert!(!written.contains("slowlog-log-slower-than"), "{written}");
        let back = Config::from_file(&path).unwrap();
        assert_eq!(
            (
                back.port,
                back.maxclients,
                back.timeout,
                back.slowlog_max_len
            ),
            (7001, 500, 30, 7)
        );
        assert_eq!(back.requirepass, None);
        assert_eq!(back.client_query_buffer_limit, 2 << 20);
        assert!(back.rename_command.is_disabled(crate::table::Cmd::FlushAll));
    }
}
