//! What the server must show after a kill: the keys' states, the operations' effects on them
//! (as units that take effect whole or not at all), and the check ([`resolve`]) that finds which
//! in-flight operations took effect.

use super::super::*;

use bytes::Bytes;
use quiver_testkit::acked::{Finding, Verdict};

use super::hash::{fields_of, FieldValue, Fields};

/// Registers (string values) each load thread owns.
pub(super) const REGISTERS: usize = 48;
/// Counters (INCR only) each load thread owns.
pub(super) const COUNTERS: usize = 8;
/// Hashes each load thread owns: few, so that each sees several changes a cycle.
pub(super) const HASHES: usize = 6;
/// The keys of a thread: registers, then counters, then hashes.
pub(super) const FIRST_HASH: usize = REGISTERS + COUNTERS;
pub(super) const KEYS: usize = FIRST_HASH + HASHES;
const _: () = assert!(KEYS <= 128, "a set of keys is a u128 bit mask");
/// Most units in flight on one connection: the search marks those it applies in a u64.
pub(super) const UNITS_IN_FLIGHT_MAX: usize = 64;
/// A TTL that outlives any run: the key must survive every kill with it.
pub(super) const LONG_TTL_S: u64 = 30 * 24 * 3600;
const LONG_TTL_MS: i64 = LONG_TTL_S as i64 * 1000;
/// Slack between our clock readings and the server's (the same clock, read at other moments
/// and truncated to milliseconds) when judging whether a short TTL has passed.
const EXPIRY_MARGIN_MS: u64 = 50;
/// Values are padded to `id * PAD_STEP % VALUE_PAD_MAX` bytes, every `LARGE_VALUE_EVERY`th to
/// `LARGE_VALUE_BYTES`: records of many sizes.
const PAD_STEP: u64 = 37;
const VALUE_PAD_MAX: u64 = 600;
const LARGE_VALUE_EVERY: u64 = 64;
const LARGE_VALUE_BYTES: usize = 6_000;
/// Nodes the search for an explanation may visit (a few dozen in practice: the order on each
/// key prunes it); past this the test fails rather than hang.
const SEARCH_NODES_MAX: u64 = 1 << 22;
/// Bytes of a value shown in a message.
const SHOWN_VALUE_BYTES: usize = 40;
/// PTTL's answers for an absent key and for one without expiry.
const PTTL_ABSENT: i64 = -2;
const PTTL_NO_EXPIRY: i64 = -1;

/// Milliseconds since the Unix epoch: the clock the server measures expiry on.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Key `key` of load thread `thread`.
pub(super) fn key_name(thread: usize, key: usize) -> String {
    if key < REGISTERS {
        format!("kl:t{thread}:r{key}")
    } else if key < FIRST_HASH {
        format!("kl:t{thread}:n{}", key - REGISTERS)
    } else {
        format!("kl:t{thread}:h{}", key - FIRST_HASH)
    }
}

/// The value `id` of thread `thread`: unique, so a value read names the write it came from.
pub(super) fn render(thread: usize, id: u64) -> String {
    let pad = if id.is_multiple_of(LARGE_VALUE_EVERY) {
        LARGE_VALUE_BYTES
    } else {
        (id * PAD_STEP % VALUE_PAD_MAX) as usize
    };
    format!("t{thread}:v{id}:{}", "x".repeat(pad))
}

/// The TTL a command gives.
#[derive(Clone, Copy, Debug)]
pub(super) enum Ttl {
    None,
    Long,
    Short(u64),
}

/// A register's or a hash's expiry.
#[derive(Clone, Copy, Debug)]
pub(super) enum Expiry {
    Never,
    Long,
    /// The server's deadline lies between `sent_ms + ttl_ms` (it applied the command after we
    /// sent it) and `done_ms + ttl_ms` (before its reply, or its death, reached us).
    Short {
        ttl_ms: u64,
        sent_ms: u64,
        done_ms: u64,
    },
}

