//! Byte layout of segment files and records, and the text of the compaction manifest
//! ([`CompactionManifest`]). `docs/log_format.md` is the specification; this module is the only
//! code that knows the bytes. All integers are little-endian.
//!
//! ```text
//! segment  := segment_header record* zero_header?
//! segment_header (64 B) := magic[8] "QUIVSEG\x01" | version u32 | partition u32 | reserved u32
//!                        | slot u32 | file_id u64 | order_major u64 | order_minor u32
//!                        | segment_bytes u64 | reserved[8] | header_crc u32 (crc32c of bytes 0..60)
//! record   := header(24 B) ext key value padding    (total a multiple of 8)
//! header   := header_crc u32 | value_crc u32 | seq u64 | type u8 | flags u8 | key_len u16 | value_len u32
//! ext      := expire_at_ms u64 (flag 0x01)? namespace u32 (flag 0x02)?
//!   header_crc = crc32c(header[4..24] ++ ext ++ key), value_crc = crc32c(value)
//! ```

use std::cmp::Ordering;

pub const SEGMENT_MAGIC: [u8; 8] = *b"QUIVSEG\x01";
/// Version 2: records may carry an expiry time and a namespace (`ext`), and a key's partition
/// comes from its Redis Cluster hash slot (`slots`), recorded per partition in `QUIVER`.
pub const FORMAT_VERSION: u32 = 2;
/// The version before: no `ext`, partitions by hash. Read only by `quiver upgrade`
/// (`Options::legacy_v1`).
pub const FORMAT_VERSION_V1: u32 = 1;
pub const SEGMENT_HEADER_LEN: usize = 64;
pub const RECORD_HEADER_LEN: usize = 24;
/// Records start on 8-byte boundaries so a 32-bit index location (in 8-byte units) can address
/// a 32 GiB span of segments per partition.
pub const RECORD_ALIGN: usize = 8;

/// Where a segment sits in its partition's log order. Ordinary segments are `(n, 0)`; the
/// outputs of a compaction whose last input was `(m, k)` are `(m, k + 1)`, `(m, k + 2)`, ... so
/// they take their inputs' place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentOrder {
    pub major: u64,
    pub minor: u32,
}

impl Ord for SegmentOrder {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor).cmp(&(other.major, other.minor))
    }
}

impl PartialOrd for SegmentOrder {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Format version the segment was written in (`FORMAT_VERSION`, or 1 in a store being
    /// upgraded).
    pub version: u32,
    pub partition: u32,
    /// Addressing slot: index locations are `slot * span + offset / 8`.
    pub slot: u32,
    /// Unique, never reused file number (the file name).
    pub file_id: u64,
    pub order: SegmentOrder,
    pub segment_bytes: u64,
}

impl SegmentHeader {
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut b = [0u8; SEGMENT_HEADER_LEN];
        b[0..8].copy_from_slice(&SEGMENT_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.partition.to_le_bytes());
        b[20..24].copy_from_slice(&self.slot.to_le_bytes());
        b[24..32].copy_from_slice(&self.file_id.to_le_bytes());
        b[32..40].copy_from_slice(&self.order.major.to_le_bytes());
        b[40..44].copy_from_slice(&self.order.minor.to_le_bytes());
        b[44..52].copy_from_slice(&self.segment_bytes.to_le_bytes());
        let crc = crate::crc::crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<SegmentHeader, String> {
        if b.len() < SEGMENT_HEADER_LEN {
            return Err(format!("segment header truncated ({} bytes)", b.len()));
        }
        if b[0..8] != SEGMENT_MAGIC {
            return Err("bad segment magic".into());
        }
        let crc = u32_at(b, 60);
        if crc != crate::crc::crc32c(&b[0..60]) {
            return Err("segment header checksum mismatch".into());
        }
        let version = u32_at(b, 8);
        if version != FORMAT_VERSION && version != FORMAT_VERSION_V1 {
            return Err(format!("unsupported segment format version {version}"));
        }
        Ok(SegmentHeader {
            version,
            partition: u32_at(b, 12),
            slot: u32_at(b, 20),
            file_id: u64_at(b, 24),
            order: SegmentOrder {
                major: u64_at(b, 32),
                minor: u32_at(b, 40),
            },
            segment_bytes: u64_at(b, 44),
        })
    }
}

/// Record types. A batch is one part per partition it touches: the part's members (BatchPut /
/// BatchDelete, all carrying the batch's seq), then a BatchCommit (the batch's only or last
/// part) or a BatchEnd (any other part) with the same seq, in one append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordType {
    Put = 1,
    Delete = 2,
    BatchPut = 3,
    BatchDelete = 4,
    /// Empty key; value = member count of this partition's part (u32).
    BatchCommit = 5,
    /// Empty key and value: every record before it in this partition's log is dead (FLUSHALL,
    /// one record per partition instead of a tombstone per key).
    Truncate = 6,
    /// Empty key; value = member count of this partition's part (u32). Ends a part of a
    /// multi-partition batch that is not the last: the part takes effect if the batch's
    /// BatchCommit (in the partition of its last part) exists, or once any record follows it
    /// in this partition's log (written after the whole batch was).
    BatchEnd = 7,
}

