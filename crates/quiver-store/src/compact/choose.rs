//! Which segments a compaction pass takes: always a contiguous range of whole groups (a group:
//! segments sharing a major order, the outputs of one earlier pass or one sealed active
//! segment), so that the outputs can take the range's place in log order.
//!
//! - **By garbage** (the background thread, `Pass::Garbage`): among the ranges whose dead
//!   records bring the partition's garbage ratio down to `GARBAGE_AFTER_SHARE` of the
//!   trigger, the one with the most dead records per record; the active segment is sealed
//!   either way (a group of its own, for the passes to come). With overwrites spread over the
//!   keys, old groups hold the most garbage, and a range of them costs far fewer copies per
//!   record dropped than the whole log: a simulation of uniform overwrites with the trigger
//!   at 0.5 gave 0.45 copies and 1.4 records read per write, against 0.9 and 1.8 when each
//!   pass takes the whole log. It needs each segment's counts (`Segment::counts`); where one
//!   is unknown (segments from before the store opened), the pass is the head of a sweep.
//! - **A sweep** (`Pass::Sweep`): from the head or after a cursor, as many groups as a byte
//!   budget allows (at least one), the active segment sealed into the range when it reaches
//!   the end — the whole log when the budget has room, a disk-short sweep's step otherwise.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use crate::log::format::SEGMENT_HEADER_LEN;
use crate::log::segment::Segment;
use crate::partition::{PartState, StoreCtx};

/// A pass chosen by garbage brings the partition's garbage ratio down to this share of the
/// trigger (`compact_garbage_ratio`): lower copies more per pass, higher runs more passes
/// (each ends with a checkpoint). 0.8 (0.4 with the trigger at 0.5) in the simulation: 0.45
/// copies per write and a pass per ~10% of the records written; 0.9 gave 0.37 copies but
/// half again as many passes.
const GARBAGE_AFTER_SHARE: f64 = 0.8;
/// Sealed groups a partition keeps at most after a pass by garbage: a pass that would leave
/// more takes a longer range. Bounds the segments (each takes one of a partition's slots:
/// 32 with 1 GiB segments) and the ranges to weigh.
const SEALED_GROUPS_MAX: usize = 12;
/// Free slots a pass by garbage leaves when it seals the active segment without taking it.
const SEAL_SLOTS_SPARE: usize = 8;

/// Which segments one pass takes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pass {
    /// The range with the most garbage per record (see the module's comment), reading at most
    /// `budget_bytes` (disk blocks of the segments) unless it is a single group.
    Garbage { budget_bytes: u64 },
    /// From the head, or after the group with major order `start_after` (a sweep's cursor; a
    /// cursor past the last sealed group starts again at the head), as many groups as
    /// `budget_bytes` allows, at least one.
    Sweep {
        budget_bytes: u64,
        start_after: Option<u64>,
    },
}

impl Pass {
    /// The whole log, the active segment sealed into it.
    pub const WHOLE: Pass = Pass::Sweep {
        budget_bytes: u64::MAX,
        start_after: None,
    };
}

/// The segments chosen: `ordered[start..start + len]` once the active segment is sealed if
/// `seal_active` (the range then ends with it if `takes_active`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Choice {
    pub start: usize,
    pub len: usize,
    pub seal_active: bool,
    pub takes_active: bool,
    /// The range reaches the end of the log (the active segment taken, or holding nothing).
    pub reaches_end: bool,
    pub by_garbage: bool,
}

/// Chooses a pass's range on the partition's state (its lock held).
pub(super) fn choose(ctx: &StoreCtx, st: &PartState, pass: Pass) -> Choice {
    let (budget_bytes, start_after) = match pass {
        Pass::Garbage { budget_bytes } => {
            if let Some(c) = by_garbage(ctx, st, budget_bytes) {
                return c;
            }
            (budget_bytes, None)
        }
        Pass::Sweep {
            budget_bytes,
            start_after,
        } => (budget_bytes, start_after),
    };
    let ordered = &st.segs.ordered;
    let sealed = ordered.len() - 1;
    let start = match start_after {
        Some(major) => ordered[..sealed]
            .iter()
            .position(|s| s.header.order.major > major)
            .unwrap_or(0),
        None => 0,
    };
    let len = range_len(&ordered[start..sealed], budget_bytes);
    let reaches_end = start + len == sealed;
    let takes_active = reaches_end && st.appender.end() > SEGMENT_HEADER_LEN as u64;
    Choice {
        start,
        len: len + takes_active as usize,
        seal_active: takes_active,
        takes_active,
        reaches_end,
        by_garbage: false,
    }
}

/// A group of segments as a choice by garbage weighs it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Group {
    segments: usize,
    records: u64,
    dead: u64,
    bytes: u64,
}

