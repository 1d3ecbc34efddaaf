//! Concurrency: two writers (disjoint key ranges; puts, vector puts, deletes, churn of fresh
//! keys written and deleted, compound batches), two readers validating everything they see,
//! and a thread compacting over and over (whole partitions and incremental steps), all at once
//! with background maintenance (growth, shrinking, sweeps of compaction, checkpoints) on.
//!
//! Every value names its key and a version, and the rest of its bytes derive from both, so a
//! reader recognises a torn or foreign value. Versions come from one counter per writer, so a
//! reader can also tell a value that was never written (a version beyond the counter), a value
//! going back in time (a version older than one it saw before for the key) and a value of a
//! batch that failed its precondition (tagged `X`). A batch writes one version to the keys of a
//! group, one key per partition: a vector read of the group sees all of them with one version,
//! or none. The work is bounded by operation counts, not by time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use quiver_store::hash::KeyHash;
use quiver_store::{
    BackendKind, Batch, BatchAction, BatchOutcome, Durability, Entry, Options, Precondition, Store,
};
use quiver_testkit::rng::Rng;

use crate::common::{scan_all, small_options};

const WRITERS: usize = 2;
/// Keys each writer puts, overwrites and deletes one or a few at a time.
const PLAIN_KEYS: u64 = 150;
/// Keys each writer puts first and then only overwrites: always present.
const STABLE_KEYS: u64 = 20;
/// Groups of keys each writer writes only through batches.
const GROUPS: u64 = 6;
/// Keys each writer bulk-loads in chunks during the first half of its run and deletes in the
/// second half (index growth, then shrinking).
const BULK_KEYS: u64 = 2400;
const BULK_CHUNK: u64 = 200;
/// Keys each churn writes and deletes at once (fresh every time, numbered after the bulk
/// keys): indexes fill with tombstones, as in the hang of issue 8.
const CHURN_KEYS: u64 = 300;
/// Operations per writer (a quarter of it in `fsync` mode, where every write waits for a sync).
const ROUNDS: u64 = 4000;
/// Compaction passes (of the thread calling `compact()`) that overlap the writers' work.
const COMPACTIONS_MIN: u64 = 8;
/// Reads each reader does at least (it goes on until the writers are done).
const READS_MIN: u64 = 500;
/// Longest padding of a value.
const PAD_MAX: u64 = 400;

/// Tags of values: plain write, batch write, batch that must fail (never visible).
const TAG_PLAIN: u8 = b'P';
const TAG_BATCH: u8 = b'B';
const TAG_POISON: u8 = b'X';

fn plain_key(w: usize, i: u64) -> Vec<u8> {
    format!("w{w}:p{i}").into_bytes()
}

fn stable_key(w: usize, i: u64) -> Vec<u8> {
    format!("w{w}:s{i}").into_bytes()
}

fn bulk_key(w: usize, i: u64) -> Vec<u8> {
    format!("w{w}:b{i}").into_bytes()
}

/// The keys of group `g` of writer `w`: member `j` lives in partition `j`, so a batch over the
/// group spans every partition.
fn group_keys(w: usize, g: u64, partitions: u32) -> Vec<Vec<u8>> {
    (0..partitions)
        .map(|j| {
            (0u64..)
                .map(|n| format!("w{w}:g{g}:{j}:{n}").into_bytes())
                .find(|k| quiver_store::slot::even_layout_partition(k, partitions) == j)
                .expect("some suffix lands in every partition")
        })
        .collect()
}

/// The value `key` holds at `version`: `key|version|tag|` and padding derived from both.
fn value_for(key: &[u8], version: u64, tag: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(key.len() + 24 + PAD_MAX as usize);
    v.extend_from_slice(key);
    v.extend_from_slice(format!("|{version}|").as_bytes());
    v.push(tag);
    v.push(b'|');
    let mut rng = Rng::new(KeyHash::of(key).0 ^ version);
    let pad = rng.below(PAD_MAX);
    v.extend((0..pad).map(|_| rng.next_u64() as u8));
    v
}

/// The writer owning `key`.
fn owner(key: &[u8]) -> Option<usize> {
    match key {
        [b'w', d, b':', ..] if d.is_ascii_digit() && ((d - b'0') as usize) < WRITERS => {
            Some((d - b'0') as usize)
        }
        _ => None,
    }
}

