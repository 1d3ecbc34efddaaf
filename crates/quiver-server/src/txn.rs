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

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use quiver_store::{Batch, BatchAction, BatchOutcome, Entry, Precondition, Store};

use crate::errors;
use crate::reply::Reply;
use crate::state::ServerState;
use crate::stats::Stats;
use crate::watch::Watches;

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
    Err(errors::not_applied_after_conflicts(what, attempts_max))
}

/// What [`Txn::commit`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Commit {
    /// The writes (if any) were applied and their watchers marked.
    Applied,
    /// A key read (or watched) changed before the commit: nothing was applied.
    Conflict,
}

/// Keys read per engine call while walking the whole key space (KEYS, FLUSHDB).
pub const WALK_PAGE: usize = 4096;

/// A transaction in progress; see the module documentation.
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
    /// Value and expiry in the store when first read (`None`: absent).
    read: HashMap<Bytes, Option<Entry>>,
    /// Buffered writes (`None`: delete), in first-write order.
    written: Vec<Bytes>,
    overlay: HashMap<Bytes, Option<Entry>>,
    /// FLUSHDB / FLUSHALL ran inside this transaction: keys not in the overlay now read absent,
    /// and commit flushes the store before writing the overlay.
    flushed: bool,
    /// The store's clock when the transaction began: every command of it measures expiry
    /// times against this one instant (as Redis fixes the time for a command, and for all of
    /// an EXEC).
    now_ms: u64,
}

impl<'a> Txn<'a> {
    pub fn new(state: &'a ServerState) -> Txn<'a> {
        Txn {
            store: &state.store,
            stats: &state.stats,
            read_width_max: state.config.max_multikey_width,
            read_calls: 0,
            watches: &state.watches,
            read: HashMap::new(),
            written: Vec::new(),
            overlay: HashMap::new(),
            flushed: false,
            now_ms: state.store.now_ms(),
        }
    }

    /// Reads every key not seen yet as one engine vector (or several of `max-multikey-width`
    /// keys), so the commands that follow find their values here instead of going to the
    /// store one by one.
    pub fn prefetch<'k>(
        &mut self,
        keys: impl Iterator<Item = &'k Bytes>,
    ) -> quiver_store::Result<()> {
        if self.flushed {
            return Ok(());
        }
        let mut missing: Vec<&Bytes> = keys
            .filter(|k| !self.read.contains_key(*k) && !self.overlay.contains_key(*k))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        // Keys the engine refuses (empty, too long) are left for the command to report.
        missing.retain(|k| valid_key(k));
        if missing.is_empty() {
            return Ok(());
        }
        for chunk in missing.chunks(self.read_width_max.max(1)) {
            self.stats.vector_widths.record(chunk.len() as u64);
            self.read_calls += 1;
            let values = self.store.multi_get_entries(chunk)?;
            for (k, v) in chunk.iter().zip(values) {
                self.read.insert((*k).clone(), v);
            }
        }
        Ok(())
    }

    /// The key's value as this transaction sees it.
    pub fn get(&mut self, key: &Bytes) -> quiver_store::Result<Option<Bytes>> {
        Ok(self.get_entry(key)?.map(|e| e.value))
    }

    /// The key's value and expiry time as this transaction sees them (a key whose expiry
    /// time has come is absent).
    pub fn get_entry(&mut self, key: &Bytes) -> quiver_store::Result<Option<Entry>> {
        let now = self.now_ms;
        if let Some(v) = self.overlay.get(key) {
            return Ok(live(v, now).cloned());
        }
        if self.flushed || !valid_key(key) {
            return Ok(None);
        }
        if let Some(v) = self.read.get(key) {
            return Ok(live(v, now).cloned());
        }
        self.stats.vector_widths.record(1);
        self.read_calls += 1;
        let v = self.store.get_entry(key)?;
        self.read.insert(key.clone(), v.clone());
        Ok(live(&v, now).cloned())
    }

    /// Now (ms since the Unix epoch, on the store's clock) for this transaction: taken once,
    /// when it began, so all its commands measure expiry times against the same instant.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    pub fn exists(&mut self, key: &Bytes) -> quiver_store::Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// Writes a value that never expires (a SET: any old expiry is gone).
    pub fn put(&mut self, key: Bytes, value: Bytes) {
        self.put_expiring(key, value, None);
    }

