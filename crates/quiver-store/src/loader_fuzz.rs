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
//!
//! The corpus kept in the repository (`tests/corpus/{log,checkpoint,meta}/`) holds the
//! original files, regressions, and one image for each distinct way a loader took damage
//! (the reasons it gave, numbers left out) among [`CORPUS_SEARCH`] mutations: what a
//! coverage-guided fuzzer would keep, chosen by outcome. CI loads every file of it and mutates
//! them too; `cargo test -p quiver-store --release --lib -- --ignored write_the_loader_corpus`
//! chooses it again (after a format change).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use quiver_plan::rng::WyRand;

use crate::checkpoint;
use crate::log::reader::{Scanner, Step};
use crate::log::segment::Segment;
use crate::meta;
use crate::options::Options;
use crate::slot::{key_slot, SlotRange};
use crate::store::Store;

const ITERATIONS_CI: u64 = 20_000;
const ITERATIONS_LONG: u64 = 1_000_000;
/// Mutations the corpus is chosen from.
const CORPUS_SEARCH: u64 = 200_000;
/// Files per loader in the corpus at most.
const CORPUS_FILES_MAX: usize = 64;
/// The segment list a checkpoint of the corpus is decoded against (one `file_id slot` line
/// each), next to the checkpoint images.
const CORPUS_SEGMENTS_FILE: &str = "segments";

fn corpus_dir(loader: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(loader)
}

/// The images of one loader's corpus (its sidecar files left out), in name order.
fn corpus(loader: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(corpus_dir(loader))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != CORPUS_SEGMENTS_FILE))
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn corpus_segments() -> Vec<(u64, u32)> {
    std::fs::read_to_string(corpus_dir("checkpoint").join(CORPUS_SEGMENTS_FILE))
        .unwrap()
        .lines()
        .map(|l| {
            let (id, slot) = l.split_once(' ').unwrap();
            (id.parse().unwrap(), slot.parse().unwrap())
        })
        .collect()
}

/// An outcome with its numbers and quoted text left out: images that differ only in them
/// took damage the same way.
fn outcome_kind(text: &str) -> String {
    let mut kind = String::new();
    let mut quote = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if matches!(c, '"' | '`') => {
                quote = Some(c);
                kind.push('…');
            }
            None if !c.is_ascii_digit() => kind.push(c),
            None => {}
        }
    }
    kind
}

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

/// Partitions of the small store; the images are its partition 0's, which owns
/// [`partition_0`]'s slots (a checkpoint holds a count per slot of its range: a small range
/// keeps the images small).
const PARTITIONS: u32 = 16;

fn partition_0() -> SlotRange {
    SlotRange::even(PARTITIONS)[0]
}

/// `n` keys named `prefix` and a number, all of partition 0.
fn keys_of_partition_0(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0u32..)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .filter(|k| partition_0().contains(key_slot(k)))
        .take(n)
        .collect()
}

fn originals(dir: &Path) -> Originals {
    let opts = Options {
        partitions: PARTITIONS,
        segment_bytes: 128 << 10,
        value_len_max: 1 << 10,
        ..Options::default()
    };
    let store = Store::open(dir, opts).unwrap();
    let keys = keys_of_partition_0("key", 60);
    for (i, k) in keys.iter().enumerate() {
        let value = vec![b'a' + (i % 26) as u8; (i * 7) % 300];
        store.put(k, &value).unwrap();
    }
    for k in keys.iter().step_by(7) {
        store.delete(k).unwrap();
    }
    let more = keys_of_partition_0("b", 2);
    let mut batch = crate::Batch::new();
    batch
        .put(more[0].clone(), &b"x"[..])
        .put(more[1].clone(), &b"y"[..]);
    store.apply(&batch).unwrap();
    let ttl = &keys_of_partition_0("ttl", 1)[0];
    store
        .put_expiring(ttl, b"v", Some(store.now_ms() + 3_600_000))
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
/// Returns the outcome's kind (see `outcome_kind`): the reasons met, in order.
fn scan_segment(path: &Path, image: &[u8], c: &mut Counts) -> String {
    std::fs::write(path, image).unwrap();
    let seg = match Segment::open(path.to_path_buf(), true) {
        Ok(seg) => seg,
        Err(e) => {
            c.refused += 1;
            let e = e.to_string();
            return outcome_kind(&e[e.find(": ").map_or(0, |i| i + 2)..]);
        }
    };
    let mut kind = String::new();
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
                offset,
                resume_at,
                reason,
            } => {
                assert!(resume_at > offset);
                last = resume_at;
                c.damaged += 1;
                if !kind.contains(reason) {
                    kind.push_str(reason);
                    kind.push(';');
                }
            }
            Step::End { torn, .. } => {
                c.torn += u64::from(torn.is_some());
                kind.push_str(torn.unwrap_or("clean end"));
                return kind;
            }
        }
    }
    panic!("the scan of a {}-byte image did not end", image.len());
}

