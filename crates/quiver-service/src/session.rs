//! Per-connection state of any RESP service: protocol version, authentication, the
//! transaction being queued, the selected database. What a service keeps beyond it is its own
//! (`Service::Conn`).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use bytes::Bytes;

use crate::acl::User;
use crate::clients::ClientInfo;
use crate::output::ReplyMode;
use crate::push::{Receiver, TRACKING_CHANNEL};

/// Commands queued between MULTI and EXEC.
#[derive(Default)]
pub struct Multi {
    /// (index in the command table, arguments).
    pub queued: Vec<(usize, Vec<Bytes>)>,
    /// A queued command was refused (unknown, wrong arity): EXEC answers EXECABORT.
    pub aborted: bool,
}

pub struct Session {
    pub info: Arc<ClientInfo>,
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user's rules as of `user_version` of the server's users.
    pub user: Arc<User>,
    pub user_version: u64,
    pub multi: Option<Multi>,
    /// The selected database (SELECT; 0 at first).
    pub db: u32,
    /// QUIT: close once the replies so far are written.
    pub closing: bool,
    /// READONLY (cluster mode): reads may be served by a replica.
    pub readonly: bool,
    /// Clients the command just run killed (CLIENT KILL): what follows waits until they are
    /// disconnected (`Clients::wait_gone`).
    pub killed: Vec<u64>,
    /// MONITOR's queue, handed to the connection's loop once the run's replies are out.
    pub monitor: Option<tokio::sync::mpsc::Receiver<bytes::Bytes>>,
    /// CLIENT REPLY (or RESET) just run: the caller switches the connection's `Output` before
    /// writing that command's reply (`Output::switch`), which the new mode may drop.
    pub reply_change: Option<ReplyMode>,
    /// CLIENT TRACKING is on (`Core::tracking` holds its options).
    pub tracking: bool,
    /// CLIENT CACHING YES / NO (OPTIN / OPTOUT), for the next command.
    pub tracking_caching: Caching,
    /// Pub/Sub: the channels and patterns subscribed to (`pubsub`).
    pub channels: BTreeSet<Bytes>,
    pub patterns: BTreeSet<Bytes>,
}

/// Where CLIENT CACHING's choice stands: it applies to the command after it (or the
/// transaction), and CLIENT TRACKINGINFO shows it until that command has run, as Redis clears
/// it after the command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Caching {
    #[default]
    None,
    /// CLIENT CACHING ran; the next command takes it.
    Next,
    /// The command running now took it.
    Taken,
}

impl Session {
    /// A new connection's session, as `user` (the default user: authenticated if it needs no
    /// password).
    pub fn new(info: Arc<ClientInfo>, user: Arc<User>, user_version: u64) -> Session {
        Session {
            info,
            resp3: false,
            authenticated: user.enabled && user.nopass,
            user,
            user_version,
            multi: None,
            db: 0,
            closing: false,
            readonly: false,
            killed: Vec::new(),
            monitor: None,
            reply_change: None,
            tracking: false,
            tracking_caching: Caching::None,
            channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
        }
    }

    pub fn id(&self) -> u64 {
        self.info.id
    }

    pub fn set_multi(&mut self, multi: Option<Multi>) {
        let n = multi.as_ref().map_or(u64::MAX, |m| m.queued.len() as u64);
        self.info.multi.store(n, Relaxed);
        self.multi = multi;
    }

    /// Selects database `db` (checked by the caller).
    pub fn select(&mut self, db: u32) {
        self.db = db;
        self.info.db.store(db, Relaxed);
    }

    /// Channels and patterns subscribed to (Redis's subscription count).
    pub fn subscriptions(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// RESP2 with a subscription: only the Pub/Sub commands, PING, QUIT and RESET run.
    pub fn subscribed_mode(&self) -> bool {
        !self.resp3 && self.subscriptions() > 0
    }

    /// How this connection takes pushes (`push::Pushes::deliver`).
    pub fn receiver(&self) -> Receiver {
        Receiver {
            resp3: self.resp3,
            tracking_channel: self.channels.contains(TRACKING_CHANNEL),
        }
    }

    pub fn set_resp3(&mut self, resp3: bool) {
        self.resp3 = resp3;
        self.info.resp.store(if resp3 { 3 } else { 2 }, Relaxed);
    }
}
