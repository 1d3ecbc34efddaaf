//! A history recorder and its linearizability check (issue 12): client threads run GET / SET /
//! INCR / MSET on a small set of keys, each operation recorded with its invoke and return
//! times on one monotonic clock and its outcome; the history is written as JSON lines and
//! checked, key by key, by porcupine in `tools/lincheck` (a Go program that
//! scripts/test_deps.sh builds into `target/lincheck/lincheck`; `QUIVER_LINCHECK` names another
//! binary). The format, the model and what an unknown outcome means are in
//! `tools/lincheck/main.go` and docs/testing.md.
//!
//! - [`KeySpace`]: the keys, `{TAG}r<i>` registers (SET, MSET, GET) and `{TAG}n<i>` counters
//!   (INCR, GET; never SET, so an INCR never meets a non-integer), in groups sharing a hash
//!   tag: one group lives on one node, several spread over a cluster; an MSET stays in one
//!   group (one slot: atomic on one node). The model starts every key empty: record on keys
//!   nothing else has written (a prefix of their own).
//! - [`Recorder`]: the clock origin, the key space and the operations (at most [`OPS_MAX`]).
//! - [`Client`]: what a client thread talks through — a `Connection` (to a node or a router) or
//!   a `ClusterClient`; [`run_clients`] runs the threads over a `connect` function.
//! - [`Outcome`]: ok, fail (a definite refusal before any effect: [`REFUSALS`] and the cluster
//!   client giving up routing) or unknown (a connection error, a timeout, any other error
//!   reply). After an unknown outcome a client reconnects: its connection's state is unknown.
//! - [`write_history`], [`check`], [`assert_linearizable`]: the checker's run and its summary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use quiver_bench::rng::WyRand;
use quiver_client::{ClusterClient, Connection, Error, Value};
use quiver_testkit::process::run;
use quiver_testkit::WAIT;
use serde::Deserialize;
use serde_json::json;

/// Bound on the operations one recorder keeps (porcupine's search grows with the history; a
/// client stops before invoking one more).
pub const OPS_MAX: usize = 200_000;
/// Bound on the checker's search (`lincheck --timeout`): past it the result is unknown.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between two connection attempts of a client whose server is down.
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);
/// Bound on a client's reconnection (a server that stays down this long fails the test).
const RECONNECT_WAIT_MAX: Duration = WAIT;
/// The mix of operations, in percent (the rest: MSET).
const GET_PERCENT: u64 = 40;
const SET_PERCENT: u64 = 30;
const INCR_PERCENT: u64 = 20;
/// Keys of one MSET: 2 or 3 (fewer if the group has fewer registers).
const MSET_KEYS_MIN: usize = 2;
const MSET_KEYS_MAX: usize = 3;
/// Error codes that refuse a command before it has any effect: such an operation is a fail.
pub const REFUSALS: &[&str] = &[
    "MOVED",
    "ASK",
    "CROSSSLOT",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "NOAUTH",
    "WRONGPASS",
];
/// Lines of a failing history shown in a panic message.
const SHOWN_LINES_MAX: usize = 40;

// ---------------------------------------------------------------------------------------------
// keys

/// The keys the clients use, in groups sharing a hash tag.
#[derive(Clone, Debug)]
pub struct KeySpace {
    /// Per group, its registers (`{TAG}r<i>`).
    registers: Vec<Vec<String>>,
    /// Per group, its counters (`{TAG}n<i>`).
    counters: Vec<Vec<String>>,
}

impl KeySpace {
    /// `groups` groups with hash tags `{PREFIX0}`, `{PREFIX1}`, ..., each of `registers`
    /// registers and `counters` counters.
    pub fn new(prefix: &str, groups: usize, registers: usize, counters: usize) -> KeySpace {
        assert!(
            groups > 0 && registers > 0 && counters > 0,
            "an empty key space"
        );
        let names = |kind: &str, n: usize| -> Vec<Vec<String>> {
            (0..groups)
                .map(|g| {
                    (0..n)
                        .map(|i| format!("{{{prefix}{g}}}{kind}{i}"))
                        .collect()
                })
                .collect()
        };
        KeySpace {
            registers: names("r", registers),
            counters: names("n", counters),
        }
    }