/// Decodes one checkpoint image; `intact`: it must load (the original, or damage the checksum
/// was recomputed over may). Returns the outcome's kind.
fn load_checkpoint(image: &[u8], segments: &[(u64, u32)], intact: bool, c: &mut Counts) -> String {
    c.images += 1;
    match checkpoint::decode(image, 0, Some(partition_0()), segments) {
        Ok(_) => {
            assert!(intact, "a damaged checkpoint loaded");
            c.loaded += 1;
            "loaded".into()
        }
        Err(why) => {
            assert!(!why.is_empty());
            c.refused += 1;
            outcome_kind(&why)
        }
    }
}

/// Parses one metadata image (in `dir`, a directory of its own). Returns the outcome's kind.
fn load_meta(dir: &Path, image: &[u8], c: &mut Counts) -> String {
    std::fs::write(dir.join(crate::layout::META_FILE), image).unwrap();
    let mut opts = Options::default();
    c.images += 1;
    match meta::load_or_create(dir, &mut opts) {
        Ok(_) => {
            c.loaded += 1;
            "loaded".into()
        }
        Err(e) => {
            c.refused += 1;
            let e = e.to_string();
            assert!(!e.is_empty());
            outcome_kind(&e.replace(&dir.display().to_string(), ""))
        }
    }
}

/// A mutation base: the original most of the time, else a file of the corpus.
fn base<'a>(rng: &mut WyRand, original: &'a [u8], corpus: &'a [Vec<u8>]) -> &'a [u8] {
    if corpus.is_empty() || rng.index(4) != 0 {
        original
    } else {
        &corpus[rng.index(corpus.len())]
    }
}

