//! Helpers shared by the engine tests.

use std::collections::BTreeSet;

use quiver_store::{BackendKind, Durability, Options, Store};

/// Small segments and partitions so tests exercise rotation, growth and compaction.
pub fn small_options(backend: BackendKind) -> Options {
    Options {
        partitions: 4,
        segment_bytes: 128 << 10,
        durability: Durability::Os,
        backend,
        value_len_max: 16 << 10,
        background: false,
        checkpoint_interval_ms: 0,
        compact_garbage_ratio: 0.0,
        // Enough for a few small segments (the full-disk tests); tests open many stores.
        disk_reserve_bytes: 1 << 20,
        ..Options::default()
    }
}

/// The keys a whole SCAN of the store returns, `count` a page.
#[allow(dead_code)]
pub fn scan_all(store: &Store, count: usize) -> BTreeSet<Vec<u8>> {
    /// Pages a scan of a test's store takes at most.
    const PAGES_MAX: usize = 1 << 20;
    let mut keys = BTreeSet::new();
    let mut cursor = 0;
    for _ in 0..PAGES_MAX {
        let page = store.scan(cursor, None, count).unwrap();
        keys.extend(page.keys.iter().map(|k| k.to_vec()));
        cursor = page.cursor;
        if cursor == 0 {
            return keys;
        }
    }
    panic!("a scan did not end in {PAGES_MAX} pages");
}

pub fn key(i: u64) -> Vec<u8> {
    format!("key:{i:08}").into_bytes()
}

pub fn value(i: u64, round: u64) -> Vec<u8> {
    let len = (i * 7 + round * 13) % 300;
    let mut v = format!("v{i}.{round}:").into_bytes();
    v.resize(v.len() + len as usize, b'a' + (i % 26) as u8);
    v
}

/// Segment files of partition `p` of the store in `dir`, sorted by file id (= creation order).
#[allow(dead_code)]
pub fn segment_files(dir: &std::path::Path, p: u32) -> Vec<std::path::PathBuf> {
    let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(dir.join(format!("p{p:04}")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}

/// Every checkpoint file of the store in `dir`.
#[allow(dead_code)]
pub fn checkpoint_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path().join("index.ckpt");
        if p.exists() {
            v.push(p);
        }
    }
    v.sort();
    v
}

/// Offset of the record whose key is `key` in a segment file's bytes: the key sits right after
/// the 24-byte header of an 8-byte aligned record whose key length matches. The last such
/// record if the key was written more than once.
#[allow(dead_code)]
pub fn find_record(bytes: &[u8], key: &[u8]) -> Option<u64> {
    use quiver_store::log::format::{RECORD_ALIGN, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
    let mut found = None;
    let mut at = SEGMENT_HEADER_LEN;
    while at + RECORD_HEADER_LEN + key.len() <= bytes.len() {
        let k = &bytes[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + key.len()];
        let key_len = u16::from_le_bytes([bytes[at + 18], bytes[at + 19]]) as usize;
        if k == key && key_len == key.len() {
            found = Some(at as u64);
        }
        at += RECORD_ALIGN;
    }
    found
}

/// A record found by [`scan_segment`].
#[allow(dead_code)]
#[derive(Clone, Debug)]
pub struct RecordAt {
    pub offset: u64,
    pub len: u64,
    pub key: Vec<u8>,
    pub value_len: u32,
}

/// Walks a segment file (of a closed store) with the engine's scanner: its valid records and
/// where its log ends.
#[allow(dead_code)]
pub fn scan_segment(path: &std::path::Path) -> (Vec<RecordAt>, u64) {
    use quiver_store::log::format::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
    use quiver_store::log::reader::{Scanner, Step};
    use quiver_store::log::segment::Segment;
    let seg = Segment::open(path.to_path_buf(), true).unwrap();
    let mut sc = Scanner::new(&seg, SEGMENT_HEADER_LEN as u64, u64::MAX, false);
    let mut records = Vec::new();
    loop {
        match sc.next_step().unwrap() {
            Step::Record { offset, header, .. } => records.push(RecordAt {
                offset,
                len: header.record_len() as u64,
                key: sc.record()[RECORD_HEADER_LEN..RECORD_HEADER_LEN + header.key_len as usize]
                    .to_vec(),
                value_len: header.value_len,
            }),
            Step::Damaged { offset, .. } => panic!("{} damaged at {offset}", path.display()),
            Step::End { offset, .. } => return (records, offset),
        }
    }
}

/// Overwrites bytes of a file at `offset`.
#[allow(dead_code)]
pub fn write_bytes_at(path: &std::path::Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

/// Flips (xors with 0x5a) the byte at `offset` of a file.
#[allow(dead_code)]
pub fn flip_byte(path: &std::path::Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= 0x5a;
    f.write_all_at(&b, offset).unwrap();
}
