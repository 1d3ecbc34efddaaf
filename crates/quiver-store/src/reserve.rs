//! The disk reserve: space held back in the store directory (the `RESERVE` file, its blocks
//! allocated) so that the writes that free space — deletes and compaction — can still run
//! when the disk is full. (CockroachDB calls this a ballast file.)
//!
//! While the disk has room, the reserve is simply held. When a delete or a compaction finds
//! no space, the reserve is released (the file truncated) and the store is *short of space*:
//! writes that add data are refused with `NoSpace`, so the released space goes to deletes and
//! compaction only. As soon as the file system has room for the reserve again (compaction has
//! freed segments, or something outside the store freed space), it is taken back and writes
//! are accepted again.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, Result};

pub const RESERVE_FILE: &str = "RESERVE";
/// The reserve takes at most this fraction of the file system (1/32): a small disk keeps
/// most of its space for data. (Compacting the oldest segment needs room for its live
/// records: a disk much smaller than 32 segments wants smaller segments.)
const RESERVE_FS_FRACTION_DIVISOR: u64 = 32;
/// The reserve is taken back only when the file system has this much more free space than
/// the reserve itself (a quarter of it), so taking it back does not fill the disk again.
const RESTORE_HEADROOM_DIVISOR: u64 = 4;
/// How often a refused write may check whether the reserve can be taken back.
const RESTORE_CHECK_INTERVAL: Duration = Duration::from_millis(50);

pub(crate) struct DiskReserve {
    path: PathBuf,
    /// Bytes the reserve holds when held (0: no reserve).
    target: u64,
    state: Mutex<State>,
    /// Set while the reserve is released for deletes and compaction (shared with the
    /// appenders, which then allocate no disk blocks ahead of need).
    short: Arc<AtomicBool>,
}

struct State {
    held: bool,
    last_restore_check: Option<Instant>,
}

impl DiskReserve {
    /// A reserve of `bytes` (capped at 1/32 of the file system) in `dir`, taken now if the disk
    /// has room for it; `bytes == 0`: none.
    pub fn open(dir: &Path, bytes: u64, short: Arc<AtomicBool>) -> Result<DiskReserve> {
        let target = match bytes {
            0 => 0,
            _ => bytes.min(fs_stats(dir)?.total / RESERVE_FS_FRACTION_DIVISOR),
        };
        let r = DiskReserve::with_target(dir, target, short);
        if target == 0 {
            let _ = std::fs::remove_file(&r.path);
            return Ok(r);
        }
        let held = allocated_bytes(&r.path) >= target || r.try_allocate()?;
        r.state.lock().held = held;
        Ok(r)
    }

    /// A store without a reserve (read-only opening).
    pub fn none(dir: &Path, short: Arc<AtomicBool>) -> DiskReserve {
        DiskReserve::with_target(dir, 0, short)
    }

    fn with_target(dir: &Path, target: u64, short: Arc<AtomicBool>) -> DiskReserve {
        DiskReserve {
            path: dir.join(RESERVE_FILE),
            target,
            state: Mutex::new(State {
                held: false,
                last_restore_check: None,
            }),
            short,
        }
    }

    /// Whether writes that add data are refused (the reserve is released).
    pub fn is_short(&self) -> bool {
        self.short.load(Ordering::Relaxed)
    }

    pub fn held_bytes(&self) -> u64 {
        if self.state.lock().held {
            self.target
        } else {
            0
        }
    }

    /// A write that adds data may go ahead: `NoSpace` while the reserve is released and
    /// cannot be taken back yet.
    pub fn admit_growth(&self) -> Result<()> {
        if !self.is_short() {
            return Ok(());
        }
        {
            let mut st = self.state.lock();
            if st
                .last_restore_check
                .is_some_and(|t| t.elapsed() < RESTORE_CHECK_INTERVAL)
            {
                return Err(self.no_space());
            }
            st.last_restore_check = Some(Instant::now());
        }
        self.restore();
        if self.is_short() {
            return Err(self.no_space());
        }
        Ok(())
    }

    /// Releases the reserve for a write that frees space; true if space was released (the
    /// caller should try again).
    pub fn release(&self) -> bool {
        let mut st = self.state.lock();
        if !st.held {
            return false;
        }
        let freed = File::options()
            .write(true)
            .open(&self.path)
            .and_then(|f| f.set_len(0));
        if freed.is_err() {
            // Nothing released: the caller's own `NoSpace` stands.
            return false;
        }
        st.held = false;
        self.short.store(true, Ordering::Relaxed);
        true
    }

    /// Takes the reserve back if the file system has room for it and some headroom; ends
    /// the shortage. Called by the background thread every tick and by refused writes.
    pub fn restore(&self) {
        if self.target == 0 {
            return;
        }
        let mut st = self.state.lock();
        if st.held {
            return;
        }
        let Ok(fs) = fs_stats(self.path.parent().unwrap_or(Path::new("."))) else {
            return;
        };
        if fs.free < self.target + self.target / RESTORE_HEADROOM_DIVISOR {
            return;
        }
        if let Ok(true) = self.try_allocate() {
            st.held = true;
            self.short.store(false, Ordering::Relaxed);
        }
    }

    /// Allocates the reserve file's blocks; false if the disk has no room for them (then the
    /// file is left empty).
    fn try_allocate(&self) -> Result<bool> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.path)
            .map_err(|e| Error::io("create disk reserve", &self.path, e))?;
        // SAFETY: fallocate on a descriptor we own; mode 0 only allocates blocks.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, self.target as libc::off_t) };
        if rc == 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        // Whatever was allocated before the failure goes back to the file system.
        let _ = f.set_len(0);
        match Error::io("allocate disk reserve", &self.path, err) {
            Error::NoSpace { .. } => Ok(false),
            // A file system without fallocate: no reserve can be held there.
            Error::Io { source, .. }
                if matches!(source.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) =>
            {
                Ok(false)
            }
            e => Err(e),
        }
    }

    /// Free bytes of the file system (for compaction's budget); `None` if unknown.
    pub fn fs_free_bytes(&self) -> Option<u64> {
        fs_stats(self.path.parent()?).ok().map(|s| s.free)
    }

    fn no_space(&self) -> Error {
        Error::NoSpace {
            path: self.path.clone(),
        }
    }
}

fn allocated_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

/// Size and free space of the file system holding `dir`, for unprivileged users.
struct FsStats {
    total: u64,
    free: u64,
}

fn fs_stats(dir: &Path) -> Result<FsStats> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| Error::InvalidOptions(format!("{} contains a NUL byte", dir.display())))?;
    // SAFETY: `statvfs` is a C struct of integers (and padding), for which all-zero bytes are
    // a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a zeroed statvfs for the kernel to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(Error::io("statvfs", dir, std::io::Error::last_os_error()));
    }
    Ok(FsStats {
        total: s.f_blocks as u64 * s.f_frsize as u64,
        free: s.f_bavail as u64 * s.f_frsize as u64,
    })
}