/// What a key holds.
#[derive(Clone, Copy, Debug)]
pub(super) enum State {
    Absent,
    Value {
        id: u64,
        expiry: Expiry,
    },
    /// A counter (0: absent).
    Count(i64),
    /// A hash, never without fields (a hash loses its key with its last field).
    Hash {
        fields: Fields,
        expiry: Expiry,
    },
}

impl State {
    /// The fields of the hash held (none when absent).
    pub(super) fn fields(self) -> Fields {
        match self {
            State::Hash { fields, .. } => fields,
            _ => Fields::EMPTY,
        }
    }
}

/// Every key before the first write.
pub(super) fn initial() -> Vec<State> {
    (0..KEYS)
        .map(|k| match (REGISTERS..FIRST_HASH).contains(&k) {
            true => State::Count(0),
            false => State::Absent,
        })
        .collect()
}

/// Changes the hash `state` holds (absent: a new one, without expiry) by `change`, keeping its
/// expiry; a hash left without fields is gone, as in Redis.
fn change_hash(state: &mut State, change: impl FnOnce(&mut Fields)) {
    let (mut fields, expiry) = match *state {
        State::Hash { fields, expiry } => (fields, expiry),
        _ => (Fields::EMPTY, Expiry::Never),
    };
    change(&mut fields);
    *state = match fields.is_empty() {
        true => State::Absent,
        false => State::Hash { fields, expiry },
    };
}

/// One command's effect on one key. HSET (each field to the value `id`) and HDEL name their
/// fields as a bit mask (`hash::mask`).
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    Set { key: usize, id: u64, ttl: Ttl },
    Incr { key: usize },
    Expire { key: usize, ttl: Ttl },
    Del { key: usize },
    HSet { key: usize, id: u64, fields: u8 },
    HDel { key: usize, fields: u8 },
    HIncrBy { key: usize, field: usize, by: i64 },
}

impl Step {
    pub(super) fn key(self) -> usize {
        match self {
            Step::Set { key, .. }
            | Step::Incr { key }
            | Step::Expire { key, .. }
            | Step::Del { key }
            | Step::HSet { key, .. }
            | Step::HDel { key, .. }
            | Step::HIncrBy { key, .. } => key,
        }
    }

    pub(super) fn apply_to(self, state: &mut State, sent_ms: u64, done_ms: u64) {
        let expiry = |ttl| match ttl {
            Ttl::None => Expiry::Never,
            Ttl::Long => Expiry::Long,
            Ttl::Short(ttl_ms) => Expiry::Short {
                ttl_ms,
                sent_ms,
                done_ms,
            },
        };
        match (self, state) {
            (Step::Set { id, ttl, .. }, state) => {
                *state = State::Value {
                    id,
                    expiry: expiry(ttl),
                }
            }
            (Step::Incr { .. }, State::Count(n)) => *n += 1,
            (
                Step::Expire { ttl, .. },
                State::Value { expiry: e, .. } | State::Hash { expiry: e, .. },
            ) => *e = expiry(ttl),
            (Step::Del { .. }, state) => *state = State::Absent,
            (Step::HSet { id, fields, .. }, state) => change_hash(state, |h| {
                for f in fields_of(fields) {
                    h.set(f, FieldValue::Id(id));
                }
            }),
            (Step::HDel { fields, .. }, state) => change_hash(state, |h| {
                for f in fields_of(fields) {
                    h.remove(f);
                }
            }),
            (Step::HIncrBy { field, by, .. }, state) => change_hash(state, |h| {
                let sum = match h.get(field) {
                    Some(FieldValue::Count(n)) => n + by,
                    // The load never sends HINCRBY to a field HSET writes (it would fail).
                    Some(FieldValue::Id(_)) => unreachable!("HINCRBY of an HSET field"),
                    None => by,
                };
                h.set(field, FieldValue::Count(sum));
            }),
            // EXPIRE of an absent key does nothing (the load sends none); counters only count.
            (Step::Incr { .. } | Step::Expire { .. }, _) => {}
        }
    }
}

