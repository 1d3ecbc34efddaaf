//! Store options: fixed-at-creation layout, durability, backend and limits.

use crate::error::{Error, Result};

/// Longest key accepted (bytes). Keys are 0..=KEY_LEN_MAX bytes (the empty key too, as in Redis);
/// the record header stores a u16.
pub const KEY_LEN_MAX: usize = 65_535;
/// Default largest value (512 MiB, Redis's proto-max-bulk-len).
pub const VALUE_LEN_MAX_DEFAULT: usize = 512 << 20;
/// Largest number of partitions. The hash fragment uses bits 32..48 and the partition the top
/// bits of the same word, so they stay independent below 2^16 partitions; 1024 is plenty.
pub const PARTITIONS_MAX: u32 = 1024;
/// Smallest segment (tests use small segments to exercise rotation and compaction).
pub const SEGMENT_BYTES_MIN: u64 = 64 << 10;
/// Largest segment: 8-byte-aligned offsets in a 32-bit location must address at least one.
pub const SEGMENT_BYTES_MAX: u64 = 16 << 30;

/// What an acknowledged write survives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Records are buffered in the process and written out every `flush_interval_ms` or when the
    /// buffer fills: a process crash may lose the last interval of writes.
    None,
    /// Records are written to the OS before the call returns: survives a process crash (kill -9),
    /// not a power loss.
    Os,
    /// Records are written and fdatasync'ed before the call returns (group commit: concurrent
    /// callers share one sync): survives power loss.
    Fsync,
}

impl std::str::FromStr for Durability {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Durability::None),
            "os" => Ok(Durability::Os),
            "fsync" => Ok(Durability::Fsync),
            _ => Err(Error::InvalidOptions(format!(
                "unknown durability {s:?} (expected none, os or fsync)"
            ))),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Durability::None => "none",
            Durability::Os => "os",
            Durability::Fsync => "fsync",
        })
    }
}

/// How values are read from segment files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// Memory-mapped segments: page-cache-resident data, prefetch then copy.
    Mmap,
    /// One pread per record.
    Pread,
    /// io_uring with O_DIRECT: one submission for the whole vector (device-resident data).
    Uring,
}

impl BackendKind {
    pub const ALL: [BackendKind; 3] = [BackendKind::Mmap, BackendKind::Pread, BackendKind::Uring];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Mmap => "mmap",
            BackendKind::Pread => "pread",
            BackendKind::Uring => "io_uring",
        }
    }
}

impl std::str::FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "mmap" => Ok(BackendKind::Mmap),
            "pread" => Ok(BackendKind::Pread),
            "io_uring" | "uring" => Ok(BackendKind::Uring),
            _ => Err(Error::InvalidOptions(format!(
                "unknown backend {s:?} (expected mmap, pread or io_uring)"
            ))),
        }
    }
}

