//! Index resizing: a new index sized for the partition's live keys replaces the old one.
//!
//! 1. Under the partition lock, note the log's end and the number of live keys.
//! 2. Without the lock, read the log up to that end and insert every put record the current
//!    index still points at (see `maintenance::scan_records`): only live keys, so no tombstones
//!    and no room taken by keys deleted long ago, and no key is read twice.
//! 3. Replay what was appended meanwhile: without the lock while there is much of it (each
//!    round reads what writers appended during the one before), then, under the lock, the
//!    last few records, and swap the indexes. Writers wait only for that last round.
//!
//! The new index is sized for the live keys and for those writers are expected to insert
//! while it is built (the last resize's pace): meanwhile they go to the old index, its spill
//! once its main table is full (`index`), and the catch-up brings them over.
//!
//! The log and the counters are untouched: resizing changes no record.

use crate::builder::IndexBuilder;
use crate::error::{Error, Result};
use crate::index::{Index, SpareSpill, LOAD_AFTER_GROWTH};
use crate::maintenance::{self, LogPos, ScanMode};
use crate::partition::{MaintenanceState, Partition, StoreCtx};
use crate::stalls::Pacer;

/// Rebuilds tried before giving up, each sized for what outran the previous one: writers can
/// insert keys faster than a rebuild catches up only so many times in a row.
const RESIZE_ATTEMPTS_MAX: usize = 4;

/// Rounds of catching up without the lock (step 3) at most. Each round replays what the
/// writers appended during the one before, so while the replay outpaces them the rounds
/// shrink geometrically and few are needed; writers faster than the replay leave the rest to
/// the round under the lock.
const CATCH_UP_ROUNDS_MAX: usize = 16;

/// Appended bytes (in the same segment) few enough to replay under the lock: ~1K records.
const CATCH_UP_LOCKED_BYTES: u64 = 64 << 10;

/// The most a resize sizes for beyond the live keys, per live key, whatever the writers' pace:
/// the RAM an index may hold for keys still to come (a load of 0.375 if none come: 16 bytes a
/// key).
const RESIZE_PACE_MAX: f64 = 1.0;
// An index sized at the most is not at once too empty, and rebuilt smaller.
const _: () = assert!(LOAD_AFTER_GROWTH / (1.0 + RESIZE_PACE_MAX) > maintenance::LOAD_SHRINK);

/// Rebuilds the partition's index with room for `extra_keys` keys beyond the live ones (and
/// for those the writers are expected to insert meanwhile). The caller holds the partition's
/// maintenance lock, `m`.
pub(crate) fn resize(
    ctx: &StoreCtx,
    part: &Partition,
    m: &mut MaintenanceState,
    extra_keys: usize,
) -> Result<()> {
    let mut extra = extra_keys;
    for _ in 0..RESIZE_ATTEMPTS_MAX {
        if let Some(pace) = attempt(ctx, part, extra, m.resize_pace)? {
            m.resize_pace = pace;
            ctx.maintenance_runs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(());
        }
        extra = extra * 2 + part.state.read().index.live() + 1024;
    }
    Err(Error::IndexFull {
        partition: part.id,
        keys: extra_keys,
    })
}

/// One rebuild, sized for the live keys, `extra_keys` and the keys expected meanwhile at
/// `pace`; returns the pace it saw. `Ok(None)` if writers inserted more keys meanwhile than
/// it has room for, or a split changed the partition's range.
fn attempt(ctx: &StoreCtx, part: &Partition, extra_keys: usize, pace: f64) -> Result<Option<f64>> {
    // Not slowed (writers fill the old index's spill meanwhile), but handing the core to a
    // serving thread that shares it every `YIELD_SLICE` (`Pacer::yielding`).
    let mut pacer = Pacer::yielding();
    // Where the last resize's pace says the main table fills before this one ends, the spill
    // the writers will open is made here, its pages faulted in, not by the writer (`SpareSpill`).
    let wanted = {
        let st = part.state.read();
        let coming = st.index.live() as f64 * pace.min(RESIZE_PACE_MAX);
        st.index.spare_spill_wanted(coming as usize)
    };
    let spare = wanted.map(|cap| {
        SpareSpill::prefaulted(cap, || {
            pacer.step_done();
        })
    });
    // `_unkept`: a spare the index did not take (it spilled meanwhile), freed after the lock.
    let (segs, end, live, spilled, range, _unkept) = {
        let mut st = part.state.write();
        let _stall = ctx.stalls.hold("index resize snapshot");
        let unkept = spare.and_then(|s| st.index.keep_spare_spill(s));
        st.appender.flush()?;
        (
            st.segs.ordered.clone(),
            LogPos::end_of(&st),
            st.index.live(),
            st.index.spilled(),
            st.range,
            unkept,
        )
    };
    // Keys live at the snapshot whose record precedes it are at most `live`: no overflow here.
    // The keys writers insert during this rebuild are sized for too, at the pace of the last
    // one (or as many as spilled since): else they fill the new table's room before it
    // replaces the old one, the rest spill, and the next resize starts with a spill half
    // full — writers would wait for it (BENCHMARKS §35).
    let expected = (live as f64 * pace.min(RESIZE_PACE_MAX)) as usize;
    let mut index = Index::for_keys(live + expected.max(spilled) + extra_keys);
    let mode = ScanMode {
        keep_bytes: false,
        // A damaged value is the reader's to report; the index only needs the key.
        verify_values: false,
        on_damage: ctx.opts.on_damage,
    };
    maintenance::scan_records(ctx, part, &segs, Some(end), mode, |r| {
        pacer.done(1);
        if r.live {
            index.insert(r.hash, r.loc);
        }
        Ok(())
    })?;

    let mut b = IndexBuilder::for_range(index, range);
    let mut from = end;
    for _ in 0..CATCH_UP_ROUNDS_MAX {
        let (segs, to) = {
            let mut st = part.state.write();
            let _stall = ctx.stalls.hold("index resize snapshot");
            st.appender.flush()?;
            (st.segs.clone(), LogPos::end_of(&st))
        };
        if to.file_id == from.file_id && to.offset - from.offset <= CATCH_UP_LOCKED_BYTES {
            break;
        }
        // The records up to `to` stay where they are: the maintenance lock keeps compaction
        // away, and appends only add after them.
        maintenance::replay_between(&segs, from, to, &mut b, &mut pacer)?;
        if b.too_full() {
            // Writers outran the size chosen: a larger one is tried at once.
            return Ok(None);
        }
        from = to;
    }

    let mut st = part.state.write();
    let stall = ctx.stalls.hold("index resize catch-up");
    if st.range != range {
        // A split moved keys out meanwhile: what was replayed may hold them. Start again.
        return Ok(None);
    }
    st.appender.flush()?;
    maintenance::catch_up(&st, from, &mut b)?;
    if b.too_full() {
        return Ok(None);
    }
    // Keys that spilled before the snapshot came in while writers waited for room, or
    // during the last resize: the pace counts them too.
    let inserted = b.index.live().saturating_sub(live).max(spilled);
    let old = std::mem::replace(&mut st.index, b.index);
    st.dirty = true;
    // The old tables are freed once writers can go on.
    drop(stall);
    drop(st);
    drop(old);
    Ok(Some(inserted as f64 / live.max(1) as f64))
}