impl RecordType {
    pub fn from_u8(v: u8) -> Option<RecordType> {
        Some(match v {
            1 => RecordType::Put,
            2 => RecordType::Delete,
            3 => RecordType::BatchPut,
            4 => RecordType::BatchDelete,
            5 => RecordType::BatchCommit,
            6 => RecordType::Truncate,
            7 => RecordType::BatchEnd,
            _ => return None,
        })
    }

    pub fn is_put(self) -> bool {
        matches!(self, RecordType::Put | RecordType::BatchPut)
    }

    pub fn is_delete(self) -> bool {
        matches!(self, RecordType::Delete | RecordType::BatchDelete)
    }

    pub fn is_batch_member(self) -> bool {
        matches!(self, RecordType::BatchPut | RecordType::BatchDelete)
    }

    /// A BatchCommit or BatchEnd: the record that ends a batch's part.
    pub fn ends_part(self) -> bool {
        matches!(self, RecordType::BatchCommit | RecordType::BatchEnd)
    }
}

/// Header flag: an 8-byte expiry time (milliseconds since the Unix epoch) follows the header.
pub const FLAG_EXPIRES: u8 = 0x01;
/// Header flag: a 4-byte namespace id (a database of SELECT, never 0) follows the header (after
/// the expiry, if there is one).
pub const FLAG_NAMESPACE: u8 = 0x02;
/// Header flag: the value is a hash's fields packed (`fields::Fields`, docs/design.md
/// "Hashes: the layout"), not a string. No `ext` bytes; puts only.
pub const FLAG_HASH: u8 = 0x04;
const FLAGS_KNOWN: u8 = FLAG_EXPIRES | FLAG_NAMESPACE | FLAG_HASH;
/// The longest `ext`: an expiry and a namespace.
pub const RECORD_EXT_LEN_MAX: usize = 12;

/// What a record carries besides its key and value: the `ext` fields of its header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordExt {
    /// Absolute expiry time, milliseconds since the Unix epoch (puts only).
    pub expire_at: Option<u64>,
    /// The key's namespace; 0 (the default database) is written as no field at all.
    pub namespace: u32,
    /// What the value is (puts only).
    pub kind: ValueKind,
}

/// What a put's value is: Redis's type of the key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ValueKind {
    #[default]
    String,
    /// A hash's fields, packed ([`FLAG_HASH`]).
    Hash,
}

impl RecordExt {
    pub const NONE: RecordExt = RecordExt {
        expire_at: None,
        namespace: 0,
        kind: ValueKind::String,
    };

    pub fn flags(&self) -> u8 {
        let mut f = 0;
        if self.expire_at.is_some() {
            f |= FLAG_EXPIRES;
        }
        if self.namespace != 0 {
            f |= FLAG_NAMESPACE;
        }
        if self.kind == ValueKind::Hash {
            f |= FLAG_HASH;
        }
        f
    }

