//! A write's lookups made before its write locks ([`foresee`], under read locks), kept under
//! the write locks where nothing changed since ([`confirm`]). A writer that finds a partition
//! it needs held by another would wait anyway; looking its keys up meanwhile, under read locks
//! that other lookups and every reader share, takes the lookups' cache misses (an index probe
//! and a read of the candidate record per key: most of a write's hold) out of the time it
//! holds the partition exclusively (BENCHMARKS §38). What a write does is still decided under
//! its write locks, from lookups confirmed there.

use std::sync::Arc;

use crate::hash::KeyHash;
use crate::lookup::{lookup, Found, LookupKey};
use crate::partition::{release_all, PartState, Partition, Shape, StoreCtx};

/// Lookups made under read locks ([`foresee`]), to be confirmed under write locks.
pub(crate) struct Foreseen {
    /// Per item looked up: what its lookup found, and the location its index slot held then.
    seen: Vec<Seen>,
    /// Per partition (the order of the states): its shape when its keys were looked up.
    shapes: Vec<Shape>,
}

struct Seen {
    found: Found,
    /// The location at the found position (`None` where the key was absent).
    loc: Option<u32>,
}

/// Looks up `items` (item `i` in partition `parts[items[i].state]`) under the read locks of
/// `parts`, all taken at once (ascending ids, as they come, as a multi-get takes them): one
/// lookup of every partition's keys overlaps their cache misses.
pub(crate) fn foresee(
    ctx: &StoreCtx,
    parts: &[&Arc<Partition>],
    items: &[LookupKey<'_>],
    verify_values: bool,
) -> Foreseen {
    let guards: Vec<_> = parts.iter().map(|p| p.read_serving()).collect();
    let states: Vec<&PartState> = guards.iter().map(|g| &**g).collect();
    let found = lookup(ctx, &states, items, verify_values);
    let shapes = states.iter().map(|st| st.shape()).collect();
    let seen = found
        .into_iter()
        .zip(items)
        .map(|(found, item)| Seen {
            loc: found
                .pos()
                .and_then(|pos| states[item.state].index.live_at(pos)),
            found,
        })
        .collect();
    release_all(guards);
    Foreseen { seen, shapes }
}

/// The lookups of `items` on the write-locked `states` (those [`foresee`] had read-locked, in
/// the same order): each foreseen result that still holds, a lookup now for the others. A
/// foreseen result holds if its partition has the same shape and a key found still has the
/// location it had at its position (it was not written since), a key absent still has no
/// candidate in the index (none was inserted). A live key whose expiry time has come since
/// is expired. Without `foreseen`, every key is looked up now.
pub(crate) fn confirm(
    ctx: &StoreCtx,
    states: &[&PartState],
    foreseen: Option<Foreseen>,
    items: &[LookupKey<'_>],
    verify_values: bool,
) -> Vec<Found> {
    let Some(Foreseen { seen, shapes }) = foreseen else {
        return lookup(ctx, states, items, verify_values);
    };
    let same_shape: Vec<bool> = states
        .iter()
        .zip(&shapes)
        .map(|(st, &shape)| st.shape() == shape)
        .collect();
    let mut now: Option<u64> = None;
    let mut again: Vec<usize> = Vec::new();
    let mut found: Vec<Found> = seen
        .into_iter()
        .zip(items)
        .enumerate()
        .map(|(i, (seen, item))| {
            if !same_shape[item.state] || !still_holds(states[item.state], &seen, item.hash) {
                again.push(i);
                return Found::Absent;
            }
            match seen.found {
                Found::Live {
                    pos,
                    expire_at: Some(at),
                    ..
                } if at <= *now.get_or_insert_with(|| ctx.now_ms()) => Found::Expired { pos },
                found => found,
            }
        })
        .collect();
    if !again.is_empty() {
        let keys: Vec<LookupKey<'_>> = again.iter().map(|&i| items[i]).collect();
        for (i, f) in again
            .into_iter()
            .zip(lookup(ctx, states, &keys, verify_values))
        {
            found[i] = f;
        }
    }
    found
}

/// Whether what a lookup of a key of hash `hash` saw in `st` (of the same shape) is still so:
/// its position still holds the location it held, or, absent, it still has no candidate.
fn still_holds(st: &PartState, seen: &Seen, hash: KeyHash) -> bool {
    match seen.found {
        Found::Live { pos, .. } | Found::Expired { pos } => st.index.live_at(pos) == seen.loc,
        Found::Absent => st.index.surely_absent(hash),
        Found::Failed(_) => false,
    }
}
