//! What the parent knows of the store a child left: per key (and per batch group, and for the
//! layout) the state the last acknowledged operation made, the states of the operations in
//! flight at a kill, and the tally of the run.

use std::collections::{HashMap, HashSet};

use quiver_store::slot::SlotRange;

use super::{group_keys, show, single_key, GROUPS, PARTITIONS, SINGLE_KEYS};

/// How many failure messages a failing run prints (the counts cover them all).
const FAILURES_SHOWN: usize = 10;

/// What one key (or every key of a batch group) holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// The operation (its version) that made this state; 0: nothing written yet.
    pub op: u64,
    /// The version of the value present (a set_expiry keeps the value it found); `None`: no
    /// key.
    pub value: Option<u64>,
    /// The value's expiry time (ms since the Unix epoch); `None`: never.
    pub expire_at: Option<u64>,
}

/// What a read returned: the value's version and expiry time, or no key.
pub type Observed = Option<(u64, Option<u64>)>;

/// Bounds of the instant a read was made at (ms since the Unix epoch, the system clock the
/// store measures expiry on): before the call and after it returned.
#[derive(Clone, Copy, Debug)]
pub struct ReadTime {
    pub before: u64,
    pub after: u64,
}

impl State {
    /// Whether a read at `at` may return `observed` from this state: the same value and
    /// deadline, live at the read; or no key, because there is none or its time has come.
    fn allows(&self, observed: Observed, at: ReadTime) -> bool {
        match observed {
            // Live when read: its deadline is after the store's clock, which is past `before`.
            Some((v, e)) => {
                self.value == Some(v) && self.expire_at == e && e.is_none_or(|t| t > at.before)
            }
            None => self.value.is_none() || self.expire_at.is_some_and(|t| t <= at.after),
        }
    }

    /// Whether its deadline has come by `at`.
    fn expired_by(&self, at: u64) -> bool {
        self.value.is_some() && self.expire_at.is_some_and(|t| t <= at)
    }
}

/// What a key (or a batch group) may hold: its last acknowledged state, or the state of a
/// later operation that was in flight when a child was killed.
#[derive(Clone, Debug, Default)]
pub struct Possible {
    /// The state of the last acknowledged operation, or the state last observed.
    pub acked: State,
    /// States of operations begun and never acknowledged, newer than `acked`.
    pub inflight: Vec<State>,
    /// States acknowledged operations replaced since the last read: one found again (the
    /// same value with its old deadline, say) is an operation lost.
    replaced: Vec<State>,
    /// `acked` comes from an acknowledgement no read has checked yet.
    unchecked_ack: bool,
}

impl Possible {
    pub fn ack(&mut self, state: State) {
        self.replaced
            .push(std::mem::replace(&mut self.acked, state));
        self.inflight.retain(|s| s.op > state.op);
        self.unchecked_ack = true;
    }

    /// Checks an observed state and makes it the known one; a mismatch is counted as lost
    /// (an older state shows: the acknowledged operation is missing) or wrong. A read
    /// `after_crash` (in the store a kill left) counts the acknowledged operation as checked.
    pub fn observe(
        &mut self,
        observed: Observed,
        at: ReadTime,
        after_crash: bool,
        what: &str,
        tally: &mut Tally,
    ) {
        if after_crash && std::mem::take(&mut self.unchecked_ack) {
            tally.checked_ops.insert(self.acked.op);
        }
        if self.acked.allows(observed, at) {
            if observed.is_some() && self.acked.expire_at.is_some() {
                tally.expiring_present += 1;
            }
            if observed.is_none() && self.acked.expired_by(at.after) {
                tally.expired_absent += 1;
            }
        }
        let state = if self.acked.allows(observed, at) {
            self.acked
        } else if let Some(&s) = self.inflight.iter().find(|s| s.allows(observed, at)) {
            s
        } else {
            // An older state: no key, an older value, or one an acknowledged operation
            // replaced (a deadline it changed).
            let older = match observed {
                None => true,
                Some((v, e)) => {
                    v < self.acked.value.unwrap_or(self.acked.op)
                        || self
                            .replaced
                            .iter()
                            .any(|s| s.value == Some(v) && s.expire_at == e)
                }
            };
            let msg = format!(
                "{what} holds {observed:?} (version, expiry) read at {at:?}, but the last \
                 acknowledged operation left {:?} and those in flight {:?}",
                self.acked, self.inflight
            );
            tally.failure(older, msg);
            State {
                op: self.acked.op,
                value: observed.map(|o| o.0),
                expire_at: observed.and_then(|o| o.1),
            }
        };
        // A key whose time has come is gone, whichever state it was.
        self.acked = match observed {
            Some(_) => state,
            None => State {
                op: state.op,
                value: None,
                expire_at: None,
            },
        };
        self.inflight.clear();
        self.replaced.clear();
    }
}

