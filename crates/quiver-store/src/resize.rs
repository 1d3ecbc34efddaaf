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
//! The log and the counters are untouched: resizing changes no record.

use crate::builder::IndexBuilder;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::maintenance::{self, LogPos, ScanMode};
use crate::partition::{Partition, StoreCtx};

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

/// Rebuilds the partition's index with room for `extra_keys` keys beyond the live ones.
/// The caller holds the partition's maintenance lock.
pub(crate) fn resize(ctx: &StoreCtx, part: &Partition, extra_keys: usize) -> Result<()> {
    let mut extra = extra_keys;
    for _ in 0..RESIZE_ATTEMPTS_MAX {
        if attempt(ctx, part, extra)? {
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

/// One rebuild; `Ok(false)` if writers inserted more keys meanwhile than it has room for, or
/// a split changed the partition's range.
fn attempt(ctx: &StoreCtx, part: &Partition, extra_keys: usize) -> Result<bool> {
    let (segs, end, live, range) = {
        let mut st = part.state.write();
        let _stall = ctx.stalls.hold("index resize snapshot");
        st.appender.flush()?;
        (
            st.segs.ordered.clone(),
            LogPos::end_of(&st),
            st.index.live(),
            st.range,
        )
    };
    // Keys live at the snapshot whose record precedes it are at most `live`: no overflow here.
    let mut index = Index::for_keys(live + extra_keys);
    let mode = ScanMode {
        keep_bytes: false,
        // A damaged value is the reader's to report; the index only needs the key.
        verify_values: false,
        on_damage: ctx.opts.on_damage,
    };
    maintenance::scan_records(ctx, part, &segs, Some(end), mode, |r| {
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
        maintenance::replay_between(&segs, from, to, &mut b)?;
        from = to;
    }

    let mut st = part.state.write();
    let _stall = ctx.stalls.hold("index resize catch-up");
    if st.range != range {
        // A split moved keys out meanwhile: what was replayed may hold them. Start again.
        return Ok(false);
    }
    st.appender.flush()?;
    maintenance::catch_up(&st, from, &mut b)?;
    if b.too_full() {
        return Ok(false);
    }
    st.index = b.index;
    st.dirty = true;
    Ok(true)
}
