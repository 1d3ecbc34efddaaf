//! Damaged files: torn tails, flipped bytes in values, headers, keys and checkpoints, and
//! truncated segment files. Damage is detected and reported, never returned as data; a torn
//! tail is cut off and the store goes on. Damage in the middle of a log makes opening fail
//! (`DamagePolicy::Refuse`, the default) naming file, offset and what may be affected;
//! `Salvage` opens without it, and `repair` leaves a log that opens cleanly again.

use std::path::{Path, PathBuf};

use quiver_store::fields::Fields;
use quiver_store::log::format::{
    encode_record, RecordExt, RecordType, ValueKind, RECORD_HEADER_LEN,
};
use quiver_store::{BackendKind, Batch, DamagePolicy, Error, Options, Store};

use crate::common::{
    checkpoint_files, find_record, flip_byte, key, scan_segment, segment_files, small_options,
    value, write_bytes_at,
};

fn options(partitions: u32, backend: BackendKind) -> Options {
    Options {
        partitions,
        ..small_options(backend)
    }
}

/// Every key in `keys` reads back as `want(i)`, one by one and as one vector.
fn assert_values(s: &Store, keys: &[u64], want: impl Fn(u64) -> Vec<u8>, what: &str) {
    for &i in keys {
        let got = s
            .get(&key(i))
            .unwrap_or_else(|e| panic!("{what}: get key {i}: {e}"));
        assert_eq!(got.as_deref(), Some(&want(i)[..]), "{what}: key {i}");
    }
    let ks: Vec<Vec<u8>> = keys.iter().map(|&i| key(i)).collect();
    let got = s
        .multi_get(&ks)
        .unwrap_or_else(|e| panic!("{what}: multi_get: {e}"));
    for (&i, g) in keys.iter().zip(got) {
        assert_eq!(
            g.as_deref(),
            Some(&want(i)[..]),
            "{what}: multi_get key {i}"
        );
    }
}

/// The segment file holding the last record of `k`, and that record's offset.
fn locate(dir: &Path, partitions: u32, k: &[u8]) -> (PathBuf, u64) {
    let mut found = None;
    for p in 0..partitions {
        for f in segment_files(dir, p) {
            if let Some(off) = find_record(&std::fs::read(&f).unwrap(), k) {
                found = Some((f, off));
            }
        }
    }
    found.unwrap_or_else(|| panic!("record of {} not found", String::from_utf8_lossy(k)))
}

fn salvaging(opts: &Options) -> Options {
    Options {
        on_damage: DamagePolicy::Salvage,
        ..opts.clone()
    }
}

/// Opening with the default policy fails with `Error::Damaged`, one of whose places names
/// `path` (and `offset`, if given) and contains `mentions`.
fn assert_refused(
    opts: &Options,
    dir: &Path,
    path: &Path,
    offset: Option<u64>,
    mentions: &str,
    what: &str,
) {
    match Store::open(dir, opts.clone()) {
        Err(Error::Damaged { places }) => {
            let named = places.iter().any(|p| {
                p.contains(&path.display().to_string())
                    && offset.is_none_or(|o| p.contains(&format!("at offset {o}")))
                    && p.contains(mentions)
            });
            assert!(
                named,
                "{what}: the refusal should name {} at {offset:?} ({mentions}): {places:#?}",
                path.display()
            );
        }
        Err(e) => panic!("{what}: expected Error::Damaged, got {e:?}"),
        Ok(_) => panic!("{what}: a damaged store opened without a word"),
    }
}

fn remove_checkpoints(dir: &Path) {
    let files = checkpoint_files(dir);
    assert!(!files.is_empty());
    for f in files {
        std::fs::remove_file(f).unwrap();
    }
}

fn assert_corruption_at(
    res: quiver_store::Result<Option<bytes::Bytes>>,
    path: &Path,
    offset: u64,
    what: &str,
) {
    match res {
        Err(Error::Corruption {
            path: p, offset: o, ..
        }) => {
            assert_eq!(p, path, "{what}: corruption names the wrong file");
            assert_eq!(o, offset, "{what}: corruption names the wrong offset");
        }
        other => panic!(
            "{what}: expected Error::Corruption at {}:{offset}, got {other:?}",
            path.display()
        ),
    }
}

