//! What a key of the chain crash loop may hold, from what its one writer sent: the states it
//! may be in (each with the write that gave it), narrowed by every acknowledged reply and
//! widened by every write whose outcome is unknown (in flight when a node died).
//!
//! A key has one writer, whose operations are sequential, so with unique values the rule is
//! exact: a key holds the state its last acknowledged write gave it, or one of the in-flight
//! writes after it took effect (a counter: its last acknowledged value plus any of the
//! in-flight INCRs after it; a DEL in flight may have reset it; a hash: its fields, in order
//! while it is small, as any of the in-flight HSETs, HDELs, HINCRBYs and DELs after it would leave them, in the
//! order sent). An acknowledged hash write's reply tells which of the states it may have met
//! it did, each giving its own state after it. Anything else is a finding: **lost** when the
//! key shows nothing where something was acknowledged, an older value than the last
//! acknowledged one, a counter short of its acknowledged count, or a hash missing a field of
//! every state it may hold or holding it at an older value; **wrong** otherwise (a value never
//! written, a counter past its bound, a small hash's fields in another order, members that disagree,
//! an MSET in flight seen on some of its keys only, a FLUSHALL in flight seen on some keys of a
//! range only, a reply that no state explains).
//!
//! A FLUSHALL is a write of every key: sent while the writers wait, it takes the next number
//! of each writer's sequence.

use quiver_testkit::acked::{Finding, Verdict};

use super::hash::{behind, Fields, HashWrite};

/// A key's kind: registers take SET, MSET and DEL; counters INCR and DEL; hashes HSET, HDEL,
/// HINCRBY and DEL; all FLUSHALL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Register,
    Counter,
    Hash,
}

/// What a key holds when present: a string (a register's value, a counter's number; GET's
/// reply) or a hash's fields (HGETALL's reply, in its order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    Text(String),
    Hash(Fields),
}

/// The most states a key may hold at once: each write in flight may double them (a hash keeps
/// several through acknowledged writes), and a cycle has a few in flight per writer.
const POSSIBLE_MAX: usize = 1 << 12;

/// A write of the load, on one key (an MSET is one per key, with the same number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Set(String),
    Del,
    Incr,
    /// A FLUSHALL: the key deleted with every other key of its range.
    Flush,
    Hash(HashWrite),
}

/// How a write ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// SET / MSET answered OK (FLUSHALL: every node answered OK).
    Ok,
    /// DEL answered this count (of this key: every DEL of the load has one key).
    Deleted(i64),
    /// INCR answered this value.
    Incremented(i64),
    /// HSET, HDEL or HINCRBY answered this integer.
    Answered(i64),
    /// Refused before any effect (MOVED, CLUSTERDOWN, TRYAGAIN, a connection refused, ...).
    Refused,
    /// May or may not have taken effect (the connection broke with it in flight).
    Unknown,
}

/// A state the key may hold and the write that gave it: that write's number in its writer's
/// sequence (0: the state before the first), and whether it was acknowledged (or, after a
/// check, seen).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub op: u64,
    pub value: Option<Held>,
    pub acked: bool,
}

/// The value of write `op` of writer `writer`, `pad` filler bytes long after its name (values
/// are unique: a value read names its write).
pub fn value(writer: usize, op: u64, pad: usize) -> String {
    format!("w{writer}.{op}.{}", "x".repeat(pad))
}

/// The write number a value of [`value`]'s form names.
pub fn op_of(value: &str) -> Option<u64> {
    value.strip_prefix('w')?.split('.').nth(1)?.parse().ok()
}