/// Checks that `value` is one the owner of `key` wrote for it; returns its version and tag.
fn decode(key: &[u8], value: &[u8]) -> Result<(u64, u8), String> {
    let bad = |why: &str| {
        Err(format!(
            "{}: bad value ({why}): {:?}",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(&value[..value.len().min(64)])
        ))
    };
    let Some(rest) = value.strip_prefix(key).and_then(|r| r.strip_prefix(b"|")) else {
        return bad("names another key");
    };
    let Some(bar) = rest.iter().position(|&c| c == b'|') else {
        return bad("no version");
    };
    let Some(version) = std::str::from_utf8(&rest[..bar])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return bad("unreadable version");
    };
    let Some(&tag) = rest.get(bar + 1) else {
        return bad("no tag");
    };
    if value != value_for(key, version, tag) {
        return bad("torn or corrupted");
    }
    if tag == TAG_POISON {
        return bad("written by a batch whose precondition failed");
    }
    Ok((version, tag))
}

struct Shared {
    store: Store,
    /// Per writer: the highest version it has started writing.
    versions: [AtomicU64; WRITERS],
    done: AtomicBool,
    /// Compaction passes started by the compactor thread.
    compactions_started: AtomicU64,
    compactor_failed: AtomicBool,
    partitions: u32,
}