/// Steps that take effect together or not at all.
#[derive(Clone, Debug)]
pub(super) struct Unit {
    pub(super) steps: Vec<Step>,
    pub(super) sent_ms: u64,
    pub(super) done_ms: u64,
}

impl Unit {
    pub(super) fn new(steps: Vec<Step>) -> Unit {
        Unit {
            steps,
            sent_ms: 0,
            done_ms: 0,
        }
    }

    fn keys(&self) -> u128 {
        self.steps.iter().fold(0, |m, s| m | 1 << s.key())
    }

    fn apply(&self, model: &mut [State]) {
        for step in &self.steps {
            step.apply_to(&mut model[step.key()], self.sent_ms, self.done_ms);
        }
    }
}

/// A reply the load expects.
#[derive(Clone, Debug)]
pub(super) enum Expect {
    Ok,
    Queued,
    Int(i64),
    IntIn(i64, i64),
    Exec(Vec<Expect>),
}

impl Expect {
    pub(super) fn fits(&self, reply: &Value) -> bool {
        match (self, reply) {
            (Expect::Ok, Value::Simple(s)) => s == "OK",
            (Expect::Queued, Value::Simple(s)) => s == "QUEUED",
            (Expect::Int(n), Value::Integer(m)) => n == m,
            (Expect::IntIn(lo, hi), Value::Integer(m)) => (lo..=hi).contains(&m),
            (Expect::Exec(items), Value::Array(got)) => {
                items.len() == got.len() && items.iter().zip(got).all(|(e, r)| e.fits(r))
            }
            _ => false,
        }
    }
}

/// One command, or MULTI ... EXEC, as sent.
pub(super) struct Op {
    /// Readable, for messages.
    pub(super) what: String,
    pub(super) units: Vec<Unit>,
    /// One per reply.
    pub(super) expect: Vec<Expect>,
    pub(super) acked: bool,
}

impl Op {
    pub(super) fn set_times(&mut self, sent_ms: Option<u64>, done_ms: u64) {
        for unit in &mut self.units {
            if let Some(sent) = sent_ms {
                unit.sent_ms = sent;
            }
            unit.done_ms = done_ms;
        }
    }
}

/// What GET (a register, a counter) or HGETALL (a hash) showed of a key.
pub(super) enum Shown {
    Absent,
    Value(Bytes),
    /// Field and value pairs, in the order HGETALL gave them.
    Hash(Vec<(Bytes, Bytes)>),
}

/// GET or HGETALL, and PTTL, of one key.
pub(super) struct Obs {
    pub(super) shown: Shown,
    pub(super) pttl: i64,
}

/// Every key of one thread, read between `start_ms` and `end_ms`.
pub(super) struct Reading {
    pub(super) obs: Vec<Obs>,
    pub(super) start_ms: u64,
    pub(super) end_ms: u64,
}

/// The command reading key `key` whole: GET of a string, HGETALL of a hash (GET of a hash is
/// WRONGTYPE).
fn read_command(key: usize) -> &'static str {
    match key < FIRST_HASH {
        true => "GET",
        false => "HGETALL",
    }
}

