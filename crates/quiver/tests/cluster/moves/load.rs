//! Load for the moves under way: writer threads, each owning its keys (so the state each key
//! must be in is known: its last acknowledged write), and a reader of keys that never change,
//! each through its own client: a `ClusterClient` ([`Load::start`]), or any [`Kv`], e.g. a
//! plain `Connection` to a `quiver router` ([`Load::start_with`]).
//!
//! A writer SETs, INCRs and DELs its keys and reads one back after each write: a read must
//! return exactly the last acknowledged state of its key (one writer per key: anything else
//! is a lost or stale write), an INCR must return one more than the last acknowledged value,
//! a DEL must find the key exactly when it should exist. Every failure is counted; the test
//! wants none. A write the client gave up routing (`Redirects`, `ClusterDown`: not applied)
//! leaves its key's state as it was; any other failed write makes it unknown until the next
//! acknowledged one, so one failure does not cascade into false ones.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use quiver_client::{ClusterClient, ClusterStats, Connection, Error, Result, Value};
use quiver_store::slot::key_slot;
use quiver_testkit::rng::Rng;
use quiver_testkit::wait_until;

use crate::harness::{cluster_client, Cluster};

/// Keys of each writer: even ones hold strings (SET, DEL), odd ones counters (INCR, DEL).
pub const WRITER_KEYS: usize = 400;
/// Keys of each multiget of the reader.
const READ_BATCH: usize = 64;
/// Failures kept for the report (all are counted).
const FAILURES_KEPT: usize = 20;
/// In ten writes, how many are SET or INCR (the rest DEL).
const WRITES_NOT_DEL: u64 = 8;

/// The calls the load makes: a cluster client's, or a plain connection's (to a router, which
/// routes for it).
pub trait Kv: Send {
    fn set(&mut self, key: &str, value: &str) -> Result<()>;
    fn get(&mut self, key: &str) -> Result<Option<Bytes>>;
    fn incr(&mut self, key: &str) -> Result<i64>;
    fn delete(&mut self, key: &str) -> Result<bool>;
    fn multi_get(&mut self, keys: &[&str]) -> Result<Vec<Option<Bytes>>>;
    /// One GET per key, pipelined where the client can (the outer `Err`: the whole call
    /// failed; each inner one: that GET's error reply).
    fn pipelined_gets(&mut self, keys: &[&str]) -> Result<Vec<Result<Option<Bytes>>>> {
        Ok(keys.iter().map(|k| self.get(k)).collect())
    }
    /// The cluster client's counters (nothing for a plain connection: the router follows).
    fn stats(&self) -> ClusterStats {
        ClusterStats::default()
    }
}

impl Kv for ClusterClient {
    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        ClusterClient::set(self, key, value)
    }
    fn get(&mut self, key: &str) -> Result<Option<Bytes>> {
        ClusterClient::get(self, key)
    }
    fn incr(&mut self, key: &str) -> Result<i64> {
        ClusterClient::incr(self, key)
    }
    fn delete(&mut self, key: &str) -> Result<bool> {
        ClusterClient::delete(self, key)
    }
    fn multi_get(&mut self, keys: &[&str]) -> Result<Vec<Option<Bytes>>> {
        ClusterClient::multi_get(self, keys)
    }
    fn stats(&self) -> ClusterStats {
        ClusterClient::stats(self)
    }
}

impl Kv for Connection {
    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        Connection::set(self, key, value)
    }
    fn get(&mut self, key: &str) -> Result<Option<Bytes>> {
        Connection::get(self, key)
    }
    fn incr(&mut self, key: &str) -> Result<i64> {
        Connection::incr(self, key)
    }
    fn delete(&mut self, key: &str) -> Result<bool> {
        Connection::delete(self, key)
    }
    fn multi_get(&mut self, keys: &[&str]) -> Result<Vec<Option<Bytes>>> {
        Connection::multi_get(self, keys)
    }
    fn pipelined_gets(&mut self, keys: &[&str]) -> Result<Vec<Result<Option<Bytes>>>> {
        let mut p = self.pipeline();
        for k in keys {
            p.command(&[b"GET", k.as_bytes()]);
        }
        let replies = p.execute()?;
        Ok(replies
            .into_iter()
            .map(|r| match r? {
                Value::Null => Ok(None),
                v => match v.as_bytes() {
                    Some(b) => Ok(Some(Bytes::copy_from_slice(b))),
                    None => Err(Error::UnexpectedReply(format!("GET: {v:?}"))),
                },
            })
            .collect())
    }
}

/// The state a key must be in: its last acknowledged write's (`None`: deleted), or unknown
/// after a failed write, which may or may not have been applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Known {
    Value(Option<String>),
    Unknown,
}