/// A state as a message shows it: values by their names without the filler.
pub fn show(value: &Option<Held>) -> String {
    let text = |v: &str| match v.rfind('.') {
        Some(end) if v.starts_with('w') => format!("{:?} (+{} bytes)", &v[..end], v.len()),
        _ => format!("{v:?}"),
    };
    match value {
        None => "absent".to_string(),
        Some(Held::Text(v)) => text(v),
        Some(Held::Hash(fields)) => {
            let pairs: Vec<String> = fields
                .pairs()
                .iter()
                .map(|(f, v)| format!("{f}: {}", text(v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
    }
}

/// A counter's number (absent reads as 0, as INCR takes it).
fn number(value: &Option<Held>) -> Option<i64> {
    match value {
        None => Some(0),
        Some(Held::Text(v)) => v.parse().ok(),
        Some(Held::Hash(_)) => None,
    }
}

/// The hash a state holds (`None`: absent, as a hash write takes it).
fn hash_of(value: &Option<Held>) -> Option<&Fields> {
    match value {
        Some(Held::Hash(fields)) => Some(fields),
        _ => None,
    }
}

/// One key's model.
#[derive(Clone, Debug)]
pub struct KeyModel {
    pub name: String,
    pub kind: KeyKind,
    /// The states it may hold now (distinct values; of a value reached twice, the later write).
    possible: Vec<Origin>,
    /// The last write acknowledged (or seen at a check): nothing older may show.
    acked_op: u64,
}

impl KeyModel {
    /// A key nothing has written.
    pub fn new(name: String, kind: KeyKind) -> KeyModel {
        KeyModel {
            name,
            kind,
            possible: vec![Origin {
                op: 0,
                value: None,
                acked: true,
            }],
            acked_op: 0,
        }
    }

    /// What it may hold, for a message.
    pub fn expected(&self) -> String {
        let states: Vec<String> = self
            .possible
            .iter()
            .map(|o| {
                let how = if o.acked { "acknowledged" } else { "in flight" };
                format!("{} (write {}, {how})", show(&o.value), o.op)
            })
            .collect();
        if states.len() == 1 {
            states.into_iter().next().unwrap_or_default()
        } else {
            format!("one of [{}]", states.join(", "))
        }
    }

    /// The state `write` gives a key in state `from`.
    fn after(&self, from: &Option<Held>, write: &Write) -> Option<Held> {
        match write {
            Write::Set(v) => Some(Held::Text(v.clone())),
            Write::Del | Write::Flush => None,
            Write::Incr => Some(Held::Text((number(from).unwrap_or(0) + 1).to_string())),
            Write::Hash(w) => w.apply(hash_of(from)).0.map(Held::Hash),
        }
    }

    /// Adds a possible state (a value already possible keeps the later write).
    fn add(&mut self, origin: Origin) {
        match self.possible.iter_mut().find(|o| o.value == origin.value) {
            Some(o) if o.op < origin.op => *o = origin,
            Some(_) => {}
            None => self.possible.push(origin),
        }
        assert!(
            self.possible.len() <= POSSIBLE_MAX,
            "{}: more than {POSSIBLE_MAX} possible states",
            self.name
        );
    }

    /// A finding about this key, seen on `member`.
    fn finding(&self, verdict: Verdict, member: &str, found: String) -> Finding {
        Finding {
            verdict,
            key: self.name.clone(),
            member: member.to_string(),
            expected: self.expected(),
            found,
        }
    }

    /// Write number `op` ended with `outcome`; its reply must fit a state the key may hold.
    pub fn apply(&mut self, op: u64, write: &Write, outcome: &Outcome) -> Result<(), Finding> {
        let reply = |what: &str| format!("the reply to {what} (write {op})");
        let acknowledged: Vec<Option<Held>> = match (write, outcome) {
            (_, Outcome::Refused) => return Ok(()),
            (_, Outcome::Unknown) => {
                let states: Vec<Option<Held>> =
                    self.possible.iter().map(|o| o.value.clone()).collect();
                for from in states {
                    let value = self.after(&from, write);
                    self.add(Origin {
                        op,
                        value,
                        acked: false,
                    });
                }
                return Ok(());
            }
            (Write::Set(v), Outcome::Ok) => vec![Some(Held::Text(v.clone()))],
            (Write::Flush, Outcome::Ok) => vec![None],
            (Write::Del, Outcome::Deleted(n)) => {
                let fits = self
                    .possible
                    .iter()
                    .any(|o| i64::from(o.value.is_some()) == *n);
                if !fits {
                    let found = format!("DEL answering {n}");
                    return Err(self.finding(Verdict::Wrong, &reply("DEL"), found));
                }
                vec![None]
            }
            (Write::Incr, Outcome::Incremented(n)) => {
                let before: Vec<i64> = self
                    .possible
                    .iter()
                    .filter_map(|o| number(&o.value))
                    .collect();
                if !before.iter().any(|b| b + 1 == *n) {
                    // Short of every possible count: an acknowledged INCR is missing.
                    let short = before.iter().all(|b| *n <= *b);
                    let found = format!("INCR answering {n}");
                    return Err(self.finding(Verdict::of(false, short), &reply("INCR"), found));
                }
                vec![Some(Held::Text(n.to_string()))]
            }
            (Write::Hash(w), Outcome::Answered(n)) => {
                // The reply tells which of the states it may have met it did (writes in flight
                // before it may leave several, each giving its own state after it).
                let answers: Vec<(Option<Fields>, i64)> = self
                    .possible
                    .iter()
                    .map(|o| w.apply(hash_of(&o.value)))
                    .collect();
                if !answers.iter().any(|(_, a)| a == n) {
                    // A HINCRBY short of every sum it could give: an acknowledged one is missing.
                    let short =
                        matches!(w, HashWrite::IncrBy { .. }) && answers.iter().all(|(_, a)| n < a);
                    let found = format!("{} answering {n}", w.command());
                    return Err(self.finding(
                        Verdict::of(false, short),
                        &reply(w.command()),
                        found,
                    ));
                }
                answers
                    .into_iter()
                    .filter(|(_, a)| a == n)
                    .map(|(after, _)| after.map(Held::Hash))
                    .collect()
            }
            (write, outcome) => panic!("{}: {write:?} cannot end {outcome:?}", self.name),
        };
        self.possible.clear();
        for value in acknowledged {
            self.add(Origin {
                op,
                value,
                acked: true,
            });
        }
        self.acked_op = op;
        Ok(())
    }

    /// Whether the key may be absent now (an absent key shows nothing of a FLUSHALL).
    pub fn may_be_absent(&self) -> bool {
        self.possible.iter().any(|o| o.value.is_none())
    }

    /// The write that explains `found` read on `member`, or the finding.
    pub fn explain(&self, member: &str, found: &Option<Held>) -> Result<u64, Finding> {
        if let Some(o) = self.possible.iter().find(|o| &o.value == found) {
            return Ok(o.op);
        }
        let older = match (self.kind, found) {
            (_, None) => false,
            (KeyKind::Register, Some(Held::Text(v))) => {
                op_of(v).is_some_and(|op| op < self.acked_op)
            }
            (KeyKind::Counter, found) => {
                let least = self.possible.iter().filter_map(|o| number(&o.value)).min();
                matches!((number(found), least), (Some(n), Some(least)) if n < least)
            }
            (KeyKind::Hash, Some(Held::Hash(shown))) => self
                .possible
                .iter()
                .all(|o| behind(shown, hash_of(&o.value), self.acked_op)),
            // A key of one kind showing the other: nothing of it was ever written.
            (KeyKind::Register | KeyKind::Hash, Some(_)) => false,
        };
        let verdict = Verdict::of(found.is_none(), older);
        Err(self.finding(verdict, member, show(found)))
    }

    /// Whether the key holds a large hash, as a check settled it.
    pub fn holds_large_hash(&self) -> bool {
        matches!(&self.possible[..], [Origin { value: Some(Held::Hash(f)), .. }] if f.is_large())
    }

    /// The check saw `found`, given by write `op`: the state the next cycle starts from (the
    /// model's own state that equals it, where one does: a hash's reply does not tell whether
    /// it is large, its state does).
    pub fn settle(&mut self, op: u64, found: Option<Held>) {
        let value = match self
            .possible
            .iter()
            .find(|o| o.op == op && o.value == found)
        {
            Some(o) => o.value.clone(),
            None => found,
        };
        self.possible = vec![Origin {
            op,
            value,
            acked: true,
        }];
        self.acked_op = op;
    }
}

/// The members of a key's chain must show one state of it (`seen`: each member's): the same
/// value; of a hash, the same fields in the same order.
pub fn agree(key: &KeyModel, seen: &[(&str, Option<Held>)]) -> Result<(), Finding> {
    if seen.windows(2).all(|pair| pair[0].1 == pair[1].1) {
        return Ok(());
    }
    let shown: Vec<String> = seen
        .iter()
        .map(|(member, value)| format!("{member}: {}", show(value)))
        .collect();
    Err(Finding {
        verdict: Verdict::Wrong,
        key: key.name.clone(),
        member: "its chain".to_string(),
        expected: "one state on every member".to_string(),
        found: shown.join("; "),
    })
}

/// An MSET whose outcome is unknown: write `op` on `keys` (indices into its writer's keys).
#[derive(Clone, Debug)]
pub struct MsetInFlight {
    pub op: u64,
    pub keys: Vec<usize>,
}

/// An MSET is one engine batch on every member: the writes seen (by `origins`, the write each
/// key's check found, in the order of `keys`) show it on all of its keys or on none. A key
/// showing an older write, while another shows the MSET, is a finding.
pub fn mset_whole(mset: &MsetInFlight, keys: &[KeyModel], origins: &[u64]) -> Result<(), Finding> {
    let shows = mset.keys.iter().find(|&&k| origins[k] == mset.op);
    let older = mset.keys.iter().find(|&&k| origins[k] < mset.op);
    match (shows, older) {
        (Some(&with), Some(&without)) => Err(Finding {
            verdict: Verdict::Wrong,
            key: keys[without].name.clone(),
            member: "every member".to_string(),
            expected: format!(
                "the MSET of write {} (in flight; {} shows it)",
                mset.op, keys[with].name
            ),
            found: format!("write {}", origins[without]),
        }),
        _ => Ok(()),
    }
}

/// A key of a range a FLUSHALL in flight may have emptied: the FLUSHALL's write number in the
/// key's writer's sequence, the write its check found, and whether the key could not be
/// absent before the FLUSHALL (only then does its absence show the FLUSHALL).
#[derive(Clone, Debug)]
pub struct FlushedKey<'a> {
    pub key: &'a KeyModel,
    pub flush_op: u64,
    pub origin: u64,
    pub telling: bool,
}

/// A FLUSHALL empties each range at once on every member (one chain message): the keys of one
/// range show it on all of them or on none. A key showing a write older than the FLUSHALL,
/// while another shows the FLUSHALL, is a finding.
pub fn flush_whole(range: &[FlushedKey<'_>]) -> Result<(), Finding> {
    let shows = range.iter().find(|k| k.telling && k.origin == k.flush_op);
    let older = range.iter().find(|k| k.origin < k.flush_op);
    match (shows, older) {
        (Some(with), Some(without)) => Err(Finding {
            verdict: Verdict::Wrong,
            key: without.key.name.clone(),
            member: "every member".to_string(),
            expected: format!(
                "emptied by the FLUSHALL (in flight; {} of the same range shows it)",
                with.key.name
            ),
            found: format!("write {} (before the FLUSHALL)", without.origin),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use quiver_client::Value;

    fn register() -> KeyModel {
        KeyModel::new("{t}r0".into(), KeyKind::Register)
    }

    fn counter() -> KeyModel {
        KeyModel::new("{t}n0".into(), KeyKind::Counter)
    }

    /// A string as GET shows it.
    fn text(v: &str) -> Option<Held> {
        Some(Held::Text(v.to_string()))
    }

    #[test]
    fn the_check_finds_a_lost_write() {
        let mut k = register();
        let (v1, v2) = (value(0, 1, 3), value(0, 2, 0));
        k.apply(1, &Write::Set(v1.clone()), &Outcome::Ok).unwrap();
        k.apply(2, &Write::Set(v2.clone()), &Outcome::Ok).unwrap();
        assert_eq!(k.explain("n", &text(&v2)), Ok(2));
        for older in [text(&v1), None] {
            let f = k.explain("node-2", &older).unwrap_err();
            assert_eq!(f.verdict, Verdict::Lost, "{f}");
        }
        let f = k.explain("node-2", &text(&value(0, 7, 0))).unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "a value never written: {f}");
    }

    #[test]
    fn the_check_accepts_in_flight_writes_after_the_last_acknowledged_only() {
        let mut k = register();
        let vs: Vec<String> = (1..=4).map(|op| value(0, op, 0)).collect();
        k.apply(1, &Write::Set(vs[0].clone()), &Outcome::Unknown)
            .unwrap();
        k.apply(2, &Write::Set(vs[1].clone()), &Outcome::Ok)
            .unwrap();
        k.apply(3, &Write::Del, &Outcome::Unknown).unwrap();
        k.apply(4, &Write::Set(vs[3].clone()), &Outcome::Refused)
            .unwrap();
        assert_eq!(k.explain("n", &text(&vs[1])), Ok(2));
        assert_eq!(k.explain("n", &None), Ok(3));
        let f = k.explain("n", &text(&vs[0])).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "older than acknowledged: {f}");
        let f = k.explain("n", &text(&vs[3])).unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "a refused write: {f}");
        k.settle(3, None);
        let f = k.explain("n", &text(&vs[1])).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "older than what was seen: {f}");
    }

    #[test]
    fn the_check_bounds_counters() {
        let mut k = counter();
        k.apply(1, &Write::Incr, &Outcome::Incremented(1)).unwrap();
        k.apply(2, &Write::Incr, &Outcome::Unknown).unwrap();
        k.apply(3, &Write::Incr, &Outcome::Unknown).unwrap();
        for n in 1..=3 {
            assert!(k.explain("n", &text(&n.to_string())).is_ok(), "{n}");
        }
        let f = k.explain("n", &text("4")).unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "past the bound: {f}");
        let f = k.explain("n", &None).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "short of it: {f}");
        // A reply must follow a possible state: 3 or 4 now, not 5 nor 1.
        k.clone()
            .apply(4, &Write::Incr, &Outcome::Incremented(4))
            .unwrap();
        let f = k
            .clone()
            .apply(4, &Write::Incr, &Outcome::Incremented(5))
            .unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "{f}");
        let f = k
            .apply(4, &Write::Incr, &Outcome::Incremented(1))
            .unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "{f}");
    }

    #[test]
    fn the_check_follows_deletes() {
        let mut k = counter();
        k.apply(1, &Write::Incr, &Outcome::Incremented(1)).unwrap();
        let f = k
            .clone()
            .apply(2, &Write::Del, &Outcome::Deleted(0))
            .unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "{f}");
        k.apply(2, &Write::Del, &Outcome::Unknown).unwrap();
        k.apply(3, &Write::Incr, &Outcome::Incremented(1)).unwrap();
        assert_eq!(k.explain("n", &text("1")), Ok(3));
    }

    #[test]
    fn the_check_finds_a_torn_mset() {
        let mut keys = vec![register(), register()];
        let (a, b) = (value(0, 1, 0), value(0, 2, 0));
        for k in &mut keys {
            k.apply(1, &Write::Set(a.clone()), &Outcome::Ok).unwrap();
            k.apply(2, &Write::Set(b.clone()), &Outcome::Unknown)
                .unwrap();
        }
        let mset = MsetInFlight {
            op: 2,
            keys: vec![0, 1],
        };
        assert!(mset_whole(&mset, &keys, &[2, 2]).is_ok());
        assert!(mset_whole(&mset, &keys, &[1, 1]).is_ok());
        let f = mset_whole(&mset, &keys, &[2, 1]).unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "{f}");
    }

    #[test]
    fn the_check_follows_flushes() {
        let mut k = register();
        let v = value(0, 1, 0);
        k.apply(1, &Write::Set(v.clone()), &Outcome::Ok).unwrap();
        let mut unknown = k.clone();
        k.apply(2, &Write::Flush, &Outcome::Ok).unwrap();
        assert_eq!(k.explain("n", &None), Ok(2));
        let f = k.explain("n", &text(&v)).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "the value came back: {f}");
        assert!(!unknown.may_be_absent());
        unknown.apply(2, &Write::Flush, &Outcome::Unknown).unwrap();
        assert_eq!(unknown.explain("n", &None), Ok(2));
        assert_eq!(unknown.explain("n", &text(&v)), Ok(1));
        // A hash is flushed like any key.
        let mut h = KeyModel::new("{t}h0".into(), KeyKind::Hash);
        h.apply(3, &hset(&[1], &v), &Outcome::Answered(1)).unwrap();
        h.apply(4, &Write::Flush, &Outcome::Ok).unwrap();
        assert_eq!(h.explain("n", &None), Ok(4));
        let f = h.explain("n", &hash(&[("f1", &v)])).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "the hash came back: {f}");
    }

    /// A hash as HGETALL shows it: its fields and values, in order.
    fn hash(pairs: &[(&str, &str)]) -> Option<Held> {
        let items: Vec<Value> = pairs
            .iter()
            .flat_map(|(f, v)| [f, v].map(|s| Value::Bulk(s.to_string().into())))
            .collect();
        Fields::from_reply(&items).unwrap().map(Held::Hash)
    }

    fn hset(fields: &[usize], value: &str) -> Write {
        let (fields, value) = (fields.to_vec(), value.to_string());
        Write::Hash(HashWrite::Set { fields, value })
    }

    fn hdel(fields: &[usize]) -> Write {
        let fields = fields.to_vec();
        Write::Hash(HashWrite::Del { fields })
    }

    fn hincrby(field: usize, by: i64) -> Write {
        Write::Hash(HashWrite::IncrBy { field, by })
    }

    #[test]
    fn the_check_follows_a_hash_in_insertion_order() {
        let mut k = KeyModel::new("{t}h0".into(), KeyKind::Hash);
        let (a, b, c) = (value(0, 1, 2), value(0, 3, 0), value(0, 5, 1));
        k.apply(1, &hset(&[2, 0], &a), &Outcome::Answered(2))
            .unwrap();
        k.apply(2, &hincrby(4, 3), &Outcome::Answered(3)).unwrap();
        // A replaced value keeps its place, a deleted field closes its gap, a new one goes last.
        k.apply(3, &hset(&[0, 1], &b), &Outcome::Answered(1))
            .unwrap();
        k.apply(4, &hdel(&[2, 5]), &Outcome::Answered(1)).unwrap();
        let acked = hash(&[("f0", &b), ("f4", "3"), ("f1", &b)]);
        assert_eq!(k.explain("n", &acked), Ok(4));
        k.apply(5, &hset(&[2], &c), &Outcome::Unknown).unwrap();
        let in_flight = hash(&[("f0", &b), ("f4", "3"), ("f1", &b), ("f2", &c)]);
        assert_eq!(k.explain("n", &acked), Ok(4));
        assert_eq!(k.explain("n", &in_flight), Ok(5));
        // The same fields in another order: wrong.
        let f = k
            .explain("n", &hash(&[("f4", "3"), ("f0", &b), ("f1", &b)]))
            .unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "{f}");
        // A member that lost the acknowledged HSET of f1, or of f0's new value, or a HINCRBY.
        let lost = [
            hash(&[("f0", &b), ("f4", "3")]),
            hash(&[("f0", &a), ("f4", "3"), ("f1", &b)]),
            hash(&[("f0", &b), ("f4", "2"), ("f1", &b)]),
            None,
        ];
        for found in lost {
            let f = k.explain("node-2", &found).unwrap_err();
            assert_eq!(f.verdict, Verdict::Lost, "{f}");
        }
        // The HDELs' replies tell that the HSET in flight took effect and the HDEL did not;
        // deleting the last fields deletes the key.
        k.apply(6, &hdel(&[0, 1]), &Outcome::Unknown).unwrap();
        k.apply(7, &hdel(&[4, 2]), &Outcome::Answered(2)).unwrap();
        k.apply(8, &hdel(&[0, 1]), &Outcome::Answered(2)).unwrap();
        assert_eq!(k.explain("n", &None), Ok(8));
        let f = k.explain("n", &hash(&[("f4", "3")])).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "{f}");
    }

    #[test]
    fn the_check_follows_hash_replies() {
        let mut k = KeyModel::new("{t}h0".into(), KeyKind::Hash);
        let (a, b) = (value(0, 1, 0), value(0, 3, 0));
        k.apply(1, &hincrby(5, 2), &Outcome::Answered(2)).unwrap();
        let f = k
            .clone()
            .apply(2, &hset(&[1], &a), &Outcome::Answered(0))
            .unwrap_err();
        assert_eq!(
            f.verdict,
            Verdict::Wrong,
            "HSET of a new field adds it: {f}"
        );
        let f = k
            .clone()
            .apply(2, &hincrby(5, 1), &Outcome::Answered(1))
            .unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "a HINCRBY short: {f}");
        // An HSET in flight, then one acknowledged: its reply (1 field added: f1 was there
        // already) tells that the first took effect.
        k.apply(2, &hset(&[1], &a), &Outcome::Unknown).unwrap();
        k.apply(3, &hset(&[1, 3], &b), &Outcome::Answered(1))
            .unwrap();
        assert_eq!(
            k.explain("n", &hash(&[("f5", "2"), ("f1", &b), ("f3", &b)])),
            Ok(3)
        );
        // An HSET answering what either state gives keeps both (in their orders).
        let mut k = KeyModel::new("{t}h1".into(), KeyKind::Hash);
        k.apply(1, &hincrby(4, 1), &Outcome::Answered(1)).unwrap();
        k.apply(2, &hdel(&[4]), &Outcome::Unknown).unwrap();
        k.apply(3, &hset(&[0], &b), &Outcome::Answered(1)).unwrap();
        assert_eq!(k.explain("n", &hash(&[("f4", "1"), ("f0", &b)])), Ok(3));
        assert_eq!(k.explain("n", &hash(&[("f0", &b)])), Ok(3));
        let f = k
            .explain("n", &hash(&[("f0", &b), ("f4", "1")]))
            .unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "{f}");
    }

    #[test]
    fn the_check_finds_members_that_disagree_on_a_hash() {
        let k = KeyModel::new("{t}h0".into(), KeyKind::Hash);
        let (a, b) = (value(0, 1, 0), value(0, 2, 0));
        let one = hash(&[("f0", &a), ("f1", &b)]);
        let same = [("node-0", one.clone()), ("node-1", one.clone())];
        assert!(agree(&k, &same).is_ok());
        let reordered = hash(&[("f1", &b), ("f0", &a)]);
        let f = agree(&k, &[("node-0", one.clone()), ("node-1", reordered)]).unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "{f}");
        let f = agree(&k, &[("node-0", one), ("node-2", None)]).unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "{f}");
    }

    #[test]
    fn the_check_finds_a_torn_flush() {
        let (a, b) = (register(), counter());
        let key = |key, origin, telling| FlushedKey {
            key,
            flush_op: 5,
            origin,
            telling,
        };
        assert!(flush_whole(&[key(&a, 5, true), key(&b, 5, true)]).is_ok());
        assert!(flush_whole(&[key(&a, 4, true), key(&b, 3, true)]).is_ok());
        assert!(flush_whole(&[key(&a, 6, true), key(&b, 3, true)]).is_ok());
        // Absent before the FLUSHALL too: its absence tells nothing.
        assert!(flush_whole(&[key(&a, 5, false), key(&b, 3, true)]).is_ok());
        let f = flush_whole(&[key(&a, 5, true), key(&b, 3, true)]).unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "{f}");
        assert_eq!(f.key, b.name);
    }
}
