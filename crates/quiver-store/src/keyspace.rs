//! One database of a store ([`Db`], Redis's SELECT): the key-addressed API — gets, puts,
//! deletes, expiry, SCAN and counts — within one namespace. `Store`'s own key methods are
//! database 0's; `Store::db(n)` gives the others. The database → namespace mapping (`dbs`) is
//! read with the layout on every try, so a SWAPDB or FLUSHDB in between makes the try start
//! again on the new mapping (`inner::owns`).

use bytes::Bytes;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::batch::{Batch, Entry, Precondition, ValueKind};
use crate::dbs::{DbMap, Figures};
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::inner::{owns, Table};
use crate::lookup::{self, Found, LookupKey};
use crate::meta;
use crate::partition::{release_all, write_all, PartState};
use crate::pipeline::{PipelineOutcome, Step};
use crate::route::{RouteTries, Routed};
use crate::scan::{self, ScanPage};
use crate::slot::SlotRange;
use crate::store::{check_key, Store, Ttl};
use crate::write::{ReadAt, WriteOp};

/// Tries of [`Db::set_expiry`] (each read-then-conditional-write loses only to a writer of
/// the same key) before it reports contention.
const EXPIRY_UPDATE_ATTEMPTS_MAX: usize = 64;

/// One access of a mixed vector ([`Db::multi_get_put`], [`Db::pipeline`]).
#[derive(Clone, Copy, Debug)]
pub enum Access<'a> {
    Get(&'a [u8]),
    Put(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
}

/// A database of the store (see the module documentation): `Store::db`.
#[derive(Clone, Copy)]
pub struct Db<'s> {
    pub(crate) store: &'s Store,
    pub(crate) db: u32,
}

/// A database's figures (INFO keyspace).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    pub db: u32,
    pub keys: u64,
    /// Live keys with an expiry time, and their average time to live (ms).
    pub expiring_keys: u64,
    pub avg_ttl_ms: u64,
}

impl<'s> Db<'s> {
    // ---- reads ----