    /// Every key, registers first.
    pub fn all(&self) -> Vec<String> {
        self.registers
            .iter()
            .flatten()
            .chain(self.counters.iter().flatten())
            .cloned()
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// operations

/// The kinds of operation the clients run (the checker also knows `del`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Get,
    Set,
    Incr,
    Mset,
}

impl Kind {
    /// Its name in the history and its command.
    fn name(self) -> (&'static str, &'static [u8]) {
        match self {
            Kind::Get => ("get", b"GET"),
            Kind::Set => ("set", b"SET"),
            Kind::Incr => ("incr", b"INCR"),
            Kind::Mset => ("mset", b"MSET"),
        }
    }
}

/// What an ok outcome returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Returned {
    /// SET, MSET: `OK`.
    Nothing,
    /// GET: the value, or `None` for a missing key.
    Value(Option<String>),
    /// INCR: the new value.
    Integer(i64),
}

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok(Returned),
    /// Refused before any effect (the reason): left out of the check.
    Fail(String),
    /// May or may not have taken effect (the reason).
    Unknown(String),
}

/// One operation of the history.
#[derive(Clone, Debug)]
pub struct Op {
    pub client: usize,
    pub kind: Kind,
    pub keys: Vec<String>,
    /// The values written (SET, MSET: one per key).
    pub args: Vec<String>,
    /// Nanoseconds since the recorder's origin, before the request was sent.
    pub invoke: u64,
    /// Nanoseconds since the recorder's origin, after the reply (or the error) arrived.
    pub ret: u64,
    pub outcome: Outcome,
}

impl Op {
    /// The operation as a line of the history (the format of `tools/lincheck/main.go`).
    pub fn json_line(&self) -> String {
        let (kind, _) = self.kind.name();
        let mut line = json!({
            "client": self.client,
            "kind": kind,
            "keys": self.keys,
            "invoke": self.invoke,
            "return": self.ret,
        });
        if matches!(self.kind, Kind::Set | Kind::Mset) {
            line["args"] = json!(self.args);
        }
        let (outcome, result) = match &self.outcome {
            Outcome::Ok(Returned::Nothing) => ("ok", None),
            Outcome::Ok(Returned::Value(v)) => ("ok", Some(json!(v))),
            Outcome::Ok(Returned::Integer(n)) => ("ok", Some(json!(n))),
            Outcome::Fail(_) => ("fail", None),
            Outcome::Unknown(_) => ("unknown", None),
        };
        line["outcome"] = json!(outcome);
        if let Some(result) = result {
            line["result"] = result;
        }
        line.to_string()
    }

    /// The command sent for it.
    fn command(&self) -> Vec<&[u8]> {
        let (_, name) = self.kind.name();
        let mut args: Vec<&[u8]> = vec![name];
        match self.kind {
            Kind::Set | Kind::Mset => {
                for (k, v) in self.keys.iter().zip(&self.args) {
                    args.extend([k.as_bytes(), v.as_bytes()]);
                }
            }
            _ => args.extend(self.keys.iter().map(|k| k.as_bytes())),
        }
        args
    }
}

/// Operations by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub ok: usize,
    pub fail: usize,
    pub unknown: usize,
}

impl Counts {
    pub fn total(&self) -> usize {
        self.ok + self.fail + self.unknown
    }
}

/// The outcome of a reply (or of the error in its place) to an operation of `kind`.
pub fn outcome(kind: Kind, reply: quiver_client::Result<Value>) -> Outcome {
    let value = match reply {
        Ok(value) => value,
        Err(e) => return outcome_of_error(&e),
    };
    let returned = match (kind, value) {
        (Kind::Set | Kind::Mset, Value::Simple(s)) if s == "OK" => Returned::Nothing,
        (Kind::Get, Value::Null) => Returned::Value(None),
        (Kind::Get, Value::Bulk(b)) => Returned::Value(Some(String::from_utf8_lossy(&b).into())),
        (Kind::Incr, Value::Integer(n)) => Returned::Integer(n),
        // No fault makes a server answer a command with another command's reply.
        (kind, other) => panic!("{kind:?}: a reply of the wrong shape: {other:?}"),
    };
    Outcome::Ok(returned)
}