/// GET or HGETALL, and PTTL, of every key of `thread`, in one pipeline.
pub(super) fn read_keys(conn: &mut Connection, thread: usize) -> Reading {
    let names: Vec<String> = (0..KEYS).map(|k| key_name(thread, k)).collect();
    let start_ms = now_ms();
    let mut pipeline = conn.pipeline();
    for (key, name) in names.iter().enumerate() {
        pipeline
            .command(&[read_command(key).as_bytes(), name.as_bytes()])
            .command(&[b"PTTL", name.as_bytes()]);
    }
    let replies = pipeline
        .execute()
        .expect("GET or HGETALL, and PTTL, of every key");
    let end_ms = now_ms();
    let obs = replies
        .chunks(2)
        .zip(&names)
        .enumerate()
        .map(|(key, (pair, name))| Obs {
            shown: match &pair[0] {
                Ok(Value::Bulk(v)) => Shown::Value(v.clone()),
                Ok(Value::Null) => Shown::Absent,
                // HGETALL of an absent key answers no fields.
                Ok(Value::Array(items)) if items.is_empty() => Shown::Absent,
                // The connection speaks RESP2: HGETALL's pairs come flat, field then value.
                Ok(Value::Array(items)) => Shown::Hash(
                    items
                        .chunks(2)
                        .map(|pair| match pair {
                            [Value::Bulk(f), Value::Bulk(v)] => (f.clone(), v.clone()),
                            _ => panic!("HGETALL {name} answered {items:?}"),
                        })
                        .collect(),
                ),
                other => panic!("{} {name} answered {other:?}", read_command(key)),
            },
            pttl: match &pair[1] {
                Ok(Value::Integer(n)) => *n,
                other => panic!("PTTL {name} answered {other:?}"),
            },
        })
        .collect();
    Reading {
        obs,
        start_ms,
        end_ms,
    }
}

/// Whether `obs` shows `state`.
fn fits(thread: usize, state: &State, obs: &Obs, reading: &Reading) -> bool {
    let absent = matches!(obs.shown, Shown::Absent) && obs.pttl == PTTL_ABSENT;
    let shows = |expected: &[u8]| matches!(&obs.shown, Shown::Value(v) if v == expected);
    match *state {
        State::Absent | State::Count(0) => absent,
        State::Count(n) => shows(n.to_string().as_bytes()) && obs.pttl == PTTL_NO_EXPIRY,
        State::Value { id, expiry } => {
            let present = shows(render(thread, id).as_bytes());
            expiry_fits(expiry, present, absent, obs, reading)
        }
        State::Hash { fields, expiry } => {
            let present =
                matches!(&obs.shown, Shown::Hash(pairs) if fields.shown_in(thread, pairs));
            expiry_fits(expiry, present, absent, obs, reading)
        }
    }
}

/// Whether a key with `expiry`, found `present` with the expected value or `absent` (PTTL -2
/// too), fits `obs`'s PTTL.
fn expiry_fits(expiry: Expiry, present: bool, absent: bool, obs: &Obs, reading: &Reading) -> bool {
    match expiry {
        Expiry::Never => present && obs.pttl == PTTL_NO_EXPIRY,
        Expiry::Long => present && obs.pttl > 0 && obs.pttl <= LONG_TTL_MS,
        Expiry::Short {
            ttl_ms,
            sent_ms,
            done_ms,
        } => {
            // Absent once the deadline may have passed, present until it surely has
            // (PTTL, read after the value, may find it just expired).
            let may_have_passed = reading.end_ms + EXPIRY_MARGIN_MS >= sent_ms + ttl_ms;
            let surely_not = reading.start_ms <= done_ms + ttl_ms + EXPIRY_MARGIN_MS;
            let pttl_fits = obs.pttl == PTTL_ABSENT || (0..=ttl_ms as i64).contains(&obs.pttl);
            (absent && may_have_passed) || (present && surely_not && pttl_fits)
        }
    }
}