    /// A string key's value (`None`: absent or expired); [`Error::WrongType`] for a key of
    /// another kind, as GET answers it.
    // `lookup` returns one result per key it is given.
    #[allow(clippy::expect_used)]
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_key(key)?;
        let inner = self.store.inner();
        let mut tries = RouteTries::default();
        loop {
            let table = inner.table();
            let ns = table.dbs.ns(self.db);
            let hash = KeyHash::of_ns(ns, key);
            let (pos, slot) = table.route(key, hash);
            let st = table.parts[pos].read_serving();
            if !owns(&st, slot) {
                drop(st);
                tries.again()?;
                continue;
            }
            // The mapping as of now (see `inner::Table::dbs`).
            let (ns, hash) = match st.dbs.ns(self.db) {
                n if n == ns => (ns, hash),
                n => (n, KeyHash::of_ns(n, key)),
            };
            let found = lookup::lookup_one_partition(&inner.ctx, &st, &[(ns, key, hash)], true);
            drop(st);
            let entry = lookup::into_entry(found.into_iter().next().expect("one key, one result"))?;
            return Ok(entry
                .map(|e| e.of_kind(ValueKind::String))
                .transpose()?
                .map(|e| e.value));
        }
    }

    /// Gets many keys as one vector: all index probes, then one batch of reads. The keys'
    /// partitions are locked together, so the result is one consistent state of the store.
    /// A key of another kind than a string reads `None`, as MGET answers it.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        self.lookup_vector(keys, true)?
            .into_iter()
            .map(lookup::into_value)
            .collect()
    }

    /// Gets a key's value with its kind and expiry time.
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        Ok(self.multi_get_entries(&[key])?.pop().flatten())
    }

    /// Gets many keys' values with their kinds and expiry times, as one vector (see
    /// `multi_get`).
    pub fn multi_get_entries<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Entry>>> {
        self.lookup_vector(keys, true)?
            .into_iter()
            .map(lookup::into_entry)
            .collect()
    }

    /// A key's expiry: absent, never, or at a time (Redis's TTL / PEXPIRETIME, absolute).
    pub fn ttl(&self, key: &[u8]) -> Result<Ttl> {
        Ok(self.multi_ttl(&[key])?[0])
    }

    /// Many keys' expiries as one vector (no value is read beyond its record header).
    pub fn multi_ttl<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Ttl>> {
        self.lookup_vector(keys, false)?
            .into_iter()
            .map(|f| match f {
                Found::Live { expire_at, .. } => Ok(match expire_at {
                    Some(t) => Ttl::At(t),
                    None => Ttl::Never,
                }),
                Found::Absent | Found::Expired { .. } => Ok(Ttl::Absent),
                Found::Failed(e) => Err(e),
            })
            .collect()
    }

    pub fn exists(&self, key: &[u8]) -> Result<bool> {
        Ok(self.multi_exists(&[key])?[0])
    }

    /// Many keys' kinds as one vector (`None`: absent; no value is read beyond its record
    /// header): SCAN's TYPE filter.
    pub fn multi_kinds<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<ValueKind>>> {
        self.lookup_vector(keys, false)?
            .into_iter()
            .map(|f| match f {
                Found::Live { kind, .. } => Ok(Some(kind)),
                Found::Absent | Found::Expired { .. } => Ok(None),
                Found::Failed(e) => Err(e),
            })
            .collect()
    }

    pub fn multi_exists<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.lookup_vector(keys, false)?
            .into_iter()
            .map(|f| match f {
                Found::Absent | Found::Expired { .. } => Ok(false),
                Found::Live { .. } => Ok(true),
                Found::Failed(e) => Err(e),
            })
            .collect()
    }

    fn lookup_vector<K: AsRef<[u8]>>(&self, keys: &[K], verify_values: bool) -> Result<Vec<Found>> {
        let inner = self.store.inner();
        self.store.check_width(keys.len())?;
        for k in keys {
            check_key(k.as_ref())?;
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let hash_all = |ns: u32| -> Vec<(&[u8], KeyHash)> {
            keys.iter()
                .map(|k| (k.as_ref(), KeyHash::of_ns(ns, k.as_ref())))
                .collect()
        };
        let mut tries = RouteTries::default();
        loop {
            let table = inner.table();
            let mut ns = table.dbs.ns(self.db);
            let mut hashed = hash_all(ns);
            let routed = Routed::new(table, hashed.iter().copied());
            let guards: Vec<_> = routed.parts().map(|p| p.read_serving()).collect();
            if !routed.owned(&guards) {
                drop(guards);
                tries.again()?;
                continue;
            }
            // The mapping as of now (see `inner::Table::dbs`).
            if guards[0].dbs.ns(self.db) != ns {
                ns = guards[0].dbs.ns(self.db);
                hashed = hash_all(ns);
            }
            let states: Vec<&PartState> = guards.iter().map(|g| &**g).collect();
            let items: Vec<LookupKey<'_>> = hashed
                .iter()
                .zip(&routed.of_key)
                .map(|(&(key, hash), &(state, _))| LookupKey {
                    state,
                    ns,
                    key,
                    hash,
                })
                .collect();
            let found = lookup::lookup(&inner.ctx, &states, &items, verify_values);
            drop(states);
            release_all(guards);
            return Ok(found);
        }
    }

    // ---- writes ----

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.multi_put(&[(key, value)])
    }

    /// Puts a key that expires at `expire_at` (ms since the Unix epoch; `None`: never — a put
    /// clears an earlier expiry, as a Redis SET does).
    pub fn put_expiring(&self, key: &[u8], value: &[u8], expire_at: Option<u64>) -> Result<()> {
        self.multi_put_expiring(&[(key, value, expire_at)])
    }

    /// Puts many pairs: each partition's share is appended as one run with one write (and, in
    /// fsync mode, made durable by one group-committed fdatasync). Readers see all of it or
    /// none; a full disk refuses all of it. A crash may keep part of it (plain records) —
    /// use [`Store::apply`] for a vector that must survive a crash all or nothing.
    pub fn multi_put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, pairs: &[(K, V)]) -> Result<()> {
        self.store.check_width(pairs.len())?;
        let mut ops = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            ops.push(self.put_op(k.as_ref(), v.as_ref(), None, ValueKind::String)?);
        }
        self.store.write_plain(self.db, &mut ops).map(|_| ())
    }

    /// [`Db::multi_put`] with an expiry time per key (`None`: never).
    pub fn multi_put_expiring<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V, Option<u64>)],
    ) -> Result<()> {
        self.store.check_width(items.len())?;
        let mut ops = Vec::with_capacity(items.len());
        for (k, v, at) in items {
            ops.push(self.put_op(k.as_ref(), v.as_ref(), *at, ValueKind::String)?);
        }
        self.store.write_plain(self.db, &mut ops).map(|_| ())
    }

    /// A plain put of `k` (its namespace and hash are set where it is routed).
    pub(crate) fn put_op<'a>(
        &self,
        k: &'a [u8],
        v: &'a [u8],
        expire_at: Option<u64>,
        kind: ValueKind,
    ) -> Result<WriteOp<'a>> {
        check_key(k)?;
        self.store.check_value(v)?;
        Ok(WriteOp {
            ns: 0,
            key: k,
            hash: KeyHash(0),
            value: Some(v),
            expire_at,
            kind,
        })
    }

    /// Sets a live key's expiry time (`None`: removes it, Redis's PERSIST); false if the key
    /// does not exist. The value is rewritten with the new expiry, atomically.
    pub fn set_expiry(&self, key: &[u8], expire_at: Option<u64>) -> Result<bool> {
        // Each try fails only if a writer changed the key between the read and the write.
        for _ in 0..EXPIRY_UPDATE_ATTEMPTS_MAX {
            let Some(entry) = self.get_entry(key)? else {
                return Ok(false);
            };
            let mut batch = Batch::new();
            let renewed = Entry {
                expire_at,
                ..entry.clone()
            };
            batch.in_db(self.db).put_entry(
                Bytes::copy_from_slice(key),
                renewed,
                Some(Precondition::Unchanged(Some(entry))),
            );
            if self.store.apply(&batch)?.is_applied() {
                return Ok(true);
            }
        }
        Err(Error::Contended {
            attempts: EXPIRY_UPDATE_ATTEMPTS_MAX,
        })
    }

    /// Removes a key's expiry (Redis's PERSIST); true if it had one.
    pub fn persist(&self, key: &[u8]) -> Result<bool> {
        match self.ttl(key)? {
            Ttl::At(_) => self.set_expiry(key, None),
            Ttl::Never | Ttl::Absent => Ok(false),
        }
    }

    /// Deletes a key; true if it existed.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        Ok(self.multi_delete(&[key])?[0])
    }

    /// Deletes many keys; per key, whether it existed. Deletes run on a full disk too (they
    /// may use the disk reserve).
    pub fn multi_delete<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.store.check_width(keys.len())?;
        let mut ops = Vec::with_capacity(keys.len());
        for k in keys {
            ops.push(delete_op(k.as_ref())?);
        }
        self.store.write_plain(self.db, &mut ops)
    }

    /// Gets and puts as one vector, in order: each get sees the puts before it in the vector
    /// and none after it, and the whole vector takes effect at one instant (all partitions it
    /// touches are locked for it) — a pipeline's GETs and SETs as one engine call, with the
    /// results of running them one by one. Puts are plain (as [`Db::multi_put`]; a put clears
    /// an expiry). `Err`: nothing was read or written (a refusal, a bad key or value, or a get
    /// that failed); `Ok((values, written))`: each get's entry (of any kind: the caller answers
    /// for a string), in order, and what the puts
    /// did — per put whether its key existed, or their error as `multi_put` reports it (they
    /// may be partly applied: `Error::PartlyApplied` counts puts only).
    #[allow(clippy::type_complexity)]
    pub fn multi_get_put(
        &self,
        accesses: &[Access<'_>],
    ) -> Result<(Vec<Option<Entry>>, Result<Vec<bool>>)> {
        self.store.check_width(accesses.len())?;
        let mut ops = Vec::with_capacity(accesses.len());
        let mut reads = Vec::with_capacity(accesses.len());
        for a in accesses {
            match *a {
                Access::Get(k) => {
                    check_key(k)?;
                    reads.push(ReadAt {
                        key: k,
                        after: ops.len(),
                    });
                }
                Access::Put(k, v) => ops.push(self.put_op(k, v, None, ValueKind::String)?),
                Access::Delete(k) => ops.push(delete_op(k)?),
            }
        }
        if ops.is_empty() {
            let keys: Vec<&[u8]> = reads.iter().map(|r| r.key).collect();
            let values = self.multi_get_entries(&keys)?;
            return Ok((values, Ok(Vec::new())));
        }
        self.store.write_plain_reading(self.db, &mut ops, &reads)
    }

    /// A pipeline of independent accesses of single keys, in order: each partition's share
    /// is applied on its own, under that partition's lock alone (see `pipeline`). A get sees
    /// the writes before it on its key; but unlike [`Db::multi_get_put`] the pipeline does not
    /// take effect at one instant — another client may see one partition's share before
    /// another's, as with a Redis pipeline of independent commands. Puts are plain (a put
    /// clears an expiry). Each access gets its answer or the failure that stopped it (a
    /// partition's share fails alone). `Err`: refused whole, nothing read or written (a bad
    /// key or value, a vector too wide, a read-only store, no disk space for puts).
    pub fn pipeline(&self, accesses: &[Access<'_>]) -> Result<PipelineOutcome> {
        self.store.check_width(accesses.len())?;
        let mut steps = Vec::with_capacity(accesses.len());
        for a in accesses {
            steps.push(match *a {
                Access::Get(k) => {
                    check_key(k)?;
                    Step::Read(k)
                }
                Access::Put(k, v) => Step::Write(self.put_op(k, v, None, ValueKind::String)?),
                Access::Delete(k) => Step::Write(delete_op(k)?),
            });
        }
        self.store.run_pipeline(self.db, &mut steps)
    }

    // ---- iteration and figures ----

    /// One page of a SCAN (Redis semantics): start with cursor 0, stop when it comes back 0.
    pub fn scan(&self, cursor: u64, pattern: Option<&[u8]>, count: usize) -> Result<ScanPage> {
        let inner = self.store.inner();
        let table = inner.table();
        let ns = table.dbs.ns(self.db);
        scan::scan(&inner.ctx, &table, ns, cursor, pattern, count)
    }

    /// Number of live keys (keys whose expiry time has come are not counted, swept or not).
    pub fn len(&self) -> u64 {
        self.stats().keys
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys, keys with an expiry and their average time to live.
    pub fn stats(&self) -> DbStats {
        let db = self.db;
        let figures = self.store.db_figures(|d| d == db).remove(&db);
        db_stats_of(db, figures.unwrap_or_default())
    }
}

/// A database's figures as INFO keyspace reports them.
fn db_stats_of(db: u32, f: Figures) -> DbStats {
    DbStats {
        db,
        keys: f.keys,
        expiring_keys: f.expiring_keys,
        avg_ttl_ms: f.avg_ttl_ms(),
    }
}

impl Store {
    // ---- databases; database 0's keys ----

    /// Database `db` (Redis's SELECT number; `0..Options::databases`).
    pub fn db(&self, db: u32) -> Result<Db<'_>> {
        let databases = self.inner().ctx.opts.databases;
        if db >= databases && db < crate::large_hash::ANCHORS_DB {
            return Err(Error::NoSuchDatabase { db, databases });
        }
        Ok(Db { store: self, db })
    }

    /// Database 0, whose keys the store's own key methods address.
    pub fn db0(&self) -> Db<'_> {
        Db { store: self, db: 0 }
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.db0().get(key)
    }

    /// See [`Db::multi_get`].
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        self.db0().multi_get(keys)
    }

    pub fn get_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.db0().get_entry(key)
    }

    pub fn multi_get_entries<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Entry>>> {
        self.db0().multi_get_entries(keys)
    }

    pub fn ttl(&self, key: &[u8]) -> Result<Ttl> {
        self.db0().ttl(key)
    }

    pub fn multi_ttl<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Ttl>> {
        self.db0().multi_ttl(keys)
    }

    pub fn exists(&self, key: &[u8]) -> Result<bool> {
        self.db0().exists(key)
    }

    pub fn multi_exists<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.db0().multi_exists(keys)
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db0().put(key, value)
    }

    /// See [`Db::put_expiring`].
    pub fn put_expiring(&self, key: &[u8], value: &[u8], expire_at: Option<u64>) -> Result<()> {
        self.db0().put_expiring(key, value, expire_at)
    }

    /// See [`Db::multi_put`].
    pub fn multi_put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, pairs: &[(K, V)]) -> Result<()> {
        self.db0().multi_put(pairs)
    }

    pub fn multi_put_expiring<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V, Option<u64>)],
    ) -> Result<()> {
        self.db0().multi_put_expiring(items)
    }

    /// See [`Db::set_expiry`].
    pub fn set_expiry(&self, key: &[u8], expire_at: Option<u64>) -> Result<bool> {
        self.db0().set_expiry(key, expire_at)
    }

    pub fn persist(&self, key: &[u8]) -> Result<bool> {
        self.db0().persist(key)
    }

    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.db0().delete(key)
    }

    /// See [`Db::multi_delete`].
    pub fn multi_delete<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.db0().multi_delete(keys)
    }

    /// Number of live keys in database 0 (see [`Db::len`]).
    pub fn len(&self) -> u64 {
        self.db0().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every database with keys, with its figures (INFO keyspace), in database order.
    pub fn db_stats(&self) -> Vec<DbStats> {
        let databases = self.inner().ctx.opts.databases;
        self.db_figures(|d| d < databases)
            .into_iter()
            .filter(|(_, f)| f.keys > 0)
            .map(|(db, f)| db_stats_of(db, f))
            .collect()
    }

    /// The figures of every database `wanted` picks, in one pass over the partitions.
    pub(crate) fn db_figures(&self, wanted: impl Fn(u32) -> bool) -> BTreeMap<u32, Figures> {
        let inner = self.inner();
        let now = inner.ctx.now_ms();
        let table = inner.table();
        let mut out: BTreeMap<u32, Figures> = BTreeMap::new();
        for p in table.parts.iter() {
            let st = p.state.read();
            for (ns, _, _) in st.ns_keys.iter() {
                let Some(db) = table.dbs.db_of(ns).filter(|&d| wanted(d)) else {
                    continue;
                };
                let (expiring_keys, ttl_sum) = st.expiries.pending(ns, now);
                out.entry(db).or_default().add(Figures {
                    keys: st.live_keys(ns, now),
                    expiring_keys,
                    ttl_sum,
                });
            }
        }
        out
    }
}

