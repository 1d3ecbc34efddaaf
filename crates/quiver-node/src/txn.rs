//! Optimistic transactions over the engine: how a read-modify-write command (INCR, APPEND,
//! GETSET, MSETNX, ...) and a whole MULTI/EXEC are made atomic without a global lock.
//!
//! A [`Txn`] reads through the store (remembering every value it saw), buffers its writes in
//! an overlay that its own later reads see, and commits as one compound batch in which every
//! key it read carries the precondition "still has the value I saw". If another client changed
//! one of them in between, nothing is applied and the caller runs the command again on fresh
//! values. The result is serializable: the batch applies exactly when the state the command
//! computed from is still the store's state, and the batch itself is all-or-nothing.
//!
//! Running again is bounded ([`retry_on_conflict`], [`TXN_ATTEMPTS_MAX`]): a command whose keys
//! other clients keep changing gets an error instead of spinning forever.

use std::collections::{BTreeSet, HashMap};

/// Maps of a transaction's keys: foldhash, not SipHash (a profile of MSET had SipHash at a
/// tenth of the server's time); a map holds one transaction's keys only, bounded by its width.
type KeyMap<V> = HashMap<DbKey, V, foldhash::fast::RandomState>;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use quiver_store::{
    Batch, BatchAction, BatchOutcome, Db, Entry, Precondition, RangeItem, Store, ValueKind,
};

use crate::chain::{Chains, Took};
use crate::state::ServerState;
use crate::store_errors;
use crate::watch::{DbKey, Watches};
use quiver_service::reply::Reply;
use quiver_service::stats::Stats;

/// Attempts of one optimistic command or EXEC before it is given up. Each failed attempt means
/// another client's write to a key it read landed in between (so the others made progress);
/// many clients INCRementing one key need a handful. Hundreds in a row only happen when writers
/// keep changing the keys faster than the command can run.
pub const TXN_ATTEMPTS_MAX: u32 = 1000;
/// Attempts run back to back; each later one first yields the thread, so that the writers it
/// keeps losing to can finish.
const TXN_ATTEMPTS_BEFORE_YIELD: u32 = 4;

/// What one attempt of an optimistic transaction came to.
pub enum Attempt<T> {
    /// Finished: applied, or an outcome that no new attempt would change (an engine error,
    /// EXEC's nil for a changed watched key).
    Done(T),
    /// A key it read changed before the commit: nothing was applied; run it again.
    Conflict,
}

/// Runs `attempt` until it is done, at most `attempts_max` times. When every attempt
/// conflicted, the result is the error reply saying that nothing was applied (`what`:
/// "command" or "transaction"), counted in `transactions_abandoned`.
pub fn retry_on_conflict<T>(
    stats: &Stats,
    attempts_max: u32,
    what: &str,
    mut attempt: impl FnMut() -> Attempt<T>,
) -> Result<T, Reply> {
    for n in 1..=attempts_max {
        if n > TXN_ATTEMPTS_BEFORE_YIELD {
            std::thread::yield_now();
        }
        match attempt() {
            Attempt::Done(done) => return Ok(done),
            Attempt::Conflict if n < attempts_max => {
                stats.transaction_retries.fetch_add(1, Relaxed);
            }
            Attempt::Conflict => {}
        }
    }
    stats.transactions_abandoned.fetch_add(1, Relaxed);
    Err(store_errors::not_applied_after_conflicts(
        what,
        attempts_max,
    ))
}

/// What [`Txn::commit`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Commit {
    /// The writes (if any) were applied and their watchers marked.
    Applied,
    /// A key read (or watched) changed before the commit: nothing was applied.
    Conflict,
    /// Replication refused the write (its chain's backlog is full): nothing was applied; the
    /// error's text.
    Refused(String),
}

/// Keys read per engine call while walking the whole key space (KEYS, FLUSHDB).
pub const WALK_PAGE: usize = 4096;

