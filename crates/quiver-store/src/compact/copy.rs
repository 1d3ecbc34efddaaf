//! A pass's step 2: what of its range survives, copied into the outputs, and what the swap must
//! take out of the index (damaged, expired and flushed live records).

use super::outputs::Outputs;
use super::{Remap, SeqMap};
use crate::dbs::DbMap;
use crate::error::{show_key, Error, Result};
use crate::hash::KeyHash;
use crate::log::format::{self, RecordExt, RecordType, ValueKind};
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

/// The copy of one range: its scan's callback (`maintenance::scan_records`) takes each record.
pub(super) struct Copy<'a> {
    pub ctx: &'a StoreCtx,
    pub part: &'a Partition,
    pub out: &'a mut Outputs,
    pub report: &'a mut MaintenanceReport,
    /// Which namespaces databases read (a flushed one's records are garbage).
    pub dbs: &'a DbMap,
    /// The batches of the range whose outcome is known (`resolved_batches`): applied or not.
    pub resolved: &'a SeqMap<bool>,
    /// The range starts the log: nothing older can lie before it to shadow.
    pub prefix: bool,
    /// The instant expiry is measured at.
    pub now: u64,
    pub copied: Copied,
}

impl Copy<'_> {
    /// Copies or drops record `r`. No lock is held here (`scan_records` calls back outside
    /// its liveness tests).
    pub fn record(&mut self, r: &ScannedRecord<'_>) -> Result<()> {
        let ty = r.header.ty;
        // Some(whole part in range) for a member or commit record of a resolved batch.
        let resolved_batch = self
            .resolved
            .get(&r.header.seq)
            .filter(|_| ty.is_batch_member() || ty.ends_part())
            .copied();
        let resolved_member = ty.is_batch_member() && resolved_batch.is_some();
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
            .append(self.ctx, self.part, r.bytes, (ty, retype), false)?;
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
        self.out
            .append(self.ctx, self.part, &tomb, (RecordType::Delete, None), true)?;
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
                    .append(self.ctx, self.part, r.bytes, (ty, retype), true)?;
                self.copied.kept_dead += 1;
            }
            None => self.copied.dropped += 1,
        }
        Ok(())
    }
}