// ---- torn tails ----

/// Bytes that are not a record (a torn write of garbage), and the first part of a real record
/// (a write cut short), appended after the log end of the active segment.
#[test]
fn garbage_after_the_log_end_is_a_torn_tail() {
    let mut partial = Vec::new();
    encode_record(
        &mut partial,
        RecordType::Put,
        999_999,
        RecordExt::NONE,
        b"never-written",
        &[7u8; 500],
    );
    partial.truncate(300);
    let tails: [(&str, Vec<u8>); 3] = [
        (
            "garbage",
            (0..100u32).map(|i| (i * 37 + 0xa5) as u8).collect(),
        ),
        ("partial record", partial),
        ("single byte", vec![0x42]),
    ];
    for (name, tail) in tails {
        for crash in [false, true] {
            let what = format!("{name}, {}", if crash { "crashed" } else { "closed" });
            let dir = tempfile::tempdir().unwrap();
            let opts = options(1, BackendKind::Mmap);
            let n = 50;
            {
                let s = Store::open(dir.path(), opts.clone()).unwrap();
                for i in 0..n {
                    s.put(&key(i), &value(i, 0)).unwrap();
                }
                if crash {
                    s.simulate_crash();
                } else {
                    s.close().unwrap();
                }
            }
            let seg = segment_files(dir.path(), 0).pop().unwrap();
            let (records, end) = scan_segment(&seg);
            assert_eq!(records.len() as u64, n);
            write_bytes_at(&seg, end, &tail);

            let s = Store::open(dir.path(), opts.clone()).unwrap();
            let r = s.recovery_report().clone();
            assert_eq!(r.torn_tails.len(), 1, "{what}: {r:#?}");
            assert!(
                r.torn_tails[0].contains(&seg.display().to_string())
                    && r.torn_tails[0].contains(&format!("at offset {end}")),
                "{what}: torn tail should name {} at offset {end}: {r:#?}",
                seg.display()
            );
            assert!(r.damage.is_empty(), "{what}: {r:#?}");
            let all: Vec<u64> = (0..n).collect();
            assert_values(&s, &all, |i| value(i, 0), &what);
            assert_eq!(s.get(b"never-written").unwrap(), None, "{what}");
            // New writes go where the torn tail was, and survive.
            for i in n..n + 20 {
                s.put(&key(i), &value(i, 1)).unwrap();
            }
            s.simulate_crash();

            let s = Store::open(dir.path(), opts.clone()).unwrap();
            let r = s.recovery_report().clone();
            assert!(
                r.torn_tails.is_empty() && r.damage.is_empty(),
                "{what}, second reopen: {r:#?}"
            );
            assert_values(&s, &all, |i| value(i, 0), &what);
            assert_values(&s, &(n..n + 20).collect::<Vec<_>>(), |i| value(i, 1), &what);
            assert_eq!(s.len(), n + 20, "{what}");
        }
    }
}