/// The outcome of an error in place of a reply.
pub fn outcome_of_error(e: &Error) -> Outcome {
    let text = e.to_string();
    if e.is_connection_error() {
        return Outcome::Unknown(text);
    }
    match e {
        // The cluster client gave up routing: every node it tried refused the command, or it
        // sent nothing.
        Error::Redirects { .. }
        | Error::ClusterDown(_)
        | Error::SlotNotCovered { .. }
        | Error::KeyIndex { .. } => Outcome::Fail(text),
        _ if e.server_code().is_some_and(|c| REFUSALS.contains(&c)) => Outcome::Fail(text),
        _ => Outcome::Unknown(text),
    }
}

// ---------------------------------------------------------------------------------------------
// the recorder

/// A history being recorded: the clock origin, the keys and the operations.
pub struct Recorder {
    origin: Instant,
    pub keys: KeySpace,
    ops: Mutex<Vec<Op>>,
    /// Operations invoked (or about to be): at most [`OPS_MAX`].
    invoked: AtomicUsize,
}

impl Recorder {
    pub fn new(keys: KeySpace) -> Recorder {
        Recorder {
            origin: Instant::now(),
            keys,
            ops: Mutex::new(Vec::new()),
            invoked: AtomicUsize::new(0),
        }
    }

    /// Nanoseconds since the origin (monotonic, shared by every client thread).
    pub fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap()
    }

    /// Takes a place for one more operation; `false` when [`OPS_MAX`] are taken (an operation
    /// must never run unrecorded: its effect would be unexplained).
    fn reserve(&self) -> bool {
        self.invoked
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < OPS_MAX).then_some(n + 1)
            })
            .is_ok()
    }

    /// Adds an operation (the clients' own, or one a test makes up).
    pub fn push(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }

    /// Operations recorded so far.
    pub fn len(&self) -> usize {
        self.ops.lock().unwrap().len()
    }

    /// A copy of the operations recorded so far.
    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap().clone()
    }

    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for op in self.ops.lock().unwrap().iter() {
            match op.outcome {
                Outcome::Ok(_) => counts.ok += 1,
                Outcome::Fail(_) => counts.fail += 1,
                Outcome::Unknown(_) => counts.unknown += 1,
            }
        }
        counts
    }

    /// Writes the history to `path` (see [`write_history`]).
    pub fn write_history(&self, path: &Path) {
        write_history(&self.ops.lock().unwrap(), path);
    }
}

/// Writes `ops` to `path` as JSON lines, in the order recorded.
pub fn write_history(ops: &[Op], path: &Path) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for op in ops {
        writeln!(out, "{}", op.json_line()).unwrap();
    }
    out.flush().unwrap();
}

// ---------------------------------------------------------------------------------------------
// clients

/// What a client thread sends its commands through. Every command recorded has its key (its
/// first key: an MSET's keys share a slot) at index 1.
pub trait Client: Send {
    /// Sends one command and reads its reply (an error reply as `Err`).
    fn call(&mut self, args: &[&[u8]]) -> quiver_client::Result<Value>;
}

impl Client for Connection {
    fn call(&mut self, args: &[&[u8]]) -> quiver_client::Result<Value> {
        self.command(args)
    }
}

impl Client for ClusterClient {
    fn call(&mut self, args: &[&[u8]]) -> quiver_client::Result<Value> {
        self.command(args, 1)
    }
}

/// The load of [`run_clients`].
#[derive(Clone, Debug)]
pub struct Load {
    pub clients: usize,
    /// Operations each client invokes (fewer if the deadline or [`OPS_MAX`] comes first).
    pub ops_per_client: usize,
    /// No operation is invoked past this long after the start.
    pub deadline: Option<Duration>,
    /// The random mix of client `i` is seeded with `seed` and `i`.
    pub seed: u64,
}

