//! CLIENT TRACKING: server-assisted client-side caching, as Redis 7.0's `tracking.c`.
//!
//! In the default mode the server remembers, per key name (not per database, as Redis), the
//! connections that read it with a read-only command since it last changed; a change to the
//! key sends each of them (or the connection it redirects to) one invalidation and forgets
//! them. With OPTIN a read is remembered only right after CLIENT CACHING YES, with OPTOUT
//! unless right after CLIENT CACHING NO. In BCAST mode a connection names key prefixes instead
//! (none: every key), and each change under one of them is sent, without remembering reads.
//! FLUSHDB and FLUSHALL send every tracking connection one invalidation of all keys (a null).
//! Messages go to the target connection's queue (`push`), which its own loop writes.
//!
//! A key is remembered *before* its read runs (Redis, on one thread, remembers after): a write
//! committed after the remembering finds it and invalidates, and one committed before is what
//! the read sees, so no connection keeps a value older than the last invalidation it got.
//! Every write looks at [`Tracking::on`] first and takes the table's lock only while some
//! connection tracks (one lock for the whole table: tracking serializes the writers' turns
//! at the table, which nothing pays for while no connection tracks). NOLOOP knows a write's
//! connection by the task it runs on ([`as_client`]); a write applied on another connection's
//! task (`fsync` mode's MSETs combined into one batch) counts as that connection's.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::clients::ClientInfo;
use crate::push::Push;
use crate::session::{Caching, Session};
use crate::table::{Cmd, CommandSpec, Flags, COMMANDS};

/// Most keys the default mode remembers (Redis's `tracking-table-max-keys` default): past it,
/// keys are forgotten with an invalidation to their readers, as Redis evicts them.
pub const TRACKING_TABLE_KEYS_MAX: usize = 1_000_000;

tokio::task_local! {
    /// The connection whose task runs (NOLOOP: its own writes are not sent back to it).
    static CLIENT: u64;
}

/// Runs a connection's task as client `id` (`conn::serve`).
pub async fn as_client<F: Future>(id: u64, f: F) -> F::Output {
    CLIENT.scope(id, f).await
}

/// The connection running on this task, if any (none for maintenance tasks).
fn current_client() -> Option<u64> {
    CLIENT.try_with(|id| *id).ok()
}

/// CLIENT TRACKING ON's options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// REDIRECT: the connection invalidations go to (0: this one).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// BCAST's prefixes, in the order given.
    pub prefixes: Vec<Bytes>,
}

/// A tracking connection.
struct Tracked {
    options: Options,
    /// Its prefixes in BCAST mode (sorted, as Redis lists them).
    prefixes: Vec<Bytes>,
    own: Weak<ClientInfo>,
    /// REDIRECT's connection, as it was found when tracking began.
    redirect: Option<Weak<ClientInfo>>,
    /// The REDIRECT connection has gone.
    broken: bool,
}

#[derive(Default)]
struct Table {
    clients: HashMap<u64, Tracked>,
    /// Default mode: each key read -> the connections that read it since it last changed.
    keys: HashMap<Bytes, Vec<u64>>,
    /// The ids in `keys`, summed (INFO `tracking_total_items`).
    items: usize,
    /// BCAST mode: each prefix -> its connections.
    prefixes: BTreeMap<Bytes, Vec<u64>>,
}

/// What CLIENT TRACKINGINFO shows of a connection.
pub struct Info {
    pub options: Options,
    pub prefixes: Vec<Bytes>,
    pub broken: bool,
}

/// INFO's figures.
pub struct Figures {
    pub clients: usize,
    pub keys: usize,
    pub items: usize,
    pub prefixes: usize,
}

#[derive(Default)]
pub struct Tracking {
    /// Connections with tracking on.
    on: AtomicUsize,
    table: Mutex<Table>,
}

impl Tracking {
    /// Whether any connection tracks.
    pub fn on(&self) -> bool {
        self.on.load(Ordering::SeqCst) > 0
    }