    pub fn len(&self) -> usize {
        ext_len(self.flags())
    }

    pub fn is_empty(&self) -> bool {
        self.flags() == 0
    }

    /// Whether a record with this ext is expired at `now_ms` (expiry at or before now, as in
    /// Redis: a key whose time has come is gone).
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.expire_at.is_some_and(|t| t <= now_ms)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if let Some(t) = self.expire_at {
            out.extend_from_slice(&t.to_le_bytes());
        }
        if self.namespace != 0 {
            out.extend_from_slice(&self.namespace.to_le_bytes());
        }
    }
}

/// Length of the `ext` fields a header with `flags` announces.
pub const fn ext_len(flags: u8) -> usize {
    (if flags & FLAG_EXPIRES != 0 { 8 } else { 0 })
        + (if flags & FLAG_NAMESPACE != 0 { 4 } else { 0 })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub header_crc: u32,
    pub value_crc: u32,
    pub seq: u64,
    pub ty: RecordType,
    pub flags: u8,
    pub key_len: u16,
    pub value_len: u32,
}

impl RecordHeader {
    /// Whole record length on disk, padding included.
    pub fn record_len(&self) -> usize {
        record_len_ext(
            self.ext_len(),
            self.key_len as usize,
            self.value_len as usize,
        )
    }

    pub fn ext_len(&self) -> usize {
        ext_len(self.flags)
    }

    /// Where the key starts in the record (after the header and its `ext`).
    pub fn key_start(&self) -> usize {
        RECORD_HEADER_LEN + self.ext_len()
    }

    /// The key's byte range in the record.
    pub fn key_range(&self) -> std::ops::Range<usize> {
        let at = self.key_start();
        at..at + self.key_len as usize
    }

    /// The value's byte range in the record.
    pub fn value_range(&self) -> std::ops::Range<usize> {
        let at = self.key_range().end;
        at..at + self.value_len as usize
    }

    /// The `ext` fields, read from a record that holds at least header and `ext` (as
    /// [`check_header`] makes sure).
    pub fn ext(&self, rec: &[u8]) -> RecordExt {
        let mut at = RECORD_HEADER_LEN;
        let mut ext = RecordExt::NONE;
        if self.flags & FLAG_EXPIRES != 0 {
            ext.expire_at = Some(u64_at(rec, at));
            at += 8;
        }
        if self.flags & FLAG_NAMESPACE != 0 {
            ext.namespace = u32_at(rec, at);
        }
        if self.flags & FLAG_HASH != 0 {
            ext.kind = ValueKind::Hash;
        }
        ext
    }
}

/// Length of a record without `ext`, padding included.
pub const fn record_len(key_len: usize, value_len: usize) -> usize {
    record_len_ext(0, key_len, value_len)
}

/// Length of a record with `ext_len` bytes of `ext`, padding included.
pub const fn record_len_ext(ext_len: usize, key_len: usize, value_len: usize) -> usize {
    (RECORD_HEADER_LEN + ext_len + key_len + value_len).div_ceil(RECORD_ALIGN) * RECORD_ALIGN
}

/// True when the 24 bytes at the start of `b` are all zero: the clean end of a segment.
pub fn is_zero_header(b: &[u8]) -> bool {
    b.len() >= RECORD_HEADER_LEN && b[..RECORD_HEADER_LEN].iter().all(|&x| x == 0)
}

/// Appends one record (with padding) to `out`.
pub fn encode_record(
    out: &mut Vec<u8>,
    ty: RecordType,
    seq: u64,
    ext: RecordExt,
    key: &[u8],
    value: &[u8],
) {
    debug_assert!(key.len() <= u16::MAX as usize);
    debug_assert!(value.len() <= u32::MAX as usize);
    debug_assert!(ext.expire_at.is_none() || ty.is_put());
    let start = out.len();
    let value_crc = crate::crc::crc32c(value);
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&value_crc.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(ty as u8);
    out.push(ext.flags());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    ext.encode(out);
    out.extend_from_slice(key);
    let header_crc = crate::crc::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(value);
    let padded = record_len_ext(ext.len(), key.len(), value.len());
    out.resize(start + padded, 0);
}

