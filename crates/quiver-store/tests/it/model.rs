//! Model-based property test: random sequences of operations — plain and vector reads and
//! writes, compound batches with preconditions, scans, whole and incremental compaction,
//! checkpoints, clean reopens and simulated crashes — checked step by step against a
//! `BTreeMap` model, on every backend and in every durability mode; and a delete-heavy mix
//! (churn that fills indexes with tombstones, mass deletes, compaction of mid-log ranges).
//!
//! For long local runs, `QUIVER_MODEL_CASES` overrides the number of cases per configuration
//! and `QUIVER_MODEL_OPS` the longest sequence.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use quiver_resp::glob_match;
use quiver_store::slot::{key_slot, SlotRange};
use quiver_store::{
    Access, Answer, BackendKind, Batch, BatchAction, BatchOutcome, Durability, Entry, Options,
    Precondition, Store,
};

use crate::common::small_options;

/// Keys of the small key space: `k0`..`k39`, a few of them long.
const SMALL_KEYS: u8 = 40;
/// Longest value of the generated operations (exclusive).
const VALUE_LEN_MAX: u16 = 600;
/// Longest operation sequence (exclusive).
const SEQUENCE_LEN_MAX: usize = 60;
/// Default number of cases per configuration.
const CASES: u32 = 24;
/// Scan calls after which a scan is considered not to terminate.
const SCAN_CALLS_MAX: usize = 200_000;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Key `i` of the small key space. Some keys are long: `k7`, `k17`... carry 40 more bytes,
/// `k9`, `k19`... 700 more, and `k39` 5000 more (a record longer than a first-round read).
fn small_key(i: u8) -> Vec<u8> {
    let i = i % SMALL_KEYS;
    let mut k = format!("k{i}").into_bytes();
    let extra = match i {
        39 => 5000,
        _ if i % 10 == 7 => 40,
        _ if i % 10 == 9 => 700,
        _ => 0,
    };
    k.resize(k.len() + extra, b'a' + i % 26);
    k
}

fn fresh_key(n: u64) -> Vec<u8> {
    format!("f{n}").into_bytes()
}

/// A value, generated from a seed so that failing cases print compactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Val {
    seed: u32,
    len: u16,
}