/// The store's layout: the slot ranges of its partitions, changed by splits and merges.
pub struct LayoutModel {
    pub acked: Vec<SlotRange>,
    /// The layout of a split or merge begun and not acknowledged.
    pub pending: Vec<Vec<SlotRange>>,
    /// Every layout acknowledged before `acked`: one of them found again is a change lost.
    earlier: HashSet<Vec<SlotRange>>,
    unchecked_ack: bool,
}

impl LayoutModel {
    pub fn ack(&mut self, layout: Vec<SlotRange>) {
        self.earlier
            .insert(std::mem::replace(&mut self.acked, layout));
        self.pending.clear();
        self.unchecked_ack = true;
    }

    /// Checks a store's layout (the acknowledged one, or one begun); see [`Possible::observe`].
    pub fn observe(
        &mut self,
        observed: &[SlotRange],
        after_crash: bool,
        what: &str,
        tally: &mut Tally,
    ) {
        if after_crash && std::mem::take(&mut self.unchecked_ack) {
            tally.layouts_checked += 1;
        }
        let ok = quiver_store::slot::covers_all(observed)
            && (observed == self.acked.as_slice() || self.pending.iter().any(|p| p == observed));
        if !ok {
            tally.failure(
                self.earlier.contains(observed),
                format!(
                    "{what}: layout {} is neither the acknowledged {} nor one begun {:?}",
                    format_ranges(observed),
                    format_ranges(&self.acked),
                    self.pending
                        .iter()
                        .map(|p| format_ranges(p))
                        .collect::<Vec<_>>()
                ),
            );
        }
        if observed != self.acked.as_slice() {
            self.earlier
                .insert(std::mem::replace(&mut self.acked, observed.to_vec()));
        }
        self.pending.clear();
    }
}

/// "lo-hi,lo-hi,...": a layout on one line of the child's output.
pub fn format_ranges(ranges: &[SlotRange]) -> String {
    let parts: Vec<String> = ranges.iter().map(|r| r.to_string()).collect();
    parts.join(",")
}

pub fn parse_ranges(s: &str) -> Vec<SlotRange> {
    s.split(',')
        .map(|r| SlotRange::parse(r).unwrap_or_else(|| panic!("bad slot range {r:?}")))
        .collect()
}

/// An operation the child began.
pub enum Target {
    /// put, multi_put (`value`) or delete of single keys; a put's expiry.
    Keys {
        keys: Vec<Vec<u8>>,
        value: bool,
        expire_at: Option<u64>,
    },
    /// set_expiry or persist of a key holding the value of `value`.
    Expiry {
        key: Vec<u8>,
        value: u64,
        expire_at: Option<u64>,
    },
    /// A batch writing every key of group `g`.
    Group { g: u64, expire_at: Option<u64> },
}

pub struct Model {
    pub singles: HashMap<Vec<u8>, Possible>,
    pub groups: Vec<Possible>,
    pub group_keys: Vec<Vec<Vec<u8>>>,
    pub layout: LayoutModel,
}

impl Model {
    pub fn new() -> Model {
        Model {
            singles: (0..SINGLE_KEYS)
                .map(|i| (single_key(i), Possible::default()))
                .collect(),
            groups: vec![Possible::default(); GROUPS as usize],
            group_keys: (0..GROUPS).map(group_keys).collect(),
            layout: LayoutModel {
                acked: SlotRange::even(PARTITIONS),
                pending: Vec::new(),
                earlier: HashSet::new(),
                unchecked_ack: false,
            },
        }
    }

    pub fn apply(&mut self, target: &Target, version: u64, acked: bool) {
        let one = |p: &mut Possible, state: State| {
            if acked {
                p.ack(state);
            } else {
                p.inflight.push(state);
            }
        };
        match target {
            Target::Keys {
                keys,
                value,
                expire_at,
            } => {
                let state = State {
                    op: version,
                    value: value.then_some(version),
                    expire_at: *expire_at,
                };
                for k in keys {
                    one(self.single(k), state);
                }
            }
            Target::Expiry {
                key,
                value,
                expire_at,
            } => {
                let state = State {
                    op: version,
                    value: Some(*value),
                    expire_at: *expire_at,
                };
                one(self.single(key), state);
            }
            Target::Group { g, expire_at } => {
                let state = State {
                    op: version,
                    value: Some(version),
                    expire_at: *expire_at,
                };
                one(&mut self.groups[*g as usize], state);
            }
        }
    }