    /// CLIENT TRACKING ON for `info`, its options checked against each other (`redirect`:
    /// REDIRECT's connection, found); Redis's refusals of a change of mode or of overlapping
    /// prefixes are the error.
    pub fn enable(
        &self,
        info: &Arc<ClientInfo>,
        options: Options,
        redirect: Option<&Arc<ClientInfo>>,
    ) -> Result<(), String> {
        let mut table = self.table.lock();
        let old = table.clients.get(&info.id);
        check_change(old, &options)?;
        let was_on = old.is_some();
        let mut prefixes = old.map(|t| t.prefixes.clone()).unwrap_or_default();
        if options.bcast {
            check_prefixes(&prefixes, &options.prefixes)?;
            let wanted = if options.prefixes.is_empty() {
                vec![Bytes::new()]
            } else {
                options.prefixes.clone()
            };
            for p in wanted {
                if !prefixes.contains(&p) {
                    table.prefixes.entry(p.clone()).or_default().push(info.id);
                    prefixes.push(p);
                }
            }
            prefixes.sort();
        }
        if !was_on {
            self.on.fetch_add(1, Ordering::SeqCst);
        }
        info.tracking_redirect
            .store(options.redirect as i64, Ordering::Relaxed);
        let tracked = Tracked {
            redirect: redirect.map(Arc::downgrade),
            options,
            prefixes,
            own: Arc::downgrade(info),
            broken: false,
        };
        table.clients.insert(info.id, tracked);
        Ok(())
    }

    /// CLIENT TRACKING OFF, RESET, or the connection's end. Its ids in the key table are left
    /// to go when their keys change, as Redis leaves them.
    pub fn disable(&self, info: &ClientInfo) {
        let mut table = self.table.lock();
        let Some(tracked) = table.clients.remove(&info.id) else {
            return;
        };
        for p in &tracked.prefixes {
            if let Some(ids) = table.prefixes.get_mut(p) {
                ids.retain(|&id| id != info.id);
                if ids.is_empty() {
                    table.prefixes.remove(p);
                }
            }
        }
        info.tracking_redirect.store(-1, Ordering::Relaxed);
        self.on.fetch_sub(1, Ordering::SeqCst);
    }

    /// The tracking state of connection `id` (`None`: tracking is off).
    pub fn info(&self, id: u64) -> Option<Info> {
        let table = self.table.lock();
        table.clients.get(&id).map(|t| Info {
            options: t.options.clone(),
            prefixes: t.prefixes.clone(),
            broken: t.broken,
        })
    }

    /// Before a command of a tracking connection runs: a read-only command's keys are
    /// remembered (EXEC's: those of its queued read-only commands), unless OPTIN / OPTOUT and
    /// CLIENT CACHING say otherwise; CLIENT CACHING's choice lasts one command, or one
    /// transaction.
    pub fn before_command(&self, session: &mut Session, spec: &CommandSpec, args: &[Bytes]) {
        if spec.cmd == Cmd::Client && args[1].eq_ignore_ascii_case(b"caching") {
            return;
        }
        let caching = session.tracking_caching == Caching::Next;
        if session.multi.is_none() {
            session.tracking_caching = if caching {
                Caching::Taken
            } else {
                Caching::None
            };
        }
        let mut keys = Vec::new();
        if spec.cmd == Cmd::Exec {
            for (i, queued) in session.multi.iter().flat_map(|m| &m.queued) {
                if COMMANDS[*i].flags.contains(Flags::READONLY) {
                    keys.extend(COMMANDS[*i].keys(queued).cloned());
                }
            }
        } else if spec.flags.contains(Flags::READONLY) {
            // (BATCH, whose keys only `admission::keys_of` finds, is no read-only command.)
            keys = spec.keys(args).cloned().collect();
        }
        if !keys.is_empty() {
            self.remember(session.id(), caching, keys);
        }
    }

    /// Connection `id` reads `keys`; `caching`: CLIENT CACHING came right before.
    fn remember(&self, id: u64, caching: bool, keys: Vec<Bytes>) {
        let mut table = self.table.lock();
        let Some(t) = table.clients.get(&id) else {
            return;
        };
        let o = &t.options;
        if o.bcast || (o.optin && !caching) || (o.optout && caching) {
            return;
        }
        for key in keys {
            let ids = table.keys.entry(key).or_default();
            if !ids.contains(&id) {
                ids.push(id);
                table.items += 1;
            }
        }
        let mut sends = Vec::new();
        while table.keys.len() > TRACKING_TABLE_KEYS_MAX {
            let Some(key) = table.keys.keys().next().cloned() else {
                break;
            };
            table.forget(&key, None, &mut sends);
        }
        drop(table);
        deliver(sends);
    }

