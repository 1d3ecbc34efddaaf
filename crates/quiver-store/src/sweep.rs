//! The active expiry sweep: keys whose expiry time has come are deleted — a tombstone each,
//! as a DEL writes — so that their records become garbage for compaction and no older value
//! of the key can come back after a rebuild. Reads treat such keys as absent whether or not
//! the sweep has reached them (lazy expiry); the sweep bounds how long they hold RAM and disk.
//!
//! Per partition and call: the summary (`expiry::Expiries`) names up to `max` due keys by
//! hash; their records are found and read under the shared lock; then, under the exclusive
//! lock, each key is looked up again and deleted only if it is still expired (a writer may
//! have set it anew meanwhile).

use crate::error::Result;
use crate::hash::KeyHash;
use crate::log::format::{self, ValueKind, RECORD_EXT_LEN_MAX, RECORD_HEADER_LEN};
use crate::lookup::{self, Found};
use crate::options::Durability;
use crate::partition::{PartState, Partition, StoreCtx};
use crate::write::{self, Framing, WriteOp};

/// Deletes up to `max` expired keys of the partition; returns how many it deleted.
pub(crate) fn sweep_partition(ctx: &StoreCtx, part: &Partition, max: usize) -> Result<u64> {
    let now = ctx.now_ms();
    // 1. The due keys' names, read under the shared lock.
    let (keys, stale) = {
        let st = part.state.read();
        let due = st.expiries.due(now, max);
        if due.is_empty() {
            return Ok(0);
        }
        let mut keys: Vec<(u32, Vec<u8>)> = Vec::with_capacity(due.len());
        let mut stale = Vec::new();
        for h in due {
            match expired_key_of(&st, KeyHash(h), now)? {
                Some(k) => keys.push(k),
                None => stale.push(h),
            }
        }
        (keys, stale)
    };
    // 2. Delete those still expired, under the exclusive lock.
    let mut st = part.state.write();
    let _stall = ctx.stalls.hold("expiry sweep");
    for h in stale {
        // No expired record of that hash: the summary was behind (a key it names was
        // replaced or deleted through a 64-bit hash collision); drop the entry.
        st.expiries.remove(h);
    }
    if keys.is_empty() {
        return Ok(0);
    }
    let lookups: Vec<(u32, &[u8], KeyHash)> = keys
        .iter()
        .map(|(ns, k)| (*ns, &k[..], KeyHash::of_ns(*ns, k)))
        .collect();
    let found = lookup::lookup_one_partition(ctx, &st, &lookups, false);
    let mut ops = Vec::new();
    let mut still = Vec::new();
    for ((ns, key, hash), f) in lookups.iter().zip(found) {
        if let Found::Expired { .. } = f {
            ops.push(WriteOp {
                ns: *ns,
                key,
                hash: *hash,
                value: None,
                expire_at: None,
                kind: ValueKind::String,
            });
            still.push(f);
        }
    }
    if ops.is_empty() {
        return Ok(0);
    }
    let run = write::encode(ctx, &ops, &still);
    st.prepare_append(ctx, part.id, &part.dir, run.bytes.len() as u64)?;
    let (locs, res) = write::append_run(ctx, part, &mut st, &run, Framing::Plain);
    write::update_index(&mut st, &ops, &still, &locs);
    res?;
    let swept = locs.iter().filter(|l| l.is_some()).count() as u64;
    if ctx.expired.wanted() {
        let gone = ops.iter().zip(&locs).filter(|(_, l)| l.is_some());
        ctx.expired.add(gone.map(|(op, _)| op.key));
    }
    let lsn = st.appended_lsn;
    drop(st);
    if ctx.opts.durability == Durability::Fsync {
        part.wait_durable(lsn)?;
    }
    Ok(swept)
}

/// The namespace and key of the expired record the index holds for `hash`, if any.
fn expired_key_of(st: &PartState, hash: KeyHash, now: u64) -> Result<Option<(u32, Vec<u8>)>> {
    let mut probe = st.index.probe(hash);
    let mut head = [0u8; RECORD_HEADER_LEN + RECORD_EXT_LEN_MAX];
    while let Some((_, loc)) = st.index.next_candidate(hash.fragment(), &mut probe) {
        let Ok((seg, offset)) = st.segs.resolve(loc) else {
            continue;
        };
        let rec = match st
            .appender
            .buffered_record(offset)
            .filter(|_| std::sync::Arc::ptr_eq(seg, &st.appender.segment))
        {
            Some(b) => b.to_vec(),
            None => {
                let n = seg.read_at(&mut head, offset)?;
                let Some(h) = format::parse_header(&head[..n]) else {
                    continue;
                };
                let mut rec = vec![0u8; h.key_range().end];
                if seg.read_at(&mut rec, offset)? < rec.len() {
                    continue;
                }
                rec
            }
        };
        let Ok(h) = format::check_header(&rec) else {
            continue;
        };
        let ext = h.ext(&rec);
        let key = &rec[h.key_range()];
        if KeyHash::of_ns(ext.namespace, key) == hash && ext.expired_at(now) {
            return Ok(Some((ext.namespace, key.to_vec())));
        }
    }
    Ok(None)
}