/// What opening a store does about damage in the middle of a log (bytes that are not a valid
/// record, a batch part missing members). Such damage can hide the newest record of a key, so
/// that an older value would be served as current.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DamagePolicy {
    /// Opening fails with [`crate::Error::Damaged`], naming every damaged place and the keys
    /// that may be affected; nothing is changed on disk. (A torn tail — the end of the last
    /// write cut short by a crash — is not damage: it is truncated in every policy.)
    #[default]
    Refuse,
    /// The store opens without what is damaged, and [`crate::RecoveryReport`] says what was
    /// skipped and which keys may have lost their newest value. Compaction drops damaged
    /// records instead of stopping at them, so compacting afterwards leaves a clean log.
    Salvage,
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Options for [`crate::Store::open`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Number of partitions (fixed when the store is created; read from disk afterwards).
    pub partitions: u32,
    /// Maximum segment file size in bytes, a power of two (fixed at creation).
    pub segment_bytes: u64,
    pub durability: Durability,
    pub backend: BackendKind,
    /// Largest value accepted.
    pub value_len_max: usize,
    /// Widest vector accepted by the multi_* calls.
    pub vector_width_max: usize,
    /// In `none` mode, the largest per-partition write buffer before it is written out.
    pub write_buffer_bytes_max: usize,
    /// In `none` mode, how often the background thread writes buffers out.
    pub flush_interval_ms: u64,
    /// Background checkpoint period (0 = only on close and on demand).
    pub checkpoint_interval_ms: u64,
    /// Background compaction starts when a partition's garbage ratio (dead records / records)
    /// exceeds this, and it holds at least `compact_min_dead_records` (a floor that only
    /// spares tiny partitions needless passes). 0.0 disables it.
    pub compact_garbage_ratio: f64,
    pub compact_min_dead_records: u64,
    /// The share of a core a background compaction pass takes while it is not urgent: after
    /// each slice of work it sleeps long enough to keep to it, so serving threads on the same
    /// core keep the rest (a pass that took the core half the time while it ran made write
    /// tails of seconds in an open loop, issue 13). A pass is urgent when the partition's
    /// garbage ratio is past halfway from `compact_garbage_ratio` to 1: it then takes half a
    /// core (`compact::URGENT_CPU_SHARE`) or this share if larger. 1.0: never paced. Passes
    /// on a disk short of space and passes asked for (`compact()`) are unpaced.
    pub compact_cpu_share: f64,
    /// Run maintenance (index growth, compaction, checkpoints, flushes) on a background thread.
    /// When false, index growth runs inline in the writer that needs it.
    pub background: bool,
    /// Expected number of keys: sizes the initial index so a bulk load does not regrow it.
    pub expected_keys: u64,
    /// Segment bytes one background compaction pass reads at most (the oldest segments
    /// first): bounds the disk space a pass needs before it frees anything, and its duration.
    /// At least one segment is compacted per pass.
    pub compact_pass_bytes_max: u64,
    /// Disk space held in reserve (the `RESERVE` file) so that deletes and compaction can
    /// still run when the disk is full: when a delete or a compaction finds no space, the
    /// reserve is released and, until compaction has made room to take it back, writes that
    /// add data are refused. Capped at 1/32 of the file system's size; 0 disables it. It should
    /// hold the live records of at least one segment (compaction's unit).
    pub disk_reserve_bytes: u64,
    /// Open without writing anything: no checkpoints, no torn-tail truncation, no background
    /// thread, no reserve; every write fails with [`crate::Error::ReadOnly`]. For offline
    /// inspection (`quiver check`, `quiver stats`).
    pub read_only: bool,
    /// What opening does about damage in the middle of a log.
    pub on_damage: DamagePolicy,
    /// The time key expiry is measured against (the system clock unless a test sets one).
    pub clock: crate::clock::Clock,
    /// Keys with an expired time the background thread deletes per partition and pass (the
    /// active sweep's bound; reads treat an expired key as absent whether swept or not).
    pub expire_sweep_keys_max: usize,
    /// Open a store of the previous format (version 1) read-only, for `quiver upgrade`. A
    /// version-1 store opened without it is refused with an error that names the upgrade.
    pub legacy_v1: bool,
    /// Databases addressable through `Store::db` (Redis's `databases`; at most
    /// `large_hash::USER_DATABASES_MAX`: the hidden databases of large hashes' anchors and
    /// buckets come after, which `Store::db` also opens).
    pub databases: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            partitions: 16,
            segment_bytes: 1 << 30,
            durability: Durability::Os,
            backend: BackendKind::Mmap,
            value_len_max: VALUE_LEN_MAX_DEFAULT,
            vector_width_max: 65_536,
            write_buffer_bytes_max: 1 << 20,
            flush_interval_ms: 100,
            checkpoint_interval_ms: 60_000,
            compact_garbage_ratio: 0.5,
            compact_min_dead_records: 64,
            compact_cpu_share: 0.25,
            background: true,
            expected_keys: 0,
            compact_pass_bytes_max: 4 << 30,
            disk_reserve_bytes: 1 << 30,
            read_only: false,
            on_damage: DamagePolicy::Refuse,
            clock: crate::clock::Clock::system(),
            expire_sweep_keys_max: 1024,
            legacy_v1: false,
            databases: 16,
        }
    }
}

impl Options {
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidOptions(m));
        if self.partitions == 0 || self.partitions > PARTITIONS_MAX {
            return bad(format!(
                "partitions {} outside 1..={PARTITIONS_MAX}",
                self.partitions
            ));
        }
        if !self.segment_bytes.is_power_of_two()
            || !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&self.segment_bytes)
        {
            return bad(format!(
                "segment_bytes {} must be a power of two in {SEGMENT_BYTES_MIN}..={SEGMENT_BYTES_MAX}",
                self.segment_bytes
            ));
        }
        let record_max = crate::log::format::record_len_ext(
            crate::log::format::RECORD_EXT_LEN_MAX,
            KEY_LEN_MAX,
            self.value_len_max,
        ) as u64
            + crate::log::format::SEGMENT_HEADER_LEN as u64;
        if record_max > self.segment_bytes {
            return bad(format!(
                "value_len_max {} does not fit a {}-byte segment (a record must fit in one segment)",
                self.value_len_max, self.segment_bytes
            ));
        }
        if self.databases == 0 || self.databases > crate::large_hash::USER_DATABASES_MAX {
            return bad(format!(
                "databases {} outside 1..={}",
                self.databases,
                crate::large_hash::USER_DATABASES_MAX
            ));
        }
        if self.legacy_v1 && !self.read_only {
            return bad("a version-1 store (legacy_v1) can only be opened read-only".into());
        }
        if self.vector_width_max == 0 {
            return bad("vector_width_max must be at least 1".into());
        }
        if !(self.compact_cpu_share > 0.0 && self.compact_cpu_share <= 1.0) {
            return bad(format!(
                "compact_cpu_share {} outside (0, 1]",
                self.compact_cpu_share
            ));
        }
        if !(0.0..1.0).contains(&self.compact_garbage_ratio) {
            return bad(format!(
                "compact_garbage_ratio {} outside [0, 1)",
                self.compact_garbage_ratio
            ));
        }
        Ok(())
    }
}
