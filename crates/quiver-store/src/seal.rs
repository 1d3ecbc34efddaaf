//! Seals: the local proof that a partition's batch parts ended by a BatchEnd are committed.
//!
//! A multi-partition batch writes one part per partition, the one carrying the commit record
//! last; the other parts end with a BatchEnd. Replay takes such a part as committed when any
//! record follows it in its own partition's log (every record after it was written after the
//! whole batch was: the batch held the partition's lock throughout, and a failed batch takes
//! its parts back), or when the batch's commit record is found in another partition. A part
//! that is the last record of its log depends on that other partition, whose commit record a
//! checkpoint (replay starts after it) or a compaction (it drops commit records of resolved
//! parts) can take out of what replay sees. So before either, every partition with such parts
//! gets a seal after them: a BatchCommit record of no member (replay ignores it, and
//! compaction keeps it unless its range is a prefix of the log).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::Result;
use crate::log::format::{self, COMMIT_RECORD_LEN};
use crate::options::Durability;
use crate::partition::{PartState, Partition, StoreCtx};

/// Notes that `part`'s log holds a part ended by a BatchEnd (locked by the caller). The
/// proof that it is committed is the batch's commit record in another partition, until a
/// record follows it here: [`seal_parts`] writes one before a checkpoint or compaction can
/// take that commit record out of what replay sees.
pub(crate) fn note_unsealed(ctx: &StoreCtx, part: &Arc<Partition>) {
    if !part.unsealed.swap(true, Ordering::AcqRel) {
        ctx.unsealed.lock().push(Arc::clone(part));
    }
}

/// Appends a seal (a BatchCommit record of no member, which replay ignores) to every
/// partition that holds BatchEnd parts written since its last seal: from it on, replay of
/// that partition needs no other partition to know those parts committed. Called before
/// anything that can hide a commit record from a later replay: a checkpoint (after its
/// snapshot), a compaction (before its swap), a split or merge. A batch written after this
/// starts is after the snapshot or range of the caller, so it needs no seal yet.
pub(crate) fn seal_parts(ctx: &StoreCtx) -> Result<()> {
    let list = std::mem::take(&mut *ctx.unsealed.lock());
    let mut failure = None;
    for part in list {
        let mut st = part.state.write();
        if !part.unsealed.load(Ordering::Acquire) {
            continue;
        }
        if st.retired {
            part.unsealed.store(false, Ordering::Release);
            continue;
        }
        let res = append_commit_record(ctx, part.id, &part.dir, &mut st, ctx.alloc_seq(), 0)
            .and_then(|()| st.appender.flush())
            .and_then(|()| {
                if ctx.opts.durability == Durability::Fsync {
                    st.sync_active()
                } else {
                    Ok(())
                }
            });
        match res {
            Ok(()) => part.unsealed.store(false, Ordering::Release),
            Err(e) => {
                drop(st);
                ctx.unsealed.lock().push(Arc::clone(&part));
                failure.get_or_insert(e);
            }
        }
    }
    failure.map_or(Ok(()), Err)
}

/// Appends a BatchCommit record of batch `seq` announcing `members` members in this
/// partition (locked by the caller): a seal (`members` 0, a fresh seq), or the commit record a
/// crash kept from being written (opening found the batch committed in another partition and
/// applied this partition's part: `recovery::resolve_batches`).
pub(crate) fn append_commit_record(
    ctx: &StoreCtx,
    part: u32,
    dir: &Path,
    st: &mut PartState,
    seq: u64,
    members: u32,
) -> Result<()> {
    let mut buf = Vec::with_capacity(COMMIT_RECORD_LEN);
    format::encode_commit(&mut buf, seq, members);
    st.ensure_room(ctx, part, dir, buf.len() as u64)?;
    st.append(&buf)?;
    st.count_appended_dead_here(); // a BatchEnd or commit record is never live
    Ok(())
}