impl Shared {
    fn next_version(&self, w: usize) -> u64 {
        self.versions[w].fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// A writer: owns its keys, and remembers what it wrote.
struct Writer {
    w: usize,
    shared: Arc<Shared>,
    model: BTreeMap<Vec<u8>, Vec<u8>>,
    rng: Rng,
    groups: Vec<Vec<Vec<u8>>>,
    bulk_next: u64,
    bulk_deleted: u64,
    /// Churn keys written (and deleted) so far.
    churned: u64,
    /// Operations to do.
    rounds: u64,
}

impl Writer {
    fn store(&self) -> &Store {
        &self.shared.store
    }

    fn value(&mut self, key: &[u8], tag: u8) -> Vec<u8> {
        value_for(key, self.shared.next_version(self.w), tag)
    }

    fn random_plain_or_stable(&mut self) -> Vec<u8> {
        if self.rng.below(5) == 0 {
            stable_key(self.w, self.rng.below(STABLE_KEYS))
        } else {
            plain_key(self.w, self.rng.below(PLAIN_KEYS))
        }
    }

    fn put(&mut self, key: Vec<u8>) -> Result<(), String> {
        let v = self.value(&key, TAG_PLAIN);
        self.store()
            .put(&key, &v)
            .map_err(|e| format!("put: {e}"))?;
        self.model.insert(key, v);
        Ok(())
    }

    fn multi_put(&mut self, keys: Vec<Vec<u8>>) -> Result<(), String> {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = keys
            .into_iter()
            .map(|k| {
                let v = self.value(&k, TAG_PLAIN);
                (k, v)
            })
            .collect();
        self.store()
            .multi_put(&pairs)
            .map_err(|e| format!("multi_put: {e}"))?;
        self.model.extend(pairs);
        Ok(())
    }

    fn multi_delete(&mut self, keys: Vec<Vec<u8>>) -> Result<(), String> {
        let got = self
            .store()
            .multi_delete(&keys)
            .map_err(|e| format!("multi_delete: {e}"))?;
        let want: Vec<bool> = keys
            .iter()
            .map(|k| self.model.remove(k).is_some())
            .collect();
        if got != want {
            return Err(format!(
                "multi_delete returned {got:?}, the writer expected {want:?}"
            ));
        }
        Ok(())
    }

    /// Puts one version to every key of a group, guarded by WATCH-style preconditions that hold
    /// (nobody else writes these keys).
    fn group_put(&mut self, g: usize) -> Result<(), String> {
        let keys = self.groups[g].clone();
        let version = self.shared.next_version(self.w);
        let mut batch = Batch::new();
        for (j, k) in keys.iter().enumerate() {
            let v = value_for(k, version, TAG_BATCH);
            let current: Option<bytes::Bytes> = self.model.get(k).cloned().map(Into::into);
            match j % 3 {
                0 => batch.put_if(
                    k.clone(),
                    v,
                    Precondition::Unchanged(current.map(Entry::lasting)),
                ),
                1 if current.is_some() => {
                    batch.put_if(k.clone(), v, Precondition::ValueEquals(current.unwrap()))
                }
                _ => batch.put(k.clone(), v),
            };
        }
        batch.check(stable_key(self.w, 0), Precondition::Exists);
        let outcome = self
            .store()
            .apply(&batch)
            .map_err(|e| format!("apply: {e}"))?;
        if outcome != BatchOutcome::Applied {
            return Err(format!("group put: {outcome:?}"));
        }
        for k in keys {
            let v = value_for(&k, version, TAG_BATCH);
            self.model.insert(k, v);
        }
        Ok(())
    }

    fn group_delete(&mut self, g: usize) -> Result<(), String> {
        let keys = self.groups[g].clone();
        let mut batch = Batch::new();
        for k in &keys {
            match self.model.get(k) {
                Some(v) => batch.delete_if(k.clone(), Precondition::ValueEquals(v.clone().into())),
                None => batch.delete_if(k.clone(), Precondition::Absent),
            };
        }
        let outcome = self
            .store()
            .apply(&batch)
            .map_err(|e| format!("apply: {e}"))?;
        if outcome != BatchOutcome::Applied {
            return Err(format!("group delete: {outcome:?}"));
        }
        for k in keys {
            self.model.remove(&k);
        }
        Ok(())
    }

    /// A batch over a group whose last precondition fails: nothing of it may ever be seen.
    fn group_poison(&mut self, g: usize) -> Result<(), String> {
        let keys = self.groups[g].clone();
        let version = self.shared.next_version(self.w);
        let mut batch = Batch::new();
        for k in &keys {
            batch.put(k.clone(), value_for(k, version, TAG_POISON));
        }
        batch.delete(plain_key(self.w, 0));
        batch.check(stable_key(self.w, 1), Precondition::Absent);
        let outcome = self
            .store()
            .apply(&batch)
            .map_err(|e| format!("apply: {e}"))?;
        let want = BatchOutcome::ConditionFailed {
            op: keys.len() + 1,
            condition: Precondition::Absent,
        };
        if outcome != want {
            return Err(format!("poison batch: got {outcome:?}, expected {want:?}"));
        }
        Ok(())
    }

    /// A small unconditional batch of puts and deletes of plain keys: often all in one
    /// partition (the single-write path), sometimes not.
    fn plain_batch(&mut self) -> Result<(), String> {
        let n = 1 + self.rng.below(3);
        let mut batch = Batch::new();
        for _ in 0..n {
            let k = plain_key(self.w, self.rng.below(PLAIN_KEYS));
            if self.rng.below(3) == 0 {
                batch.delete(k);
            } else {
                let v = self.value(&k, TAG_BATCH);
                batch.put(k, v);
            }
        }
        let outcome = self
            .store()
            .apply(&batch)
            .map_err(|e| format!("apply: {e}"))?;
        if outcome != BatchOutcome::Applied {
            return Err(format!("plain batch: {outcome:?}"));
        }
        for op in batch.ops {
            match op.action {
                BatchAction::Put(v) => {
                    self.model.insert(op.key.to_vec(), v.to_vec());
                }
                _ => {
                    self.model.remove(&op.key[..]);
                }
            }
        }
        Ok(())
    }

    /// Reads its own keys back: exactly what it last wrote (read-your-writes).
    fn read_own(&mut self) -> Result<(), String> {
        let keys: Vec<Vec<u8>> = (0..8).map(|_| self.random_plain_or_stable()).collect();
        let got = self
            .store()
            .multi_get(&keys)
            .map_err(|e| format!("multi_get: {e}"))?;
        for (k, g) in keys.iter().zip(&got) {
            if g.as_deref() != self.model.get(k).map(|v| &v[..]) {
                return Err(format!(
                    "{} does not read back as last written",
                    String::from_utf8_lossy(k)
                ));
            }
        }
        Ok(())
    }

    fn run(mut self) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
        let rounds = self.rounds;
        for round in 0..rounds {
            if round % (rounds / COMPACTIONS_MIN) == 0 {
                // However fast the writes are, some compaction passes run in the middle of them:
                // the k-th slice of the work (from 1) waits for the k-th pass to start.
                let k = round / (rounds / COMPACTIONS_MIN) + 1;
                while self.shared.compactions_started.load(Ordering::SeqCst) < k {
                    if self.shared.compactor_failed.load(Ordering::SeqCst) {
                        return Err("the compactor failed".into());
                    }
                    thread::sleep(Duration::from_millis(1));
                }
            }
            if round % 50 == 30 {
                let first = BULK_KEYS + self.churned;
                self.churned += CHURN_KEYS;
                let keys: Vec<Vec<u8>> = (first..first + CHURN_KEYS)
                    .map(|i| bulk_key(self.w, i))
                    .collect();
                self.multi_put(keys.clone())?;
                self.multi_delete(keys)?;
                continue;
            }
            // Bulk keys: loaded in chunks during the first half, deleted in the second.
            if round % 20 == 10 {
                if round < rounds / 2 && self.bulk_next < BULK_KEYS {
                    let keys = (self.bulk_next..BULK_KEYS.min(self.bulk_next + BULK_CHUNK))
                        .map(|i| bulk_key(self.w, i))
                        .collect();
                    self.bulk_next += BULK_CHUNK;
                    self.multi_put(keys)?;
                } else if round >= rounds / 2 && self.bulk_deleted < self.bulk_next {
                    let keys = (self.bulk_deleted
                        ..self.bulk_next.min(self.bulk_deleted + BULK_CHUNK))
                        .map(|i| bulk_key(self.w, i))
                        .collect();
                    self.bulk_deleted += BULK_CHUNK;
                    self.multi_delete(keys)?;
                }
                continue;
            }
            let g = self.rng.below(GROUPS) as usize;
            match self.rng.below(100) {
                0..26 => {
                    let k = self.random_plain_or_stable();
                    self.put(k)?;
                }
                26..40 => {
                    let n = 2 + self.rng.below(8);
                    let keys = (0..n).map(|_| self.random_plain_or_stable()).collect();
                    self.multi_put(keys)?;
                }
                40..50 => {
                    let k = plain_key(self.w, self.rng.below(PLAIN_KEYS));
                    let got = self
                        .store()
                        .delete(&k)
                        .map_err(|e| format!("delete: {e}"))?;
                    let want = self.model.remove(&k).is_some();
                    if got != want {
                        return Err(format!("delete returned {got}, the writer expected {want}"));
                    }
                }
                50..55 => {
                    let n = 2 + self.rng.below(6);
                    let keys = (0..n)
                        .map(|_| plain_key(self.w, self.rng.below(PLAIN_KEYS)))
                        .collect();
                    self.multi_delete(keys)?;
                }
                55..60 => self.plain_batch()?,
                60..64 => self.read_own()?,
                64..85 => self.group_put(g)?,
                85..93 => self.group_delete(g)?,
                _ => self.group_poison(g)?,
            }
        }
        Ok(self.model)
    }
}

/// What a reader did, for the report.
#[derive(Default, Debug)]
struct ReadStats {
    reads: u64,
    groups_present: u64,
    groups_absent: u64,
    scans: u64,
}

struct Reader {
    shared: Arc<Shared>,
    rng: Rng,
    /// Highest version seen per key: a later read must not go back in time.
    seen: HashMap<Vec<u8>, u64>,
    groups: Vec<Vec<Vec<u8>>>,
    stats: ReadStats,
}

impl Reader {
    fn random_key(&mut self) -> Vec<u8> {
        let w = self.rng.below(WRITERS as u64) as usize;
        match self.rng.below(10) {
            0..5 => plain_key(w, self.rng.below(PLAIN_KEYS)),
            5..7 => stable_key(w, self.rng.below(STABLE_KEYS)),
            7..9 => self.groups[w * GROUPS as usize + self.rng.below(GROUPS) as usize]
                [self.rng.below(self.shared.partitions as u64) as usize]
                .clone(),
            _ => bulk_key(w, self.rng.below(BULK_KEYS)),
        }
    }

