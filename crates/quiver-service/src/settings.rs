//! The settings CONFIG SET changes while serving (`cmd::config`): each is read where it is
//! used, on every use (one atomic load), so a change takes effect on open connections at
//! their next request or read — `maxclients` at the next accept, `timeout` at the next wait
//! for a request, the buffer limits at the next run, the slow log at the next command. The
//! rest of [`Config`] is fixed at start.

use std::sync::atomic::AtomicI64;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use parking_lot::Mutex;

use crate::config::Config;

pub struct Live {
    maxclients: AtomicUsize,
    /// Seconds; 0: never.
    timeout: AtomicU64,
    client_query_buffer_limit: AtomicUsize,
    client_output_buffer_limit: AtomicUsize,
    /// Microseconds; negative: nothing is logged.
    slowlog_log_slower_than: AtomicI64,
    slowlog_max_len: AtomicUsize,
    /// As CONFIG GET shows it (the `default` user's password is in `Users`).
    requirepass: Mutex<Option<String>>,
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
            requirepass: Mutex::new(config.requirepass.clone()),
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

    pub fn requirepass(&self) -> Option<String> {
        self.requirepass.lock().clone()
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
            Change::RequirePass(p) => *self.requirepass.lock() = p.clone(),
        }
        self.changed.send_modify(|n| *n += 1);
    }
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
    /// `None`: no password (CONFIG SET requirepass "").
    RequirePass(Option<String>),
}