impl Store {
    /// Swaps two databases (Redis's SWAPDB): one metadata write, atomically — every
    /// operation sees both databases before the swap or both after it.
    pub fn swap_dbs(&self, a: u32, b: u32) -> Result<()> {
        self.db(a)?;
        self.db(b)?;
        self.change_dbs(|m| Ok((m.swapped(a, b), None))).map(|_| ())
    }

    /// Deletes every key of one database at once (Redis's FLUSHDB): the database gets a fresh
    /// namespace in one metadata write; returns how many keys it had. Readers see all of its
    /// keys or none, and so does a crash.
    pub fn flush_db(&self, db: u32) -> Result<u64> {
        self.db(db)?;
        self.change_dbs(|m| {
            let (m, old) = m.flushed(db)?;
            Ok((m, Some(old)))
        })
    }

    /// Installs the mapping `change` makes of the current one, with every partition locked;
    /// if it also names a namespace that died, counts and forgets its keys.
    fn change_dbs(
        &self,
        change: impl FnOnce(&DbMap) -> Result<(DbMap, Option<u32>)>,
    ) -> Result<u64> {
        let inner = self.inner();
        let ctx = &inner.ctx;
        if ctx.opts.read_only {
            return Err(Error::ReadOnly);
        }
        // No split or merge meanwhile: they hold the layout this writes too.
        let _layout = inner.layout_change.lock();
        let table = inner.table();
        let (next, dead) = change(&table.dbs)?;
        let mut guards = write_all(table.in_lock_order());
        let listed: Vec<(u32, SlotRange)> = table
            .parts
            .iter()
            .zip(table.partitioner.ranges())
            .map(|(p, r)| (p.id, *r))
            .collect();
        // The commit point: the old mapping or the new one, whole, across a crash.
        meta::store_layout(&inner.dir, ctx.opts.segment_bytes, &listed, &next)?;
        let next = Arc::new(next);
        let now = ctx.now_ms();
        let mut gone = 0;
        for st in guards.iter_mut() {
            st.dbs = next.clone();
            if let Some(ns) = dead {
                // Its records are garbage now (compaction drops them and their index entries).
                gone += st.live_keys(ns, now);
                st.counters.dead += st.ns_keys.remove(ns);
                st.expiries.remove_ns(ns);
                st.dirty = true;
            }
        }
        *inner.table.write() = Arc::new(Table {
            partitioner: table.partitioner.clone(),
            parts: table.parts.clone(),
            dbs: next,
        });
        drop(guards);
        if dead.is_some() {
            inner.background.wake();
        }
        Ok(gone)
    }
}

/// A plain delete of `k` (its namespace and hash are set where it is routed).
fn delete_op(k: &[u8]) -> Result<WriteOp<'_>> {
    check_key(k)?;
    Ok(WriteOp {
        ns: 0,
        key: k,
        hash: KeyHash(0),
        value: None,
        expire_at: None,
        kind: ValueKind::String,
    })
}
