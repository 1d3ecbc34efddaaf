//! SCAN: cursor-based, unordered iteration with Redis semantics. A cursor is a position in
//! the key space — `slot << 32 | order`: the partition owning that hash slot, then a position
//! in hash order within it — not an index slot, so it stays meaningful when an index is
//! resized or compacted, or a partition's range split or merged, between calls: every key
//! present for the whole scan is returned at least once.

use bytes::Bytes;
use quiver_resp::glob_match;

use crate::error::Result;
use crate::hash::KeyHash;
use crate::inner::Table;
use crate::io::ReadRequest;
use crate::log::format;
use crate::partition::{Partition, StoreCtx};

/// One page of a scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanPage {
    /// Cursor for the next call; 0 when the scan is complete.
    pub cursor: u64,
    pub keys: Vec<Bytes>,
}

pub(crate) fn scan(
    ctx: &StoreCtx,
    table: &Table,
    ns: u32,
    cursor: u64,
    pattern: Option<&[u8]>,
    count: usize,
) -> Result<ScanPage> {
    let count = count.max(1);
    let mut page = ScanPage::default();
    let mut cursor = cursor;
    let mut visited = 0usize;
    let (partitioner, parts) = (&table.partitioner, &table.parts);
    loop {
        let Some(p) = partitioner.scan_partition((cursor >> 32) as u32) else {
            page.cursor = 0;
            return Ok(page);
        };
        let (next_order, n) = scan_partition(
            ctx,
            &parts[p],
            ns,
            cursor as u32,
            count - visited,
            pattern,
            &mut page.keys,
        )?;
        visited += n;
        cursor = match next_order {
            Some(o) => ((partitioner.scan_cursor_hi(p) as u64) << 32) | o as u64,
            None if p + 1 < parts.len() => (partitioner.scan_cursor_hi(p + 1) as u64) << 32,
            None => 0,
        };
        if cursor == 0 || visited >= count {
            page.cursor = cursor;
            return Ok(page);
        }
    }
}

/// Returns keys of partition `part` with order in `[from, end)` for an `end` chosen so about
/// `budget` live slots are visited, and how many were; `None` as next order when the
/// partition is done. Empty slots cost nothing against the budget, so a sparse key space is
/// walked to the end rather than answered with empty pages.
fn scan_partition(
    ctx: &StoreCtx,
    part: &Partition,
    ns: u32,
    from: u32,
    budget: usize,
    pattern: Option<&[u8]>,
    keys: &mut Vec<Bytes>,
) -> Result<(Option<u32>, usize)> {
    let st = part.state.read();
    let ix = &st.index;
    let cap = ix.capacity();
    let start = ix.home(KeyHash(from as u64));
    // `budget` live slots of the main table from the start slot: the end slot bounds the
    // order range; the keys in it are in those slots and the chains running past them, in
    // the main table or its spill.
    let mut pos = start;
    let mut live_seen = 0;
    while pos < cap && live_seen < budget {
        live_seen += usize::from(ix.live_at(pos).is_some());
        pos += 1;
    }
    let end_order: u64 = if pos >= cap {
        1 << 32
    } else {
        ix.first_order_of_slot(pos)
    };
    let mut locs: Vec<u32> = Vec::new();
    ix.locs_for_orders(from, end_order, &mut locs);
    // Read the candidates' keys as one vector and keep those in [from, end_order).
    let mut reqs: Vec<ReadRequest<'_>> = Vec::with_capacity(locs.len());
    let now = ctx.now_ms();
    // Records still in the tail buffer (`none` durability) are not in the file yet.
    let mut buffered: Vec<Bytes> = Vec::new();
    for &loc in &locs {
        if let Ok((seg, off)) = st.segs.resolve(loc) {
            if std::sync::Arc::ptr_eq(seg, &st.appender.segment) {
                if let Some(b) = st.appender.buffered_record(off) {
                    buffered.push(b);
                    continue;
                }
            }
            reqs.push(ReadRequest::new(
                seg,
                off,
                crate::partition::first_read_len(64, 0),
            ));
        }
    }
    ctx.backend.read_records(&mut reqs);
    for r in reqs
        .into_iter()
        .map(|r| r.result)
        .chain(buffered.into_iter().map(Ok))
    {
        let Ok(bytes) = r else { continue };
        let Ok(h) = format::check_header(&bytes) else {
            continue;
        };
        // Only the database's keys, and only those whose time has not come.
        let ext = h.ext(&bytes);
        if ext.namespace != ns || ext.expired_at(now) {
            continue;
        }
        let key = bytes.slice(h.key_range());
        let order = KeyHash::of_ns(ns, &key).order() as u64;
        if order < from as u64 || order >= end_order {
            continue;
        }
        if pattern.is_none_or(|p| glob_match(p, &key)) {
            keys.push(key);
        }
    }
    let next = (end_order < (1 << 32)).then_some(end_order as u32);
    Ok((next, live_seen))
}