impl Val {
    fn bytes(self) -> Vec<u8> {
        let mut x = (self.seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..self.len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// The `j`-th value of a bulk operation seeded with `seed`.
    fn bulk(seed: u32, j: usize) -> Val {
        Val {
            seed: seed.wrapping_add(j as u32),
            len: ((seed as usize).wrapping_add(j * 37) % VALUE_LEN_MAX as usize) as u16,
        }
    }
}

/// A precondition, resolved against the model when the operation runs.
#[derive(Clone, Debug)]
enum Cond {
    Exists,
    Absent,
    /// `ValueEquals` the key's current value (or some value, if the key is absent).
    ValueEqualsCurrent,
    ValueEquals(Val),
    /// `Unchanged` with the key's current state (before the batch): always holds.
    UnchangedCurrent,
    UnchangedAbsent,
    Unchanged(Val),
}

impl Cond {
    fn resolve(&self, current: Option<&Vec<u8>>) -> Precondition {
        match self {
            Cond::Exists => Precondition::Exists,
            Cond::Absent => Precondition::Absent,
            Cond::ValueEqualsCurrent => Precondition::ValueEquals(Bytes::from(
                current
                    .cloned()
                    .unwrap_or_else(|| b"no such value".to_vec()),
            )),
            Cond::ValueEquals(v) => Precondition::ValueEquals(v.bytes().into()),
            Cond::UnchangedCurrent => Precondition::Unchanged(current.cloned().map(Entry::lasting)),
            Cond::UnchangedAbsent => Precondition::Unchanged(None),
            Cond::Unchanged(v) => Precondition::Unchanged(Some(Entry::lasting(v.bytes()))),
        }
    }
}

#[derive(Clone, Debug)]
enum Act {
    Put(Val),
    Delete,
    Check,
}

#[derive(Clone, Debug)]
struct BOp {
    key: u8,
    act: Act,
    cond: Option<Cond>,
}

#[derive(Clone, Debug)]
enum Op {
    Put(u8, Val),
    Delete(u8),
    /// Duplicate keys are likely: the last one wins.
    MultiPut(Vec<(u8, Val)>),
    MultiDelete(Vec<u8>),
    Get(u8),
    MultiGet(Vec<u8>),
    /// Gets (`None`) and puts as one mixed vector (`Db::multi_get_put`): each get sees the
    /// puts before it and none after.
    GetPut(Vec<(u8, Option<Val>)>),
    /// Gets, puts and deletes as a pipeline (`Db::pipeline`): each partition's share on its
    /// own; each get sees the writes before it on its key.
    Pipeline(Vec<(u8, PAct)>),
    Exists(u8),
    MultiExists(Vec<u8>),
    Apply(Vec<BOp>),
    Scan {
        count: usize,
        pattern: Option<&'static str>,
    },
    /// Puts `n` keys never used before, as one vector (index growth, segment rotation).
    BulkFresh {
        n: usize,
        seed: u32,
    },
    /// Deletes `n` fresh keys (some already deleted, some never written) as one vector.
    BulkDeleteFresh {
        n: usize,
        seed: u32,
    },
    /// Puts `n` fresh keys and deletes them again (two vectors): the index fills with
    /// tombstones, as in the hang of issue 8.
    Churn {
        n: usize,
        seed: u32,
    },
    Compact,
    /// One pass of incremental compaction per partition over at most `kib` KiB of segments
    /// (a range in the middle of the log once a sweep is under way).
    CompactStep {
        kib: u32,
    },
    Checkpoint,
    Reopen,
    /// A clean reopen with the next backend: files written through one backend are read
    /// through another.
    ReopenOtherBackend,
    Crash,
    /// A crash, and the index checkpoints are lost: the index is rebuilt from the logs alone.
    CrashLosingCheckpoints,
}

const PATTERNS: [&str; 8] = ["k1*", "k?", "k[2-3]*", "*9*", "f1*", "[^k]*", "k\\3", "*"];

fn val() -> impl Strategy<Value = Val> {
    (
        any::<u32>(),
        prop_oneof![1 => Just(0u16), 8 => 0..VALUE_LEN_MAX],
    )
        .prop_map(|(seed, len)| Val { seed, len })
}

/// One access of a pipeline: a get, a put, a delete.
#[derive(Clone, Debug)]
enum PAct {
    Get,
    Put(Val),
    Delete,
}

fn pipeline_access() -> impl Strategy<Value = (u8, PAct)> {
    let act =
        prop_oneof![3 => Just(PAct::Get), 4 => val().prop_map(PAct::Put), 2 => Just(PAct::Delete)];
    (key(), act)
}

fn key() -> impl Strategy<Value = u8> {
    0..SMALL_KEYS
}

fn cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        3 => Just(Cond::Exists),
        3 => Just(Cond::Absent),
        3 => Just(Cond::ValueEqualsCurrent),
        1 => val().prop_map(Cond::ValueEquals),
        3 => Just(Cond::UnchangedCurrent),
        1 => Just(Cond::UnchangedAbsent),
        1 => val().prop_map(Cond::Unchanged),
    ]
}

fn batch_op() -> impl Strategy<Value = BOp> {
    let act =
        prop_oneof![5 => val().prop_map(Act::Put), 2 => Just(Act::Delete), 1 => Just(Act::Check)];
    (key(), act, prop::option::weighted(0.4, cond())).prop_map(|(key, act, cond)| BOp {
        key,
        act,
        cond,
    })
}