/// A transaction in progress; see the module documentation.
///
/// Its keys are [`DbKey`]s numbered by the databases as they were when it began: a SWAPDB
/// inside it swaps which of those a database number addresses ([`Txn::select`] and the
/// commands never see the difference), and the commit writes each key where its database went.
pub struct Txn<'a> {
    store: &'a Store,
    /// Hits and misses, and the width of each engine read.
    stats: &'a Stats,
    /// Keys per engine read (`max-multikey-width`): a wider prefetch takes several.
    read_width_max: usize,
    /// Engine reads so far: more than one, and the reads are checked unchanged at commit even
    /// when nothing is written, so that what the transaction answered is one state of the store.
    read_calls: usize,
    /// Watchers of the keys written are marked at commit.
    watches: &'a Watches,
    /// Databases SELECT may choose from (`databases`).
    databases: u32,
    /// The database its commands address now (a SELECT inside MULTI changes it).
    db: u32,
    /// Database number -> the database (numbered at the start) whose keys it holds, after the
    /// SWAPDBs inside the transaction; empty while there were none.
    view: Vec<u32>,
    /// SWAPDBs to carry out at commit, in order.
    swaps: Vec<(u32, u32)>,
    /// Databases (numbered at the start) a FLUSHDB or FLUSHALL inside the transaction emptied:
    /// keys not in the overlay read absent there, and commit flushes them before writing.
    flushed: BTreeSet<u32>,
    /// FLUSHALL ran: commit empties every database at once.
    flushed_all: bool,
    /// Value and expiry in the store when first read (`None`: absent).
    read: KeyMap<Option<Entry>>,
    /// Buffered writes (`None`: delete), in first-write order.
    written: Vec<DbKey>,
    overlay: KeyMap<Option<Entry>>,
    /// The store's clock when the transaction began: every command of it measures expiry
    /// times against this one instant (as Redis fixes the time for a command, and for all of
    /// an EXEC).
    now_ms: u64,
    /// The cluster node, in cluster mode: the commit goes down its chains when it replicates
    /// some, and DBSIZE counts the slots Redis's tools see it serve.
    cluster: Option<&'a crate::cluster::ClusterNode>,
}

impl<'a> Txn<'a> {
    /// A transaction whose commands address database `db` (the connection's).
    pub fn new(state: &'a ServerState, db: u32) -> Txn<'a> {
        Txn {
            store: &state.store,
            stats: &state.core.stats,
            read_width_max: state.live.max_multikey_width(),
            read_calls: 0,
            watches: &state.watches,
            databases: state.core.config.databases,
            db,
            view: Vec::new(),
            swaps: Vec::new(),
            flushed: BTreeSet::new(),
            flushed_all: false,
            read: KeyMap::default(),
            written: Vec::new(),
            overlay: KeyMap::default(),
            now_ms: state.store.now_ms(),
            cluster: state.cluster.as_deref(),
        }
    }

    /// The node's chains, when it replicates some.
    fn chains(&self) -> Option<&'a Chains> {
        self.cluster
            .map(|n| &n.chains)
            .filter(|c| c.is_replicated())
    }

    /// In cluster mode, the slot ranges whose keys DBSIZE counts: those Redis's tools see
    /// this node serve (`Topology::counted_ranges`; none before it has a topology).
    pub fn counted_ranges(&self) -> Option<Vec<quiver_store::slot::SlotRange>> {
        let node = self.cluster?;
        let view = node.view();
        Some(
            view.topology
                .as_ref()
                .map(|t| t.counted_ranges(&node.id))
                .unwrap_or_default(),
        )
    }

    /// The database the commands address now.
    pub fn db(&self) -> u32 {
        self.db
    }

    /// Databases SELECT may choose from.
    pub fn databases(&self) -> u32 {
        self.databases
    }

    /// The commands that follow address database `db` (SELECT inside MULTI; checked by the
    /// caller).
    pub fn select(&mut self, db: u32) {
        self.db = db;
    }

    /// Which database, numbered at the start, database `db` holds now.
    fn at(&self, db: u32) -> u32 {
        self.view.get(db as usize).copied().unwrap_or(db)
    }

    /// Where the keys of database `start` (numbered at the start) are once the transaction's
    /// SWAPDBs are done.
    fn final_db(&self, start: u32) -> u32 {
        self.view
            .iter()
            .position(|&s| s == start)
            .map_or(start, |db| db as u32)
    }