/// The choice by garbage, if every candidate segment's counts are known and some range
/// drops enough.
fn by_garbage(ctx: &StoreCtx, st: &PartState, budget_bytes: u64) -> Option<Choice> {
    let ordered = &st.segs.ordered;
    let active_used = st.appender.end() > SEGMENT_HEADER_LEN as u64;
    // The active segment is a candidate (its own group) if it holds anything.
    let candidates = &ordered[..ordered.len() - 1 + active_used as usize];
    let groups = groups_of(candidates)?;
    let c = st.counters;
    let target = GARBAGE_AFTER_SHARE * ctx.tuning.compact_garbage_ratio();
    let need = (c.dead as f64 - target * c.records as f64) / (1.0 - target);
    let (start_group, len_groups) = best_range(&groups, need.max(1.0), budget_bytes)?;
    let start = groups[..start_group].iter().map(|g| g.segments).sum();
    let len = groups[start_group..start_group + len_groups]
        .iter()
        .map(|g| g.segments)
        .sum();
    let reaches_end = start_group + len_groups == groups.len();
    let takes_active = active_used && reaches_end;
    Some(Choice {
        start,
        len,
        seal_active: takes_active || (active_used && st.segs.free_slots() > SEAL_SLOTS_SPARE),
        takes_active,
        reaches_end,
        by_garbage: true,
    })
}

/// The groups of `segs` (in log order) with their counts; `None` if a count is unknown.
fn groups_of(segs: &[Arc<Segment>]) -> Option<Vec<Group>> {
    let mut groups: Vec<Group> = Vec::new();
    let mut major = None;
    for seg in segs {
        let (records, dead) = seg.counts()?;
        if major != Some(seg.header.order.major) {
            major = Some(seg.header.order.major);
            groups.push(Group::default());
        }
        let g = groups.last_mut()?;
        g.segments += 1;
        g.records += records;
        g.dead += dead;
        g.bytes += disk_bytes(seg);
    }
    Some(groups)
}

/// (first group, groups) of the range with the most dead records per record among those
/// with at least `need` dead records, within `budget_bytes` (or a single group), leaving at
/// most `SEALED_GROUPS_MAX` groups.
fn best_range(groups: &[Group], need: f64, budget_bytes: u64) -> Option<(usize, usize)> {
    // After the pass: the groups outside the range, its output, and the new active segment's.
    let len_min = (groups.len() + 1).saturating_sub(SEALED_GROUPS_MAX).max(1);
    let mut best: Option<(f64, usize, usize)> = None;
    for start in 0..groups.len() {
        let mut sum = Group::default();
        for (len, g) in (1..).zip(&groups[start..]) {
            sum.records += g.records;
            sum.dead += g.dead;
            sum.bytes += g.bytes;
            if len > 1 && sum.bytes > budget_bytes {
                break;
            }
            if len < len_min || (sum.dead as f64) < need {
                continue;
            }
            let ratio = sum.dead as f64 / sum.records.max(1) as f64;
            if best.is_none_or(|(b, _, _)| ratio > b) {
                best = Some((ratio, start, len));
            }
        }
    }
    best.map(|(_, start, len)| (start, len))
}

/// How many of the segments of `sealed` (from its start) a pass with `budget_bytes` takes:
/// whole groups, at least one group, while their disk blocks fit the budget.
fn range_len(sealed: &[Arc<Segment>], budget_bytes: u64) -> usize {
    let mut bytes = 0u64;
    let mut n = 0;
    while n < sealed.len() {
        let major = sealed[n].header.order.major;
        let group = sealed[n..]
            .iter()
            .take_while(|s| s.header.order.major == major)
            .count();
        let group_bytes: u64 = sealed[n..n + group].iter().map(|s| disk_bytes(s)).sum();
        if n > 0 && bytes + group_bytes > budget_bytes {
            break;
        }
        bytes += group_bytes;
        n += group;
    }
    n
}

/// Disk blocks a segment holds, in bytes (0 if the file system will not say).
fn disk_bytes(seg: &Segment) -> u64 {
    seg.file().metadata().map_or(0, |m| m.blocks() * 512)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(records: u64, dead: u64) -> Group {
        Group {
            segments: 1,
            records,
            dead,
            bytes: records * 100,
        }
    }

    #[test]
    fn the_range_with_most_garbage_per_record_that_drops_enough() {
        // Old groups hold the most garbage; the young ones little.
        let groups = [g(100, 90), g(100, 80), g(100, 40), g(100, 10)];
        assert_eq!(best_range(&groups, 80.0, u64::MAX), Some((0, 1)));
        assert_eq!(best_range(&groups, 150.0, u64::MAX), Some((0, 2)));
        // More than the old groups hold: the range grows into the younger ones.
        assert_eq!(best_range(&groups, 200.0, u64::MAX), Some((0, 3)));
        // Not in the log at all.
        assert_eq!(best_range(&groups, 500.0, u64::MAX), None);
        // Garbage in the middle of the log.
        let groups = [g(100, 10), g(100, 95), g(100, 10)];
        assert_eq!(best_range(&groups, 50.0, u64::MAX), Some((1, 1)));
    }

    #[test]
    fn the_budget_bounds_a_range_of_several_groups_but_not_one() {
        let groups = [g(100, 90), g(100, 80), g(100, 10)];
        // Two groups are 20 000 bytes: over the budget, so no range drops 150.
        assert_eq!(best_range(&groups, 150.0, 15_000), None);
        // One group over the budget is still taken.
        assert_eq!(best_range(&groups, 50.0, 5_000), Some((0, 1)));
    }

    #[test]
    fn a_range_is_long_enough_to_keep_the_groups_bounded() {
        let mut groups = vec![g(100, 90)];
        groups.extend((0..SEALED_GROUPS_MAX).map(|_| g(100, 10)));
        // 13 groups: leaving at most 12 sealed ones (the output among them) takes two.
        let (_, len) = best_range(&groups, 10.0, u64::MAX).unwrap();
        assert_eq!(len, 2);
    }
}
