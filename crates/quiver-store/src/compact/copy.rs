//! A pass's step 2: what of its range survives, copied into the outputs, and what the swap must
//! take out of the index (damaged, expired and flushed live records).

use std::ops::Range;
use std::sync::Arc;

use super::outputs::Outputs;
use super::Remap;
use crate::dbs::DbMap;
use crate::error::{show_key, Error, Result};
use crate::hash::KeyHash;
use crate::log::format::{self, RecordExt, RecordHeader, RecordType, ValueKind};
use crate::log::segment::Segment;
use crate::maintenance::{MaintenanceReport, ScannedRecord};
use crate::options::DamagePolicy;
use crate::partition::{Partition, StoreCtx};
use crate::slot::key_slot;

/// A live record the pass drops: its key's namespace and hash slot (whose counts lose it),
/// hash and location (which find its index entry).
#[derive(Clone, Copy)]
pub(super) struct LiveDropped {
    pub ns: u32,
    pub slot: u16,
    pub hash: KeyHash,
    pub loc: u32,
}

impl LiveDropped {
    fn of(r: &ScannedRecord<'_>, ext: RecordExt) -> LiveDropped {
        LiveDropped {
            ns: ext.namespace,
            slot: key_slot(format::record_key(r.bytes)),
            hash: r.hash,
            loc: r.loc,
        }
    }
}

/// What the copy found: where each live record went, and what leaves the log and the index.
#[derive(Default)]
pub(super) struct Copied {
    /// Live records copied: their index entries move at the swap.
    pub remaps: Vec<Remap>,
    /// Live records whose value is damaged (salvage only): dropped from the index at the swap.
    pub lost: Vec<LiveDropped>,
    /// Live records whose expiry time had come: dropped from the index at the swap (if no
    /// writer replaced them meanwhile); `tombstones` of them left a tombstone in the output.
    pub expired: Vec<LiveDropped>,
    /// Records the index still holds whose namespace was flushed (FLUSHDB, which counted them
    /// dead): dropped from the index at the swap.
    pub flushed: Vec<(KeyHash, u32)>,
    pub tombstones: u64,
    /// Dead records dropped, and dead records kept (tombstones, parts replay must find).
    pub dropped: u64,
    pub kept_dead: u64,
}

impl Copied {
    /// Every record that leaves the log.
    pub fn gone(&self) -> u64 {
        self.dropped
            + self.lost.len() as u64
            + self.expired.len() as u64
            + self.flushed.len() as u64
    }
}

/// The copy of one range: its scan's callback (`maintenance::scan_records`) takes each record,
/// and `finish` ends it.
pub(super) struct Copy<'a> {
    pub ctx: &'a StoreCtx,
    pub part: &'a Partition,
    pub out: &'a mut Outputs,
    pub report: &'a mut MaintenanceReport,
    /// Which namespaces databases read (a flushed one's records are garbage).
    pub dbs: &'a DbMap,
    /// The range starts the log: nothing older can lie before it to shadow.
    pub prefix: bool,
    /// The instant expiry is measured at.
    pub now: u64,
    pub copied: Copied,
    /// The members of the batch part the scan is in, held until the record after them.
    pub open: OpenPart,
    /// The batches whose parts were resolved in the range so far: a commit record that opening
    /// wrote apart from its part (`recovery::resolve_batches`) is resolved with it.
    pub resolved: SeqMap<bool>,
}

/// Batches by sequence number: foldhash, not SipHash.
pub(super) type SeqMap<V> = std::collections::HashMap<u64, V, foldhash::fast::RandomState>;