    /// Writes a value with an expiry time (ms since the Unix epoch; `None`: never).
    pub fn put_expiring(&mut self, key: Bytes, value: Bytes, expire_at: Option<u64>) {
        self.write(key, Some(Entry { value, expire_at }));
    }

    /// Writes a new value and keeps the key's expiry time (INCR, APPEND, SETRANGE).
    pub fn put_keep_ttl(&mut self, key: Bytes, value: Bytes) -> quiver_store::Result<()> {
        let expire_at = self.get_entry(&key)?.and_then(|e| e.expire_at);
        self.put_expiring(key, value, expire_at);
        Ok(())
    }

    pub fn delete(&mut self, key: Bytes) {
        self.write(key, None);
    }

    fn write(&mut self, key: Bytes, value: Option<Entry>) {
        if self.overlay.insert(key.clone(), value).is_none() {
            self.written.push(key);
        }
    }

    /// Every key becomes absent (FLUSHDB inside MULTI).
    pub fn flush(&mut self) {
        self.flushed = true;
        self.overlay.clear();
        self.written.clear();
    }

    /// Buffered writes: (key, new value and expiry, or `None` for a delete or for a value
    /// whose expiry time has come).
    pub fn overlay(&self) -> impl Iterator<Item = (&Bytes, Option<&Entry>)> {
        self.written
            .iter()
            .map(|k| (k, live(&self.overlay[k], self.now_ms)))
    }

    /// Whether `key` exists in the store, ignoring this transaction's own writes (for
    /// keyspace commands that combine the store with the overlay).
    pub fn exists_in_store(&mut self, key: &Bytes) -> quiver_store::Result<bool> {
        if self.flushed || !valid_key(key) {
            return Ok(false);
        }
        if let Some(v) = self.read.get(key) {
            return Ok(live(v, self.now_ms).is_some());
        }
        self.stats.vector_widths.record(1);
        self.read_calls += 1;
        let v = self.store.get_entry(key)?;
        let found = live(&v, self.now_ms).is_some();
        self.read.insert(key.clone(), v);
        Ok(found)
    }

    pub fn is_flushed(&self) -> bool {
        self.flushed
    }

    pub fn store(&self) -> &'a Store {
        self.store
    }

    pub fn stats(&self) -> &'a Stats {
        self.stats
    }

    /// Whether this transaction writes anything.
    pub fn has_writes(&self) -> bool {
        !self.written.is_empty() || self.flushed
    }

    /// Applies the buffered writes as one batch whose preconditions are the values read,
    /// plus `watched` (key, value when WATCH ran). A transaction that wrote nothing, has no
    /// watched keys and read in one engine call commits without touching the store: that
    /// call saw one state of the store. Reads from several calls are checked unchanged by a
    /// batch of checks (which writes nothing).
    ///
    /// A flush inside the transaction is carried out first (all keys at once, but not
    /// atomically with the rest; see [`flush_store`]).
    pub fn commit(self, watched: &[(Bytes, Option<Entry>)]) -> quiver_store::Result<Commit> {
        if !self.has_writes() && watched.is_empty() && self.read_calls <= 1 {
            return Ok(Commit::Applied);
        }
        let mut batch = Batch::new();
        for (key, seen) in watched {
            batch.check(key.clone(), Precondition::Unchanged(seen.clone()));
        }
        if self.flushed {
            // The flush cannot be part of the batch: check the watched keys first, then flush,
            // then write. Another client's write can slip in between (documented).
            if !batch.is_empty() && !self.store.apply(&batch)?.is_applied() {
                return Ok(Commit::Conflict);
            }
            batch = Batch::new();
            flush_store(self.store, self.watches)?;
        } else {
            for (key, seen) in &self.read {
                if !self.overlay.contains_key(key) {
                    batch.check(key.clone(), Precondition::Unchanged(seen.clone()));
                }
            }
        }
        for key in &self.written {
            let value = &self.overlay[key];
            let seen = if self.flushed {
                None
            } else {
                self.read.get(key)
            };
            let condition = seen.map(|s| Precondition::Unchanged(s.clone()));
            let action = match value {
                Some(e) => BatchAction::Put(e.value.clone()),
                // Deleting what was absent writes nothing; only the read must still hold.
                None if matches!(seen, Some(None)) => BatchAction::Check,
                None => BatchAction::Delete,
            };
            if action == BatchAction::Check && condition.is_none() {
                continue;
            }
            batch.push(key.clone(), action, condition);
            if let (Some(op), Some(e)) = (batch.ops.last_mut(), value) {
                op.expire_at = e.expire_at;
            }
        }
        if batch.is_empty() {
            self.watches.touch(&self.written);
            return Ok(Commit::Applied);
        }
        if let [op] = &batch.ops[..] {
            // One unconditional write needs no batch records (SET, DEL of one key).
            if op.condition.is_none() {
                match &op.action {
                    BatchAction::Put(v) => self.store.put_expiring(&op.key, v, op.expire_at)?,
                    BatchAction::Delete => {
                        self.store.delete(&op.key)?;
                    }
                    BatchAction::Check => {}
                }
                self.watches.touch(&self.written);
                return Ok(Commit::Applied);
            }
        }
        match self.store.apply(&batch)? {
            BatchOutcome::Applied => {
                self.watches.touch(&self.written);
                Ok(Commit::Applied)
            }
            BatchOutcome::ConditionFailed { .. } => Ok(Commit::Conflict),
        }
    }
}

