//! Tests of the io_uring backend: reads against patterned segment files, the O_DIRECT and
//! buffered paths, short and failed completions.

use super::*;
use crate::log::format::{encode_record, RecordExt, RecordType};
use crate::log::segment::{test_header, Segment};

const CAP: u64 = 1 << 20;

/// A uring backend, or `None` (test skipped) where the kernel or a sandbox refuses
/// io_uring.
fn uring(buffered: bool) -> Option<UringBackend> {
    let b = if buffered {
        UringBackend::buffered()
    } else {
        UringBackend::new()
    };
    match b {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("skipping io_uring test: {e}");
            None
        }
    }
}

/// A segment whose whole capacity is filled with a position-dependent pattern (the header
/// bytes included); returns it with the file's expected contents.
fn patterned(dir: &tempfile::TempDir, file_id: u64) -> (Segment, Vec<u8>) {
    let path = dir.path().join(format!("{file_id}.seg"));
    let seg = Segment::create(path, test_header(file_id, CAP)).unwrap();
    let mut image: Vec<u8> = (0..CAP as usize)
        .map(|i| (i.wrapping_mul(131) ^ (i >> 9) ^ file_id as usize) as u8)
        .collect();
    image[..64].copy_from_slice(&seg.header.encode());
    seg.write_at(&image, 0).unwrap();
    (seg, image)
}

fn expected(image: &[u8], offset: u64, len: usize) -> &[u8] {
    let from = (offset as usize).min(image.len());
    let to = (offset as usize).saturating_add(len).min(image.len());
    &image[from..to]
}

fn check(backend: &UringBackend, seg: &Segment, image: &[u8], ranges: &[(u64, usize)]) {
    let mut reqs: Vec<ReadRequest<'_>> = ranges
        .iter()
        .map(|&(o, l)| ReadRequest::new(seg, o, l))
        .collect();
    backend.read_ranges(&mut reqs);
    for (r, &(o, l)) in reqs.iter().zip(ranges) {
        let got = r
            .result
            .as_ref()
            .unwrap_or_else(|e| panic!("read ({o}, {l}): {e}"));
        assert_eq!(&got[..], expected(image, o, l), "read ({o}, {l})");
    }
}

fn assorted_ranges() -> Vec<(u64, usize)> {
    vec![
        (100, 37),       // unaligned offset and length inside one block
        (4095, 2),       // spans two 4 KiB blocks
        (4000, 5000),    // spans three blocks
        (8192, 4096),    // exactly one aligned block
        (0, 64),         // the segment header
        (12345, 0),      // empty
        (64, 300_000),   // long
        (CAP - 10, 100), // short: ends at EOF
        (CAP - 4096, 4096),
        (CAP, 10),       // at EOF: empty
        (CAP + 5000, 7), // past EOF: empty
    ]
}

#[test]
fn kind_is_uring() {
    let Some(b) = uring(false) else { return };
    assert_eq!(b.kind(), BackendKind::Uring);
}

#[test]
fn reads_unaligned_ranges() {
    let Some(b) = uring(false) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (seg, image) = patterned(&dir, 1);
    check(&b, &seg, &image, &assorted_ranges());
}

#[test]
fn reads_through_buffered_fallback() {
    let Some(b) = uring(true) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (seg, image) = patterned(&dir, 1);
    check(&b, &seg, &image, &assorted_ranges());
}

#[test]
fn vector_wider_than_the_ring() {
    for buffered in [false, true] {
        let Some(b) = uring(buffered) else { return };
        let dir = tempfile::tempdir().unwrap();
        let (seg, image) = patterned(&dir, 2);
        let ranges: Vec<(u64, usize)> = (0..300u64)
            .map(|i| ((i * 3001 + 7) % (CAP - 9000), 1 + (i as usize * 13) % 9000))
            .collect();
        assert!(ranges.len() > RING_ENTRIES as usize);
        check(&b, &seg, &image, &ranges);
        // The ring went back to the pool and is reused by the next call.
        assert_eq!(b.rings.lock().len(), 1);
        check(&b, &seg, &image, &ranges);
    }
}

#[test]
fn mixes_segments_and_isolates_errors() {
    let Some(b) = uring(false) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (good, image) = patterned(&dir, 3);
    let (gone, _) = patterned(&dir, 4);
    // The O_DIRECT descriptor is opened on first use, by path: that now fails.
    std::fs::remove_file(&gone.path).unwrap();
    let mut reqs = vec![
        ReadRequest::new(&good, 100, 50),
        ReadRequest::new(&gone, 100, 50),
        ReadRequest::new(&good, 5000, 5000),
        ReadRequest::new(&gone, 0, 10),
    ];
    b.read_ranges(&mut reqs);
    assert_eq!(&reqs[0].result.as_ref().unwrap()[..], &image[100..150]);
    assert_eq!(&reqs[2].result.as_ref().unwrap()[..], &image[5000..10000]);
    for i in [1, 3] {
        match &reqs[i].result {
            Err(Error::Io { .. }) => {}
            other => panic!("request {i}: expected an I/O error, got {other:?}"),
        }
    }
}

