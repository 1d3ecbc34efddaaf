//! Mutated files through the three loaders a store opens with: the log reader (a segment file
//! opened and scanned to its end), the checkpoint decoder, and the metadata (`QUIVER`) parser.
//! Each starts from the real file of a small store and damages a copy — bytes flipped, set,
//! inserted, deleted, ranges zeroed or duplicated, the file cut short — then loads it. No
//! input may panic, hang or allocate beyond what the file's length allows; every damage
//! comes back as an error or, in the log, as a `Damaged` or torn `End` step. Half of the
//! checkpoint images get their checksum recomputed, so the decoder's structure checks (not
//! only the checksum) meet the damage.
//!
//! CI runs [`ITERATIONS_CI`] images per loader from a fixed seed; the ignored test runs
//! [`ITERATIONS_LONG`] (`cargo test -p quiver-store --release --lib -- --ignored
//! million_mutated --nocapture`) and prints its counts.

use std::path::Path;

use quiver_plan::rng::WyRand;

use crate::checkpoint;
use crate::log::reader::{Scanner, Step};
use crate::log::segment::Segment;
use crate::meta;
use crate::options::Options;
use crate::store::Store;

const ITERATIONS_CI: u64 = 20_000;
const ITERATIONS_LONG: u64 = 1_000_000;

/// One to four damages of `b`.
fn mutate(rng: &mut WyRand, b: &mut Vec<u8>) {
    for _ in 0..1 + rng.index(4) {
        let n = b.len();
        match rng.index(7) {
            0 if n > 0 => b[rng.index(n)] ^= 1 << rng.index(8),
            1 if n > 0 => b[rng.index(n)] = [0, 0xFF, 0x7F, 0x80][rng.index(4)],
            2 => b.insert(rng.index(n + 1), rng.next_u64() as u8),
            3 if n > 0 => {
                b.remove(rng.index(n));
            }
            4 => b.truncate(rng.index(n + 1)),
            5 if n > 0 => {
                let at = rng.index(n);
                let end = (at + 1 + rng.index(64)).min(n);
                b[at..end].fill(0);
            }
            6 if n > 8 => {
                let at = rng.index(n - 8);
                let chunk = b[at..at + 1 + rng.index(8)].to_vec();
                let to = rng.index(n);
                b.splice(to..to, chunk);
            }
            _ => {}
        }
    }
}

/// The files of a small store: its first segment (up to the log end), its checkpoint with the
/// partition's segment list, and its metadata file.
struct Originals {
    segment: Vec<u8>,
    checkpoint: Vec<u8>,
    segments: Vec<(u64, u32)>,
    meta: Vec<u8>,
}

fn originals(dir: &Path) -> Originals {
    let opts = Options {
        partitions: 1,
        segment_bytes: 128 << 10,
        value_len_max: 1 << 10,
        ..Options::default()
    };
    let store = Store::open(dir, opts).unwrap();
    for i in 0..60u32 {
        let value = vec![b'a' + (i % 26) as u8; (i as usize * 7) % 300];
        store.put(format!("key{i}").as_bytes(), &value).unwrap();
    }
    for i in (0..60u32).step_by(7) {
        store.delete(format!("key{i}").as_bytes()).unwrap();
    }
    let mut batch = crate::Batch::new();
    batch.put(&b"b1"[..], &b"x"[..]).put(&b"b2"[..], &b"y"[..]);
    store.apply(&batch).unwrap();
    store
        .put_expiring(b"ttl", b"v", Some(store.now_ms() + 3_600_000))
        .unwrap();
    store.close().unwrap();

    let part = crate::layout::partition_dir(dir, 0);
    let mut segs: Vec<_> = std::fs::read_dir(&part)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    let seg = Segment::open(segs[0].clone(), true).unwrap();
    let mut scan = Scanner::new(&seg, 0, u64::MAX, true);
    let end = loop {
        match scan.next_step().unwrap() {
            Step::End { offset, .. } => break offset,
            Step::Record { .. } => {}
            Step::Damaged { .. } => panic!("the original segment is damaged"),
        }
    };
    let mut segment = std::fs::read(&segs[0]).unwrap();
    segment.truncate(end as usize);
    let segments = segs
        .iter()
        .enumerate()
        .map(|(slot, p)| {
            (
                Segment::open(p.clone(), true).unwrap().file_id(),
                slot as u32,
            )
        })
        .collect();
    Originals {
        segment,
        checkpoint: std::fs::read(checkpoint::checkpoint_path(&part)).unwrap(),
        segments,
        meta: std::fs::read(dir.join(crate::layout::META_FILE)).unwrap(),
    }
}