/// Finds which of `units` (in flight, in order) took effect, given that a unit takes effect on
/// all its keys or none, on each key only after the units before it there, and that each key
/// then fits its observation (checked once the last unit on it is decided). Returns the state
/// that choice leaves, and the units applied (bit `i`: `units[i]`).
fn search(
    units: &[&Unit],
    i: usize,
    model: Vec<State>,
    blocked: u128,
    last: &[Option<usize>],
    fits: &dyn Fn(usize, &State) -> bool,
    budget: &mut u64,
) -> Option<(Vec<State>, u64)> {
    let Some(unit) = units.get(i) else {
        return Some((model, 0));
    };
    *budget = budget
        .checked_sub(1)
        .expect("the search for an explanation visited SEARCH_NODES_MAX nodes");
    let keys = unit.keys();
    let settled =
        |m: &[State]| (0..KEYS).all(|k| keys & 1 << k == 0 || last[k] != Some(i) || fits(k, &m[k]));
    if keys & blocked == 0 {
        let mut applied = model.clone();
        unit.apply(&mut applied);
        if settled(&applied) {
            if let Some((found, mask)) = search(units, i + 1, applied, blocked, last, fits, budget)
            {
                return Some((found, mask | 1 << i));
            }
        }
    }
    // Not applied: nothing later on its keys can have been.
    match settled(&model) {
        true => search(units, i + 1, model, blocked | keys, last, fits, budget),
        false => None,
    }
}

/// Where the check reads every key.
const MEMBER: &str = "the restarted server";

fn describe(thread: usize, state: &State) -> String {
    match *state {
        State::Absent | State::Count(0) => "absent".into(),
        State::Count(n) => format!("{n:?} (no TTL)"),
        State::Value { id, expiry } => format!(
            "v{id} ({} bytes, {})",
            render(thread, id).len(),
            describe_expiry(expiry)
        ),
        State::Hash { fields, expiry } => {
            format!("{} ({})", fields.describe(), describe_expiry(expiry))
        }
    }
}

fn describe_expiry(expiry: Expiry) -> String {
    match expiry {
        Expiry::Never => "no TTL".to_string(),
        Expiry::Long => format!("a TTL of {LONG_TTL_S} s"),
        Expiry::Short {
            ttl_ms,
            sent_ms,
            done_ms,
        } => format!("a TTL of {ttl_ms} ms, sent at {sent_ms}, done by {done_ms}"),
    }
}

/// `v` quoted, cut to [`SHOWN_VALUE_BYTES`], with its length.
fn describe_bytes(v: &[u8]) -> String {
    let cut = &v[..v.len().min(SHOWN_VALUE_BYTES)];
    let more = if cut.len() < v.len() { "..." } else { "" };
    format!(
        "{:?}{more} ({} bytes)",
        String::from_utf8_lossy(cut),
        v.len()
    )
}