/// A batch part's members met so far, held back: what becomes of them depends on the record
/// that follows them. A part is written whole, in one append (`commit::write_batch`): its
/// members, then its end record (a BatchEnd or BatchCommit announcing how many members the
/// part has). So the part is resolved in the range — `Some(true)` — when its end record comes
/// next and counts the members met; `Some(false)` when it counts others (damage: a salvaging
/// open did not apply the batch). Anything else after them, or the range's end, leaves the
/// part unresolved: kept exactly as it is. (A commit record that opening wrote for a crashed
/// batch lies apart from its part, after it: `Copy::resolved` resolves it with its part.) A
/// whole part in a running store's log is committed: a failed batch takes its parts back,
/// opening cuts off the parts of a batch a crash interrupted, and a BatchEnd part whose commit
/// record lies in another partition is sealed before the pass swaps anything in (`seal`).
/// Reading the range once, instead of a first pass to count each batch's members, took a
/// fifth off an MSET load's compaction. A part held is no larger than the one request that
/// wrote it in one append, so holding it costs what writing it did.
#[derive(Default)]
pub(super) struct OpenPart {
    seq: u64,
    members: Vec<HeldMember>,
    /// The members' bytes (the scan's own are gone after each chunk).
    bytes: Vec<u8>,
}

/// A held member: the scan's `ScannedRecord`, owned.
struct HeldMember {
    segment: Arc<Segment>,
    offset: u64,
    loc: u32,
    header: RecordHeader,
    hash: KeyHash,
    live: bool,
    value_ok: bool,
    bytes: Range<usize>,
}

impl OpenPart {
    fn hold(&mut self, r: &ScannedRecord<'_>) {
        self.seq = r.header.seq;
        let at = self.bytes.len();
        self.bytes.extend_from_slice(r.bytes);
        self.members.push(HeldMember {
            segment: Arc::clone(r.segment),
            offset: r.offset,
            loc: r.loc,
            header: r.header,
            hash: r.hash,
            live: r.live,
            value_ok: r.value_ok,
            bytes: at..self.bytes.len(),
        });
    }
}