/// Runs `load.clients` client threads, client `i` connecting with `connect(i)` (and again
/// after each unknown outcome, retried while it fails, at most [`RECONNECT_WAIT_MAX`]);
/// returns when every client is done. Each client invokes one operation at a time: 40% GET of
/// any key, 30% SET of a register, 20% INCR of a counter, 10% MSET of 2-3 registers of one
/// group; every value written is unique (`c<client>-<seq>`).
pub fn run_clients<C: Client>(
    recorder: &Recorder,
    load: &Load,
    connect: impl Fn(usize) -> quiver_client::Result<C> + Sync,
) {
    let start = Instant::now();
    std::thread::scope(|s| {
        for id in 0..load.clients {
            let connect = &connect;
            s.spawn(move || client_loop(recorder, load, start, id, connect));
        }
    });
}

/// One client's operations.
fn client_loop<C: Client>(
    recorder: &Recorder,
    load: &Load,
    start: Instant,
    id: usize,
    connect: &(impl Fn(usize) -> quiver_client::Result<C> + Sync),
) {
    // Distinct streams per client (wyrand's state is a counter: spread the seeds apart).
    let mut rng = WyRand::new(load.seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut conn: Option<C> = None;
    for seq in 0..load.ops_per_client {
        if load.deadline.is_some_and(|d| start.elapsed() >= d) || !recorder.reserve() {
            return;
        }
        let c = match &mut conn {
            Some(c) => c,
            None => {
                let c = conn.insert(reconnect(connect, id));
                // The wait for a connection may have outlasted the deadline.
                if load.deadline.is_some_and(|d| start.elapsed() >= d) {
                    return;
                }
                c
            }
        };
        let mut op = pick(&mut rng, &recorder.keys, id, seq);
        op.invoke = recorder.now();
        let reply = c.call(&op.command());
        op.ret = recorder.now();
        op.outcome = outcome(op.kind, reply);
        if matches!(op.outcome, Outcome::Unknown(_)) {
            conn = None;
        }
        recorder.push(op);
    }
}

/// `connect(id)`, tried again while it fails, at most [`RECONNECT_WAIT_MAX`].
fn reconnect<C>(connect: &impl Fn(usize) -> quiver_client::Result<C>, id: usize) -> C {
    let deadline = Instant::now() + RECONNECT_WAIT_MAX;
    loop {
        match connect(id) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => {
                panic!("client {id}: no connection within {RECONNECT_WAIT_MAX:?}: {e}")
            }
            Err(_) => std::thread::sleep(RECONNECT_PAUSE),
        }
    }
}

/// The next operation of client `id` (its times and outcome to be filled in).
fn pick(rng: &mut WyRand, keys: &KeySpace, id: usize, seq: usize) -> Op {
    let value = format!("c{id}-{seq}");
    let group = rng.below(keys.registers.len() as u64) as usize;
    let registers = &keys.registers[group];
    let counters = &keys.counters[group];
    let choose =
        |rng: &mut WyRand, from: &[String]| from[rng.below(from.len() as u64) as usize].clone();
    let roll = rng.below(100);
    let (kind, keys, args) = if roll < GET_PERCENT {
        let n = registers.len() + counters.len();
        let i = rng.below(n as u64) as usize;
        let key = registers
            .get(i)
            .unwrap_or_else(|| &counters[i - registers.len()]);
        (Kind::Get, vec![key.clone()], vec![])
    } else if roll < GET_PERCENT + SET_PERCENT {
        (Kind::Set, vec![choose(rng, registers)], vec![value])
    } else if roll < GET_PERCENT + SET_PERCENT + INCR_PERCENT {
        (Kind::Incr, vec![choose(rng, counters)], vec![])
    } else {
        let span = MSET_KEYS_MAX - MSET_KEYS_MIN + 1;
        let n = (MSET_KEYS_MIN + rng.below(span as u64) as usize).min(registers.len());
        // n distinct registers: a random rotation of the group's.
        let first = rng.below(registers.len() as u64) as usize;
        let chosen: Vec<String> = (0..n)
            .map(|j| registers[(first + j) % registers.len()].clone())
            .collect();
        (Kind::Mset, chosen, vec![value; n])
    };
    Op {
        client: id,
        kind,
        keys,
        args,
        invoke: 0,
        ret: 0,
        outcome: Outcome::Unknown("not sent".into()),
    }
}