/// The last record of the active segment cut short (a write interrupted by a crash or a full
/// disk) — inside its header, its key or its value, by a short file or by zeros: the record is
/// a torn tail, and the key keeps its previous value.
#[test]
fn last_record_cut_short_is_a_torn_tail() {
    /// Where in a record of the given length the cut falls.
    type Cut = fn(u64) -> u64;
    let cuts: [(&str, Cut); 4] = [
        ("inside the header", |_| 8),
        ("inside the key", |_| RECORD_HEADER_LEN as u64 + 5),
        ("inside the value", |len| len / 2),
        ("before the value's last byte", |len| len - 9),
    ];
    for (name, cut_at) in cuts {
        for shorten_file in [false, true] {
            let what = format!(
                "cut {name}, {}",
                if shorten_file {
                    "file shortened"
                } else {
                    "zeroed"
                }
            );
            let dir = tempfile::tempdir().unwrap();
            let opts = options(1, BackendKind::Mmap);
            let n = 40;
            let big: Vec<u8> = (0..6000u32).map(|i| (i % 251) as u8 + 1).collect();
            {
                let s = Store::open(dir.path(), opts.clone()).unwrap();
                for i in 0..n {
                    s.put(&key(i), &value(i, 0)).unwrap();
                }
                // The write that is torn: an overwrite of key 7 spanning pages.
                s.put(&key(7), &big).unwrap();
                s.simulate_crash();
            }
            let seg = segment_files(dir.path(), 0).pop().unwrap();
            let (records, end) = scan_segment(&seg);
            let last = records.last().unwrap().clone();
            assert_eq!(last.key, key(7));
            assert_eq!(last.offset + last.len, end);
            let cut = last.offset + cut_at(last.len);
            if shorten_file {
                let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
                f.set_len(cut).unwrap();
            } else {
                write_bytes_at(&seg, cut, &vec![0u8; (end - cut) as usize]);
            }

            let s = Store::open(dir.path(), opts.clone())
                .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
            let r = s.recovery_report().clone();
            assert_eq!(r.torn_tails.len(), 1, "{what}: {r:#?}");
            assert!(
                r.torn_tails[0].contains(&seg.display().to_string())
                    && r.torn_tails[0].contains(&format!("at offset {}", last.offset)),
                "{what}: torn tail should name {} at offset {}: {r:#?}",
                seg.display(),
                last.offset
            );
            assert!(r.damage.is_empty(), "{what}: {r:#?}");
            let all: Vec<u64> = (0..n).collect();
            // Key 7 is back to its previous, complete value.
            assert_values(&s, &all, |i| value(i, 0), &what);
            assert_eq!(
                std::fs::metadata(&seg).unwrap().len(),
                opts.segment_bytes,
                "{what}"
            );
            s.put(&key(7), b"after").unwrap();
            s.put(&key(n), b"new").unwrap();
            s.simulate_crash();

            let s = Store::open(dir.path(), opts).unwrap();
            let r = s.recovery_report().clone();
            assert!(
                r.torn_tails.is_empty() && r.damage.is_empty(),
                "{what}, second reopen: {r:#?}"
            );
            assert_eq!(
                s.get(&key(7)).unwrap().as_deref(),
                Some(&b"after"[..]),
                "{what}"
            );
            assert_eq!(
                s.get(&key(n)).unwrap().as_deref(),
                Some(&b"new"[..]),
                "{what}"
            );
            assert_values(&s, &(8..n).collect::<Vec<_>>(), |i| value(i, 0), &what);
        }
    }
}

// ---- damage in the middle of a segment ----

/// A flipped byte in the value of a record in the middle of a segment: `get` of that key
/// fails with `Error::Corruption` naming the file and the record's offset, with the index from
/// a checkpoint and rebuilt from the log alike; every other key stays readable.
#[test]
fn flipped_value_byte_is_an_error_naming_file_and_offset() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let opts = options(2, backend);
        let n = 200;
        let victim = 50;
        {
            let s = Store::open(dir.path(), opts.clone()).unwrap();
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..n).map(|i| (key(i), value(i, 0))).collect();
            s.multi_put(&pairs).unwrap();
            s.close().unwrap();
        }
        let (seg, off) = locate(dir.path(), 2, &key(victim));
        let (records, _) = scan_segment(&seg);
        let pos = records.iter().position(|r| r.offset == off).unwrap();
        assert!(
            pos > 0 && pos + 1 < records.len(),
            "the victim must be in the middle"
        );
        flip_byte(
            &seg,
            off + (RECORD_HEADER_LEN + key(victim).len() + 3) as u64,
        );

        let others: Vec<u64> = (0..n).filter(|&i| i != victim).collect();
        for from_checkpoint in [true, false] {
            let what = format!(
                "{backend}, index {}",
                if from_checkpoint {
                    "from checkpoint"
                } else {
                    "rebuilt"
                }
            );
            let opts = if from_checkpoint {
                // The damaged record is not read when opening; the read reports it.
                opts.clone()
            } else {
                // Rebuilding reads it: opening refuses, naming it; salvaging opens.
                remove_checkpoints(dir.path());
                assert_refused(&opts, dir.path(), &seg, Some(off), "value checksum", &what);
                salvaging(&opts)
            };
            let s = Store::open(dir.path(), opts.clone()).unwrap();
            let r = s.recovery_report().clone();
            if from_checkpoint {
                assert_eq!(r.partitions_from_checkpoint, 2, "{what}: {r:#?}");
            } else {
                assert_eq!(r.partitions_rebuilt, 2, "{what}: {r:#?}");
            }
            assert!(r.torn_tails.is_empty(), "{what}: {r:#?}");
            assert_corruption_at(s.get(&key(victim)), &seg, off, &what);
            match s.multi_get(&[key(1), key(victim), key(2)]) {
                Err(Error::Corruption { path, offset, .. }) => {
                    assert_eq!((path.as_path(), offset), (seg.as_path(), off), "{what}")
                }
                other => panic!("{what}: multi_get with the damaged key: {other:?}"),
            }
            assert_values(&s, &others, |i| value(i, 0), &what);
            assert_eq!(s.len(), n, "{what}");
            s.close().unwrap();
        }

        // Writing the key again replaces the damaged record; compaction drops it, and the
        // store opens cleanly again.
        let s = Store::open(dir.path(), salvaging(&opts)).unwrap();
        s.put(&key(victim), b"rewritten").unwrap();
        assert_eq!(
            s.get(&key(victim)).unwrap().as_deref(),
            Some(&b"rewritten"[..])
        );
        s.compact().unwrap();
        drop(s);
        let s = Store::open(dir.path(), opts).unwrap();
        assert_eq!(
            s.get(&key(victim)).unwrap().as_deref(),
            Some(&b"rewritten"[..]),
            "{backend}"
        );
        assert_values(
            &s,
            &others,
            |i| value(i, 0),
            &format!("{backend}, after rewrite"),
        );
    }
}