    /// Reads every key of database `db` not seen yet as one engine vector (or several of
    /// `max-multikey-width` keys), so the commands that follow find their values here instead
    /// of going to the store one by one.
    pub fn prefetch<'k>(
        &mut self,
        db: u32,
        keys: impl Iterator<Item = &'k Bytes>,
    ) -> quiver_store::Result<()> {
        let s = self.at(db);
        if self.flushed.contains(&s) {
            return Ok(());
        }
        let mut missing: Vec<&Bytes> = keys
            .filter(|k| {
                let k = (s, (*k).clone());
                !self.read.contains_key(&k) && !self.overlay.contains_key(&k)
            })
            .collect();
        missing.sort_unstable();
        missing.dedup();
        // Keys the engine refuses (empty, too long) are left for the command to report.
        missing.retain(|k| valid_key(k));
        if missing.is_empty() {
            return Ok(());
        }
        let store = self.store.db(s)?;
        for chunk in missing.chunks(self.read_width_max.max(1)) {
            self.stats.vector_width(chunk.len() as u64);
            self.read_calls += 1;
            let values = store.multi_get_entries(chunk)?;
            for (k, v) in chunk.iter().zip(values) {
                self.read.insert((s, (*k).clone()), v);
            }
        }
        Ok(())
    }

    /// The value of a string key as this transaction sees it; `Error::WrongType` (Redis's
    /// WRONGTYPE) for a key of another kind.
    pub fn get(&mut self, key: &Bytes) -> quiver_store::Result<Option<Bytes>> {
        Ok(self.get_string_entry(key)?.map(|e| e.value))
    }

    /// [`Txn::get`] with the key's expiry time.
    pub fn get_string_entry(&mut self, key: &Bytes) -> quiver_store::Result<Option<Entry>> {
        self.get_of_kind(key, ValueKind::String)
    }

    /// [`Txn::get_entry`] of a key that must hold `kind` (absent or of that kind);
    /// `Error::WrongType` for another.
    pub fn get_of_kind(
        &mut self,
        key: &Bytes,
        kind: ValueKind,
    ) -> quiver_store::Result<Option<Entry>> {
        self.get_entry(key)?.map(|e| e.of_kind(kind)).transpose()
    }

    /// The key's value, kind and expiry time as this transaction sees them (a key whose
    /// expiry time has come is absent).
    pub fn get_entry(&mut self, key: &Bytes) -> quiver_store::Result<Option<Entry>> {
        self.get_entry_in(self.db, key)
    }

    /// [`Txn::get_entry`] in database `db` (MOVE, COPY ... DB).
    pub fn get_entry_in(&mut self, db: u32, key: &Bytes) -> quiver_store::Result<Option<Entry>> {
        let now = self.now_ms;
        let k = (self.at(db), key.clone());
        if let Some(v) = self.overlay.get(&k) {
            return Ok(live(v, now).cloned());
        }
        if self.flushed.contains(&k.0) || !valid_key(key) {
            return Ok(None);
        }
        if let Some(v) = self.read.get(&k) {
            return Ok(live(v, now).cloned());
        }
        self.stats.vector_width(1);
        self.read_calls += 1;
        let v = self.store.db(k.0)?.get_entry(key)?;
        let found = live(&v, now).cloned();
        self.read.insert(k, v);
        Ok(found)
    }

    /// Now (ms since the Unix epoch, on the store's clock) for this transaction: taken once,
    /// when it began, so all its commands measure expiry times against the same instant.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Whether the key exists, of any kind.
    pub fn exists(&mut self, key: &Bytes) -> quiver_store::Result<bool> {
        Ok(self.get_entry(key)?.is_some())
    }

    /// Writes a value that never expires (a SET: any old expiry is gone).
    pub fn put(&mut self, key: Bytes, value: Bytes) {
        self.put_expiring(key, value, None);
    }

    /// Writes a value with an expiry time (ms since the Unix epoch; `None`: never).
    pub fn put_expiring(&mut self, key: Bytes, value: Bytes, expire_at: Option<u64>) {
        self.put_expiring_in(self.db, key, value, expire_at);
    }

    /// [`Txn::put_expiring`] in database `db` (MOVE, COPY ... DB).
    pub fn put_expiring_in(&mut self, db: u32, key: Bytes, value: Bytes, expire_at: Option<u64>) {
        self.put_entry_in(db, key, Entry::string(value, expire_at));
    }

    /// Writes `entry` whole: its value, kind and expiry time (RENAME, EXPIRE: a key of any
    /// kind written back as it was, but for what the command changes).
    pub fn put_entry(&mut self, key: Bytes, entry: Entry) {
        self.put_entry_in(self.db, key, entry);
    }

    /// [`Txn::put_entry`] in database `db` (MOVE, COPY ... DB).
    pub fn put_entry_in(&mut self, db: u32, key: Bytes, entry: Entry) {
        self.write((self.at(db), key), Some(entry));
    }

    /// Writes a new value and keeps the key's expiry time (INCR, APPEND, SETRANGE).
    pub fn put_keep_ttl(&mut self, key: Bytes, value: Bytes) -> quiver_store::Result<()> {
        let expire_at = self.get_entry(&key)?.and_then(|e| e.expire_at);
        self.put_expiring(key, value, expire_at);
        Ok(())
    }

    pub fn delete(&mut self, key: Bytes) {
        self.delete_in(self.db, key);
    }

    /// [`Txn::delete`] in database `db` (a large hash's buckets).
    pub fn delete_in(&mut self, db: u32, key: Bytes) {
        self.write((self.at(db), key), None);
    }

    fn write(&mut self, key: DbKey, value: Option<Entry>) {
        if self.overlay.insert(key.clone(), value).is_none() {
            self.written.push(key);
        }
    }

    /// Every key of the current database becomes absent (FLUSHDB inside MULTI).
    pub fn flush(&mut self) {
        let s = self.at(self.db);
        self.flushed.insert(s);
        self.overlay.retain(|(db, _), _| *db != s);
        self.written.retain(|(db, _)| *db != s);
    }

    /// Every key of every database becomes absent (FLUSHALL inside MULTI).
    pub fn flush_all(&mut self) {
        self.flushed_all = true;
        self.flushed = (0..self.databases).collect();
        self.overlay.clear();
        self.written.clear();
    }

    /// Databases `a` and `b` trade their keys (SWAPDB; both checked by the caller).
    pub fn swap(&mut self, a: u32, b: u32) {
        if self.view.is_empty() {
            self.view = (0..self.databases).collect();
        }
        self.view.swap(a as usize, b as usize);
        self.swaps.push((a, b));
    }

    /// Buffered writes of the current database: (key, new value and expiry, or `None` for a
    /// delete or for a value whose expiry time has come).
    pub fn overlay(&self) -> impl Iterator<Item = (&Bytes, Option<&Entry>)> {
        self.overlay_in(self.db)
    }

    /// [`Txn::overlay`] of database `db`.
    pub fn overlay_in(&self, db: u32) -> impl Iterator<Item = (&Bytes, Option<&Entry>)> {
        let s = self.at(db);
        self.written
            .iter()
            .filter(move |k| k.0 == s)
            .map(|k| (&k.1, live(&self.overlay[k], self.now_ms)))
    }

    /// Whether `key` exists in the store's current database, ignoring this transaction's own
    /// writes (for keyspace commands that combine the store with the overlay).
    pub fn exists_in_store(&mut self, key: &Bytes) -> quiver_store::Result<bool> {
        let k = (self.at(self.db), key.clone());
        if self.flushed.contains(&k.0) || !valid_key(key) {
            return Ok(false);
        }
        if let Some(v) = self.read.get(&k) {
            return Ok(live(v, self.now_ms).is_some());
        }
        self.stats.vector_width(1);
        self.read_calls += 1;
        let v = self.store.db(k.0)?.get_entry(key)?;
        let found = live(&v, self.now_ms).is_some();
        self.read.insert(k, v);
        Ok(found)
    }

    /// Whether the current database was emptied inside this transaction.
    pub fn is_flushed(&self) -> bool {
        self.is_flushed_in(self.db)
    }

    /// [`Txn::is_flushed`] of database `db`.
    pub fn is_flushed_in(&self, db: u32) -> bool {
        self.flushed.contains(&self.at(db))
    }

    /// The store (its own key methods address database 0).
    pub fn store(&self) -> &'a Store {
        self.store
    }

    /// The store's keys of the current database, as they were when the transaction began
    /// (SCAN, KEYS, DBSIZE, RANDOMKEY).
    pub fn store_db(&self) -> quiver_store::Result<Db<'a>> {
        self.store.db(self.at(self.db))
    }

    pub fn stats(&self) -> &'a Stats {
        self.stats
    }

    /// Whether this transaction writes anything.
    pub fn has_writes(&self) -> bool {
        !self.written.is_empty() || !self.flushed.is_empty() || !self.swaps.is_empty()
    }

    /// Applies the buffered writes as one batch whose preconditions are the values read,
    /// plus `watched` (key, value when WATCH ran). A transaction that wrote nothing, has no
    /// watched keys and read in one engine call commits without touching the store: that
    /// call saw one state of the store. Reads from several calls are checked unchanged by a
    /// batch of checks (which writes nothing).
    ///
    /// SWAPDB, FLUSHDB and FLUSHALL inside the transaction are carried out first (each at
    /// once, but not atomically with the rest: the watched keys are checked, then the
    /// databases swapped and emptied, then the writes applied without preconditions).
    pub fn commit(self, watched: &[(DbKey, Option<Entry>)]) -> quiver_store::Result<Commit> {
        if !self.has_writes() && watched.is_empty() && self.read_calls <= 1 {
            return Ok(Commit::Applied);
        }
        let mut batch = Batch::new();
        for ((db, key), seen) in watched {
            batch
                .in_db(*db)
                .check(key.clone(), Precondition::Unchanged(seen.clone()));
        }
        let reshaped = !self.flushed.is_empty() || !self.swaps.is_empty();
        if reshaped {
            // The swaps and flushes cannot be part of the batch: check the watched keys
            // first, then swap and flush, then write. Another client's write can slip in
            // between (documented).
            if !batch.is_empty() && !self.store.apply(&batch)?.is_applied() {
                return Ok(Commit::Conflict);
            }
            batch = Batch::new();
            for &(a, b) in &self.swaps {
                swap_dbs(self.store, self.watches, a, b)?;
            }
            if self.flushed_all {
                flush_all(self.store, self.watches)?;
            } else {
                for &s in &self.flushed {
                    flush_db(self.store, self.watches, self.final_db(s))?;
                }
            }
        } else {
            for ((db, key), seen) in &self.read {
                if !self.overlay.contains_key(&(*db, key.clone())) {
                    batch
                        .in_db(*db)
                        .check(key.clone(), Precondition::Unchanged(seen.clone()));
                }
            }
        }
        // Each write goes where its database is once the swaps are done.
        for k in &self.written {
            let value = &self.overlay[k];
            let seen = if reshaped { None } else { self.read.get(k) };
            let condition = seen.map(|s| Precondition::Unchanged(s.clone()));
            let batch = batch.in_db(self.final_db(k.0));
            match value {
                Some(e) => batch.put_entry(k.1.clone(), e.clone(), condition),
                // Deleting what was absent writes nothing; only the read must still hold.
                None if matches!(seen, Some(None)) => match condition {
                    Some(c) => batch.check(k.1.clone(), c),
                    None => continue,
                },
                None => batch.push(k.1.clone(), BatchAction::Delete, condition),
            };
        }
        if batch.is_empty() {
            self.touch_written();
            return Ok(Commit::Applied);
        }
        let apply = || -> quiver_store::Result<Commit> {
            if let [op] = &batch.ops[..] {
                // One unconditional write of a string needs no batch records (SET, DEL of
                // one key).
                if op.condition.is_none() && op.kind == ValueKind::String {
                    let store = self.store.db(op.db)?;
                    match &op.action {
                        BatchAction::Put(v) => store.put_expiring(&op.key, v, op.expire_at)?,
                        BatchAction::Delete => {
                            store.delete(&op.key)?;
                        }
                        BatchAction::Check => {}
                    }
                    return Ok(Commit::Applied);
                }
            }
            match self.store.apply(&batch)? {
                BatchOutcome::Applied => Ok(Commit::Applied),
                BatchOutcome::ConditionFailed { .. } => Ok(Commit::Conflict),
            }
        };
        let committed = match self.chains() {
            None => apply(),
            Some(chains) => {
                // The batch's writes, all or nothing, as one message down their chain.
                let items = chain_items(&batch);
                let written = chains.write(&items, true, || {
                    let result = apply();
                    let took = match &result {
                        Ok(Commit::Applied) => Took::All,
                        _ => Took::None,
                    };
                    (result, took)
                });
                match written {
                    Ok(result) => result,
                    Err(refused) => Ok(Commit::Refused(refused.to_string())),
                }
            }
        };
        if matches!(committed, Ok(Commit::Applied)) {
            self.touch_written();
        }
        committed
    }

    /// Marks the watchers of every key written, in the database it went to (nothing to do,
    /// and no work per key, while nobody watches).
    fn touch_written(&self) {
        self.watches
            .touch_keys(self.written.iter().map(|(s, k)| (self.final_db(*s), k)));
    }
}

