//! What a key of the chain crash loop may hold, from what its one writer sent: the states it
//! may be in (each with the write that gave it), narrowed by every acknowledged reply and
//! widened by every write whose outcome is unknown (in flight when a node died).
//!
//! A key has one writer, whose operations are sequential, so with unique values the rule is
//! exact: a key holds the state its last acknowledged write gave it, or one of the in-flight
//! writes after it took effect (a counter: its last acknowledged value plus any of the
//! in-flight INCRs after it; a DEL in flight may have reset it). Anything else is a finding:
//! **lost** when the key shows nothing where something was acknowledged, an older value than
//! the last acknowledged one, or a counter short of its acknowledged count; **wrong**
//! otherwise (a value never written, a counter past its bound, members that disagree, an MSET
//! in flight seen on some of its keys only, a FLUSHALL in flight seen on some keys of a range
//! only, a reply that no state explains).
//!
//! A FLUSHALL is a write of every key: sent while the writers wait, it takes the next number
//! of each writer's sequence.

use quiver_testkit::acked::{Finding, Verdict};

/// A key's kind: registers take SET, MSET and DEL; counters INCR and DEL; both FLUSHALL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Register,
    Counter,
}

/// A write of the load, on one key (an MSET is one per key, with the same number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Set(String),
    Del,
    Incr,
    /// A FLUSHALL: the key deleted with every other key of its range.
    Flush,
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
    pub value: Option<String>,
    pub acked: bool,
}

/// The value of write `op` of writer `writer`, `pad` filler bytes long after its name (values
/// are unique: a value read names its write).
pub fn value(writer: usize, op: u64, pad: usize) -> String {
    format!("w{writer}.{op}.{}", "x".repeat(pad))
}

/// The write number a value of [`value`]'s form names.
fn op_of(value: &str) -> Option<u64> {
    value.strip_prefix('w')?.split('.').nth(1)?.parse().ok()
}

/// A value as a message shows it: its name without the filler.
fn show(value: &Option<String>) -> String {
    match value {
        None => "absent".to_string(),
        Some(v) => match v.rfind('.') {
            Some(end) if v.starts_with('w') => format!("{:?} (+{} bytes)", &v[..end], v.len()),
            _ => format!("{v:?}"),
        },
    }
}

