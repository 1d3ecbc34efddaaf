//! `check`: verifies every record of every segment (header, key and value checksums), every
//! index entry (it must point at a put record, in a segment of the log, whose key hashes to
//! the entry's fragment), the key counts (per namespace and per slot: those of the index's
//! entries), and that the log's segments are exactly the partition's segment files.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::key_counts::NsKeys;
use crate::large_hash::HashValue;
use crate::log::format::{self, ValueKind, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::log::reader::{Scanner, Step};
use crate::log::segment::SEGMENT_SUFFIX;
use crate::partition::{PartState, Partition};
use crate::slot::key_slot;

/// What [`crate::Store::check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub segments: u64,
    pub records: u64,
    pub index_entries: u64,
    /// Every problem found, naming file and offset. Empty means the store is intact.
    pub problems: Vec<String>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

pub(crate) fn check_partition(part: &Partition, report: &mut CheckReport) -> Result<()> {
    // Maintenance would change the files under the comparison below.
    let _m = part.maintenance.lock();
    // Records still in the `none`-mode buffer are checked in the file, like the others.
    part.state.write().appender.flush()?;
    // Shared lock: writers wait while this partition is checked; readers go on.
    let st = part.state.read();
    check_files(part, &st, report)?;
    let end = (st.segs.active().file_id(), st.appender.end());
    for seg in &st.segs.ordered {
        report.segments += 1;
        let limit = if seg.file_id() == end.0 {
            end.1
        } else {
            u64::MAX
        };
        let mut sc = Scanner::new(seg, SEGMENT_HEADER_LEN as u64, limit, true);
        loop {
            match sc.next_step()? {
                Step::Record {
                    offset, value_ok, ..
                } => {
                    report.records += 1;
                    if !value_ok {
                        report.problems.push(format!(
                            "{} at offset {offset}: record value checksum mismatch",
                            seg.path.display()
                        ));
                    }
                }
                Step::Damaged {
                    offset,
                    resume_at,
                    reason,
                } => report.problems.push(format!(
                    "{} at offset {offset}: {reason} ({} bytes unreadable)",
                    seg.path.display(),
                    resume_at - offset
                )),
                Step::End { offset, torn } => {
                    if let Some(reason) = torn {
                        report.problems.push(format!(
                            "{} at offset {offset}: {reason}",
                            seg.path.display()
                        ));
                    }
                    break;
                }
            }
        }
    }
    let ix = &st.index;
    let mut counted = NsKeys::for_range(st.range);
    for pos in 0..ix.slots() {
        let Some(loc) = ix.live_at(pos) else { continue };
        report.index_entries += 1;
        let frag = ix.frag_at(pos);
        let problem = match st.segs.resolve(loc) {
            Err(e) => Some(e.to_string()),
            Ok((seg, offset)) if !st.segs.ordered.iter().any(|s| Arc::ptr_eq(s, seg)) => {
                Some(format!(
                    "{} at offset {offset}: index entry points into a segment outside the log",
                    seg.path.display()
                ))
            }
            Ok((seg, offset)) => {
                let mut head = [0u8; RECORD_HEADER_LEN];
                seg.read_at(&mut head, offset)?;
                match format::parse_header(&head) {
                    None => Some(format!(
                        "{} at offset {offset}: index entry points at no record",
                        seg.path.display()
                    )),
                    Some(h) => {
                        let mut rec = vec![0u8; h.record_len()];
                        seg.read_at(&mut rec, offset)?;
                        match format::decode_record(&rec, false) {
                            Err(r) => Some(format!("{} at offset {offset}: {r}", seg.path.display())),
                            Ok(v) if !v.header.ty.is_put() => Some(format!(
                                "{} at offset {offset}: index entry points at a {:?} record",
                                seg.path.display(),
                                v.header.ty
                            )),
                            Ok(v) if KeyHash::of_ns(v.ext.namespace, &rec[v.key.clone()]).fragment() != frag => Some(format!(
                                "{} at offset {offset}: index fragment does not match the record's key",
                                seg.path.display()
                            )),
                            Ok(v) => {
                                // A flushed namespace's entries wait for compaction, uncounted.
                                if st.dbs.is_live(v.ext.namespace) {
                                    counted.add(v.ext.namespace, key_slot(&rec[v.key.clone()]));
                                }
                                let packed = match v.ext.kind {
                                    ValueKind::Hash => HashValue::check(&rec[v.value.clone()]).err(),
                                    ValueKind::String => None,
                                };
                                packed.map(|e| format!("{} at offset {offset}: {e}", seg.path.display()))
                            }
                        }
                    }
                }
            }
        };
        if let Some(p) = problem {
            report
                .problems
                .push(format!("partition {} slot {pos}: {p}", part.id));
        }
    }
    check_counts(part.id, &st.ns_keys, &counted, report);
    Ok(())
}

/// The partition's key counts (`kept`) are those of its index's entries (`counted`).
fn check_counts(part: u32, kept: &NsKeys, counted: &NsKeys, report: &mut CheckReport) {
    let nss: BTreeSet<u32> = kept.iter().chain(counted.iter()).map(|e| e.0).collect();
    for ns in nss {
        let (k, c) = (kept.get(ns), counted.get(ns));
        if k != c {
            report.problems.push(format!(
                "partition {part}: namespace {ns} counts {k} keys, its index holds {c}"
            ));
        }
        let slots = |n: &NsKeys| -> Vec<u32> {
            n.iter()
                .find(|e| e.0 == ns)
                .map_or_else(Vec::new, |e| e.2.to_vec())
        };
        let (ks, cs) = (slots(kept), slots(counted));
        if let Some(i) = (0..ks.len().max(cs.len()))
            .find(|&i| ks.get(i).copied().unwrap_or(0) != cs.get(i).copied().unwrap_or(0))
        {
            report.problems.push(format!(
                "partition {part}: namespace {ns}: the count of the range's slot number {i} \
                 is {}, its index holds {}",
                ks.get(i).copied().unwrap_or(0),
                cs.get(i).copied().unwrap_or(0)
            ));
        }
    }
}

/// The segments of the log are exactly the partition's `*.seg` files (none missing, none
/// left over).
fn check_files(part: &Partition, st: &PartState, report: &mut CheckReport) -> Result<()> {
    let in_log: BTreeSet<String> = st
        .segs
        .ordered
        .iter()
        .filter_map(|s| s.path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let mut on_disk = BTreeSet::new();
    let entries = std::fs::read_dir(&part.dir)
        .map_err(|e| Error::io("list partition directory", &part.dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list partition directory", &part.dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(SEGMENT_SUFFIX) {
            on_disk.insert(name);
        }
    }
    for name in in_log.difference(&on_disk) {
        report.problems.push(format!(
            "partition {}: segment {name} is in the log but not on disk",
            part.id
        ));
    }
    for name in on_disk.difference(&in_log) {
        report.problems.push(format!(
            "partition {}: {} is not part of the log",
            part.id,
            part.dir.join(name).display()
        ));
    }
    Ok(())
}
