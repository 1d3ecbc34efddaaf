//! `upgrade`: a store of on-disk format 1 — written here byte by byte as version 1 wrote it
//! (keys spread by the top bits of their xxh3 hash, segment headers of version 1 with the
//! partition count, records without `ext`) — is converted, verified and put in place.

use std::path::Path;

use quiver_store::hash::KeyHash;
use quiver_store::layout::partition_dir;
use quiver_store::log::format::{
    encode_commit, encode_record, RecordExt, RecordType, SegmentHeader, SegmentOrder,
    FORMAT_VERSION, FORMAT_VERSION_V1,
};
use quiver_store::log::segment::segment_file_name;
use quiver_store::{upgrade, BackendKind, Error, Options, Store};

use crate::common::{key, small_options, value};

const SEGMENT_BYTES: u64 = 128 << 10;

/// One record of the version-1 store to write.
enum Rec {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// A batch of puts; `committed: false` leaves out its commit record (a crash).
    Batch(Vec<(Vec<u8>, Vec<u8>)>, bool),
}

/// Writes a version-1 store of `partitions` partitions holding `recs`, in order.
fn write_v1_store(dir: &Path, partitions: u32, recs: &[Rec]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("QUIVER"),
        format!("quiver-store\nformat 1\npartitions {partitions}\nsegment_bytes {SEGMENT_BYTES}\n"),
    )
    .unwrap();
    let part_of = |k: &[u8]| KeyHash::of(k).legacy_partition(partitions) as usize;
    let mut logs: Vec<Vec<u8>> = vec![Vec::new(); partitions as usize];
    for (seq, r) in (1..).zip(recs) {
        match r {
            Rec::Put(k, v) => encode_record(
                &mut logs[part_of(k)],
                RecordType::Put,
                seq,
                RecordExt::NONE,
                k,
                v,
            ),
            Rec::Delete(k) => encode_record(
                &mut logs[part_of(k)],
                RecordType::Delete,
                seq,
                RecordExt::NONE,
                k,
                b"",
            ),
            Rec::Batch(members, committed) => {
                let mut counts = vec![0u32; partitions as usize];
                for (k, v) in members {
                    let p = part_of(k);
                    encode_record(
                        &mut logs[p],
                        RecordType::BatchPut,
                        seq,
                        RecordExt::NONE,
                        k,
                        v,
                    );
                    counts[p] += 1;
                }
                for (p, &n) in counts.iter().enumerate() {
                    if n > 0 && *committed {
                        encode_commit(&mut logs[p], seq, n);
                    }
                }
            }
        }
    }
    for (p, log) in logs.iter().enumerate() {
        let pdir = partition_dir(dir, p as u32);
        std::fs::create_dir_all(&pdir).unwrap();
        let file_id = p as u64 + 1;
        let mut header = SegmentHeader {
            version: FORMAT_VERSION_V1,
            partition: p as u32,
            slot: 0,
            file_id,
            order: SegmentOrder { major: 1, minor: 0 },
            segment_bytes: SEGMENT_BYTES,
        }
        .encode();
        // Version 1 kept the partition count at bytes 16..20.
        header[16..20].copy_from_slice(&partitions.to_le_bytes());
        let crc = crc32c::crc32c(&header[..60]);
        header[60..64].copy_from_slice(&crc.to_le_bytes());
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(log);
        assert!(bytes.len() as u64 <= SEGMENT_BYTES);
        bytes.resize(SEGMENT_BYTES as usize, 0);
        std::fs::write(pdir.join(segment_file_name(file_id)), bytes).unwrap();
    }
}

#[test]
fn a_version_1_store_is_converted_verified_and_put_in_place() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let mut recs = Vec::new();
    for i in 0..300 {
        recs.push(Rec::Put(key(i), value(i, 0)));
    }
    for i in 0..50 {
        recs.push(Rec::Put(key(i), value(i, 1)));
    }
    for i in 50..80 {
        recs.push(Rec::Delete(key(i)));
    }
    recs.push(Rec::Batch(
        (1000..1010).map(|i| (key(i), value(i, 2))).collect(),
        true,
    ));
    recs.push(Rec::Batch(
        (2000..2010).map(|i| (key(i), value(i, 3))).collect(),
        false,
    ));
    write_v1_store(&dir, 4, &recs);

    let opts = small_options(BackendKind::Mmap);
    let err = Store::open(&dir, opts.clone()).err().unwrap();
    assert!(matches!(err, Error::OldFormat { found: 1, .. }), "{err:?}");

    let report = upgrade(&dir, opts.clone()).unwrap();
    assert_eq!(report.keys, 300 - 30 + 10);
    assert_eq!(report.old_store, root.path().join("store.v1"));
    assert_eq!(
        (report.from_version, report.to_version),
        (1, FORMAT_VERSION)
    );

    let store = Store::open(&dir, opts.clone()).unwrap();
    assert_eq!(store.len(), 280);
    assert_eq!(store.slot_ranges().len(), 4);
    for i in 0..300 {
        let expected = match i {
            0..50 => Some(value(i, 1)),
            50..80 => None,
            _ => Some(value(i, 0)),
        };
        assert_eq!(
            store.get(&key(i)).unwrap().map(|v| v.to_vec()),
            expected,
            "key {i}"
        );
    }
    for i in 1000..1010 {
        assert_eq!(store.get(&key(i)).unwrap().unwrap(), value(i, 2));
    }
    for i in 2000..2010 {
        assert_eq!(
            store.get(&key(i)).unwrap(),
            None,
            "an uncommitted batch stays out"
        );
    }
    let text = std::fs::read_to_string(dir.join("QUIVER")).unwrap();
    assert!(text.contains("format 2") && text.contains("partition 3 slots 12288-16383"));
    store.close().unwrap();

    // Upgrading again changes nothing; the old store is still refused as it was.
    assert!(matches!(
        upgrade(&dir, opts.clone()),
        Err(Error::AlreadyCurrent { .. })
    ));
    assert!(matches!(
        Store::open(&report.old_store, opts),
        Err(Error::OldFormat { .. })
    ));
}

#[test]
fn an_interrupted_upgrade_is_started_again() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let recs: Vec<Rec> = (0..100).map(|i| Rec::Put(key(i), value(i, 0))).collect();
    write_v1_store(&dir, 2, &recs);
    // What a crash during the copy leaves: a partial new store beside the old one.
    let partial = root.path().join("store.upgrading");
    let s = Store::open(&partial, Options::default()).unwrap();
    s.put(b"half", b"done").unwrap();
    s.close().unwrap();
    let report = upgrade(&dir, small_options(BackendKind::Pread)).unwrap();
    assert_eq!(report.keys, 100);
    let store = Store::open(&dir, small_options(BackendKind::Pread)).unwrap();
    assert_eq!(store.len(), 100);
    assert_eq!(store.get(b"half").unwrap(), None);
    assert!(!partial.exists());
}