/// The general mix (`heavy` 1), or deletes, churn and incremental compaction `heavy` times as
/// likely.
fn op_weighted(heavy: u32) -> impl Strategy<Value = Op> {
    use prop::collection::vec;
    prop_oneof![
        10 => (key(), val()).prop_map(|(k, v)| Op::Put(k, v)),
        5 * heavy => key().prop_map(Op::Delete),
        5 => vec((key(), val()), 0..12).prop_map(Op::MultiPut),
        3 * heavy => vec(key(), 0..12).prop_map(Op::MultiDelete),
        4 => key().prop_map(Op::Get),
        4 => vec(key(), 0..16).prop_map(Op::MultiGet),
        4 => vec((key(), prop::option::of(val())), 0..16).prop_map(Op::GetPut),
        4 => vec(pipeline_access(), 0..24).prop_map(Op::Pipeline),
        2 => key().prop_map(Op::Exists),
        2 => vec(key(), 0..16).prop_map(Op::MultiExists),
        10 => prop_oneof![4 => vec(batch_op(), 0..6), 1 => vec(batch_op(), 6..24)].prop_map(Op::Apply),
        3 => (1usize..50, prop::option::weighted(0.4, prop::sample::select(&PATTERNS[..])))
            .prop_map(|(count, pattern)| Op::Scan { count, pattern }),
        4 => (300usize..1500, any::<u32>()).prop_map(|(n, seed)| Op::BulkFresh { n, seed }),
        heavy => (50usize..400, any::<u32>()).prop_map(|(n, seed)| Op::BulkDeleteFresh { n, seed }),
        heavy => (200usize..2000, any::<u32>()).prop_map(|(n, seed)| Op::Churn { n, seed }),
        2 => Just(Op::Compact),
        2 * heavy => (1u32..600).prop_map(|kib| Op::CompactStep { kib }),
        1 => Just(Op::Checkpoint),
        2 => Just(Op::Reopen),
        1 => Just(Op::ReopenOtherBackend),
        2 => Just(Op::Crash),
        1 => Just(Op::CrashLosingCheckpoints),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    ops_weighted(1)
}

fn ops_weighted(heavy: u32) -> impl Strategy<Value = Vec<Op>> {
    let len_max = env_or("QUIVER_MODEL_OPS", SEQUENCE_LEN_MAX as u32) as usize;
    prop::collection::vec(op_weighted(heavy), 1..len_max)
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(TestCaseError::fail(format!($($fmt)*)));
        }
    };
}

/// Turns an engine error into a test failure.
fn ok<T>(what: &str, r: quiver_store::Result<T>) -> Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(format!("{what} failed: {e}")))
}

fn show(v: Option<&[u8]>) -> String {
    match v {
        None => "None".into(),
        Some(v) if v.len() <= 24 => format!("{:?}", String::from_utf8_lossy(v)),
        Some(v) => format!(
            "<{} bytes {:?}..>",
            v.len(),
            String::from_utf8_lossy(&v[..16])
        ),
    }
}

/// One configuration's store, its model, and the operations that act on both.
struct Harness {
    dir: tempfile::TempDir,
    opts: Options,
    store: Option<Store>,
    model: Model,
    next_fresh: u64,
}

impl Harness {
    fn new(opts: Options) -> Result<Harness, TestCaseError> {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let store = ok("open", Store::open(dir.path(), opts.clone()))?;
        Ok(Harness {
            dir,
            opts,
            store: Some(store),
            model: Model::new(),
            next_fresh: 0,
        })
    }

    fn store(&self) -> &Store {
        self.store
            .as_ref()
            .expect("the store is open between operations")
    }