/// A batch's writes as the items a chain carries down to its members, all or nothing (its
/// checks carry nothing: the head checked them).
pub fn chain_items(batch: &Batch) -> Vec<RangeItem> {
    batch
        .ops
        .iter()
        .filter_map(|op| {
            let entry = match &op.action {
                BatchAction::Put(v) => Some(Entry {
                    value: v.clone(),
                    expire_at: op.expire_at,
                    kind: op.kind,
                }),
                BatchAction::Delete => None,
                BatchAction::Check => return None,
            };
            Some(RangeItem::in_db(op.db, op.key.clone(), entry))
        })
        .collect()
}

/// Which of `keys` exist in database `db`, in engine calls of [`WALK_PAGE`] keys (keys the
/// engine refuses exist nowhere).
fn exist_in(store: &Store, db: u32, keys: &[&Bytes]) -> quiver_store::Result<Vec<bool>> {
    let store = store.db(db)?;
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(WALK_PAGE) {
        let valid: Vec<&Bytes> = chunk.iter().copied().filter(|k| valid_key(k)).collect();
        let mut exists = store.multi_exists(&valid)?.into_iter();
        found.extend(
            chunk
                .iter()
                .map(|k| valid_key(k) && exists.next().unwrap_or(false)),
        );
    }
    Ok(found)
}

