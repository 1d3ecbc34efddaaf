//! The store's lock file: one process at a time opens a store directory, and within a process
//! one `Store` at a time.
//!
//! Across processes this is a POSIX record lock (`fcntl(F_SETLK)`) on `<dir>/LOCK`. Unlike
//! `flock`, a record lock belongs to the process and is not inherited by a forked child, so a
//! store dropped while another thread spawns a process is really unlocked at once. Record locks
//! do not conflict within one process (and closing *any* descriptor of the file would drop
//! them), so a process-wide registry of locked directories guards the in-process case and is
//! checked before the file is opened at all (the approach of LevelDB and RocksDB).

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::error::{Error, Result};

pub const LOCK_FILE: &str = "LOCK";

/// Directories locked by this process.
static LOCKED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Holds the lock on a store directory for as long as it lives.
pub(crate) struct DirLock {
    file: Option<File>,
    dir: PathBuf,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let dir = dir
            .canonicalize()
            .map_err(|e| Error::io("resolve store directory", dir, e))?;
        if !LOCKED
            .lock()
            .get_or_insert_with(HashSet::new)
            .insert(dir.clone())
        {
            return Err(Error::Locked { path });
        }
        // From here on, dropping `lock` unregisters the directory.
        let mut lock = DirLock { file: None, dir };
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("open lock file", &path, e))?;
        // SAFETY: a zeroed flock is a valid value of this plain C struct.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        // SAFETY: fcntl on a descriptor we own with a pointer to a live flock struct.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &mut fl) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EAGAIN) => Error::Locked { path },
                _ => Error::io("lock store", &path, err),
            });
        }
        lock.file = Some(file);
        Ok(lock)
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the record lock; then the directory may be reopened.
        self.file.take();
        if let Some(set) = LOCKED.lock().as_mut() {
            set.remove(&self.dir);
        }
    }
}