    fn reopen(&mut self) -> Result<(), TestCaseError> {
        self.store = Some(ok(
            "reopen",
            Store::open(self.dir.path(), self.opts.clone()),
        )?);
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Put(k, v) => {
                let (k, v) = (small_key(*k), v.bytes());
                ok("put", self.store().put(&k, &v))?;
                self.model.insert(k, v);
            }
            Op::Delete(k) => {
                let k = small_key(*k);
                let got = ok("delete", self.store().delete(&k))?;
                let want = self.model.remove(&k).is_some();
                ensure!(got == want, "delete returned {got}, model says {want}");
            }
            Op::MultiPut(pairs) => {
                let pairs: Vec<(Vec<u8>, Vec<u8>)> = pairs
                    .iter()
                    .map(|(k, v)| (small_key(*k), v.bytes()))
                    .collect();
                ok("multi_put", self.store().multi_put(&pairs))?;
                self.model.extend(pairs);
            }
            Op::MultiDelete(keys) => {
                let keys: Vec<Vec<u8>> = keys.iter().map(|&k| small_key(k)).collect();
                self.multi_delete(&keys)?;
            }
            Op::Get(k) => {
                let k = small_key(*k);
                let got = ok("get", self.store().get(&k))?;
                let want = self.model.get(&k);
                ensure!(
                    got.as_deref() == want.map(|v| &v[..]),
                    "get {}: got {}, model has {}",
                    show(Some(&k)),
                    show(got.as_deref()),
                    show(want.map(|v| &v[..]))
                );
            }
            Op::MultiGet(keys) => {
                let keys: Vec<Vec<u8>> = keys.iter().map(|&k| small_key(k)).collect();
                self.check_multi_get(&keys)?;
            }
            Op::GetPut(accesses) => self.get_put(accesses)?,
            Op::Pipeline(accesses) => self.pipeline(accesses)?,
            Op::Exists(k) => {
                let k = small_key(*k);
                let got = ok("exists", self.store().exists(&k))?;
                ensure!(
                    got == self.model.contains_key(&k),
                    "exists {}: got {got}",
                    show(Some(&k))
                );
            }
            Op::MultiExists(keys) => {
                let keys: Vec<Vec<u8>> = keys.iter().map(|&k| small_key(k)).collect();
                let got = ok("multi_exists", self.store().multi_exists(&keys))?;
                let want: Vec<bool> = keys.iter().map(|k| self.model.contains_key(k)).collect();
                ensure!(
                    got == want,
                    "multi_exists: got {got:?}, model says {want:?}"
                );
            }
            Op::Apply(bops) => self.apply(bops)?,
            Op::Scan { count, pattern } => self.check_scan(*count, pattern.map(str::as_bytes))?,
            Op::BulkFresh { n, seed } => self.bulk_fresh(*n, *seed)?,
            Op::BulkDeleteFresh { n, seed } => {
                // Mostly keys written before, some never written (up to 10% beyond the counter).
                let range = self.next_fresh + self.next_fresh / 10 + 1;
                let keys: Vec<Vec<u8>> = (0..*n as u64)
                    .map(|j| fresh_key((*seed as u64).wrapping_add(j.wrapping_mul(7919)) % range))
                    .collect();
                self.multi_delete(&keys)?;
            }
            Op::Churn { n, seed } => self.churn(*n, *seed)?,
            Op::Compact => {
                ok("compact", self.store().compact())?;
                self.verify_all()?;
            }
            Op::CompactStep { kib } => {
                ok(
                    "compact_step",
                    self.store().compact_step(*kib as u64 * 1024),
                )?;
                self.verify_all()?;
            }
            Op::Checkpoint => ok("checkpoint", self.store().checkpoint())?,
            Op::Reopen => {
                drop(self.store.take());
                self.reopen()?;
                self.verify_all()?;
            }
            Op::ReopenOtherBackend => self.reopen_other_backend()?,
            Op::Crash => self.crash(false)?,
            Op::CrashLosingCheckpoints => self.crash(true)?,
        }
        let len = self.store().len();
        ensure!(
            len == self.model.len() as u64,
            "len() is {len}, the model holds {}",
            self.model.len()
        );
        self.check_slot_counts()
    }

    /// The per-slot key counts agree with the model: in each partition's range, in ranges
    /// across partitions, and in the slot of each small key.
    fn check_slot_counts(&self) -> Result<(), TestCaseError> {
        let mut ranges = self.store().slot_ranges();
        ranges.extend([SlotRange::ALL, SlotRange::new(3000, 12000).unwrap()]);
        ranges.extend((0..SMALL_KEYS).map(|i| {
            let slot = key_slot(&small_key(i));
            SlotRange::new(slot, slot).unwrap()
        }));
        for r in ranges {
            let got = self.store().count_keys_in_ranges(&[r]);
            let want = self
                .model
                .keys()
                .filter(|k| r.contains(key_slot(k)))
                .count() as u64;
            ensure!(
                got == want,
                "{got} keys counted in slots {r}, the model has {want}"
            );
        }
        Ok(())
    }

    /// GETs and SETs as one vector (`Db::multi_get_put`), run as if one by one.
    fn get_put(&mut self, accesses: &[(u8, Option<Val>)]) -> Result<(), TestCaseError> {
        let owned: Vec<(Vec<u8>, Option<Vec<u8>>)> = accesses
            .iter()
            .map(|(k, v)| (small_key(*k), v.map(Val::bytes)))
            .collect();
        let vector: Vec<Access<'_>> = owned
            .iter()
            .map(|(k, v)| match v {
                Some(v) => Access::Put(k, v),
                None => Access::Get(k),
            })
            .collect();
        let db = ok("db", self.store().db(0))?;
        let (got, written) = ok("multi_get_put", db.multi_get_put(&vector))?;
        ok("multi_get_put's puts", written)?;
        let mut want = Vec::new();
        for (k, v) in owned {
            match v {
                Some(v) => {
                    self.model.insert(k, v);
                }
                None => want.push(self.model.get(&k).cloned()),
            }
        }
        let got: Vec<Option<Vec<u8>>> = got
            .into_iter()
            .map(|v| v.and_then(Entry::into_string).map(|b| b.to_vec()))
            .collect();
        ensure!(
            got == want,
            "multi_get_put {accesses:?}: got {got:?}, model says {want:?}"
        );
        Ok(())
    }

    /// `n` keys never written before, in one multi-put.
    fn bulk_fresh(&mut self, n: usize, seed: u32) -> Result<(), TestCaseError> {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
            .map(|j| {
                (
                    fresh_key(self.next_fresh + j as u64),
                    Val::bulk(seed, j).bytes(),
                )
            })
            .collect();
        self.next_fresh += n as u64;
        ok("bulk multi_put", self.store().multi_put(&pairs))?;
        self.model.extend(pairs);
        Ok(())
    }

    /// `n` fresh keys written, then deleted at once: garbage that no model key shadows.
    fn churn(&mut self, n: usize, seed: u32) -> Result<(), TestCaseError> {
        let keys: Vec<Vec<u8>> = (0..n as u64)
            .map(|j| fresh_key(self.next_fresh + j))
            .collect();
        self.next_fresh += n as u64;
        let pairs: Vec<(&Vec<u8>, Vec<u8>)> = keys
            .iter()
            .enumerate()
            .map(|(j, k)| (k, Val::bulk(seed, j).bytes()))
            .collect();
        ok("churn multi_put", self.store().multi_put(&pairs))?;
        let existed = ok("churn multi_delete", self.store().multi_delete(&keys))?;
        ensure!(
            existed.iter().all(|&e| e),
            "churn: a key just written did not exist"
        );
        Ok(())
    }

    /// The store reopened with the next read backend.
    fn reopen_other_backend(&mut self) -> Result<(), TestCaseError> {
        drop(self.store.take());
        let i = BackendKind::ALL
            .iter()
            .position(|&b| b == self.opts.backend);
        self.opts.backend = BackendKind::ALL[(i.unwrap_or(0) + 1) % BackendKind::ALL.len()];
        self.reopen()?;
        self.verify_all()?;
        Ok(())
    }

    /// Drops the store as a crash would (after a flush in `none` mode, where a crash may lose
    /// the last interval of writes), optionally deletes the index checkpoints, and reopens:
    /// nothing acknowledged may be lost.
    fn crash(&mut self, lose_checkpoints: bool) -> Result<(), TestCaseError> {
        let store = self.store.take().expect("open");
        if self.opts.durability == Durability::None {
            ok("flush", store.flush())?;
        }
        store.simulate_crash();
        if lose_checkpoints {
            let entries = std::fs::read_dir(self.dir.path())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for entry in entries.flatten() {
                let ckpt = entry.path().join("index.ckpt");
                if ckpt.exists() {
                    std::fs::remove_file(&ckpt).map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
        }
        self.reopen()?;
        let report = self.store().recovery_report();
        ensure!(
            report.damage.is_empty() && report.torn_tails.is_empty(),
            "recovery after a clean crash found damage: {report:?}"
        );
        if lose_checkpoints {
            ensure!(
                report.partitions_rebuilt == self.opts.partitions,
                "the index was not rebuilt from the logs: {report:?}"
            );
        }
        self.verify_all()
    }

    /// A pipeline: every access answered as if they ran one by one, nothing failed.
    fn pipeline(&mut self, accesses: &[(u8, PAct)]) -> Result<(), TestCaseError> {
        let owned: Vec<(Vec<u8>, Option<Vec<u8>>)> = accesses
            .iter()
            .map(|(k, a)| match a {
                PAct::Put(v) => (small_key(*k), Some(v.bytes())),
                _ => (small_key(*k), None),
            })
            .collect();
        let vector: Vec<Access<'_>> = owned
            .iter()
            .zip(accesses)
            .map(|((k, v), (_, a))| match (a, v) {
                (PAct::Get, _) => Access::Get(k),
                (PAct::Put(_), Some(v)) => Access::Put(k, v),
                _ => Access::Delete(k),
            })
            .collect();
        let db = ok("db", self.store().db(0))?;
        let got = ok("pipeline", db.pipeline(&vector))?;
        ensure!(
            got.failures.is_empty(),
            "pipeline {accesses:?} failed: {:?}",
            got.failures
        );
        for (((k, v), (_, a)), answer) in owned.into_iter().zip(accesses).zip(&got.answers) {
            let want = match a {
                // The model has no expiry times: every key is a lasting string.
                PAct::Get => Answer::Value(self.model.get(&k).cloned().map(Entry::lasting)),
                PAct::Put(_) => Answer::Written {
                    existed: self.model.insert(k, v.unwrap_or_default()).is_some(),
                },
                PAct::Delete => Answer::Written {
                    existed: self.model.remove(&k).is_some(),
                },
            };
            ensure!(
                answer.as_ref() == Some(&want),
                "pipeline {accesses:?}: got {answer:?}, model says {want:?}"
            );
        }
        Ok(())
    }

    fn multi_delete(&mut self, keys: &[Vec<u8>]) -> Result<(), TestCaseError> {
        let got = ok("multi_delete", self.store().multi_delete(keys))?;
        let want: Vec<bool> = keys
            .iter()
            .map(|k| self.model.remove(k).is_some())
            .collect();
        ensure!(
            got == want,
            "multi_delete: got {got:?}, model says {want:?}"
        );
        Ok(())
    }

    fn apply(&mut self, bops: &[BOp]) -> Result<(), TestCaseError> {
        let mut batch = Batch::new();
        let mut expected = BatchOutcome::Applied;
        for (i, b) in bops.iter().enumerate() {
            let key = small_key(b.key);
            // Conditions hold or not against the state before the batch: the model is not
            // touched until every one of them has been evaluated.
            let condition = b.cond.as_ref().map(|c| c.resolve(self.model.get(&key)));
            if let Some(c) = &condition {
                let current = self.model.get(&key).map(|v| &v[..]);
                let holds = match c {
                    Precondition::Exists => current.is_some(),
                    Precondition::Absent => current.is_none(),
                    Precondition::ValueEquals(v) => current == Some(&v[..]),
                    Precondition::Unchanged(v) => current == v.as_ref().map(|e| &e.value[..]),
                };
                if !holds && expected.is_applied() {
                    expected = BatchOutcome::ConditionFailed {
                        op: i,
                        condition: c.clone(),
                    };
                }
            }
            let action = match b.act {
                Act::Put(v) => BatchAction::Put(v.bytes().into()),
                Act::Delete => BatchAction::Delete,
                Act::Check => BatchAction::Check,
            };
            batch.push(key, action, condition);
        }
        let got = ok("apply", self.store().apply(&batch))?;
        ensure!(
            got == expected,
            "apply: got {got:?}, model expects {expected:?}"
        );
        if got.is_applied() {
            for op in &batch.ops {
                match &op.action {
                    BatchAction::Put(v) => {
                        self.model.insert(op.key.to_vec(), v.to_vec());
                    }
                    BatchAction::Delete => {
                        self.model.remove(&op.key[..]);
                    }
                    BatchAction::Check => {}
                }
            }
        }
        Ok(())
    }

    fn check_multi_get(&self, keys: &[Vec<u8>]) -> Result<(), TestCaseError> {
        let got = ok("multi_get", self.store().multi_get(keys))?;
        ensure!(
            got.len() == keys.len(),
            "multi_get returned {} results for {} keys",
            got.len(),
            keys.len()
        );
        for (k, g) in keys.iter().zip(&got) {
            let want = self.model.get(k).map(|v| &v[..]);
            ensure!(
                g.as_deref() == want,
                "multi_get {}: got {}, model has {}",
                show(Some(k)),
                show(g.as_deref()),
                show(want)
            );
        }
        Ok(())
    }

    /// A full scan returns every model key matching the pattern at least once, and nothing else.
    fn check_scan(&self, count: usize, pattern: Option<&[u8]>) -> Result<(), TestCaseError> {
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut calls = 0;
        loop {
            let page = ok("scan", self.store().scan(cursor, pattern, count))?;
            for k in page.keys {
                ensure!(
                    self.model.contains_key(&k[..]),
                    "scan returned {} which the model does not hold",
                    show(Some(&k))
                );
                ensure!(
                    pattern.is_none_or(|p| glob_match(p, &k)),
                    "scan returned {} which does not match the pattern",
                    show(Some(&k))
                );
                seen.insert(k);
            }
            cursor = page.cursor;
            calls += 1;
            if cursor == 0 {
                break;
            }
            ensure!(
                calls < SCAN_CALLS_MAX,
                "scan does not terminate (cursor {cursor:#x})"
            );
        }
        for k in self.model.keys() {
            if pattern.is_none_or(|p| glob_match(p, k)) {
                ensure!(
                    seen.contains(&k[..]),
                    "scan (count {count}, pattern {:?}) missed {}",
                    pattern.map(String::from_utf8_lossy),
                    show(Some(k))
                );
            }
        }
        Ok(())
    }

    /// Every model key has its value, and every small key the model lacks is absent.
    fn verify_all(&self) -> Result<(), TestCaseError> {
        let mut keys: Vec<Vec<u8>> = self.model.keys().cloned().collect();
        keys.extend(
            (0..SMALL_KEYS)
                .map(small_key)
                .filter(|k| !self.model.contains_key(k)),
        );
        self.check_multi_get(&keys)?;
        for i in 0..SMALL_KEYS {
            let k = small_key(i);
            let got = ok("get", self.store().get(&k))?;
            ensure!(
                got.as_deref() == self.model.get(&k).map(|v| &v[..]),
                "get {} after reload: got {}",
                show(Some(&k)),
                show(got.as_deref())
            );
        }
        let len = self.store().len();
        ensure!(
            len == self.model.len() as u64,
            "len() is {len}, the model holds {}",
            self.model.len()
        );
        // The store's own view is consistent: records, index entries, segment files.
        let check = ok("check", self.store().check())?;
        ensure!(check.is_ok(), "check: {:?}", check.problems);
        Ok(())
    }
}

fn run_case(opts: &Options, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut h = Harness::new(opts.clone())?;
    for (i, op) in ops.iter().enumerate() {
        h.step(op).map_err(|e| match e {
            TestCaseError::Fail(why) => {
                TestCaseError::fail(format!("step {i} ({}): {}", op_name(op), why.message()))
            }
            other => other,
        })?;
    }
    h.verify_all()?;
    // A final clean reopen, then a final crash (after a flush in `none` mode).
    h.step(&Op::Reopen)?;
    h.step(&Op::Crash)?;
    let stats = h.store().stats();
    ensure!(
        stats.keys == h.model.len() as u64,
        "stats.keys {} != model {}",
        stats.keys,
        h.model.len()
    );
    if std::env::var_os("QUIVER_MODEL_VERBOSE").is_some() {
        eprintln!(
            "{} ops: {} keys, index capacity {}, {} segments, {} records",
            ops.len(),
            stats.keys,
            stats.index_capacity,
            stats.segments,
            stats.records
        );
    }
    Ok(())
}

fn op_name(op: &Op) -> String {
    let s = format!("{op:?}");
    match s.find(['(', ' ']) {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn env_or(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_model(backend: BackendKind, durability: Durability) {
    run_model_with(Options {
        durability,
        ..small_options(backend)
    });
}

/// With the maintenance thread on: growth, shrinking, compaction, checkpoints and (in `none`
/// mode) buffer flushes happen between and during the operations, and must not change what
/// they see.
fn run_model_background(backend: BackendKind, durability: Durability) {
    run_model_with(background_options(backend, durability));
}

fn background_options(backend: BackendKind, durability: Durability) -> Options {
    Options {
        durability,
        background: true,
        compact_garbage_ratio: 0.3,
        compact_min_dead_records: 50,
        checkpoint_interval_ms: 20,
        flush_interval_ms: 5,
        // Passes of a few segments: the background sweeps ranges in the middle of the log.
        compact_pass_bytes_max: 256 << 10,
        ..small_options(backend)
    }
}

fn run_model_with(opts: Options) {
    run_model_ops(opts, ops());
}

/// The delete-heavy mix: deletes, churn and incremental compaction five times as likely.
fn run_model_delete_heavy(opts: Options) {
    run_model_ops(opts, ops_weighted(5));
}

fn run_model_ops(opts: Options, ops: impl Strategy<Value = Vec<Op>>) {
    let (backend, durability) = (opts.backend, opts.durability);
    let config = Config {
        cases: env_or("QUIVER_MODEL_CASES", CASES),
        // Regressions found get a plain test below instead of a file next to the sources.
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    match runner.run(&ops, |ops| run_case(&opts, &ops)) {
        Ok(()) => {}
        Err(TestError::Fail(reason, ops)) => {
            panic!(
                "{backend}/{durability}: {reason}\nminimal failing sequence ({} ops):\n{ops:#?}",
                ops.len()
            )
        }
        Err(e) => panic!("{backend}/{durability}: {e}"),
    }
}

#[test]
fn model_mmap_os() {
    run_model(BackendKind::Mmap, Durability::Os);
}

#[test]
fn model_pread_os() {
    run_model(BackendKind::Pread, Durability::Os);
}

#[test]
fn model_io_uring_os() {
    run_model(BackendKind::Uring, Durability::Os);
}

#[test]
fn model_mmap_none() {
    run_model(BackendKind::Mmap, Durability::None);
}

#[test]
fn model_io_uring_none() {
    run_model(BackendKind::Uring, Durability::None);
}

#[test]
fn model_pread_fsync() {
    run_model(BackendKind::Pread, Durability::Fsync);
}

#[test]
fn model_mmap_os_background() {
    run_model_background(BackendKind::Mmap, Durability::Os);
}

#[test]
fn model_pread_none_background() {
    run_model_background(BackendKind::Pread, Durability::None);
}

#[test]
fn model_delete_heavy_mmap_os() {
    run_model_delete_heavy(small_options(BackendKind::Mmap));
}

#[test]
fn model_delete_heavy_pread_none_background() {
    run_model_delete_heavy(background_options(BackendKind::Pread, Durability::None));
}

/// Every backend sees the same operations: the sequence below touches each op kind once.
#[test]
fn model_every_op_kind_once() {
    let ops = vec![
        Op::Put(1, Val { seed: 1, len: 10 }),
        Op::MultiPut(vec![
            (2, Val { seed: 2, len: 0 }),
            (2, Val { seed: 3, len: 5 }),
            (39, Val { seed: 4, len: 599 }),
        ]),
        Op::Apply(vec![
            BOp {
                key: 1,
                act: Act::Put(Val { seed: 5, len: 3 }),
                cond: Some(Cond::ValueEqualsCurrent),
            },
            BOp {
                key: 3,
                act: Act::Check,
                cond: Some(Cond::Absent),
            },
            BOp {
                key: 2,
                act: Act::Delete,
                cond: Some(Cond::UnchangedCurrent),
            },
        ]),
        Op::Apply(vec![
            BOp {
                key: 4,
                act: Act::Put(Val { seed: 6, len: 3 }),
                cond: None,
            },
            BOp {
                key: 1,
                act: Act::Delete,
                cond: Some(Cond::Absent),
            },
        ]),
        Op::BulkFresh { n: 1200, seed: 7 },
        Op::Scan {
            count: 7,
            pattern: Some("k1*"),
        },
        Op::BulkDeleteFresh { n: 300, seed: 9 },
        Op::MultiDelete(vec![1, 1, 2, 39]),
        Op::MultiGet(vec![1, 2, 39, 39]),
        Op::MultiExists(vec![1, 4]),
        Op::Exists(4),
        Op::Get(4),
        Op::Delete(4),
        Op::Churn { n: 900, seed: 3 },
        Op::CompactStep { kib: 200 },
        Op::Compact,
        Op::CompactStep { kib: 1 },
        Op::CompactStep { kib: 1 },
        Op::Checkpoint,
        Op::Crash,
        Op::Reopen,
        Op::CrashLosingCheckpoints,
        Op::ReopenOtherBackend,
        Op::Scan {
            count: 1,
            pattern: None,
        },
    ];
    for backend in BackendKind::ALL {
        for durability in [Durability::None, Durability::Os, Durability::Fsync] {
            let opts = Options {
                durability,
                ..small_options(backend)
            };
            if let Err(e) = run_case(&opts, &ops) {
                panic!("{backend}/{durability}: {e}");
            }
        }
    }
}

/// Regression: in `none` durability, SCAN read records from the segment files only, so keys
/// whose records were still in the in-process write buffer were missing from a full scan.
#[test]
fn scan_sees_buffered_writes() {
    let ops = vec![
        Op::Put(0, Val { seed: 1, len: 10 }),
        Op::Scan {
            count: 1,
            pattern: None,
        },
        Op::BulkFresh { n: 300, seed: 0 },
        Op::Scan {
            count: 50,
            pattern: None,
        },
        Op::Scan {
            count: 10,
            pattern: Some("k?"),
        },
    ];
    for backend in BackendKind::ALL {
        let opts = Options {
            durability: Durability::None,
            ..small_options(backend)
        };
        if let Err(e) = run_case(&opts, &ops) {
            panic!("{backend}: {e}");
        }
    }
}