/// The watched keys of database `db` that exist in database `db` or in `also`.
pub(crate) fn watched_existing(
    store: &Store,
    watches: &Watches,
    db: u32,
    also: Option<u32>,
) -> quiver_store::Result<Vec<DbKey>> {
    let watched = watches.keys_in(|d| d == db);
    let keys: Vec<&Bytes> = watched.iter().map(|(_, k)| k).collect();
    let mut exists = exist_in(store, db, &keys)?;
    if let Some(other) = also {
        for (e, o) in exists.iter_mut().zip(exist_in(store, other, &keys)?) {
            *e |= o;
        }
    }
    Ok(watched
        .into_iter()
        .zip(exists)
        .filter(|(_, e)| *e)
        .map(|(k, _)| k)
        .collect())
}

/// SWAPDB: one metadata write in the engine; then, as Redis 7's `touchAllWatchedKeysInDb`
/// both ways, the watchers of a key of either database that existed in either are marked.
pub fn swap_dbs(store: &Store, watches: &Watches, a: u32, b: u32) -> quiver_store::Result<()> {
    let mut touched = watched_existing(store, watches, a, Some(b))?;
    if a != b {
        touched.extend(watched_existing(store, watches, b, Some(a))?);
    }
    store.swap_dbs(a, b)?;
    watches.mark_watchers(touched.iter().map(|(db, k)| (*db, k)));
    Ok(())
}