fn describe_obs(obs: &Obs, reading: &Reading) -> String {
    let value = match &obs.shown {
        Shown::Absent => "absent".to_string(),
        Shown::Value(v) => describe_bytes(v),
        Shown::Hash(pairs) => {
            let pairs: Vec<String> = pairs
                .iter()
                .map(|(f, v)| format!("{}: {}", String::from_utf8_lossy(f), describe_bytes(v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
    };
    let (start, end) = (reading.start_ms, reading.end_ms);
    format!(
        "{value}, PTTL {} (read between {start} and {end})",
        obs.pttl
    )
}

/// Key `key` fits none of `expected`: lost if it shows nothing or a state older than its last
/// acknowledged write, else wrong.
fn key_failure(
    thread: usize,
    base: &[State],
    acked: &[Op],
    key: usize,
    expected: &[State],
    reading: &Reading,
) -> Finding {
    let obs = &reading.obs[key];
    let mut state = base[key];
    let mut older = vec![state];
    for unit in acked.iter().flat_map(|o| &o.units) {
        for step in unit.steps.iter().filter(|s| s.key() == key) {
            step.apply_to(&mut state, unit.sent_ms, unit.done_ms);
            older.push(state);
        }
    }
    older.pop();
    let older = older.iter().any(|s| fits(thread, s, obs, reading));
    let shown: Vec<String> = expected.iter().map(|s| describe(thread, s)).collect();
    Finding {
        verdict: Verdict::of(matches!(obs.shown, Shown::Absent), older),
        key: key_name(thread, key),
        member: MEMBER.to_string(),
        expected: shown.join(" or "),
        found: describe_obs(obs, reading),
    }
}

/// What the check explained: the keys' states now, and how many in-flight operations took
/// effect in the explanation (one that may have or not counts as taken).
pub(super) struct Explained {
    pub(super) state: Vec<State>,
    pub(super) in_flight_applied: u64,
}

/// Explains what the keys of `thread` show, after `ops` (acknowledged ones first, then those
/// in flight) from `base`.
pub(super) fn resolve(
    thread: usize,
    base: &[State],
    ops: &[Op],
    reading: &Reading,
) -> Result<Explained, Finding> {
    let fit = |key: usize, state: &State| fits(thread, state, &reading.obs[key], reading);
    let acked_count = ops.iter().take_while(|o| o.acked).count();
    let (acked_ops, in_flight) = ops.split_at(acked_count);
    assert!(in_flight.iter().all(|o| !o.acked), "replies come in order");
    let mut acked = base.to_vec();
    for unit in acked_ops.iter().flat_map(|o| &o.units) {
        unit.apply(&mut acked);
    }
    let units: Vec<&Unit> = in_flight.iter().flat_map(|o| &o.units).collect();
    assert!(units.len() <= UNITS_IN_FLIGHT_MAX);
    let mut last = vec![None; KEYS];
    for (i, unit) in units.iter().enumerate() {
        for step in &unit.steps {
            last[step.key()] = Some(i);
        }
    }
    let fail =
        |key, expected: &[State]| key_failure(thread, base, acked_ops, key, expected, reading);
    for key in (0..KEYS).filter(|&k| last[k].is_none()) {
        if !fit(key, &acked[key]) {
            return Err(fail(key, &[acked[key]]));
        }
    }
    let mut budget = SEARCH_NODES_MAX;
    if let Some((state, mask)) = search(&units, 0, acked.clone(), 0, &last, &fit, &mut budget) {
        let mut first = 0;
        let mut in_flight_applied = 0;
        for op in in_flight {
            let op_mask = ((1u128 << op.units.len()) - 1) << first;
            in_flight_applied += u64::from(u128::from(mask) & op_mask != 0);
            first += op.units.len();
        }
        // A short TTL found run out: the key is absent from now on.
        let state = state
            .iter()
            .zip(&reading.obs)
            .map(|(s, o)| match (s, &o.shown) {
                (State::Value { .. } | State::Hash { .. }, Shown::Absent) => State::Absent,
                _ => *s,
            })
            .collect();
        return Ok(Explained {
            state,
            in_flight_applied,
        });
    }
    // No choice explains all: a key that no prefix of its own steps explains...
    let touched: Vec<usize> = (0..KEYS).filter(|&k| last[k].is_some()).collect();
    for &key in &touched {
        let mut state = acked[key];
        let mut candidates = vec![state];
        for unit in &units {
            for step in unit.steps.iter().filter(|s| s.key() == key) {
                step.apply_to(&mut state, unit.sent_ms, unit.done_ms);
                candidates.push(state);
            }
        }
        if !candidates.iter().any(|s| fit(key, s)) {
            return Err(fail(key, &candidates));
        }
    }
    // ... or in-flight operations that took effect in part, or out of order on some key.
    let names: Vec<String> = touched.iter().map(|&k| key_name(thread, k)).collect();
    let whats: Vec<&str> = in_flight.iter().map(|o| o.what.as_str()).collect();
    let found: Vec<String> = touched
        .iter()
        .zip(&names)
        .map(|(&k, name)| format!("{name}: {}", describe_obs(&reading.obs[k], reading)))
        .collect();
    Err(Finding {
        verdict: Verdict::Wrong,
        key: names.join(" "),
        member: MEMBER.to_string(),
        expected: format!(
            "the operations in flight taking effect all or nothing, in order on each key: {}",
            whats.join(" | ")
        ),
        found: found.join("; "),
    })
}

// The check's own tests: it finds what it is there to find.
mod tests;