/// A flipped byte in the header or the key of a record in the middle of a segment. With the
/// index from a checkpoint, `get` of that key is an `Error::Corruption`; rebuilt from the log,
/// the damage is reported (file and offset) and skipped, and every record after it is read.
#[test]
fn flipped_header_or_key_byte_is_reported_as_damage() {
    let places: [(&str, u64); 3] = [
        ("sequence number", 9),
        ("value length", 21),
        ("key", RECORD_HEADER_LEN as u64 + 2),
    ];
    for (name, at) in places {
        let what = format!("flipped {name}");
        let dir = tempfile::tempdir().unwrap();
        let opts = options(1, BackendKind::Mmap);
        let n = 300;
        let victim = 100;
        {
            let s = Store::open(dir.path(), opts.clone()).unwrap();
            for chunk in (0..n).collect::<Vec<_>>().chunks(30) {
                let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                    chunk.iter().map(|&i| (key(i), value(i, 0))).collect();
                s.multi_put(&pairs).unwrap();
            }
            s.close().unwrap();
        }
        let segs = segment_files(dir.path(), 0);
        assert_eq!(segs.len(), 1, "all records in one segment");
        let (seg, off) = locate(dir.path(), 1, &key(victim));
        let (records, _) = scan_segment(&seg);
        let pos = records.iter().position(|r| r.offset == off).unwrap();
        assert!(
            pos > 0 && pos + 10 < records.len(),
            "the victim must be in the middle"
        );
        flip_byte(&seg, off + at);
        let others: Vec<u64> = (0..n).filter(|&i| i != victim).collect();

        // Index from the checkpoint: the key's record no longer verifies.
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        assert_eq!(s.recovery_report().partitions_from_checkpoint, 1);
        assert_corruption_at(s.get(&key(victim)), &seg, off, &what);
        assert_values(&s, &others, |i| value(i, 0), &what);
        s.close().unwrap();

        // Rebuilt from the log: opening refuses, naming the damage; salvaging skips it and
        // reads the rest of the segment.
        remove_checkpoints(dir.path());
        assert_refused(&opts, dir.path(), &seg, Some(off), "unreadable", &what);
        let s = Store::open(dir.path(), salvaging(&opts))
            .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
        let r = s.recovery_report().clone();
        assert_eq!(r.partitions_rebuilt, 1, "{what}: {r:#?}");
        assert_eq!(r.damage.len(), 1, "{what}: {r:#?}");
        assert!(
            r.damage[0].contains(&seg.display().to_string())
                && r.damage[0].contains(&format!("at offset {off}")),
            "{what}: damage should name {} at offset {off}: {r:#?}",
            seg.display()
        );
        assert!(r.torn_tails.is_empty(), "{what}: {r:#?}");
        assert_eq!(
            s.get(&key(victim)).unwrap(),
            None,
            "{what}: a damaged record is not data"
        );
        assert_values(&s, &others, |i| value(i, 0), &what);
        assert_eq!(s.len(), n - 1, "{what}");

        // The store goes on: new writes (the lost key too) survive a reopen.
        s.put(&key(victim), b"again").unwrap();
        s.put(&key(n), b"new").unwrap();
        drop(s);
        // A repair rewrites the log without the damage: an ordinary open works again.
        let rep = quiver_store::repair(dir.path(), opts.clone()).unwrap();
        assert!(!rep.losses().is_empty(), "{what}: {rep:#?}");
        let s = Store::open(dir.path(), opts).unwrap();
        assert!(s.recovery_report().damage.is_empty(), "{what}");
        assert_eq!(
            s.get(&key(victim)).unwrap().as_deref(),
            Some(&b"again"[..]),
            "{what}"
        );
        assert_eq!(
            s.get(&key(n)).unwrap().as_deref(),
            Some(&b"new"[..]),
            "{what}"
        );
        assert_values(&s, &others, |i| value(i, 0), &what);
    }
}