impl Copy<'_> {
    /// Copies or drops record `r` (a batch member: once the record after its part is known).
    /// No lock is held here (`scan_records` calls back outside its liveness tests).
    pub fn record(&mut self, r: &ScannedRecord<'_>) -> Result<()> {
        let ty = r.header.ty;
        let open = !self.open.members.is_empty();
        if ty.is_batch_member() {
            if open && self.open.seq != r.header.seq {
                self.close_part(None)?;
            }
            self.open.hold(r);
            return Ok(());
        }
        if ty.ends_part() && open && self.open.seq == r.header.seq {
            let announced = format::commit_count(&r.bytes[r.header.value_range()]);
            let resolved = self.open.members.len() == announced as usize;
            self.resolved.insert(r.header.seq, resolved);
            self.close_part(Some(resolved))?;
            return self.take(r, Some(resolved));
        }
        self.close_part(None)?;
        let resolved_batch = match ty.ends_part() {
            true => self.resolved.get(&r.header.seq).copied(),
            false => None,
        };
        self.take(r, resolved_batch)
    }

    /// The range's end: a part still held is unresolved in it.
    pub fn finish(&mut self) -> Result<()> {
        self.close_part(None)
    }

    /// Copies or drops the held part's members, its batch resolved or not (`None`).
    fn close_part(&mut self, resolved: Option<bool>) -> Result<()> {
        if self.open.members.is_empty() {
            return Ok(());
        }
        let mut open = std::mem::take(&mut self.open);
        let result = open.members.iter().try_for_each(|m| {
            let r = ScannedRecord {
                segment: &m.segment,
                offset: m.offset,
                loc: m.loc,
                header: m.header,
                hash: m.hash,
                live: m.live,
                bytes: &open.bytes[m.bytes.clone()],
                value_ok: m.value_ok,
            };
            self.take(&r, resolved)
        });
        // The buffers serve the next part.
        open.members.clear();
        open.bytes.clear();
        self.open = open;
        result
    }

    /// Copies or drops `r`; `resolved_batch`: for a batch's member or end record, whether its
    /// part is resolved in the range (`Some`) and its batch applied (`true`).
    fn take(&mut self, r: &ScannedRecord<'_>, resolved_batch: Option<bool>) -> Result<()> {
        let resolved_member = r.header.ty.is_batch_member() && resolved_batch.is_some();
        if r.live {
            self.live(r, resolved_member)
        } else {
            self.dead(r, resolved_batch, resolved_member)
        }
    }

    /// A live record: copied, unless damaged (salvage), of a flushed namespace, or expired.
    fn live(&mut self, r: &ScannedRecord<'_>, resolved_member: bool) -> Result<()> {
        if !r.value_ok {
            return self.damaged(r);
        }
        let ty = r.header.ty;
        let ext = r.header.ext(r.bytes);
        let resolved = !ty.is_batch_member() || resolved_member;
        if resolved && !self.dbs.is_live(ext.namespace) {
            // No database reads its namespace, and none ever will: nothing to shadow.
            self.copied.flushed.push((r.hash, r.loc));
            return Ok(());
        }
        if ext.expired_at(self.now) && resolved {
            self.copied.expired.push(LiveDropped::of(r, ext));
            if !self.prefix {
                self.tombstone(r, ext)?;
            }
            return Ok(());
        }
        let retype = resolved_member.then_some(RecordType::Put);
        let to = self
            .out
            .append(self.ctx, self.part, r.bytes, retype, false)?;
        self.copied.remaps.push(Remap {
            hash: r.hash,
            from: r.loc,
            to,
        });
        Ok(())
    }

    /// A live record whose value is damaged: an error, or (salvage) dropped and reported.
    fn damaged(&mut self, r: &ScannedRecord<'_>) -> Result<()> {
        let what = "record value checksum mismatch";
        match self.ctx.opts.on_damage {
            DamagePolicy::Refuse => Err(Error::corruption(&r.segment.path, r.offset, what)),
            DamagePolicy::Salvage => {
                let dropped = LiveDropped::of(r, r.header.ext(r.bytes));
                self.copied.lost.push(dropped);
                self.report.damage.push(format!(
                    "{} at offset {}: {what}; key {} dropped",
                    r.segment.path.display(),
                    r.offset,
                    show_key(format::record_key(r.bytes))
                ));
                Ok(())
            }
        }
    }

    /// The tombstone an expired record leaves where an older copy of its key may lie before
    /// the range.
    fn tombstone(&mut self, r: &ScannedRecord<'_>, ext: RecordExt) -> Result<()> {
        let mut tomb = Vec::new();
        let key = &r.bytes[r.header.key_range()];
        let ext = RecordExt {
            expire_at: None,
            kind: ValueKind::String,
            ..ext
        };
        format::encode_record(&mut tomb, RecordType::Delete, r.header.seq, ext, key, b"");
        self.out.append(self.ctx, self.part, &tomb, None, true)?;
        self.copied.tombstones += 1;
        Ok(())
    }

    /// Dead puts, tombstones, commit records: dropped, or kept (`Some`), retyped or not.
    fn dead(
        &mut self,
        r: &ScannedRecord<'_>,
        resolved_batch: Option<bool>,
        resolved_member: bool,
    ) -> Result<()> {
        let ty = r.header.ty;
        let prefix = self.prefix;
        let flushed = !self.dbs.is_live(r.header.ext(r.bytes).namespace);
        let keep: Option<Option<RecordType>> = match ty {
            RecordType::Put => None,
            // A tombstone of a flushed namespace shadows only records that are dead anyway.
            RecordType::Delete if flushed => None,
            RecordType::Delete | RecordType::Truncate => (!prefix).then_some(None),
            RecordType::BatchPut | RecordType::BatchCommit | RecordType::BatchEnd
                if resolved_batch.is_some() =>
            {
                None
            }
            // A seal (no member) before which everything is resolved in a prefix range.
            RecordType::BatchCommit
                if prefix && format::commit_count(&r.bytes[r.header.value_range()]) == 0 =>
            {
                None
            }
            // A delete of a batch that was applied keeps shadowing older copies.
            RecordType::BatchDelete if resolved_member => {
                (!prefix && resolved_batch == Some(true)).then_some(Some(RecordType::Delete))
            }
            // A part (or commit) that replay must find as it is.
            RecordType::BatchPut
            | RecordType::BatchDelete
            | RecordType::BatchCommit
            | RecordType::BatchEnd => Some(None),
        };
        match keep {
            Some(retype) => {
                self.out
                    .append(self.ctx, self.part, r.bytes, retype, true)?;
                self.copied.kept_dead += 1;
            }
            None => self.copied.dropped += 1,
        }
        Ok(())
    }
}