    pub fn single(&mut self, key: &[u8]) -> &mut Possible {
        self.singles
            .get_mut(key)
            .unwrap_or_else(|| panic!("unknown key {}", show(key)))
    }
}

/// What a run did and found, for the summary.
#[derive(Default)]
pub struct Tally {
    pub cycles: u64,
    /// Acknowledged operations: writes (a multi_put or a batch once), set_expiry and persist,
    /// splits and merges.
    pub acks: u64,
    /// Those not yet followed by a full check.
    acks_unchecked: u64,
    /// Acknowledged operations a full check came after, and passed: the state each left was
    /// there, or the state of a later one (so a write overwritten is checked through the one
    /// that overwrote it).
    pub checked: u64,
    /// Acknowledged writes whose own state a read found: of each key and group, the last one
    /// acknowledged before the read (a multi_put counts once).
    pub checked_ops: HashSet<u64>,
    /// Acknowledged splits and merges whose layout a reopening checked.
    pub layouts_checked: u64,
    pub lost: u64,
    pub wrong: u64,
    failures: Vec<String>,
    pub inflight_at_kill: u64,
    pub killed_in: HashMap<&'static str, u64>,
    pub killed_before_ready: u64,
    pub splits: u64,
    pub merges: u64,
    pub noops: u64,
    /// Acknowledged expiring states found present with their deadline, and found gone
    /// because their time had come.
    pub expiring_present: u64,
    pub expired_absent: u64,
    pub torn_tails: u64,
    pub batches_repaired: u64,
    pub batches_aborted: u64,
    pub checkpoints_ignored: u64,
    pub verified: u64,
    /// Checks made on a copy of the store (the store itself left to the next child).
    pub copies_verified: u64,
    pub child_done: u64,
}

impl Tally {
    /// Counts an acknowledged operation.
    pub fn ack(&mut self) {
        self.acks += 1;
        self.acks_unchecked += 1;
    }

    /// A full check passed: every operation acknowledged before it is checked.
    pub fn checked_all(&mut self) {
        self.checked += std::mem::take(&mut self.acks_unchecked);
    }

    /// Counts a mismatch: `lost` if an acknowledged operation is missing, else wrong.
    pub fn failure(&mut self, lost: bool, msg: String) {
        if lost {
            self.lost += 1;
        } else {
            self.wrong += 1;
        }
        if self.failures.len() < FAILURES_SHOWN {
            let kind = if lost { "LOST" } else { "WRONG" };
            self.failures.push(format!("{kind}: {msg}"));
        }
    }

    /// The summary, its first line in a fixed format.
    pub fn summary(&self, elapsed: std::time::Duration) -> String {
        let killed_in = |what: &str| self.killed_in.get(what).copied().unwrap_or(0);
        format!(
            "crash test: {} cycles, {} acknowledged operations checked, {} lost, {} wrong, \
             {} in flight at kill, {} read as the last on their key, group or layout, \
             {:.1} minutes\n\
             crash test details: {} operations acknowledged; killed {} times inside compact(), {} inside checkpoint(), \
             {} inside split(), {} inside merge(), {} before the store was open; \
             {} splits and {} merges acknowledged; {} set_expiry/persist found no key; \
             {} children finished; {} verifications ({} of them on a copy): {} expiring values present with their \
             deadline, {} gone as their deadline passed, {} torn tails, {} batches repaired, \
             {} aborted, {} checkpoints ignored",
            self.cycles,
            self.checked,
            self.lost,
            self.wrong,
            self.inflight_at_kill,
            self.checked_ops.len() as u64 + self.layouts_checked,
            elapsed.as_secs_f64() / 60.0,
            self.acks,
            killed_in("compact"),
            killed_in("checkpoint"),
            killed_in("split"),
            killed_in("merge"),
            self.killed_before_ready,
            self.splits,
            self.merges,
            self.noops,
            self.child_done,
            self.verified,
            self.copies_verified,
            self.expiring_present,
            self.expired_absent,
            self.torn_tails,
            self.batches_repaired,
            self.batches_aborted,
            self.checkpoints_ignored,
        )
    }

    /// Fails the test (after printing the summary) once anything was lost or wrong.
    pub fn fail_if_any(&self, elapsed: std::time::Duration, ctx: &str) {
        if self.lost + self.wrong > 0 {
            println!("{}", self.summary(elapsed));
            panic!(
                "{ctx}: {} lost, {} wrong; the first:\n{}",
                self.lost,
                self.wrong,
                self.failures.join("\n")
            );
        }
    }
}