/// A record marked as a hash's packed fields (flag 0x04) whose value is no such thing is
/// damage the checker names, file and offset; one whose value is packed fields is not.
#[test]
fn the_checker_verifies_the_packed_fields_of_hash_records() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(1, BackendKind::Mmap);
    let mut fields = Fields::default();
    fields.set(b"field", b"value");
    let good = fields.encode();
    let bad = b"\x05 not packed fields";
    {
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        s.put(b"good", &good).unwrap();
        s.put(b"bad", bad).unwrap();
        s.close().unwrap();
    }
    // Each record rewritten in place as a hash's: the same seq, key and value, so the same
    // length, with the flag (and its header checksum).
    let mut bad_at = None;
    for (k, v) in [(&b"good"[..], &good[..]), (&b"bad"[..], &bad[..])] {
        let (seg, off) = locate(dir.path(), 1, k);
        let bytes = std::fs::read(&seg).unwrap();
        let at = off as usize;
        let seq = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap());
        let hash = RecordExt {
            kind: ValueKind::Hash,
            ..RecordExt::NONE
        };
        let mut rec = Vec::new();
        encode_record(&mut rec, RecordType::Put, seq, hash, k, v);
        write_bytes_at(&seg, off, &rec);
        if k == b"bad" {
            bad_at = Some((seg, off));
        }
    }
    let (seg, off) = bad_at.unwrap();
    let s = Store::open(dir.path(), opts).unwrap();
    let check = s.check().unwrap();
    assert_eq!(check.problems.len(), 1, "{check:?}");
    let problem = &check.problems[0];
    assert!(
        problem.contains("packed hash")
            && problem.contains(&seg.display().to_string())
            && problem.contains(&format!("at offset {off}")),
        "{check:?}"
    );
}

// ---- damaged files ----

