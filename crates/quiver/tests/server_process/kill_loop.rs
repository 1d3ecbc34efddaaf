//! Issue 14: `quiver serve` killed with SIGKILL over and over under a mixed load, every key
//! checked after each kill (`server_crash_loop`, and the long run `server_crash_loop_long`).
//!
//! The load: [`LOAD_THREADS`] connections, each writing only keys of its own — registers (SET,
//! SET EX / PX, MSET, EXPIRE / PEXPIRE, DEL), counters (INCR) and hashes (HSET, HDEL, HINCRBY,
//! EXPIRE, DEL) — in pipelined bursts, with MULTI/EXEC transactions mixing them. Each thread
//! keeps what it sent: the operations acknowledged, and those in flight when the server died. A
//! key having one writer, its state after a kill is known exactly, up to which in-flight
//! operations took effect:
//!
//! - every acknowledged operation took effect;
//! - of the in-flight ones, those that took effect on a key are a prefix of those sent on it
//!   (one connection's commands on a key are applied in order, and kill -9 loses nothing
//!   written to the OS);
//! - an MSET or a MULTI/EXEC took effect on all its keys or on none; a multi-key DEL is a
//!   plain vector, which a crash may keep in part (docs/design.md), so its keys count one by one;
//! - a key with a short TTL reads its value until its deadline and absent after it, never an
//!   older value;
//! - a hash change keeps the key's TTL, and a hash losing its last field is gone.
//!
//! The check (`model::resolve`) searches for a choice of in-flight operations under these
//! rules giving exactly what the server shows (GET, or HGETALL for a hash, and PTTL of every
//! key); the state that choice gives is where the next cycle starts. No choice: the test fails,
//! naming the first key no choice explains (lost: it shows nothing, or a state older than its
//! last acknowledged write; wrong: anything else) or, when each key alone is explained, the
//! in-flight operations that can only have taken effect in part or out of order.

use super::*;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;

use bytes::BytesMut;
use quiver_client::{encode_command, Parser};
use quiver_testkit::acked::Verdict;
use quiver_testkit::process::tail_text;

mod hash;
mod model;

use hash::{field_name, fields_of, mask, FieldValue, FIELDS, SET_FIELDS};
use model::{
    initial, key_name, now_ms, read_keys, render, resolve, Expect, Expiry, Op, State, Step, Ttl,
    Unit, COUNTERS, FIRST_HASH, HASHES, LONG_TTL_S, REGISTERS, UNITS_IN_FLIGHT_MAX,
};

/// Client connections writing at once, each on keys of its own.
const LOAD_THREADS: usize = 3;
/// Most operations written at once before their replies are read.
const BURST_MAX: u64 = 8;
/// Most keys of one MSET (at least 2).
const MSET_KEYS_MAX: u64 = 6;
/// Most keys of one DEL (at least 1).
const DEL_KEYS_MAX: u64 = 3;
const _: () = assert!(
    BURST_MAX * DEL_KEYS_MAX <= UNITS_IN_FLIGHT_MAX as u64,
    "a burst's units fit the search's mask"
);
/// Most fields of one HSET and of one HDEL (at least 1).
const HSET_FIELDS_MAX: u64 = 3;
const HDEL_FIELDS_MAX: u64 = 2;
/// HINCRBY adds from 1 to this much.
const HINCRBY_MAX: u64 = 9;
/// Short TTLs, drawn from this range: some expire before the next check, some after.
const SHORT_TTL_MIN_MS: u64 = 20;
const SHORT_TTL_MAX_MS: u64 = 2_000;
/// The kill comes after this many acknowledged operations (all threads)...
const ACKS_BEFORE_KILL_MIN: u64 = 40;
const ACKS_BEFORE_KILL_SPREAD: u64 = 400;
/// ... plus up to this many microseconds.
const KILL_JITTER_MAX_US: u64 = 5_000;
/// Every `FSYNC_EVERY`th cycle serves with `--durability fsync`, the others with `os`.
const FSYNC_EVERY: usize = 4;
/// Cycles of the CI test.
const CI_CYCLES: usize = 150;
/// The long run's cycles: `QUIVER_SERVER_KILL_CYCLES`, by default `LONG_CYCLES_DEFAULT`.
const CYCLES_ENV: &str = "QUIVER_SERVER_KILL_CYCLES";
const LONG_CYCLES_DEFAULT: usize = 1_000;
/// The long run reports progress every this many cycles.
const PROGRESS_EVERY: usize = 50;
const READ_CHUNK: usize = 64 * 1024;