    /// Validates one read result; returns its version.
    fn check(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<Option<u64>, String> {
        let name = String::from_utf8_lossy(key).into_owned();
        let Some(value) = value else {
            if key.starts_with(b"w0:s") || key.starts_with(b"w1:s") {
                return Err(format!("{name}: a key that is never deleted is missing"));
            }
            return Ok(None);
        };
        let (version, _tag) = decode(key, value)?;
        let w = owner(key).ok_or_else(|| format!("{name}: no writer owns this key"))?;
        let latest = self.shared.versions[w].load(Ordering::SeqCst);
        if version > latest {
            return Err(format!(
                "{name}: version {version} was never written (writer at {latest})"
            ));
        }
        let seen = self.seen.entry(key.to_vec()).or_default();
        if version < *seen {
            return Err(format!(
                "{name}: version {version} read after version {seen}"
            ));
        }
        *seen = version;
        Ok(Some(version))
    }

    fn read_group(&mut self) -> Result<(), String> {
        let keys = self.groups[self.rng.below(self.groups.len() as u64) as usize].clone();
        let got = self
            .shared
            .store
            .multi_get(&keys)
            .map_err(|e| format!("multi_get: {e}"))?;
        let mut versions = Vec::with_capacity(keys.len());
        for (k, v) in keys.iter().zip(&got) {
            versions.push(self.check(k, v.as_deref())?);
        }
        if versions.iter().any(|v| *v != versions[0]) {
            return Err(format!(
                "group {} seen half-written: versions {versions:?}",
                String::from_utf8_lossy(&keys[0])
            ));
        }
        if versions[0].is_some() {
            self.stats.groups_present += 1;
        } else {
            self.stats.groups_absent += 1;
        }
        let exists = self
            .shared
            .store
            .multi_exists(&keys)
            .map_err(|e| format!("multi_exists: {e}"))?;
        if exists.iter().any(|&e| e != exists[0]) {
            return Err(format!(
                "group seen half-written by multi_exists: {exists:?}"
            ));
        }
        Ok(())
    }

    /// A full scan returns only keys the writers own, and every key that is never deleted.
    fn scan(&mut self) -> Result<(), String> {
        let count = 1 + self.rng.below(120) as usize;
        // Half the scans match one writer's never-deleted keys only.
        let only = (self.rng.below(2) == 0).then(|| self.rng.below(WRITERS as u64) as usize);
        let pattern = only.map(|w| format!("w{w}:s*").into_bytes());
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut calls = 0;
        loop {
            let page = self
                .shared
                .store
                .scan(cursor, pattern.as_deref(), count)
                .map_err(|e| format!("scan: {e}"))?;
            for k in page.keys {
                let w =
                    owner(&k).ok_or_else(|| format!("scan returned a key nobody wrote: {k:?}"))?;
                if only.is_some_and(|o| o != w || !k.starts_with(format!("w{o}:s").as_bytes())) {
                    return Err(format!(
                        "scan returned {k:?}, which does not match its pattern"
                    ));
                }
                seen.insert(k.to_vec());
            }
            cursor = page.cursor;
            calls += 1;
            if cursor == 0 {
                break;
            }
            if calls > 1_000_000 {
                return Err("scan does not terminate".into());
            }
        }
        for w in (0..WRITERS).filter(|&w| only.is_none_or(|o| o == w)) {
            for i in 0..STABLE_KEYS {
                if !seen.contains(&stable_key(w, i)) {
                    return Err(format!(
                        "scan (count {count}, pattern {:?}) missed w{w}:s{i}, which is never deleted",
                        pattern.as_deref().map(String::from_utf8_lossy)
                    ));
                }
            }
        }
        self.stats.scans += 1;
        Ok(())
    }

    fn run(mut self) -> Result<ReadStats, String> {
        while self.stats.reads < READS_MIN || !self.shared.done.load(Ordering::SeqCst) {
            self.stats.reads += 1;
            match self.rng.below(100) {
                0..30 => {
                    let k = self.random_key();
                    let v = self.shared.store.get(&k).map_err(|e| format!("get: {e}"))?;
                    self.check(&k, v.as_deref())?;
                }
                30..55 => {
                    let n = 1 + self.rng.below(24);
                    let keys: Vec<Vec<u8>> = (0..n).map(|_| self.random_key()).collect();
                    let got = self
                        .shared
                        .store
                        .multi_get(&keys)
                        .map_err(|e| format!("multi_get: {e}"))?;
                    for (k, v) in keys.iter().zip(&got) {
                        self.check(k, v.as_deref())?;
                    }
                }
                55..62 => {
                    let k = stable_key(
                        self.rng.below(WRITERS as u64) as usize,
                        self.rng.below(STABLE_KEYS),
                    );
                    if !self
                        .shared
                        .store
                        .exists(&k)
                        .map_err(|e| format!("exists: {e}"))?
                    {
                        return Err(format!(
                            "{}: a key that is never deleted does not exist",
                            String::from_utf8_lossy(&k)
                        ));
                    }
                }
                62..99 => self.read_group()?,
                _ => self.scan()?,
            }
        }
        Ok(self.stats)
    }
}

/// Checks the store holds exactly `model` (over every key any writer may have written).
fn verify_final(store: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>, groups: &[Vec<Vec<u8>>]) {
    let mut universe: BTreeSet<Vec<u8>> = model.keys().cloned().collect();
    for w in 0..WRITERS {
        universe.extend((0..PLAIN_KEYS).map(|i| plain_key(w, i)));
        universe.extend((0..STABLE_KEYS).map(|i| stable_key(w, i)));
        universe.extend((0..BULK_KEYS).map(|i| bulk_key(w, i)));
    }
    universe.extend(groups.iter().flatten().cloned());
    let keys: Vec<Vec<u8>> = universe.into_iter().collect();
    let got = store.multi_get(&keys).unwrap();
    for (k, g) in keys.iter().zip(&got) {
        assert_eq!(
            g.as_deref(),
            model.get(k).map(|v| &v[..]),
            "final value of {}",
            String::from_utf8_lossy(k)
        );
    }
    assert_eq!(store.len(), model.len() as u64);
    let scanned = scan_all(store, 97);
    assert!(
        scanned.iter().eq(model.keys()),
        "a final scan returns exactly the model's keys"
    );
    let check = store.check().unwrap();
    assert!(check.is_ok(), "{:?}", check.problems);
}

fn run_concurrently(backend: BackendKind, durability: Durability, rounds: u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability,
        background: true,
        compact_garbage_ratio: 0.3,
        compact_min_dead_records: 200,
        checkpoint_interval_ms: 50,
        flush_interval_ms: 5,
        compact_pass_bytes_max: 256 << 10,
        ..small_options(backend)
    };
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let partitions = store.options().partitions;
    let shared = Arc::new(Shared {
        store,
        versions: [AtomicU64::new(0), AtomicU64::new(0)],
        done: AtomicBool::new(false),
        compactions_started: AtomicU64::new(0),
        compactor_failed: AtomicBool::new(false),
        partitions,
    });
    let groups: Vec<Vec<Vec<u8>>> = (0..WRITERS)
        .flat_map(|w| (0..GROUPS).map(move |g| group_keys(w, g, partitions)))
        .collect();

