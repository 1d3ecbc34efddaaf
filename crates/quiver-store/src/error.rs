//! The engine's error type: one enum, every variant names what went wrong and where.

use std::io;
use std::path::PathBuf;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the engine can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("I/O error during {op} on {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file system is full (ENOSPC). The write was not applied; the store stays readable and
    /// accepts writes again once space is freed.
    #[error("no space left on device while writing {path}")]
    NoSpace { path: PathBuf },
    /// Stored bytes failed verification. Never returned as data.
    #[error("corruption in {path} at offset {offset}: {reason}")]
    Corruption {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// Another process holds the store's lock file.
    #[error("store at {path} is locked by another process")]
    Locked { path: PathBuf },
    /// A key is longer than the limit.
    #[error("key length {len} exceeds the maximum {max}")]
    KeyLength { len: usize, max: usize },
    /// A value is longer than the configured limit.
    #[error("value length {len} exceeds the maximum {max}")]
    ValueTooLarge { len: usize, max: usize },
    /// A batch (or one partition's share of it) does not fit in one segment.
    #[error("batch of {bytes} bytes exceeds the segment capacity {max}")]
    BatchTooLarge { bytes: u64, max: u64 },
    /// A vector has more entries than the limit.
    #[error("vector of {len} entries exceeds the maximum {max}")]
    VectorTooWide { len: usize, max: usize },
    /// A partition has used every segment slot its 32-bit index locations can address.
    #[error("partition {partition} has no free segment slot (compaction frees them)")]
    PartitionFull { partition: u32 },
    /// Options are inconsistent or out of range.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// Opening found damage in the middle of a log (see [`crate::DamagePolicy`]): the store was
    /// not opened and nothing was changed. Each entry names a file, an offset and what may be
    /// affected.
    #[error("the store is damaged and was not opened ({} problem(s)): {}", .places.len(), .places.join("; "))]
    Damaged { places: Vec<String> },
    /// A partition refuses writes: a failed write left bytes in its log that could not be
    /// taken back (see `reason`), and nothing may follow them. Reads go on; reopening the store
    /// recovers (replay cuts those bytes off).
    #[error("the partition in {dir} refuses writes until the store is reopened: {reason}")]
    PartitionFailed { dir: PathBuf, reason: String },
    /// An earlier fdatasync of a log file failed: what was written to it may not be on disk,
    /// and no later fdatasync of it is trusted (it is not even tried). Its partition refuses
    /// writes; reads go on; reopening the store recovers from what is on disk.
    #[error(
        "an earlier fdatasync of {path} failed ({reason}) and is never retried as if the data \
         were safe: its partition refuses writes until the store is reopened"
    )]
    SyncFailed { path: PathBuf, reason: String },
    /// A write on a store opened read-only.
    #[error("the store is open read-only")]
    ReadOnly,
    /// A partition's index has no room for more keys and maintenance could not make any in
    /// time (it is reported in `Stats::last_background_error`). Nothing was written.
    #[error(
        "partition {partition}: the index has no room for {keys} more key(s); nothing was written"
    )]
    IndexFull { partition: u32, keys: usize },
    /// A vector of plain puts or deletes failed part-way through: `applied[i]` says whether
    /// operation `i` took effect, and `existed[i]` whether its key existed before it. Only an
    /// I/O error (or a full disk under a vector too large for one segment) does this; a
    /// failure before anything was written is returned as itself, with nothing applied.
    #[error("{source}; the vector was partly applied ({} of {} operations took effect)", .applied.iter().filter(|&&a| a).count(), .applied.len())]
    PartlyApplied {
        applied: Vec<bool>,
        existed: Vec<bool>,
        #[source]
        source: Box<Error>,
    },
    /// The directory holds a store created with different fixed options.
    #[error("store at {path} does not match the options: {reason}")]
    Incompatible { path: PathBuf, reason: String },
    /// The key holds a value of another kind than the operation reads (a hash where a
    /// string was asked for, or the reverse): Redis's WRONGTYPE.
    #[error("the key holds a value of another kind")]
    WrongType,
    /// A hash's stored value does not decode (its record's checksums held: a bug wrote it).
    #[error("a stored hash does not decode: {0}")]
    BadHash(#[from] crate::fields::FieldsError),
    /// A read-then-write of one key lost to other writers of the key this many times in a row.
    #[error("key changed by other writers {attempts} times in a row; try again")]
    Contended { attempts: usize },
    /// `quiver upgrade` of a store that is in the current format already.
    #[error("store at {dir} is in on-disk format version {version} already: nothing to upgrade")]
    AlreadyCurrent { dir: PathBuf, version: u32 },
    /// Splits or merges changed the partitions of an operation's keys this many times while
    /// it tried.
    #[error("the store's partitions changed {attempts} times during the operation; try again")]
    Rerouted { attempts: usize },
    /// A database number past the store's `databases` setting.
    #[error("no database {db}: the store has {databases} (databases 0 to {})", databases - 1)]
    NoSuchDatabase { db: u32, databases: u32 },
    /// A slot-range operation on a store of format 1 (opened for `quiver upgrade`).
    #[error("this store has no slot ranges (format 1)")]
    NotSlotted,
    /// The store was written in an older on-disk format: `quiver upgrade` converts it.
    #[error(
        "store at {dir} is in on-disk format version {found}; this Quiver reads version \
         {expected}: convert it with `quiver upgrade --dir {dir}`"
    )]
    OldFormat {
        dir: PathBuf,
        found: u32,
        expected: u32,
    },
}

/// A key for a message: as text if it is printable, else in hex; cut to a readable length.
pub(crate) fn show_key(key: &[u8]) -> String {
    const SHOWN_BYTES_MAX: usize = 64;
    let shown = &key[..key.len().min(SHOWN_BYTES_MAX)];
    let more = if key.len() > SHOWN_BYTES_MAX {
        "..."
    } else {
        ""
    };
    if shown.iter().all(|b| b.is_ascii_graphic()) {
        format!("{:?}{more}", String::from_utf8_lossy(shown))
    } else {
        let hex: String = shown.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{more}")
    }
}

impl Error {
    /// Wraps an I/O error, turning ENOSPC into [`Error::NoSpace`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        let path = path.into();
        if source.raw_os_error() == Some(libc::ENOSPC)
            || source.raw_os_error() == Some(libc::EDQUOT)
        {
            Error::NoSpace { path }
        } else {
            Error::Io { op, path, source }
        }
    }

    pub(crate) fn corruption(
        path: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Error {
        Error::Corruption {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for [`Error::NoSpace`].
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace { .. })
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}