/// What a load thread did.
#[derive(Default)]
pub struct Report {
    pub failures: Vec<String>,
    pub failed: usize,
    pub stats: ClusterStats,
    /// A writer's keys and their final states (empty for the reader).
    pub model: Vec<(String, Known)>,
}

impl Report {
    /// Counts a failure; keeps its text (with the wall-clock time, to match the nodes' logs).
    fn fail(&mut self, what: String) {
        self.failed += 1;
        if self.failures.len() < FAILURES_KEPT {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            self.failures.push(format!(
                "{what} (at {}.{:06} s)",
                now.as_secs(),
                now.subsec_micros()
            ));
        }
    }
}

/// The load threads, stopped together; `ops[i]` counts thread `i`'s iterations.
pub struct Load {
    stop: Arc<AtomicBool>,
    ops: Vec<Arc<AtomicUsize>>,
    threads: Vec<JoinHandle<Report>>,
}

impl Load {
    /// `writers` writer threads, their keys' slots in `slots` (lo, hi), and one reader of
    /// `fixed` (pairs nobody changes), each with its own cluster client; the reader's calls
    /// are multigets.
    pub fn start(
        cluster: &Cluster,
        writers: usize,
        slots: (u16, u16),
        fixed: Arc<Vec<(String, String)>>,
    ) -> Load {
        let seeds: Vec<String> = cluster.nodes.iter().map(|n| n.addr()).collect();
        let connect = move || -> Box<dyn Kv> { Box::new(cluster_client(&seeds)) };
        Load::start_with(writers, slots, fixed, false, connect)
    }

    /// [`Load::start`] with each thread's client made by `connect`; with `pipelined`, the
    /// reader alternates a multiget and the same keys as pipelined GETs.
    pub fn start_with(
        writers: usize,
        slots: (u16, u16),
        fixed: Arc<Vec<(String, String)>>,
        pipelined: bool,
        connect: impl Fn() -> Box<dyn Kv>,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut load = Load {
            stop: stop.clone(),
            ops: Vec::new(),
            threads: Vec::new(),
        };
        for t in 0..=writers {
            let ops = Arc::new(AtomicUsize::new(0));
            load.ops.push(ops.clone());
            let (stop, fixed) = (stop.clone(), fixed.clone());
            let client = connect();
            load.threads.push(std::thread::spawn(move || {
                if t < writers {
                    writer(t, slots, client, &stop, &ops)
                } else {
                    reader(client, &fixed, pipelined, &stop, &ops)
                }
            }));
        }
        load
    }

    /// Waits until every thread has done `more` iterations beyond what it has done now.
    pub fn wait_progress(&self, cluster: &Cluster, more: usize, what: &str) {
        let targets: Vec<usize> = self
            .ops
            .iter()
            .map(|o| o.load(Ordering::SeqCst) + more)
            .collect();
        wait_until(
            &format!("{more} operations of every load thread {what}"),
            || cluster.logs(),
            || {
                for (i, (ops, target)) in self.ops.iter().zip(&targets).enumerate() {
                    let done = ops.load(Ordering::SeqCst);
                    if self.threads[i].is_finished() {
                        return Err(format!("load thread {i} ended"));
                    }
                    if done < *target {
                        return Err(format!("thread {i}: {done} of {target}"));
                    }
                }
                Ok(())
            },
        );
    }

    /// Stops the threads; their reports, the writers' first.
    pub fn finish(self) -> Vec<Report> {
        self.stop.store(true, Ordering::SeqCst);
        self.threads
            .into_iter()
            .map(|t| t.join().expect("a load thread"))
            .collect()
    }
}

/// Writer `t` (see the module documentation) of keys whose slots are in `slots`, until
/// `stop`.
fn writer(
    t: usize,
    (lo, hi): (u16, u16),
    mut client: Box<dyn Kv>,
    stop: &AtomicBool,
    ops: &AtomicUsize,
) -> Report {
    let mut report = Report {
        model: (0..)
            .map(|j| format!("writer{t}-key{j}"))
            .filter(|k| (lo..=hi).contains(&key_slot(k.as_bytes())))
            .take(WRITER_KEYS)
            .map(|k| (k, Known::Value(None)))
            .collect(),
        ..Report::default()
    };
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1));
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let j = rng.index(WRITER_KEYS);
        let delete = rng.below(10) >= WRITES_NOT_DEL;
        let (key, known) = &report.model[j];
        let (key, known) = (key.clone(), known.clone());
        let outcome = if delete {
            delete_one(client.as_mut(), &key, &known)
        } else if j % 2 == 1 {
            incr_one(client.as_mut(), &key, &known)
        } else {
            seq += 1;
            let value = format!("{key}:{seq}");
            match client.set(&key, &value) {
                Ok(()) => Ok(Known::Value(Some(value))),
                Err(e) => Err(failed(format!("SET {key}"), &e)),
            }
        };
        report.model[j].1 = match outcome {
            Ok(k) => k,
            Err((failure, after)) => {
                report.fail(failure);
                after.unwrap_or(known)
            }
        };
        let r = rng.index(WRITER_KEYS);
        if let Err(failure) = read_one(client.as_mut(), &report.model[r]) {
            report.fail(failure);
        }
        ops.fetch_add(1, Ordering::SeqCst);
    }
    report.stats = client.stats();
    report
}