    let writer_threads = start_writers(&shared, &groups, rounds);
    let reader_threads = start_readers(&shared, &groups);
    let compactor = start_compactor(shared.clone());

    let mut model = BTreeMap::new();
    let mut failures = Vec::new();
    for (w, t) in writer_threads.into_iter().enumerate() {
        match t.join().expect("writer panicked") {
            Ok(m) => model.extend(m),
            Err(e) => failures.push(format!("writer {w}: {e}")),
        }
    }
    shared.done.store(true, Ordering::SeqCst);
    let mut read_stats = Vec::new();
    for (r, t) in reader_threads.into_iter().enumerate() {
        match t.join().expect("reader panicked") {
            Ok(s) => read_stats.push(s),
            Err(e) => failures.push(format!("reader {r}: {e}")),
        }
    }
    let passes = match compactor.join().expect("compactor panicked") {
        Ok(p) => p,
        Err(e) => {
            failures.push(format!("compactor: {e}"));
            0
        }
    };
    assert!(failures.is_empty(), "{backend}/{durability}: {failures:#?}");
    let stats = shared.store.stats();
    eprintln!("{backend}/{durability}: {passes} compaction passes, readers {read_stats:?}, final {stats:?}");
    assert_eq!(stats.last_background_error, None);
    for s in &read_stats {
        assert!(
            s.groups_present > 0 && s.scans > 0,
            "the readers saw the writers' work: {s:?}"
        );
    }

