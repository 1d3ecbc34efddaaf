//! The registry of connected clients: what CLIENT LIST / CLIENT KILL and INFO see.

use std::collections::BTreeMap;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed,
};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::push::Pushes;
use crate::table::COMMANDS;

/// One connected client, shared between its connection task and the registry.
pub struct ClientInfo {
    pub id: u64,
    /// Peer address (`ip:port`, or the socket path for a Unix socket).
    pub addr: String,
    pub laddr: String,
    pub created: Instant,
    pub name: Mutex<Option<Bytes>>,
    /// Milliseconds since `created` of the last command.
    pub last_active_ms: AtomicU64,
    /// Index in [`COMMANDS`] of the last command, or `usize::MAX`.
    pub last_cmd: AtomicUsize,
    /// 2 or 3.
    pub resp: AtomicU8,
    /// The selected database.
    pub db: AtomicU32,
    /// Commands queued in MULTI, or -1 outside a transaction.
    pub multi: AtomicU64,
    /// Set by CLIENT KILL; the connection closes at its next step.
    pub killed: AtomicBool,
    pub kill_notify: Notify,
    /// The ACL user the connection is logged in as (`default` at first).
    pub user: Mutex<String>,
    /// Messages outside its replies (CLIENT TRACKING's invalidations).
    pub pushes: Pushes,
    /// CLIENT TRACKING: -1 off, else REDIRECT's client id (0: none), for CLIENT LIST.
    pub tracking_redirect: AtomicI64,
}

impl ClientInfo {
    pub fn touch(&self, cmd_index: usize) {
        self.last_active_ms
            .store(self.created.elapsed().as_millis() as u64, Relaxed);
        self.last_cmd.store(cmd_index, Relaxed);
    }

    /// Queues `push` for this connection; one whose queue is full does not read what it is
    /// sent, and is closed (as Redis closes a client past its output limit).
    pub fn push(&self, push: crate::push::Push) {
        if !self.pushes.send(push) {
            tracing::warn!(client = self.id, "push queue full: closing the connection");
            self.kill();
        }
    }

    pub fn kill(&self) {
        self.killed.store(true, Relaxed);
        self.kill_notify.notify_one();
    }

    /// One line of CLIENT LIST, in Redis's `key=value` format (without the newline).
    pub fn list_line(&self) -> String {
        let age = self.created.elapsed().as_secs();
        let idle = age.saturating_sub(self.last_active_ms.load(Relaxed) / 1000);
        let name = self.name.lock().clone().unwrap_or_default();
        let cmd = match self.last_cmd.load(Relaxed) {
            usize::MAX => "NULL",
            i => COMMANDS[i].name,
        };
        let multi = match self.multi.load(Relaxed) {
            u64::MAX => -1,
            n => n as i64,
        };
        let redir = self.tracking_redirect.load(Relaxed);
        // Redis's letters, in its order; N for none.
        let flags = match (multi >= 0, redir >= 0) {
            (false, false) => "N",
            (true, false) => "x",
            (false, true) => "t",
            (true, true) => "xt",
        };
        format!(
            "id={} addr={} laddr={} fd=-1 name={} age={age} idle={idle} flags={} db={} sub=0 \
             psub=0 ssub=0 multi={multi} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 obl=0 oll=0 \
             omem=0 tot-mem=0 events=r cmd={cmd} user={} redir={redir} resp={}",
            self.id,
            self.addr,
            self.laddr,
            String::from_utf8_lossy(&name),
            flags,
            self.db.load(Relaxed),
            self.user.lock(),
            self.resp.load(Relaxed),
        )
    }
}

/// Every connected client, by id.
#[derive(Default)]
pub struct Clients {
    next_id: AtomicU64,
    by_id: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

/// How long a CLIENT KILL waits for its victims to be disconnected.
const KILL_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// How often that wait looks again.
const KILL_POLL: std::time::Duration = std::time::Duration::from_millis(1);

impl Clients {
    /// Waits (at most [`KILL_WAIT`]) until the clients in `killed` (taken from it) are
    /// disconnected, so that, as with Redis, a client that sees CLIENT KILL's reply can rely
    /// on its victims being gone. A victim may be served on the killer's own serving thread:
    /// the wait yields to it, never sleeps through it.
    pub async fn wait_gone(&self, killed: &mut Vec<u64>) {
        if killed.is_empty() {
            return;
        }
        let killed = std::mem::take(killed);
        let deadline = tokio::time::Instant::now() + KILL_WAIT;
        while killed.iter().any(|&id| self.get(id).is_some())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(KILL_POLL).await;
        }
    }

    pub fn register(&self, addr: String, laddr: String) -> Arc<ClientInfo> {
        let id = self.next_id.fetch_add(1, Relaxed) + 1;
        let info = Arc::new(ClientInfo {
            id,
            addr,
            laddr,
            created: Instant::now(),
            name: Mutex::new(None),
            last_active_ms: AtomicU64::new(0),
            last_cmd: AtomicUsize::new(usize::MAX),
            resp: AtomicU8::new(2),
            db: AtomicU32::new(0),
            multi: AtomicU64::new(u64::MAX),
            killed: AtomicBool::new(false),
            kill_notify: Notify::new(),
            user: Mutex::new(crate::acl::DEFAULT_USER.to_owned()),
            pushes: Pushes::default(),
            tracking_redirect: AtomicI64::new(-1),
        });
        self.by_id.lock().insert(id, info.clone());
        info
    }

    pub fn unregister(&self, id: u64) {
        self.by_id.lock().remove(&id);
    }

    pub fn all(&self) -> Vec<Arc<ClientInfo>> {
        self.by_id.lock().values().cloned().collect()
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.by_id.lock().get(&id).cloned()
    }
}