// ---------------------------------------------------------------------------------------------
// the check

/// The checker's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Illegal,
    /// The search timed out ([`CHECK_TIMEOUT`]).
    Unknown,
}

/// The checker's summary line.
#[derive(Clone, Debug, Deserialize)]
pub struct Summary {
    /// Lines of the history.
    pub ops: usize,
    /// Keys checked.
    pub keys: usize,
    pub result: Verdict,
    /// The keys whose own history is not linearizable.
    pub illegal_keys: Vec<String>,
    pub unknown_outcomes: usize,
    pub failed: usize,
}

/// `target/lincheck` of the workspace: the checker's binary, and the failing histories kept.
fn lincheck_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    workspace.canonicalize().unwrap().join("target/lincheck")
}

/// The checker's binary: `QUIVER_LINCHECK`, or `target/lincheck/lincheck` of the workspace
/// (built by scripts/test_deps.sh; a missing one fails the test, never skips it).
pub fn lincheck_binary() -> PathBuf {
    let path = match std::env::var_os("QUIVER_LINCHECK") {
        Some(path) => PathBuf::from(path),
        None => lincheck_dir().join("lincheck"),
    };
    assert!(
        path.is_file(),
        "the linearizability checker {} is missing: run scripts/test_deps.sh (it builds \
         tools/lincheck with Go into target/lincheck/lincheck; QUIVER_LINCHECK names another \
         build)",
        path.display()
    );
    path
}

/// Runs the checker on the history at `path`; its summary (a bad history, exit code 3, fails
/// the test: the recorder wrote something the checker cannot read).
pub fn check(path: &Path) -> Summary {
    let binary = lincheck_binary();
    let (status, out, err) = run(
        Command::new(&binary)
            .arg("--timeout")
            .arg(format!("{}s", CHECK_TIMEOUT.as_secs()))
            .arg(path),
        "lincheck",
        CHECK_TIMEOUT + WAIT,
    );
    let summary: Summary = serde_json::from_str(out.trim()).unwrap_or_else(|e| {
        panic!(
            "{} {}: {status}, no summary ({e}): {out}{err}",
            binary.display(),
            path.display()
        )
    });
    let code = match summary.result {
        Verdict::Ok => 0,
        Verdict::Illegal => 1,
        Verdict::Unknown => 2,
    };
    assert_eq!(status.code(), Some(code), "lincheck: {summary:?}\n{err}");
    summary
}

/// Writes the recorder's history to `dir/NAME.jsonl` and checks it: it must be linearizable,
/// and the summary must count what was recorded. On a failure the history is kept in
/// `target/lincheck/failed/` (the message says where and how to see it) and the panic shows
/// the lines of the illegal keys.
pub fn assert_linearizable(recorder: &Recorder, dir: &Path, name: &str) -> Summary {
    let path = dir.join(format!("{name}.jsonl"));
    recorder.write_history(&path);
    let summary = check(&path);
    let counts = recorder.counts();
    assert_eq!(
        (summary.ops, summary.unknown_outcomes, summary.failed),
        (counts.total(), counts.unknown, counts.fail),
        "the checker read another history than the one recorded: {summary:?}"
    );
    if summary.result != Verdict::Ok {
        let kept = lincheck_dir()
            .join("failed")
            .join(format!("{name}-{}.jsonl", std::process::id()));
        std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
        std::fs::copy(&path, &kept).unwrap();
        let shown: Vec<String> = recorder
            .ops()
            .iter()
            .filter(|op| op.keys.iter().any(|k| summary.illegal_keys.contains(k)))
            .take(SHOWN_LINES_MAX)
            .map(Op::json_line)
            .collect();
        panic!(
            "{name}: the history is not linearizable: {summary:?}\nkept in {}; see it with \
             {} --visualize out.html {}\nthe first {SHOWN_LINES_MAX} lines of the illegal \
             keys:\n{}",
            kept.display(),
            lincheck_binary().display(),
            kept.display(),
            shown.join("\n")
        );
    }
    summary
}