    /// These keys changed (after the write is applied): their readers and the BCAST
    /// connections of their prefixes get an invalidation.
    pub fn invalidate<'a>(&self, keys: impl IntoIterator<Item = &'a [u8]>) {
        if !self.on() {
            return;
        }
        let by = current_client();
        let mut sends = Vec::new();
        let mut table = self.table.lock();
        // BCAST: per prefix, the keys under it, sorted (one message per prefix, as Redis).
        let mut broadcast: BTreeMap<Bytes, Vec<Bytes>> = BTreeMap::new();
        for key in keys {
            if !table.prefixes.is_empty() {
                for p in table.prefixes.keys().filter(|p| key.starts_with(p)) {
                    broadcast
                        .entry(p.clone())
                        .or_default()
                        .push(Bytes::copy_from_slice(key));
                }
            }
            if table.keys.contains_key(key) {
                table.forget(key, by, &mut sends);
            }
        }
        for (prefix, mut keys) in broadcast {
            keys.sort();
            keys.dedup();
            let ids = table.prefixes.get(&prefix).cloned().unwrap_or_default();
            for id in ids {
                let noloop = table.clients.get(&id).is_some_and(|t| t.options.noloop);
                if !(noloop && by == Some(id)) {
                    table.target_of(id, Push::Invalidate(Some(keys.clone())), &mut sends);
                }
            }
        }
        drop(table);
        deliver(sends);
    }

    /// FLUSHDB or FLUSHALL: every tracking connection gets an invalidation of every key, and
    /// the table is emptied (keys are not per database here either).
    pub fn flush(&self) {
        if !self.on() {
            return;
        }
        let mut sends = Vec::new();
        let mut table = self.table.lock();
        table.keys.clear();
        table.items = 0;
        let ids: Vec<u64> = table.clients.keys().copied().collect();
        for id in ids {
            table.target_of(id, Push::Invalidate(None), &mut sends);
        }
        drop(table);
        deliver(sends);
    }

    pub fn figures(&self) -> Figures {
        let table = self.table.lock();
        Figures {
            clients: table.clients.len(),
            keys: table.keys.len(),
            items: table.items,
            prefixes: table.prefixes.len(),
        }
    }
}

/// A message and the connection it goes to.
type Send = (Arc<ClientInfo>, Push);

impl Table {
    /// Forgets `key`, sending its default-mode readers (but `by` where it is NOLOOP) an
    /// invalidation.
    fn forget(&mut self, key: &[u8], by: Option<u64>, sends: &mut Vec<Send>) {
        let Some(ids) = self.keys.remove(key) else {
            return;
        };
        self.items -= ids.len();
        for id in ids {
            let Some(t) = self.clients.get(&id) else {
                continue;
            };
            if t.options.bcast || (t.options.noloop && by == Some(id)) {
                continue;
            }
            let push = Push::Invalidate(Some(vec![Bytes::copy_from_slice(key)]));
            self.target_of(id, push, sends);
        }
    }

    /// Where connection `id`'s message goes: to it, or to its REDIRECT connection; when that
    /// one has gone, the connection is told so instead (once per message, as Redis).
    fn target_of(&mut self, id: u64, push: Push, sends: &mut Vec<Send>) {
        let Some(t) = self.clients.get_mut(&id) else {
            return;
        };
        let Some(own) = t.own.upgrade() else {
            return;
        };
        match &t.redirect {
            None => sends.push((own, push)),
            Some(to) => match to.upgrade() {
                Some(to) if !to.killed.load(Ordering::Relaxed) => sends.push((to, push)),
                _ => {
                    t.broken = true;
                    sends.push((own, Push::RedirectBroken(t.options.redirect)));
                }
            },
        }
    }
}

/// Queues each message (`ClientInfo::push`).
fn deliver(sends: Vec<Send>) {
    for (to, push) in sends {
        to.push(push);
    }
}

/// Redis's refusals of a change of mode while tracking is on.
fn check_change(old: Option<&Tracked>, new: &Options) -> Result<(), String> {
    let Some(old) = old else {
        return Ok(());
    };
    let o = &old.options;
    if o.bcast != new.bcast {
        return Err(
            "ERR You can't switch BCAST mode on/off before disabling tracking for \
                    this client, and then re-enabling it with a different mode."
                .into(),
        );
    }
    if (new.optin && o.optout) || (new.optout && o.optin) {
        return Err(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for \
                    this client, and then re-enabling it with a different mode."
                .into(),
        );
    }
    Ok(())
}

/// BCAST prefixes must not overlap the connection's or each other (one key, one message).
fn check_prefixes(existing: &[Bytes], new: &[Bytes]) -> Result<(), String> {
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Err(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single \
                 client must not overlap.",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(e)
            ));
        }
        if let Some(other) = new[i + 1..].iter().find(|o| overlap(p, o)) {
            return Err(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a \
                 single client must not overlap.",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(other)
            ));
        }
    }
    Ok(())
}