/// Where a run works: a small store's original files, and a scratch directory the damaged
/// images are loaded from (removed with it).
struct Bench {
    originals: Originals,
    scratch: PathBuf,
    seg_path: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Bench {
    fn new() -> Bench {
        let tmp = tempfile::tempdir().unwrap();
        let originals = originals(&tmp.path().join("store"));
        let scratch = tmp.path().join("scratch");
        std::fs::create_dir_all(&scratch).unwrap();
        Bench {
            originals,
            seg_path: scratch.join("0000000000000001.seg"),
            scratch,
            _tmp: tmp,
        }
    }
}

fn run(iterations: u64, seed: u64) {
    let bench = Bench::new();
    let (o, scratch, seg_path) = (&bench.originals, &bench.scratch, &bench.seg_path);
    let mut rng = WyRand::new(seed);
    let (mut log, mut ckpt, mut meta_c) = (Counts::default(), Counts::default(), Counts::default());
    let kept = [corpus("log"), corpus("checkpoint"), corpus("meta")];

    // The kept corpus as it is.
    for image in &kept[0] {
        log.images += 1;
        scan_segment(seg_path, image, &mut log);
    }
    let kept_segments = corpus_segments();
    for image in &kept[1] {
        // Its images were chosen with their checksums recomputed: they may load.
        load_checkpoint(image, &kept_segments, true, &mut ckpt);
    }
    for image in &kept[2] {
        load_meta(scratch, image, &mut meta_c);
    }

    for _ in 0..iterations {
        // The log reader.
        let mut image = base(&mut rng, &o.segment, &kept[0]).to_vec();
        mutate(&mut rng, &mut image);
        log.images += 1;
        scan_segment(seg_path, &image, &mut log);

        // The checkpoint decoder, half the time past its checksum (corpus files are decoded
        // against the segment list they were chosen with).
        let from_corpus = !kept[1].is_empty() && rng.index(4) == 0;
        let (mut image, segments) = if from_corpus {
            (kept[1][rng.index(kept[1].len())].clone(), &kept_segments)
        } else {
            (o.checkpoint.clone(), &o.segments)
        };
        let unmutated = image.clone();
        mutate(&mut rng, &mut image);
        let past_checksum = recompute_checksum(&mut rng, &mut image);
        // Damage the checksum was not recomputed over is always found (a mutation may change
        // nothing: the image is then its base, which loads).
        let intact = past_checksum || image == unmutated;
        load_checkpoint(&image, segments, intact, &mut ckpt);

        // The metadata parser, on a file in a directory of its own.
        let mut image = base(&mut rng, &o.meta, &kept[2]).to_vec();
        mutate(&mut rng, &mut image);
        load_meta(scratch, &image, &mut meta_c);
    }
    // The originals themselves load (the damage, not the harness, is what is refused).
    assert!(checkpoint::decode(&o.checkpoint, 0, Some(partition_0()), &o.segments).is_ok());
    println!("loader fuzz: seed {seed}: log reader {log:?}");
    println!("loader fuzz: checkpoint decoder {ckpt:?}");
    println!("loader fuzz: metadata parser {meta_c:?}");
    assert!(log.damaged + log.torn + log.refused > 0 && ckpt.refused > 0 && meta_c.refused > 0);
}

/// Half the time: the checksum recomputed over the damaged image. Returns whether it was.
fn recompute_checksum(rng: &mut WyRand, image: &mut [u8]) -> bool {
    let past_checksum = rng.index(2) == 0 && image.len() >= 4;
    if past_checksum {
        let n = image.len() - 4;
        let crc = crate::crc::crc32c(&image[..n]);
        image[n..].copy_from_slice(&crc.to_le_bytes());
    }
    past_checksum
}

/// Chooses the corpus again: the originals, the regressions, and the first image of each
/// distinct outcome kind among `CORPUS_SEARCH` mutations, per loader; written over
/// `tests/corpus/`.
fn write_corpus(seed: u64) {
    let bench = Bench::new();
    let (o, scratch, seg_path) = (&bench.originals, &bench.scratch, &bench.seg_path);
    let mut rng = WyRand::new(seed);
    let mut chosen: [BTreeMap<String, Vec<u8>>; 3] = Default::default();
    let mut c = Counts::default();
    for _ in 0..CORPUS_SEARCH {
        let mut image = o.segment.clone();
        mutate(&mut rng, &mut image);
        let kind = scan_segment(seg_path, &image, &mut c);
        chosen[0].entry(kind).or_insert(image);
        let mut image = o.checkpoint.clone();
        mutate(&mut rng, &mut image);
        recompute_checksum(&mut rng, &mut image);
        let kind = load_checkpoint(&image, &o.segments, true, &mut c);
        chosen[1].entry(kind).or_insert(image);
        let mut image = o.meta.clone();
        mutate(&mut rng, &mut image);
        let kind = load_meta(scratch, &image, &mut c);
        chosen[2].entry(kind).or_insert(image);
    }
    // Regression (issue 14): a `QUIVER` file with a tiny segment size made the value limit's
    // arithmetic underflow.
    let tiny = String::from_utf8(o.meta.clone())
        .unwrap()
        .lines()
        .map(|l| match l.strip_prefix("segment_bytes ") {
            Some(_) => "segment_bytes 64".to_string(),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let originals = [&o.segment, &o.checkpoint, &o.meta];
    for (i, loader) in ["log", "checkpoint", "meta"].into_iter().enumerate() {
        let dir = corpus_dir(loader);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("original"), originals[i]).unwrap();
        for (n, image) in chosen[i].values().take(CORPUS_FILES_MAX).enumerate() {
            std::fs::write(dir.join(format!("outcome-{n:03}")), image).unwrap();
        }
        println!("loader corpus: {loader}: {} outcome kinds", chosen[i].len());
    }
    std::fs::write(
        corpus_dir("meta").join("regression-tiny-segment-bytes"),
        tiny + "\n",
    )
    .unwrap();
    let list: String = o
        .segments
        .iter()
        .map(|(id, slot)| format!("{id} {slot}\n"))
        .collect();
    std::fs::write(corpus_dir("checkpoint").join(CORPUS_SEGMENTS_FILE), list).unwrap();
}

#[test]
#[ignore = "writes tests/corpus/ (run by hand after a format change)"]
fn write_the_loader_corpus() {
    write_corpus(0xC0_4905);
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