/// The kinds of operation in the load, with their weights.
#[derive(Clone, Copy)]
enum Kind {
    Set,
    SetEx,
    SetPx,
    Mset,
    Incr,
    Multi,
    Expire,
    Pexpire,
    Del,
    HSet,
    HDel,
    HIncrBy,
    /// EXPIRE (30 days) of a hash.
    HashExpire,
    /// DEL of a hash.
    HashDel,
}

const MIX: [(Kind, u64); 14] = [
    (Kind::Set, 20),
    (Kind::SetEx, 6),
    (Kind::SetPx, 6),
    (Kind::Mset, 15),
    (Kind::Incr, 18),
    (Kind::Multi, 12),
    (Kind::Expire, 6),
    (Kind::Pexpire, 6),
    (Kind::Del, 11),
    (Kind::HSet, 12),
    (Kind::HDel, 5),
    (Kind::HIncrBy, 8),
    (Kind::HashExpire, 3),
    (Kind::HashDel, 3),
];

/// One load thread: its keys' state and what it sent this cycle.
struct Writer {
    thread: usize,
    rng: Rng,
    next_id: u64,
    /// What every key held at the last check.
    base: Vec<State>,
    /// `base` with every operation sent since applied: what the next operation meets.
    current: Vec<State>,
    ops: Vec<Op>,
}

impl Writer {
    fn new(thread: usize, rng: Rng) -> Writer {
        Writer {
            thread,
            rng,
            next_id: 0,
            base: initial(),
            current: initial(),
            ops: Vec::new(),
        }
    }

    fn acked(&self) -> u64 {
        self.ops.iter().filter(|o| o.acked).count() as u64
    }

    /// The acknowledged operations that changed a hash (every MULTI/EXEC does).
    fn acked_on_hashes(&self) -> u64 {
        let on_hash = |o: &&Op| {
            o.units
                .iter()
                .any(|u| u.steps.iter().any(|s| s.key() >= FIRST_HASH))
        };
        self.ops.iter().filter(|o| o.acked).filter(on_hash).count() as u64
    }

    fn in_flight(&self) -> u64 {
        self.ops.len() as u64 - self.acked()
    }