/// A failed write: what to report, and the key's state after it (`None`: as it was).
type Failure = (String, Option<Known>);

/// A write that failed with `e`: not applied when the client gave up routing it (the node
/// that refused it last applied nothing), else of unknown outcome.
fn failed(what: String, e: &Error) -> Failure {
    let after = match e {
        Error::Redirects { .. } | Error::ClusterDown(_) => None,
        _ => Some(Known::Unknown),
    };
    (format!("{what}: {e}"), after)
}

/// DEL of `key`: it must have existed exactly when its last acknowledged state says so.
fn delete_one(client: &mut dyn Kv, key: &str, known: &Known) -> Result<Known, Failure> {
    let existed = client
        .delete(key)
        .map_err(|e| failed(format!("DEL {key}"), &e))?;
    match known {
        Known::Value(v) if v.is_some() != existed => Err((
            format!("DEL {key}: existed {existed}, but its last acknowledged state is {v:?}"),
            Some(Known::Value(None)),
        )),
        _ => Ok(Known::Value(None)),
    }
}

/// INCR of `key`: one more than its last acknowledged value (0 when deleted).
fn incr_one(client: &mut dyn Kv, key: &str, known: &Known) -> Result<Known, Failure> {
    let n = client
        .incr(key)
        .map_err(|e| failed(format!("INCR {key}"), &e))?;
    let after = Known::Value(Some(n.to_string()));
    if let Known::Value(v) = known {
        let before: i64 = v.as_deref().map_or(0, |s| s.parse().unwrap());
        if n != before + 1 {
            return Err((
                format!("INCR {key}: {n}, but its last acknowledged value is {v:?}"),
                Some(after),
            ));
        }
    }
    Ok(after)
}

/// GET of a writer's key: exactly its last acknowledged state, when known.
fn read_one(client: &mut dyn Kv, (key, known): &(String, Known)) -> Result<(), String> {
    let got = client.get(key).map_err(|e| format!("GET {key}: {e}"))?;
    match known {
        Known::Value(v) if got.as_deref() != v.as_deref().map(str::as_bytes) => Err(format!(
            "GET {key}: {:?}, but the last acknowledged write left {v:?}",
            got.map(|b| String::from_utf8_lossy(&b).into_owned())
        )),
        _ => Ok(()),
    }
}

/// Multigets of [`READ_BATCH`] of `fixed`'s keys in turn until `stop` (with `pipelined`,
/// every other batch as pipelined GETs): each value as loaded.
fn reader(
    mut client: Box<dyn Kv>,
    fixed: &[(String, String)],
    pipelined: bool,
    stop: &AtomicBool,
    ops: &AtomicUsize,
) -> Report {
    let mut report = Report::default();
    let mut start = 0;
    let mut round = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let batch: Vec<&(String, String)> = (0..READ_BATCH)
            .map(|i| &fixed[(start + i) % fixed.len()])
            .collect();
        start = (start + READ_BATCH) % fixed.len();
        let keys: Vec<&str> = batch.iter().map(|(k, _)| k.as_str()).collect();
        round += 1;
        // Each key's value, or its own error reply (pipelined GETs answer one by one).
        let (what, got): (&str, Result<Vec<Result<Option<Bytes>>>>) =
            if pipelined && round.is_multiple_of(2) {
                ("pipelined GET", client.pipelined_gets(&keys))
            } else {
                let got = client.multi_get(&keys);
                (
                    "MGET",
                    got.map(|values| values.into_iter().map(Ok).collect()),
                )
            };
        match got {
            Ok(values) => {
                for ((k, v), got) in batch.iter().zip(values) {
                    match got {
                        Ok(got) if got.as_deref() == Some(v.as_bytes()) => {}
                        got => report.fail(format!("{what} {k}: {got:?}, wanted {v}")),
                    }
                }
            }
            Err(e) => report.fail(format!("{what} of {} keys: {e}", keys.len())),
        }
        ops.fetch_add(1, Ordering::SeqCst);
    }
    report.stats = client.stats();
    report
}