/// Re-types an encoded record in place (compaction turns committed batch members into plain
/// records) and refreshes its header checksum. The value and its checksum are left untouched,
/// so a damaged value stays detectably damaged.
pub fn retype_record(rec: &mut [u8], ty: RecordType) {
    let key_end =
        RECORD_HEADER_LEN + ext_len(rec[17]) + u16::from_le_bytes([rec[18], rec[19]]) as usize;
    rec[16] = ty as u8;
    let crc = crate::crc::crc32c(&rec[4..key_end]);
    rec[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Parses the fixed 24 header bytes without verifying checksums; `None` if the type byte,
/// flags or lengths are invalid. The `ext` fields are read by [`RecordHeader::ext`] once the
/// header is verified ([`check_header`]).
pub fn parse_header(b: &[u8]) -> Option<RecordHeader> {
    if b.len() < RECORD_HEADER_LEN {
        return None;
    }
    let ty = RecordType::from_u8(b[16])?;
    let flags = b[17];
    if flags & !FLAGS_KNOWN != 0 {
        return None;
    }
    let h = RecordHeader {
        header_crc: u32_at(b, 0),
        value_crc: u32_at(b, 4),
        seq: u64_at(b, 8),
        ty,
        flags,
        key_len: u16::from_le_bytes([b[18], b[19]]),
        value_len: u32_at(b, 20),
    };
    let shape_ok = match ty {
        RecordType::BatchCommit | RecordType::BatchEnd => {
            h.key_len == 0 && h.value_len == 4 && flags == 0
        }
        RecordType::Truncate => h.key_len == 0 && h.value_len == 0 && flags == 0,
        // Any key length: the empty key is a key.
        RecordType::Delete | RecordType::BatchDelete => {
            h.value_len == 0 && flags & (FLAG_EXPIRES | FLAG_HASH) == 0
        }
        RecordType::Put | RecordType::BatchPut => true,
    };
    shape_ok.then_some(h)
}

/// The byte ranges of the records of `run` (whole records, one after another, as an append
/// writes them), in order; bytes at the end that do not parse as a record are one last range.
pub fn record_spans(run: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    let mut at = 0;
    while at < run.len() {
        let end =
            parse_header(&run[at..]).map_or(run.len(), |h| (at + h.record_len()).min(run.len()));
        spans.push(at..end);
        at = end;
    }
    spans
}

/// Parses and verifies a header, its `ext` and its key: `b` must hold at least all three.
pub fn check_header(b: &[u8]) -> Result<RecordHeader, &'static str> {
    let h = parse_header(b).ok_or("invalid record header")?;
    let key_end = h.key_range().end;
    if b.len() < key_end {
        return Err("record truncated inside its key");
    }
    if crate::crc::crc32c(&b[4..key_end]) != h.header_crc {
        return Err("record header checksum mismatch");
    }
    // A namespace field holding 0 is not what an encoder writes (0 is written as no field).
    if h.flags & FLAG_NAMESPACE != 0 && h.ext(b).namespace == 0 {
        return Err("record namespace field holds 0");
    }
    Ok(h)
}

/// The key of the record at the start of `b` (for messages: its header is not verified; empty
/// if it does not parse).
pub fn record_key(b: &[u8]) -> &[u8] {
    match parse_header(b) {
        Some(h) => {
            let r = h.key_range();
            &b[r.start.min(b.len())..r.end.min(b.len())]
        }
        None => &[],
    }
}

/// A verified record's parts, as ranges into the buffer it was decoded from.
#[derive(Clone, Debug)]
pub struct RecordView {
    pub header: RecordHeader,
    pub ext: RecordExt,
    pub key: std::ops::Range<usize>,
    pub value: std::ops::Range<usize>,
}

/// Whether the value of record `b` (whose header `h` verified) matches its checksum; false if
/// `b` ends inside the value.
pub fn value_checksum_ok(b: &[u8], h: &RecordHeader) -> bool {
    b.get(h.value_range())
        .is_some_and(|v| crate::crc::crc32c(v) == h.value_crc)
}

/// Verifies a whole record at the start of `b` (header, key and, if `check_value`, the value).
pub fn decode_record(b: &[u8], check_value: bool) -> Result<RecordView, &'static str> {
    let h = check_header(b)?;
    let key = h.key_range();
    let value = h.value_range();
    if b.len() < value.end {
        return Err("record truncated inside its value");
    }
    if check_value && !value_checksum_ok(b, &h) {
        return Err("record value checksum mismatch");
    }
    Ok(RecordView {
        header: h,
        ext: h.ext(b),
        key,
        value,
    })
}