/// A checkpoint with a flipped byte, cut short, or with a bad magic is ignored (and says why),
/// the partition's index is rebuilt from its log, and a fresh checkpoint replaces it.
#[test]
fn damaged_checkpoint_is_ignored_and_the_index_rebuilt() {
    type Damage = fn(&Path);
    let damages: [(&str, Damage); 3] = [
        ("flipped byte", |p| {
            flip_byte(p, std::fs::metadata(p).unwrap().len() / 2)
        }),
        ("cut short", |p| {
            let len = std::fs::metadata(p).unwrap().len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(len / 2)
                .unwrap();
        }),
        ("bad magic", |p| flip_byte(p, 0)),
    ];
    for (name, damage) in damages {
        let what = format!("checkpoint {name}");
        let dir = tempfile::tempdir().unwrap();
        let opts = options(2, BackendKind::Mmap);
        let n = 500;
        {
            let s = Store::open(dir.path(), opts.clone()).unwrap();
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..n).map(|i| (key(i), value(i, 0))).collect();
            s.multi_put(&pairs).unwrap();
            s.multi_delete(&[key(0), key(1)]).unwrap();
            s.close().unwrap();
        }
        let ckpt = checkpoint_files(dir.path())[0].clone();
        damage(&ckpt);

        let s = Store::open(dir.path(), opts.clone())
            .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
        let r = s.recovery_report().clone();
        assert_eq!(r.checkpoints_ignored.len(), 1, "{what}: {r:#?}");
        assert!(
            r.checkpoints_ignored[0].contains(&ckpt.display().to_string()),
            "{what}: {r:#?}"
        );
        assert_eq!(
            (r.partitions_from_checkpoint, r.partitions_rebuilt),
            (1, 1),
            "{what}: {r:#?}"
        );
        assert!(
            r.damage.is_empty() && r.torn_tails.is_empty(),
            "{what}: {r:#?}"
        );
        assert_eq!(s.len(), n - 2, "{what}");
        assert_eq!(s.get(&key(0)).unwrap(), None, "{what}");
        assert_values(&s, &(2..n).collect::<Vec<_>>(), |i| value(i, 0), &what);
        s.simulate_crash();

        let s = Store::open(dir.path(), opts).unwrap();
        let r = s.recovery_report().clone();
        assert!(
            r.checkpoints_ignored.is_empty(),
            "{what}: the rebuilt index was checkpointed: {r:#?}"
        );
        assert_eq!(r.partitions_from_checkpoint, 2, "{what}: {r:#?}");
        assert_eq!(s.len(), n - 2, "{what}");
    }
}

/// A segment file cut shorter than its header is reported and skipped; the keys of the other
/// segments stay readable and the store accepts writes.
#[test]
fn segment_file_shorter_than_its_header_is_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(1, BackendKind::Mmap);
    let n = 2000;
    {
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                chunk.iter().map(|&i| (key(i), value(i, 0))).collect();
            s.multi_put(&pairs).unwrap();
        }
        s.close().unwrap();
    }
    let segs = segment_files(dir.path(), 0);
    assert!(segs.len() >= 3, "{segs:?}");
    let lost: std::collections::HashSet<Vec<u8>> = scan_segment(&segs[0])
        .0
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert!(!lost.is_empty());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segs[0])
        .unwrap()
        .set_len(40)
        .unwrap();

    assert_refused(
        &opts,
        dir.path(),
        &segs[0],
        None,
        "segment skipped",
        "short segment",
    );
    let s =
        Store::open(dir.path(), salvaging(&opts)).unwrap_or_else(|e| panic!("open failed: {e}"));
    let r = s.recovery_report().clone();
    assert_eq!(r.damage.len(), 1, "{r:#?}");
    assert_eq!(r.unusable_files, vec![segs[0].clone()]);
    assert!(
        r.damage[0].contains(&segs[0].display().to_string()),
        "{r:#?}"
    );
    let kept: Vec<u64> = (0..n).filter(|&i| !lost.contains(&key(i))).collect();
    assert_values(&s, &kept, |i| value(i, 0), "after losing a segment");
    for i in (0..n).filter(|&i| lost.contains(&key(i))) {
        assert_eq!(
            s.get(&key(i)).unwrap(),
            None,
            "key {i} was in the lost segment"
        );
    }
    assert_eq!(s.len(), kept.len() as u64);
    for i in n..n + 500 {
        s.put(&key(i), &value(i, 1)).unwrap();
    }
    drop(s);

    // The repair sets the unusable file aside; an ordinary open works again.
    let rep = quiver_store::repair(dir.path(), opts.clone()).unwrap();
    let aside = format!("{}{}", segs[0].display(), quiver_store::DAMAGED_SUFFIX);
    assert_eq!(rep.set_aside, vec![std::path::PathBuf::from(&aside)]);
    assert!(std::path::Path::new(&aside).exists() && !segs[0].exists());
    let s = Store::open(dir.path(), opts).unwrap();
    assert!(s.recovery_report().damage.is_empty());
    assert_values(&s, &kept, |i| value(i, 0), "second reopen");
    assert_values(
        &s,
        &(n..n + 500).collect::<Vec<_>>(),
        |i| value(i, 1),
        "second reopen",
    );
    assert_eq!(s.len(), kept.len() as u64 + 500);
}