    verify_final(&shared.store, &model, &groups);
    let shared = Arc::into_inner(shared).expect("every thread is done");
    drop(shared.store);
    verify_reopened(dir.path(), opts, &model, &groups);
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The writers, each with its keys that are never deleted written first (they exist before
/// anyone reads), on threads of their own.
fn start_writers(
    shared: &Arc<Shared>,
    groups: &[Vec<Vec<u8>>],
    rounds: u64,
) -> Vec<thread::JoinHandle<Result<Model, String>>> {
    // The keys that are never deleted exist before anyone reads.
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let mut writer = Writer {
            w,
            shared: shared.clone(),
            model: BTreeMap::new(),
            rng: Rng::new(w as u64 + 1),
            groups: groups[w * GROUPS as usize..(w + 1) * GROUPS as usize].to_vec(),
            bulk_next: 0,
            bulk_deleted: 0,
            churned: 0,
            rounds,
        };
        writer
            .multi_put((0..STABLE_KEYS).map(|i| stable_key(w, i)).collect())
            .unwrap();
        writers.push(writer);
    }

    writers
        .into_iter()
        .map(|wr| {
            thread::Builder::new()
                .name(format!("writer{}", wr.w))
                .spawn(move || wr.run())
                .unwrap()
        })
        .collect()
}

/// Two readers, checking what they see against the writers' rules.
fn start_readers(
    shared: &Arc<Shared>,
    groups: &[Vec<Vec<u8>>],
) -> Vec<thread::JoinHandle<Result<ReadStats, String>>> {
    (0..2)
        .map(|r| {
            let reader = Reader {
                shared: shared.clone(),
                rng: Rng::new(100 + r),
                seen: HashMap::new(),
                groups: groups.to_vec(),
                stats: ReadStats::default(),
            };
            thread::Builder::new()
                .name(format!("reader{r}"))
                .spawn(move || reader.run())
                .unwrap()
        })
        .collect()
}

/// A thread running compaction passes (whole and stepwise) and checkpoints until the writers
/// are done.
fn start_compactor(shared: Arc<Shared>) -> thread::JoinHandle<Result<u64, String>> {
    thread::Builder::new()
        .name("compactor".into())
        .spawn(move || -> Result<u64, String> {
            let run = || {
                let mut passes = 0;
                while !shared.done.load(Ordering::SeqCst) {
                    shared.compactions_started.fetch_add(1, Ordering::SeqCst);
                    if passes % 2 == 0 {
                        shared
                            .store
                            .compact()
                            .map_err(|e| format!("compact: {e}"))?;
                    } else {
                        shared
                            .store
                            .compact_step(64 << 10)
                            .map_err(|e| format!("compact_step: {e}"))?;
                    }
                    passes += 1;
                    if passes % 4 == 0 {
                        shared
                            .store
                            .checkpoint()
                            .map_err(|e| format!("checkpoint: {e}"))?;
                    }
                    thread::sleep(Duration::from_millis(2));
                }
                Ok(passes)
            };
            let res = run();
            if res.is_err() {
                shared.compactor_failed.store(true, Ordering::SeqCst);
            }
            res
        })
        .unwrap()
}

/// The store reopened cleanly, then after a crash (everything acknowledged was flushed
/// first), holds what the writers acknowledged.
fn verify_reopened(dir: &std::path::Path, opts: Options, model: &Model, groups: &[Vec<Vec<u8>>]) {
    let reopen = Options {
        background: false,
        ..opts
    };
    let store = Store::open(dir, reopen.clone()).unwrap();
    verify_final(&store, model, groups);
    store.flush().unwrap();
    store.simulate_crash();
    let store = Store::open(dir, reopen).unwrap();
    verify_final(&store, model, groups);
}

#[test]
fn writers_readers_and_compaction_mmap() {
    run_concurrently(BackendKind::Mmap, Durability::Os, ROUNDS);
}

#[test]
fn writers_readers_and_compaction_io_uring() {
    run_concurrently(BackendKind::Uring, Durability::Os, ROUNDS);
}

#[test]
fn writers_readers_and_compaction_pread_buffered() {
    run_concurrently(BackendKind::Pread, Durability::None, ROUNDS);
}

/// Group commit: concurrent writers share fdatasyncs while compaction and rotation go on.
#[test]
fn writers_readers_and_compaction_mmap_fsync() {
    run_concurrently(BackendKind::Mmap, Durability::Fsync, ROUNDS / 4);
}