#[test]
fn concurrent_readers() {
    let Some(b) = uring(false) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (seg, image) = patterned(&dir, 5);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (b, seg, image) = (&b, &seg, &image);
            s.spawn(move || {
                for round in 0..20u64 {
                    let ranges: Vec<(u64, usize)> = (0..50u64)
                        .map(|i| {
                            (
                                (t * 7919 + round * 104_729 + i * 4099) % CAP,
                                1 + i as usize * 97,
                            )
                        })
                        .collect();
                    check(b, seg, image, &ranges);
                }
            });
        }
    });
    assert!(b.rings.lock().len() <= MAX_POOLED_RINGS);
}

#[test]
fn read_records_fetches_long_records_in_a_second_round() {
    for buffered in [false, true] {
        let Some(b) = uring(buffered) else { return };
        let dir = tempfile::tempdir().unwrap();
        let seg = Segment::create(dir.path().join("r.seg"), test_header(6, CAP)).unwrap();
        let values: [Vec<u8>; 3] = [
            b"short".to_vec(),
            (0..9000u32).map(|i| i as u8).collect(), // longer than the guess, spans blocks
            vec![7u8; 40],
        ];
        let mut offsets = Vec::new();
        let mut records = Vec::new();
        let mut at = 4090u64; // the first record straddles a block boundary
        for (i, v) in values.iter().enumerate() {
            let mut rec = Vec::new();
            encode_record(
                &mut rec,
                RecordType::Put,
                i as u64 + 1,
                RecordExt::NONE,
                b"key",
                v,
            );
            seg.write_at(&rec, at).unwrap();
            offsets.push(at);
            at += rec.len() as u64;
            records.push(rec);
        }
        let guess = super::super::record_read_hint(3, 16);
        let mut reqs: Vec<ReadRequest<'_>> = offsets
            .iter()
            .map(|&o| ReadRequest::new(&seg, o, guess))
            .collect();
        b.read_records(&mut reqs);
        // Records shorter than the guess come back with whatever follows them; the record
        // itself is the prefix.
        for (r, rec) in reqs.iter().zip(&records) {
            let got = r.result.as_ref().unwrap();
            assert!(got.len() >= rec.len(), "{} < {}", got.len(), rec.len());
            assert_eq!(&got[..rec.len()], &rec[..]);
        }
        assert_eq!(reqs[1].result.as_ref().unwrap().len(), records[1].len());
    }
}

#[test]
fn short_and_failed_completions() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, image) = patterned(&dir, 7);
    let cache = &mut HashMap::new();
    for buffered in [false, true] {
        let b = UringBackend {
            rings: Mutex::new(Vec::new()),
            buffered_only: buffered,
        };
        let src = b.source(&seg, cache).unwrap();
        cache.clear();
        let plan = || Plan::new(&seg, src, 100, 10_000).unwrap().unwrap();

        // A completion shorter than asked, not at EOF: the rest is read synchronously.
        let mut p = plan();
        let first = if src.direct { ALIGN } else { 1000 };
        let n = src
            .file
            .read_at(&mut p.buf.as_mut_slice()[..first], p.start)
            .unwrap();
        assert_eq!(n, first);
        p.complete(n as i32);
        assert!(matches!(p.state, State::Partial(_)));
        assert_eq!(&p.finish().unwrap()[..], &image[100..10_100]);

        // An interrupted read is redone synchronously.
        let mut p = plan();
        p.complete(-libc::EINTR);
        assert_eq!(&p.finish().unwrap()[..], &image[100..10_100]);

        // A failed read is that request's error.
        let mut p = plan();
        p.complete(-libc::EIO);
        match p.finish() {
            Err(Error::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(libc::EIO)),
            other => panic!("expected EIO, got {other:?}"),
        }

        // Nothing read: the end of the file.
        let mut p = plan();
        p.complete(0);
        assert!(p.finish().unwrap().is_empty());
    }
}

#[test]
fn aligned_buf_is_aligned_and_zeroed() {
    for len in [1, 100, 4096, 4097, 65536] {
        let mut buf = AlignedBuf::zeroed(len).unwrap();
        assert_eq!(buf.as_mut_ptr() as usize % ALIGN, 0);
        assert_eq!(buf.len(), len);
        assert!(buf.as_slice().iter().all(|&x| x == 0));
        buf.as_mut_slice()[len - 1] = 1;
        assert_eq!(buf.as_slice()[len - 1], 1);
    }
}
