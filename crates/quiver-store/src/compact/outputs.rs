//! The output segments of a compaction pass: copies appended in order, registered as
//! `*.seg.tmp` while written, renamed at the commit, dropped if the pass fails.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::format::{self, CompactionManifest, RecordType, SegmentOrder, SEGMENT_HEADER_LEN};
use crate::log::segment::{
    replace_file, segment_file_name, sync_dir, tmp_segment_file_name, Segment,
};
use crate::log::writer::Appender;
use crate::partition::{new_segment_at, Partition, SegmentSet, StoreCtx};
use crate::stalls::Pacer;

use super::{COMPACTION_WRITE_BYTES, MANIFEST_FILE, MANIFEST_TMP_FILE};

/// Compaction output segments being written.
pub(super) struct Outputs {
    /// Addressing of the snapshot (input locations).
    span_set: SegmentSet,
    /// Order of the last input: outputs take `(major, minor + 1 + i)`, before any later segment
    /// (whose major is larger: a pass never splits a group).
    last_input: SegmentOrder,
    segments: Vec<Arc<Segment>>,
    appender: Option<Appender>,
}

impl Outputs {
    pub(super) fn new(snapshot: &SegmentSet, last_input: SegmentOrder) -> Outputs {
        Outputs {
            span_set: snapshot.clone(),
            last_input,
            segments: Vec::new(),
            appender: None,
        }
    }

    /// Appends a copy of a record (`retype`d: a resolved batch member becomes a plain record),
    /// counted as `dead` or live in the output's counts; returns its new location.
    pub(super) fn append(
        &mut self,
        ctx: &StoreCtx,
        part: &Partition,
        rec: &[u8],
        retype: Option<RecordType>,
        dead: bool,
    ) -> Result<u32> {
        let need = rec.len() as u64;
        let a = match self.appender.as_mut() {
            Some(a) if a.room() >= need => a,
            _ => self.next_output(ctx, part)?,
        };
        let at = match retype {
            Some(ty) => {
                let mut copy = rec.to_vec();
                format::retype_record(&mut copy, ty);
                a.append(&copy)?
            }
            None => a.append(rec)?,
        };
        a.segment.count(1, dead as u64);
        let slot = a.segment.slot();
        Ok(self.span_set.loc(slot, at))
    }

    /// Seals the current output (if any) and starts the next one; returns its appender.
    pub(super) fn next_output(
        &mut self,
        ctx: &StoreCtx,
        part: &Partition,
    ) -> Result<&mut Appender> {
        if let Some(a) = self.appender.as_mut() {
            a.release_unused()?;
        }
        let order = SegmentOrder {
            major: self.last_input.major,
            minor: self.last_input.minor + 1 + self.segments.len() as u32,
        };
        let seg = {
            let mut st = part.state.write();
            let _stall = ctx.stalls.hold("compaction output");
            let slot = st.segs.free_slot(part.id)?;
            let file_id = ctx.alloc_file_id();
            let seg = Arc::new(new_segment_at(
                ctx,
                part.id,
                &part.dir.join(tmp_segment_file_name(file_id)),
                file_id,
                slot,
                order,
            )?);
            st.segs.register(seg.clone());
            seg
        };
        self.segments.push(seg.clone());
        Ok(self.appender.insert(Appender::new(
            seg,
            SEGMENT_HEADER_LEN as u64,
            true,
            COMPACTION_WRITE_BYTES,
            ctx.space_short.clone(),
            None,
        )))
    }

    /// Writes out buffered records and makes the outputs durable: their pages handed to
    /// writeback a step at a time first, `pacer` sleeping between steps, so the fdatasyncs
    /// find little left to write (`Segment::write_back`).
    pub(super) fn finish(&mut self, pacer: &mut Pacer) -> Result<()> {
        if let Some(a) = self.appender.as_mut() {
            a.release_unused()?;
        }
        for seg in &self.segments {
            seg.write_back(seg.header.segment_bytes, || {
                pacer.step_done();
            });
            seg.sync_data()?;
        }
        Ok(())
    }

    /// Commits the compaction on disk: the manifest in place is the commit point (a failure
    /// before it leaves the compaction undone: `abandon`; none after it may: `install`).
    pub(super) fn commit(&self, dir: &Path, inputs: &[Arc<Segment>]) -> Result<()> {
        let manifest = CompactionManifest {
            inputs: inputs.iter().map(|s| s.file_id()).collect(),
            outputs: self.segments.iter().map(|s| s.file_id()).collect(),
        };
        let path = dir.join(MANIFEST_FILE);
        let encoded = manifest.encode();
        let tmp = dir.join(MANIFEST_TMP_FILE);
        replace_file(
            &tmp,
            &path,
            encoded.as_bytes(),
            "write compaction manifest",
            || {},
        )
    }

    /// After `commit`: the outputs renamed to their final names and reopened. If this fails,
    /// the compaction is committed but not finished on disk: opening the store finishes it
    /// (or, if the manifest's rename never reached the disk, drops the outputs).
    pub(super) fn install(&self, dir: &Path) -> Result<Vec<Arc<Segment>>> {
        sync_dir(dir)?;
        let mut reopened = Vec::with_capacity(self.segments.len());
        for seg in &self.segments {
            let to = dir.join(segment_file_name(seg.file_id()));
            fs::rename(&seg.path, &to)
                .map_err(|e| Error::io("rename compaction output", &to, e))?;
            let out = Segment::open(to, false)?;
            reopened.push(Arc::new(out));
        }
        sync_dir(dir)?;
        Ok(reopened)
    }

    /// Drops unfinished outputs: frees their slots and deletes their files.
    pub(super) fn abandon(self, part: &Partition) {
        let mut st = part.state.write();
        for seg in &self.segments {
            st.segs.unregister(seg.slot());
            let _ = fs::remove_file(&seg.path);
        }
    }
}