/// Deletes every key at once (the engine's `drop_all`: one record per partition, every
/// partition locked), and marks the watchers of the watched keys that existed, as Redis 7's
/// FLUSHALL does.
pub fn flush_store(store: &Store, watches: &Watches) -> quiver_store::Result<()> {
    let watched: Vec<Bytes> = watches
        .keys()
        .into_iter()
        .filter(|k| valid_key(k))
        .collect();
    let mut existed = Vec::new();
    for chunk in watched.chunks(WALK_PAGE) {
        for (k, e) in chunk.iter().zip(store.multi_exists(chunk)?) {
            if e {
                existed.push(k.clone());
            }
        }
    }
    store.drop_all()?;
    watches.touch(&existed);
    Ok(())
}

/// Reads `keys` (all valid), values with their expiry times, in engine calls of at most
/// `width_max` keys.
pub fn read_all(
    store: &Store,
    keys: &[&Bytes],
    width_max: usize,
) -> quiver_store::Result<Vec<Option<Entry>>> {
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

/// Whether the engine accepts `key` (it refuses empty keys and keys over 64 KiB).
pub fn valid_key(key: &[u8]) -> bool {
    (1..=quiver_store::options::KEY_LEN_MAX).contains(&key.len())
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::cmd::common::TxnCommand;
    use crate::cmd::incr::IncrBy;
    use crate::table::Cmd;

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
        let reply = retry_on_conflict(&state.stats, ATTEMPTS, "command", || {
            attempts += 1;
            let mut txn = Txn::new(&state);
            let incr = IncrBy::parse(Cmd::Incr, &args).unwrap();
            let reply = incr.apply(&mut txn).unwrap();
            // The rival client's write: a value the INCR did not read.
            let rival = format!("{}", 1000 + attempts);
            state.store.put(b"counter", rival.as_bytes()).unwrap();
            match txn.commit(&[]).unwrap() {
                Commit::Applied => Attempt::Done(reply),
                Commit::Conflict => Attempt::Conflict,
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
        assert_eq!(state.stats.transactions_abandoned.load(Relaxed), 1);
        assert_eq!(
            state.stats.transaction_retries.load(Relaxed),
            u64::from(ATTEMPTS - 1)
        );
    }

    #[test]
    fn a_conflict_then_success_is_one_retry() {
        let dir = tempfile::tempdir().unwrap();
        let state = ServerState::for_tests(dir.path());
        let mut conflicts_left = 2;
        let reply = retry_on_conflict(&state.stats, TXN_ATTEMPTS_MAX, "command", || {
            if conflicts_left > 0 {
                conflicts_left -= 1;
                Attempt::Conflict
            } else {
                Attempt::Done(Reply::OK)
            }
        })
        .unwrap_or_else(|given_up| given_up);
        assert_eq!(reply, Reply::OK);
        assert_eq!(state.stats.transaction_retries.load(Relaxed), 2);
        assert_eq!(state.stats.transactions_abandoned.load(Relaxed), 0);
    }
}