/// FLUSHDB: every key of database `db` at once (a fresh namespace, one metadata write), and
/// the watchers of its watched keys that existed are marked, as Redis 7 does.
pub fn flush_db(store: &Store, watches: &Watches, db: u32) -> quiver_store::Result<()> {
    let touched = watched_existing(store, watches, db, None)?;
    store.flush_db(db)?;
    watches.mark_watchers(touched.iter().map(|(db, k)| (*db, k)));
    watches.flushed();
    Ok(())
}

/// FLUSHALL: every key at once (the engine's `drop_all`: one record per partition, every
/// partition locked), and the watchers of the watched keys that existed are marked.
pub fn flush_all(store: &Store, watches: &Watches) -> quiver_store::Result<()> {
    let mut touched = Vec::new();
    let mut dbs: Vec<u32> = watches.keys_in(|_| true).iter().map(|(d, _)| *d).collect();
    dbs.sort_unstable();
    dbs.dedup();
    for db in dbs {
        touched.extend(watched_existing(store, watches, db, None)?);
    }
    store.drop_all()?;
    watches.mark_watchers(touched.iter().map(|(db, k)| (*db, k)));
    watches.flushed();
    Ok(())
}

/// Reads `keys` (all valid) of database `db`, values with their expiry times, in engine calls
/// of at most `width_max` keys.
pub fn read_all(
    store: &Store,
    db: u32,
    keys: &[&Bytes],
    width_max: usize,
) -> quiver_store::Result<Vec<Option<Entry>>> {
    let store = store.db(db)?;
    let mut values = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(width_max.max(1)) {
        values.extend(store.multi_get_entries(chunk)?);
    }
    Ok(values)
}