#[derive(Debug, Default)]
struct Counts {
    images: u64,
    refused: u64,
    records: u64,
    damaged: u64,
    torn: u64,
    loaded: u64,
}

/// Opens and scans one segment image written at `path`; the scan must end within a bound.
fn scan_segment(path: &Path, image: &[u8], c: &mut Counts) {
    std::fs::write(path, image).unwrap();
    let seg = match Segment::open(path.to_path_buf(), true) {
        Ok(seg) => seg,
        Err(_) => {
            c.refused += 1;
            return;
        }
    };
    let mut scan = Scanner::new(&seg, 0, u64::MAX, true);
    let mut last = 0u64;
    // Every step moves forward by at least one 8-byte unit.
    for _ in 0..image.len() / 8 + 2 {
        match scan
            .next_step()
            .expect("a file read fails only on an I/O error")
        {
            Step::Record { offset, .. } => {
                assert!(offset >= last, "went back from {last} to {offset}");
                last = offset + 1;
                c.records += 1;
            }
            Step::Damaged {
                offset, resume_at, ..
            } => {
                assert!(resume_at > offset);
                last = resume_at;
                c.damaged += 1;
            }
            Step::End { torn, .. } => {
                c.torn += u64::from(torn.is_some());
                return;
            }
        }
    }
    panic!("the scan of a {}-byte image did not end", image.len());
}

fn run(iterations: u64, seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let o = originals(&tmp.path().join("store"));
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let seg_path = scratch.join("0000000000000001.seg");
    let mut rng = WyRand::new(seed);
    let (mut log, mut ckpt, mut meta_c) = (Counts::default(), Counts::default(), Counts::default());

    for _ in 0..iterations {
        // The log reader.
        let mut image = o.segment.clone();
        mutate(&mut rng, &mut image);
        log.images += 1;
        scan_segment(&seg_path, &image, &mut log);

        // The checkpoint decoder, half the time past its checksum.
        let mut image = o.checkpoint.clone();
        mutate(&mut rng, &mut image);
        let past_checksum = rng.index(2) == 0 && image.len() >= 4;
        if past_checksum {
            let n = image.len() - 4;
            let crc = crc32c::crc32c(&image[..n]);
            image[n..].copy_from_slice(&crc.to_le_bytes());
        }
        ckpt.images += 1;
        match checkpoint::decode(&image, 0, None, &o.segments) {
            Ok(_) => {
                // Damage the checksum was not recomputed over is always found.
                assert!(
                    past_checksum || image == o.checkpoint,
                    "a damaged checkpoint loaded"
                );
                ckpt.loaded += 1;
            }
            Err(why) => {
                assert!(!why.is_empty());
                ckpt.refused += 1;
            }
        }

        // The metadata parser, on a file in a directory of its own.
        let mut image = o.meta.clone();
        mutate(&mut rng, &mut image);
        std::fs::write(scratch.join(crate::layout::META_FILE), &image).unwrap();
        let mut opts = Options::default();
        meta_c.images += 1;
        match meta::load_or_create(&scratch, &mut opts) {
            Ok(_) => meta_c.loaded += 1,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                meta_c.refused += 1;
            }
        }
    }
    // The originals themselves load (the damage, not the harness, is what is refused).
    assert!(checkpoint::decode(&o.checkpoint, 0, None, &o.segments).is_ok());
    println!("loader fuzz: seed {seed}: log reader {log:?}");
    println!("loader fuzz: checkpoint decoder {ckpt:?}");
    println!("loader fuzz: metadata parser {meta_c:?}");
    assert!(log.damaged + log.torn + log.refused > 0 && ckpt.refused > 0 && meta_c.refused > 0);
}

#[test]
fn mutated_files_through_every_loader() {
    run(ITERATIONS_CI, 0x10AD);
}

#[test]
#[ignore = "a million images per loader (a few minutes in release): run by hand, counts in docs"]
fn million_mutated_files_per_loader() {
    run(ITERATIONS_LONG, 0x10AD_0002);
}