/// The compaction manifest (the partition's `COMPACT` file): the segment files a committed
/// compaction replaces (inputs) and those that replace them (outputs), by file id. Text, so an
/// operator can read it:
///
/// ```text
/// quiver-compaction v1
/// inputs 0000000000000003,0000000000000004
/// outputs 0000000000000009
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionManifest {
    pub inputs: Vec<u64>,
    pub outputs: Vec<u64>,
}

const MANIFEST_MAGIC: &str = "quiver-compaction v1";

impl CompactionManifest {
    pub fn encode(&self) -> String {
        let ids = |v: &[u64]| {
            v.iter()
                .map(|id| format!("{id:016x}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "{MANIFEST_MAGIC}\ninputs {}\noutputs {}\n",
            ids(&self.inputs),
            ids(&self.outputs)
        )
    }

    /// Parses a manifest; an error for anything but exactly what `encode` writes (it is
    /// written whole through a rename, so anything else is damage).
    pub fn decode(text: &str) -> Result<CompactionManifest, &'static str> {
        let mut lines = text.lines();
        if lines.next() != Some(MANIFEST_MAGIC) {
            return Err("not a compaction manifest");
        }
        let mut list = |prefix: &str| -> Result<Vec<u64>, &'static str> {
            let line = lines
                .next()
                .and_then(|l| l.strip_prefix(prefix))
                .ok_or("compaction manifest line missing")?;
            line.split(',')
                .filter(|x| !x.is_empty())
                .map(|x| u64::from_str_radix(x, 16).map_err(|_| "bad file id in manifest"))
                .collect()
        };
        let inputs = list("inputs ")?;
        let outputs = list("outputs ")?;
        if lines.next().is_some() {
            return Err("trailing lines in compaction manifest");
        }
        let m = CompactionManifest { inputs, outputs };
        // What parses but is not byte for byte what `encode` writes (ids not in 16 hex digits,
        // a missing final newline, CR LF) was not written by Quiver either.
        if m.encode() != text {
            return Err("compaction manifest not in its canonical form");
        }
        Ok(m)
    }
}

/// Length of a BatchCommit record (no key; the member count as its value).
pub const COMMIT_RECORD_LEN: usize = record_len(0, 4);

/// Encodes a BatchCommit record for batch `seq`, announcing `members` members in its
/// partition.
pub fn encode_commit(out: &mut Vec<u8>, seq: u64, members: u32) {
    encode_record(
        out,
        RecordType::BatchCommit,
        seq,
        RecordExt::NONE,
        b"",
        &members.to_le_bytes(),
    );
}

/// Encodes a BatchEnd record: the end of a part of batch `seq` that is not its last, with
/// `members` members in its partition.
pub fn encode_end(out: &mut Vec<u8>, seq: u64, members: u32) {
    encode_record(
        out,
        RecordType::BatchEnd,
        seq,
        RecordExt::NONE,
        b"",
        &members.to_le_bytes(),
    );
}

/// The member count carried by a BatchCommit or BatchEnd record's value.
pub fn commit_count(value: &[u8]) -> u32 {
    u32_at(value, 0)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(array_at(b, at))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(array_at(b, at))
}

/// The `N` bytes of `b` at `at` (a slice index panic if `b` is shorter: callers check lengths
/// first).
fn array_at<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

#[cfg(test)]
mod tests;