    /// `n` distinct numbers below `of`, in random order (a partial Fisher-Yates shuffle).
    fn distinct(&mut self, n: u64, of: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..of).collect();
        for i in 0..n as usize {
            let j = i + self.rng.below((of - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(n as usize);
        all
    }

    /// `n` distinct registers.
    fn registers(&mut self, n: u64) -> Vec<usize> {
        self.distinct(n, REGISTERS)
    }

    fn hash_key(&mut self) -> usize {
        FIRST_HASH + self.rng.below(HASHES as u64) as usize
    }

    fn short_ttl(&mut self) -> u64 {
        SHORT_TTL_MIN_MS + self.rng.below(SHORT_TTL_MAX_MS - SHORT_TTL_MIN_MS + 1)
    }

    /// Appends `args` to `out`, applies `steps` to `current`.
    fn emit(&mut self, out: &mut BytesMut, args: &[&[u8]], steps: &[Step]) {
        encode_command(out, args);
        for s in steps {
            s.apply_to(&mut self.current[s.key()], 0, 0);
        }
    }

    fn set(&mut self, out: &mut BytesMut, key: usize, ttl: Ttl) -> (Step, Expect, String) {
        let id = self.next_id;
        self.next_id += 1;
        let (name, value) = (key_name(self.thread, key), render(self.thread, id));
        let (option, amount) = match ttl {
            Ttl::None => (None, 0),
            Ttl::Long => (Some("EX"), LONG_TTL_S),
            Ttl::Short(ms) => (Some("PX"), ms),
        };
        let amount_text = amount.to_string();
        let mut args: Vec<&[u8]> = vec![b"SET", name.as_bytes(), value.as_bytes()];
        if let Some(option) = option {
            args.extend([option.as_bytes(), amount_text.as_bytes()]);
        }
        let step = Step::Set { key, id, ttl };
        self.emit(out, &args, &[step]);
        let what = match option {
            Some(o) => format!("SET {name} v{id} {o} {amount}"),
            None => format!("SET {name} v{id}"),
        };
        (step, Expect::Ok, what)
    }

    fn incr(&mut self, out: &mut BytesMut, key: usize) -> (Step, Expect, String) {
        let name = key_name(self.thread, key);
        let State::Count(n) = self.current[key] else {
            unreachable!("{name} is a counter")
        };
        let step = Step::Incr { key };
        self.emit(out, &[b"INCR", name.as_bytes()], &[step]);
        (step, Expect::Int(n + 1), format!("INCR {name}"))
    }

    fn del(&mut self, out: &mut BytesMut, keys: &[usize]) -> (Vec<Step>, Expect, String) {
        let names: Vec<String> = keys.iter().map(|&k| key_name(self.thread, k)).collect();
        // A key with a short TTL may or may not have expired yet.
        let (mut sure, mut maybe) = (0, 0);
        for &k in keys {
            match self.current[k] {
                State::Value {
                    expiry: Expiry::Short { .. },
                    ..
                }
                | State::Hash {
                    expiry: Expiry::Short { .. },
                    ..
                } => maybe += 1,
                State::Value { .. } | State::Hash { .. } => sure += 1,
                State::Absent | State::Count(_) => {}
            }
        }
        let steps: Vec<Step> = keys.iter().map(|&key| Step::Del { key }).collect();
        let mut args: Vec<&[u8]> = vec![b"DEL"];
        args.extend(names.iter().map(|n| n.as_bytes()));
        self.emit(out, &args, &steps);
        let what = format!("DEL {}", names.join(" "));
        (steps, Expect::IntIn(sure, sure + maybe), what)
    }

    /// HSET, HDEL or HINCRBY of the hash `key`, as likely each.
    fn hash_change(&mut self, out: &mut BytesMut, key: usize) -> (Step, Expect, String) {
        match self.rng.below(3) {
            0 => self.hset(out, key),
            1 => self.hdel(out, key),
            _ => self.hincrby(out, key),
        }
    }

    /// Whether `key` surely exists: it holds a value or a hash, without a short TTL that may
    /// have run out. EXPIRE's reply and effect are then known.
    fn surely_present(&self, key: usize) -> bool {
        matches!(
            self.current[key],
            State::Value {
                expiry: Expiry::Never | Expiry::Long,
                ..
            } | State::Hash {
                expiry: Expiry::Never | Expiry::Long,
                ..
            }
        )
    }

    /// EXPIRE (a long `ttl`) or PEXPIRE (a short one) of `key`, surely present.
    fn expire(&mut self, out: &mut BytesMut, key: usize, ttl: Ttl) -> (Step, Expect, String) {
        let name = key_name(self.thread, key);
        let (command, amount) = match ttl {
            Ttl::Long => ("EXPIRE", LONG_TTL_S),
            Ttl::Short(ms) => ("PEXPIRE", ms),
            Ttl::None => unreachable!("EXPIRE gives a TTL"),
        };
        let amount_text = amount.to_string();
        let step = Step::Expire { key, ttl };
        let args: [&[u8]; 3] = [command.as_bytes(), name.as_bytes(), amount_text.as_bytes()];
        self.emit(out, &args, &[step]);
        (step, Expect::Int(1), format!("{command} {name} {amount}"))
    }

    /// `step`, an HSET (each field to the step's value) or an HDEL, as a command. Both answer
    /// how many fields the hash gained or lost.
    fn hset_or_hdel(&mut self, out: &mut BytesMut, step: Step) -> (Step, Expect, String) {
        let (command, key, fields, id) = match step {
            Step::HSet { key, id, fields } => ("HSET", key, fields, Some(id)),
            Step::HDel { key, fields } => ("HDEL", key, fields, None),
            _ => unreachable!("HSET or HDEL"),
        };
        let name = key_name(self.thread, key);
        let names: Vec<String> = fields_of(fields).map(field_name).collect();
        let value = id.map(|id| hash::hset_value(self.thread, id));
        let mut args: Vec<&[u8]> = vec![command.as_bytes(), name.as_bytes()];
        for field in &names {
            args.push(field.as_bytes());
            args.extend(value.as_deref().map(str::as_bytes));
        }
        let before = self.current[key].fields().len();
        self.emit(out, &args, &[step]);
        let after = self.current[key].fields().len();
        let shown_id = id.map_or(String::new(), |id| format!(" v{id}"));
        let what = format!("{command} {name} {}{shown_id}", names.join(" "));
        (step, Expect::Int(before.abs_diff(after) as i64), what)
    }

    /// HSET of 1 to [`HSET_FIELDS_MAX`] fields of the hash `key`, all to one new value.
    fn hset(&mut self, out: &mut BytesMut, key: usize) -> (Step, Expect, String) {
        let id = self.next_id;
        self.next_id += 1;
        let n = 1 + self.rng.below(HSET_FIELDS_MAX);
        let fields = mask(&self.distinct(n, SET_FIELDS));
        self.hset_or_hdel(out, Step::HSet { key, id, fields })
    }

    /// HDEL of 1 to [`HDEL_FIELDS_MAX`] fields of the hash `key`, of either kind.
    fn hdel(&mut self, out: &mut BytesMut, key: usize) -> (Step, Expect, String) {
        let n = 1 + self.rng.below(HDEL_FIELDS_MAX);
        let fields = mask(&self.distinct(n, FIELDS));
        self.hset_or_hdel(out, Step::HDel { key, fields })
    }

    /// HINCRBY of a counter field of the hash `key`.
    fn hincrby(&mut self, out: &mut BytesMut, key: usize) -> (Step, Expect, String) {
        let name = key_name(self.thread, key);
        let field = SET_FIELDS + self.rng.below((FIELDS - SET_FIELDS) as u64) as usize;
        let by = 1 + self.rng.below(HINCRBY_MAX) as i64;
        let (field_text, by_text) = (field_name(field), by.to_string());
        let step = Step::HIncrBy { key, field, by };
        let args: [&[u8]; 4] = [
            b"HINCRBY",
            name.as_bytes(),
            field_text.as_bytes(),
            by_text.as_bytes(),
        ];
        self.emit(out, &args, &[step]);
        let Some(FieldValue::Count(sum)) = self.current[key].fields().get(field) else {
            unreachable!("HINCRBY leaves a count in {name} {field_text}")
        };
        let what = format!("HINCRBY {name} {field_text} {by}");
        (step, Expect::Int(sum), what)
    }

    /// The next operation, appended to `out`.
    fn next_op(&mut self, out: &mut BytesMut) -> Op {
        let total: u64 = MIX.iter().map(|(_, w)| w).sum();
        let mut roll = self.rng.below(total);
        let kind = MIX
            .iter()
            .find(|(_, w)| {
                let hit = roll < *w;
                roll = roll.saturating_sub(*w);
                hit
            })
            .unwrap()
            .0;
        let one = |(step, expect, what): (Step, Expect, String)| Op {
            what,
            units: vec![Unit::new(vec![step])],
            expect: vec![expect],
            acked: false,
        };
        let register = self.rng.below(REGISTERS as u64) as usize;
        match kind {
            Kind::Set => one(self.set(out, register, Ttl::None)),
            Kind::SetEx => one(self.set(out, register, Ttl::Long)),
            Kind::SetPx => {
                let ttl = self.short_ttl();
                one(self.set(out, register, Ttl::Short(ttl)))
            }
            Kind::Incr => {
                let counter = REGISTERS + self.rng.below(COUNTERS as u64) as usize;
                one(self.incr(out, counter))
            }
            Kind::Expire | Kind::Pexpire => {
                if !self.surely_present(register) {
                    return one(self.set(out, register, Ttl::None));
                }
                let ttl = match kind {
                    Kind::Expire => Ttl::Long,
                    _ => Ttl::Short(self.short_ttl()),
                };
                one(self.expire(out, register, ttl))
            }
            Kind::HSet => {
                let hash = self.hash_key();
                one(self.hset(out, hash))
            }
            Kind::HDel => {
                let hash = self.hash_key();
                one(self.hdel(out, hash))
            }
            Kind::HIncrBy => {
                let hash = self.hash_key();
                one(self.hincrby(out, hash))
            }
            Kind::HashExpire => {
                // A long TTL only: the hash then surely exists at the next change, whose reply
                // (and whether it starts a new hash) is known.
                let hash = self.hash_key();
                match self.surely_present(hash) {
                    true => one(self.expire(out, hash, Ttl::Long)),
                    false => one(self.hset(out, hash)),
                }
            }
            Kind::HashDel => {
                let hash = self.hash_key();
                let (steps, expect, what) = self.del(out, &[hash]);
                one((steps[0], expect, what))
            }
            Kind::Del => {
                let n = 1 + self.rng.below(DEL_KEYS_MAX);
                let keys = self.registers(n);
                let (steps, expect, what) = self.del(out, &keys);
                // A multi-key DEL is a plain vector: a crash may keep any of its keys.
                Op {
                    what,
                    units: steps.into_iter().map(|s| Unit::new(vec![s])).collect(),
                    expect: vec![expect],
                    acked: false,
                }
            }
            Kind::Mset => {
                let n = 2 + self.rng.below(MSET_KEYS_MAX - 1);
                let keys = self.registers(n);
                let mut steps = Vec::new();
                let mut pairs = Vec::new();
                for &key in &keys {
                    let id = self.next_id;
                    self.next_id += 1;
                    steps.push(Step::Set {
                        key,
                        id,
                        ttl: Ttl::None,
                    });
                    pairs.push((key_name(self.thread, key), render(self.thread, id)));
                }
                let mut args: Vec<&[u8]> = vec![b"MSET"];
                for (k, v) in &pairs {
                    args.extend([k.as_bytes(), v.as_bytes()]);
                }
                self.emit(out, &args, &steps);
                let shown: Vec<String> = pairs.iter().map(|(k, _)| k.clone()).collect();
                Op {
                    what: format!("MSET {}", shown.join(" ")),
                    units: vec![Unit::new(steps)],
                    expect: vec![Expect::Ok],
                    acked: false,
                }
            }
            Kind::Multi => {
                // SET a, INCR n, DEL c, a change of hash h, and half the time SET b EX and a
                // second change of h (which sees the first): one transaction.
                let with_b = self.rng.below(2) == 0;
                let keys = self.registers(if with_b { 3 } else { 2 });
                let counter = REGISTERS + self.rng.below(COUNTERS as u64) as usize;
                let hash = self.hash_key();
                encode_command(out, &[b"MULTI"]);
                let mut queued = vec![self.set(out, keys[0], Ttl::None), self.incr(out, counter)];
                let (del_steps, del_expect, del_what) = self.del(out, &keys[1..2]);
                queued.push((del_steps[0], del_expect, del_what));
                queued.push(self.hash_change(out, hash));
                if with_b {
                    queued.push(self.set(out, keys[2], Ttl::Long));
                    queued.push(self.hash_change(out, hash));
                }
                encode_command(out, &[b"EXEC"]);
                let mut expect = vec![Expect::Ok];
                expect.extend(queued.iter().map(|_| Expect::Queued));
                expect.push(Expect::Exec(queued.iter().map(|q| q.1.clone()).collect()));
                let whats: Vec<&str> = queued.iter().map(|q| q.2.as_str()).collect();
                Op {
                    what: format!("MULTI; {}; EXEC", whats.join("; ")),
                    units: vec![Unit::new(queued.iter().map(|q| q.0).collect())],
                    expect,
                    acked: false,
                }
            }
        }
    }

    /// Writes bursts until the server dies. An error before the kill, or a reply other than
    /// the expected one, is the test failing.
    fn run(&mut self, addr: &str, acks: &AtomicU64, killed: &AtomicBool) -> Result<(), String> {
        let mut stream = match TcpStream::connect(addr) {
            Ok(stream) => stream,
            Err(e) => return self.died(0, &e, killed),
        };
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream.set_write_timeout(Some(WAIT)).unwrap();
        let (mut parser, mut buf) = (Parser::new(), BytesMut::new());
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            let first = self.ops.len();
            let mut request = BytesMut::new();
            for _ in 0..1 + self.rng.below(BURST_MAX) {
                let op = self.next_op(&mut request);
                self.ops.push(op);
            }
            let sent = now_ms();
            for op in &mut self.ops[first..] {
                op.set_times(Some(sent), sent);
            }
            if let Err(e) = stream.write_all(&request) {
                return self.died(first, &e, killed);
            }
            for i in first..self.ops.len() {
                for r in 0..self.ops[i].expect.len() {
                    let reply = match next_reply(&mut stream, &mut parser, &mut buf, &mut chunk) {
                        Ok(reply) => reply,
                        Err(Ok(e)) => return self.died(i, &e, killed),
                        Err(Err(e)) => return Err(format!("thread {}: {e}", self.thread)),
                    };
                    let op = &self.ops[i];
                    if !op.expect[r].fits(&reply) {
                        return Err(format!(
                            "thread {}: {} answered {reply:?} (reply {r}), expected {:?}",
                            self.thread, op.what, op.expect[r]
                        ));
                    }
                }
                self.ops[i].acked = true;
                self.ops[i].set_times(None, now_ms());
                acks.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// The connection failed: the operations from `from` on are in flight (the time now is
    /// after the server's death).
    fn died(&mut self, from: usize, e: &std::io::Error, killed: &AtomicBool) -> Result<(), String> {
        let now = now_ms();
        for op in &mut self.ops[from..] {
            op.set_times(None, now);
        }
        if killed.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(format!(
                "thread {}: the connection failed before the kill: {e}",
                self.thread
            ))
        }
    }
}

/// The next reply on `stream`: `Err(Ok(_))` when the connection failed, `Err(Err(_))` for
/// bytes that are not RESP.
fn next_reply(
    stream: &mut TcpStream,
    parser: &mut Parser,
    buf: &mut BytesMut,
    chunk: &mut [u8],
) -> Result<Value, Result<std::io::Error, String>> {
    loop {
        match parser.parse(buf) {
            Ok(Some(reply)) => return Ok(reply),
            Ok(None) => {}
            Err(e) => return Err(Err(format!("a reply that is not RESP: {e}"))),
        }
        match stream.read(chunk) {
            Ok(0) => return Err(Ok(std::io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Ok(e)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The loop

#[derive(Default)]
struct Tally {
    cycles: usize,
    acked_checked: u64,
    /// Of `acked_checked`, those that changed a hash.
    hash_acked_checked: u64,
    lost: u64,
    wrong: u64,
    in_flight: u64,
    /// In-flight operations the check's explanations have taking effect.
    in_flight_applied: u64,
}

impl Tally {
    fn line(&self) -> String {
        format!(
            "server crash loop: {} cycles, {} acknowledged operations checked, {} lost, {} wrong, \
             {} in flight at kills",
            self.cycles, self.acked_checked, self.lost, self.wrong, self.in_flight
        )
    }
}

/// Checks every key of every thread on `server`, after the kill that ended cycle `cycle`
/// (whose server logged to `killed_log`); each thread then starts from what was found.
fn check_all(
    server: &Served,
    writers: &mut [Writer],
    cycle: Option<usize>,
    tally: &mut Tally,
    killed_log: Option<&Path>,
) {
    let mut conn = server.client();
    for w in writers.iter_mut() {
        let reading = read_keys(&mut conn, w.thread);
        match resolve(w.thread, &w.base, &w.ops, &reading) {
            Ok(explained) => {
                tally.acked_checked += w.acked();
                tally.hash_acked_checked += w.acked_on_hashes();
                tally.in_flight_applied += explained.in_flight_applied;
                w.base = explained.state;
                w.current = w.base.clone();
                w.ops.clear();
            }
            Err(f) => {
                match f.verdict {
                    Verdict::Lost => tally.lost += 1,
                    Verdict::Wrong => tally.wrong += 1,
                }
                let cycle = cycle.map_or("before any kill".into(), |c| format!("cycle {c}"));
                panic!(
                    "{cycle}: {f}\n{}\nstderr of the killed server (tail):\n{}\nstderr of the \
                     restarted server (tail):\n{}",
                    tally.line(),
                    tail_text(&killed_log.map(read_log).unwrap_or_default()),
                    tail_text(&server.stderr())
                );
            }
        }
    }
}

/// `cycles` times: start the server on the same directory, check every key, run the load,
/// kill -9 at a random moment. Then a last start, check and clean stop.
fn crash_loop(cycles: usize) -> Tally {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let mut rng = Rng::new(seed_from_env(SEED_ENV));
    let mut writers: Vec<Writer> = (0..LOAD_THREADS)
        .map(|t| Writer::new(t, Rng::new(rng.next_u64())))
        .collect();
    let mut tally = Tally::default();
    let mut killed_log: Option<PathBuf> = None;
    for cycle in 0..cycles {
        let durability = match cycle % FSYNC_EVERY == FSYNC_EVERY - 1 {
            true => "fsync",
            false => "os",
        };
        let mut server = serve(&dir, &logs, &["--durability", durability]);
        let after = cycle.checked_sub(1);
        check_all(
            &server,
            &mut writers,
            after,
            &mut tally,
            killed_log.as_deref(),
        );
        let acks = Arc::new(AtomicU64::new(0));
        let killed = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = writers
            .drain(..)
            .map(|mut w| {
                let (addr, acks, killed) = (server.addr.clone(), acks.clone(), killed.clone());
                std::thread::spawn(move || {
                    let result = w.run(&addr, &acks, &killed);
                    (w, result)
                })
            })
            .collect();
        let target = ACKS_BEFORE_KILL_MIN + rng.below(ACKS_BEFORE_KILL_SPREAD);
        let deadline = Instant::now() + WAIT;
        // A thread that ends before the kill has failed: kill, then report it.
        while acks.load(Ordering::SeqCst) < target && !threads.iter().any(|t| t.is_finished()) {
            assert!(
                Instant::now() < deadline,
                "cycle {cycle}: the load made no progress; stderr:\n{}",
                tail_text(&server.stderr())
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros(rng.below(KILL_JITTER_MAX_US)));
        killed.store(true, Ordering::SeqCst);
        server.kill_9();
        for thread in threads {
            let (w, result) = thread.join().expect("a load thread panicked");
            if let Err(message) = result {
                panic!(
                    "cycle {cycle} ({durability}): {message}\nstderr (tail):\n{}",
                    tail_text(&server.stderr())
                );
            }
            tally.in_flight += w.in_flight();
            writers.push(w);
        }
        tally.cycles += 1;
        killed_log = Some(server.stderr_path.clone());
        if (cycle + 1) % PROGRESS_EVERY == 0 {
            eprintln!("after {} cycles: {}", cycle + 1, tally.line());
        }
    }
    let server = serve(&dir, &logs, &["--durability", "os"]);
    let after = cycles.checked_sub(1);
    check_all(
        &server,
        &mut writers,
        after,
        &mut tally,
        killed_log.as_deref(),
    );
    server.stop_with(libc::SIGTERM);
    tally
}

fn report(tally: &Tally) {
    println!("{}", tally.line());
    println!(
        "(the check's explanations have {} of the {} operations in flight taking effect)",
        tally.in_flight_applied, tally.in_flight
    );
    println!(
        "({} of the acknowledged operations checked changed a hash, every MULTI/EXEC among them)",
        tally.hash_acked_checked
    );
}

#[test]
fn server_crash_loop() {
    report(&crash_loop(CI_CYCLES));
}

#[test]
#[ignore = "long: QUIVER_SERVER_KILL_CYCLES cycles (1000 by default); figures in docs/testing.md"]
fn server_crash_loop_long() {
    let cycles = std::env::var(CYCLES_ENV).map_or(LONG_CYCLES_DEFAULT, |v| {
        v.parse()
            .expect("QUIVER_SERVER_KILL_CYCLES: a number of cycles")
    });
    let started = Instant::now();
    report(&crash_loop(cycles));
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    println!("({minutes:.1} minutes)");
}