/// A counter's number (absent reads as 0, as INCR takes it).
fn number(value: &Option<String>) -> Option<i64> {
    match value {
        None => Some(0),
        Some(v) => v.parse().ok(),
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
    fn after(&self, from: &Option<String>, write: &Write) -> Option<String> {
        match write {
            Write::Set(v) => Some(v.clone()),
            Write::Del | Write::Flush => None,
            Write::Incr => Some((number(from).unwrap_or(0) + 1).to_string()),
        }
    }

    /// Adds a possible state (a value already possible keeps the later write).
    fn add(&mut self, origin: Origin) {
        match self.possible.iter_mut().find(|o| o.value == origin.value) {
            Some(o) if o.op < origin.op => *o = origin,
            Some(_) => {}
            None => self.possible.push(origin),
        }
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
        let acknowledged = match (write, outcome) {
            (_, Outcome::Refused) => return Ok(()),
            (_, Outcome::Unknown) => {
                let states: Vec<Option<String>> =
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
            (Write::Set(v), Outcome::Ok) => Some(v.clone()),
            (Write::Flush, Outcome::Ok) => None,
            (Write::Del, Outcome::Deleted(n)) => {
                let fits = self
                    .possible
                    .iter()
                    .any(|o| i64::from(o.value.is_some()) == *n);
                if !fits {
                    let found = format!("DEL answering {n}");
                    return Err(self.finding(Verdict::Wrong, &reply("DEL"), found));
                }
                None
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
                Some(n.to_string())
            }
            (write, outcome) => panic!("{}: {write:?} cannot end {outcome:?}", self.name),
        };
        self.possible = vec![Origin {
            op,
            value: acknowledged,
            acked: true,
        }];
        self.acked_op = op;
        Ok(())
    }

    /// Whether the key may be absent now (an absent key shows nothing of a FLUSHALL).
    pub fn may_be_absent(&self) -> bool {
        self.possible.iter().any(|o| o.value.is_none())
    }

    /// The write that explains `found` read on `member`, or the finding.
    pub fn explain(&self, member: &str, found: &Option<String>) -> Result<u64, Finding> {
        if let Some(o) = self.possible.iter().find(|o| &o.value == found) {
            return Ok(o.op);
        }
        let older = match (self.kind, found) {
            (_, None) => false,
            (KeyKind::Register, Some(v)) => op_of(v).is_some_and(|op| op < self.acked_op),
            (KeyKind::Counter, found) => {
                let least = self.possible.iter().filter_map(|o| number(&o.value)).min();
                matches!((number(found), least), (Some(n), Some(least)) if n < least)
            }
        };
        let verdict = Verdict::of(found.is_none(), older);
        Err(self.finding(verdict, member, show(found)))
    }

    /// The check saw `found`, given by write `op`: the state the next cycle starts from.
    pub fn settle(&mut self, op: u64, found: Option<String>) {
        self.possible = vec![Origin {
            op,
            value: found,
            acked: true,
        }];
        self.acked_op = op;
    }
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

    fn register() -> KeyModel {
        KeyModel::new("{t}r0".into(), KeyKind::Register)
    }

    fn counter() -> KeyModel {
        KeyModel::new("{t}n0".into(), KeyKind::Counter)
    }

    #[test]
    fn the_check_finds_a_lost_write() {
        let mut k = register();
        let (v1, v2) = (value(0, 1, 3), value(0, 2, 0));
        k.apply(1, &Write::Set(v1.clone()), &Outcome::Ok).unwrap();
        k.apply(2, &Write::Set(v2.clone()), &Outcome::Ok).unwrap();
        assert_eq!(k.explain("n", &Some(v2)), Ok(2));
        for older in [Some(v1), None] {
            let f = k.explain("node-2", &older).unwrap_err();
            assert_eq!(f.verdict, Verdict::Lost, "{f}");
        }
        let f = k.explain("node-2", &Some(value(0, 7, 0))).unwrap_err();
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
        assert_eq!(k.explain("n", &Some(vs[1].clone())), Ok(2));
        assert_eq!(k.explain("n", &None), Ok(3));
        let f = k.explain("n", &Some(vs[0].clone())).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "older than acknowledged: {f}");
        let f = k.explain("n", &Some(vs[3].clone())).unwrap_err();
        assert_eq!(f.verdict, Verdict::Wrong, "a refused write: {f}");
        k.settle(3, None);
        let f = k.explain("n", &Some(vs[1].clone())).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "older than what was seen: {f}");
    }

    #[test]
    fn the_check_bounds_counters() {
        let mut k = counter();
        k.apply(1, &Write::Incr, &Outcome::Incremented(1)).unwrap();
        k.apply(2, &Write::Incr, &Outcome::Unknown).unwrap();
        k.apply(3, &Write::Incr, &Outcome::Unknown).unwrap();
        for n in 1..=3 {
            assert!(k.explain("n", &Some(n.to_string())).is_ok(), "{n}");
        }
        let f = k.explain("n", &Some("4".into())).unwrap_err();
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
        assert_eq!(k.explain("n", &Some("1".into())), Ok(3));
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
        let f = k.explain("n", &Some(v.clone())).unwrap_err();
        assert_eq!(f.verdict, Verdict::Lost, "the value came back: {f}");
        assert!(!unknown.may_be_absent());
        unknown.apply(2, &Write::Flush, &Outcome::Unknown).unwrap();
        assert_eq!(unknown.explain("n", &None), Ok(2));
        assert_eq!(unknown.explain("n", &Some(v)), Ok(1));
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