/// A crash between creating a segment file and writing its header leaves an empty file: it
/// never held a record, so it is removed (and listed with the torn tails), not reported as
/// damage.
#[test]
fn empty_segment_file_from_an_interrupted_rotation_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(2, BackendKind::Mmap);
    let n = 300;
    {
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        for i in 0..n {
            s.put(&key(i), &value(i, 0)).unwrap();
        }
        s.simulate_crash();
    }
    let last = segment_files(dir.path(), 1).pop().unwrap();
    let id = u64::from_str_radix(last.file_stem().unwrap().to_str().unwrap(), 16).unwrap();
    let empty = last.with_file_name(format!("{:016x}.seg", id + 100));
    std::fs::File::create(&empty).unwrap();

    let s = Store::open(dir.path(), opts.clone()).unwrap();
    let r = s.recovery_report().clone();
    assert!(r.damage.is_empty(), "{r:#?}");
    assert_eq!(r.torn_tails.len(), 1, "{r:#?}");
    assert!(
        r.torn_tails[0].contains(&empty.display().to_string()),
        "{r:#?}"
    );
    assert!(!empty.exists());
    assert_values(
        &s,
        &(0..n).collect::<Vec<_>>(),
        |i| value(i, 0),
        "after removing the empty segment",
    );
    for i in n..n + 1000 {
        s.put(&key(i), &value(i, 1)).unwrap();
    }
    drop(s);
    let s = Store::open(dir.path(), opts).unwrap();
    let r = s.recovery_report().clone();
    assert!(r.damage.is_empty() && r.torn_tails.is_empty(), "{r:#?}");
    assert_values(
        &s,
        &(n..n + 1000).collect::<Vec<_>>(),
        |i| value(i, 1),
        "reopened",
    );
}

/// Regression (issue 8, item 3): an acknowledged MSET (a multi-partition batch) overwrote 100
/// keys; one flipped key byte in its part in partition 0 made the whole part "not applied" on
/// replay, so its keys silently answered their *old* values. Opening must refuse instead,
/// naming the file, the offset and the keys that may hold older values — with the checkpoint
/// present (the batch is in the replayed tail) and without it (full rebuild). Salvaging says
/// what is lost, and a repair leaves a store that opens cleanly.
#[test]
fn damaged_batch_part_refuses_to_open_instead_of_rolling_back() {
    for lose_checkpoint in [false, true] {
        let what = if lose_checkpoint {
            "rebuilt"
        } else {
            "from checkpoint"
        };
        let dir = tempfile::tempdir().unwrap();
        let opts = options(4, BackendKind::Mmap);
        let n = 100u64;
        let mset = |s: &Store, round: u64| {
            let mut b = Batch::new();
            for i in 0..n {
                b.put(key(i), value(i, round));
            }
            assert!(s.apply(&b).unwrap().is_applied());
        };
        {
            let s = Store::open(dir.path(), opts.clone()).unwrap();
            mset(&s, 0);
            mset(&s, 1);
            s.simulate_crash();
        }
        // A key byte of the second MSET's first record in partition 0.
        let seg = segment_files(dir.path(), 0).pop().unwrap();
        let (records, _) = scan_segment(&seg);
        let second = records
            .iter()
            .filter(|r| r.value_len > 4)
            .nth(records.iter().filter(|r| r.value_len > 4).count() / 2 + 1)
            .expect("records of the second MSET");
        let off = second.offset;
        // The damaged record's own key cannot be read: the place (file, offset) stands for it.
        let victim = second.key.clone();
        flip_byte(&seg, off + RECORD_HEADER_LEN as u64);
        if lose_checkpoint {
            remove_checkpoints(dir.path());
        }

        assert_refused(&opts, dir.path(), &seg, Some(off), "", what);
        // The refusal names the keys whose newest values are lost.
        let Err(Error::Damaged { places }) = Store::open(dir.path(), opts.clone()) else {
            unreachable!("refused above")
        };
        let all = places.join("\n");
        let named = String::from_utf8_lossy(&key(0)[..4]).to_string();
        assert!(
            all.contains("older values") && all.contains(&named),
            "{what}: {all}"
        );

        // Salvage: the store opens; every key holds its old or new value, none is damaged,
        // and the report lists every key of the part that was not applied.
        {
            let s = Store::open(dir.path(), salvaging(&opts)).unwrap();
            let r = s.recovery_report().clone();
            assert!(!r.damage.is_empty(), "{what}");
            let mut old = 0;
            for i in 0..n {
                let got = s.get(&key(i)).unwrap().unwrap();
                if got[..] == value(i, 0)[..] {
                    old += 1;
                    let k = String::from_utf8_lossy(&key(i)).to_string();
                    assert!(
                        key(i) == victim || r.damage.iter().any(|d| d.contains(&k)),
                        "{what}: key {i} rolled back without being named: {r:#?}"
                    );
                } else {
                    assert_eq!(got[..], value(i, 1)[..], "{what}: key {i}");
                }
            }
            assert!(
                old > 0,
                "{what}: the damaged part should have rolled keys back"
            );
        }

        // Repair: the losses are reported and an ordinary open finds a clean log.
        let rep = quiver_store::repair(dir.path(), opts.clone()).unwrap();
        assert!(!rep.losses().is_empty(), "{what}");
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        assert!(s.recovery_report().damage.is_empty(), "{what}");
        assert_eq!(s.len(), n, "{what}");
        let c = s.check().unwrap();
        assert!(c.is_ok(), "{what}: {c:#?}");
    }
}