/// `entry` unless its expiry time has come by `now` (ms since the Unix epoch).
fn live(entry: &Option<Entry>, now: u64) -> Option<&Entry> {
    entry
        .as_ref()
        .filter(|e| e.expire_at.is_none_or(|at| at > now))
}

/// Whether the engine accepts `key` (it refuses keys over 64 KiB; the empty key is a key).
pub fn valid_key(key: &[u8]) -> bool {
    key.len() <= quiver_store::options::KEY_LEN_MAX
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::cmd::common::TxnCommand;
    use crate::cmd::incr::IncrBy;
    use quiver_service::table::Cmd;

    /// INCR through a transaction, exactly as a command runs, except that another client's
    /// write lands between every attempt's read and its commit: every attempt conflicts.
    #[test]
    fn a_command_whose_keys_keep_changing_is_given_up_and_nothing_is_applied() {
        const ATTEMPTS: u32 = 7;
        let dir = tempfile::tempdir().unwrap();
        let state = ServerState::for_tests(dir.path());
        state.store.put(b"counter", b"10").unwrap();
        let args: Vec<Bytes> = vec!["INCR".into(), "counter".into()];
        let mut attempts = 0;
        let reply = retry_on_conflict(&state.core.stats, ATTEMPTS, "command", || {
            attempts += 1;
            let mut txn = Txn::new(&state, 0);
            let incr = IncrBy::parse(Cmd::Incr, &args).unwrap();
            let reply = incr.apply(&mut txn).unwrap();
            // The rival client's write: a value the INCR did not read.
            let rival = format!("{}", 1000 + attempts);
            state.store.put(b"counter", rival.as_bytes()).unwrap();
            match txn.commit(&[]).unwrap() {
                Commit::Applied => Attempt::Done(reply),
                Commit::Conflict => Attempt::Conflict,
                Commit::Refused(text) => panic!("no chains here: {text}"),
            }
        })
        .unwrap_or_else(|given_up| given_up);
        assert_eq!(
            reply,
            Reply::error(
                "ERR the command was not applied: concurrent writes changed the keys it read \
                 7 times in a row"
            )
        );
        assert_eq!(attempts, ATTEMPTS);
        // The rival's last value, not incremented: none of the attempts was applied.
        assert_eq!(
            state.store.get(b"counter").unwrap().as_deref(),
            Some(&b"1007"[..])
        );
        assert_eq!(state.core.stats.transactions_abandoned.load(Relaxed), 1);
        assert_eq!(
            state.core.stats.transaction_retries.load(Relaxed),
            u64::from(ATTEMPTS - 1)
        );
    }

    #[test]
    fn a_conflict_then_success_is_one_retry() {
        let dir = tempfile::tempdir().unwrap();
        let state = ServerState::for_tests(dir.path());
        let mut conflicts_left = 2;
        let reply = retry_on_conflict(&state.core.stats, TXN_ATTEMPTS_MAX, "command", || {
            if conflicts_left > 0 {
                conflicts_left -= 1;
                Attempt::Conflict
            } else {
                Attempt::Done(Reply::OK)
            }
        })
        .unwrap_or_else(|given_up| given_up);
        assert_eq!(reply, Reply::OK);
        assert_eq!(state.core.stats.transaction_retries.load(Relaxed), 2);
        assert_eq!(state.core.stats.transactions_abandoned.load(Relaxed), 0);
    }
}