/// Regression (issue 8, item 3): compaction copied a record whose value was damaged, so the
/// damage moved to a new file (and a new offset) unnoticed. It verifies every value it
/// copies: with the default policy a damaged live record stops the compaction (naming file and
/// offset) and the store stays as it was; when salvaging, the record is dropped and its key
/// named.
#[test]
fn compaction_refuses_to_copy_a_damaged_value() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(1, BackendKind::Mmap);
    let n = 400u64;
    {
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        for chunk in (0..n).collect::<Vec<_>>().chunks(40) {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                chunk.iter().map(|&i| (key(i), value(i, 0))).collect();
            s.multi_put(&pairs).unwrap();
        }
        // Garbage, so that compaction has work: half the keys overwritten.
        for i in (0..n).step_by(2) {
            s.put(&key(i), &value(i, 1)).unwrap();
        }
        s.close().unwrap();
    }
    let victim = 101; // never overwritten: its first record is live
    let (seg, off) = locate(dir.path(), 1, &key(victim));
    flip_byte(
        &seg,
        off + (RECORD_HEADER_LEN + key(victim).len() + 1) as u64,
    );
    let want = |i: u64| value(i, (i % 2 == 0) as u64);
    let others: Vec<u64> = (0..n).filter(|&i| i != victim).collect();

    // The checkpoint spares opening from reading the record; compaction reads it.
    let s = Store::open(dir.path(), opts.clone()).unwrap();
    let segments_before = segment_files(dir.path(), 0);
    match s.compact() {
        Err(Error::Corruption { path, offset, .. }) => {
            assert_eq!((path.as_path(), offset), (seg.as_path(), off))
        }
        other => panic!("compaction over a damaged value: {other:?}"),
    }
    assert_eq!(
        segment_files(dir.path(), 0).len(),
        segments_before.len() + 1,
        "only the sealed active segment is new"
    );
    assert_corruption_at(
        s.get(&key(victim)),
        &seg,
        off,
        "after the refused compaction",
    );
    assert_values(&s, &others, want, "after the refused compaction");
    drop(s);

    let s = Store::open(dir.path(), salvaging(&opts)).unwrap();
    let report = s.compact().unwrap();
    let k = String::from_utf8_lossy(&key(victim)).to_string();
    assert!(
        report
            .damage
            .iter()
            .any(|d| d.contains(&k) && d.contains(&format!("at offset {off}"))),
        "{report:#?}"
    );
    assert_eq!(
        s.get(&key(victim)).unwrap(),
        None,
        "a dropped damaged record is not data"
    );
    assert_values(&s, &others, want, "after the salvaging compaction");
    assert!(s.check().unwrap().is_ok());
    drop(s);
    let s = Store::open(dir.path(), opts).unwrap();
    assert!(s.recovery_report().damage.is_empty());
    assert_values(&s, &others, want, "reopened");
}
