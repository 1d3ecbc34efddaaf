//! The store's lock file: one process at a time opens a store directory.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{Error, Result};

pub const LOCK_FILE: &str = "LOCK";

/// Holds an exclusive `flock` on `<dir>/LOCK` for as long as it lives.
pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("open lock file", &path, e))?;
        // SAFETY: flock on a descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            return Err(if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                Error::Locked { path }
            } else {
                Error::io("lock store", &path, err)
            });
        }
        Ok(DirLock { _file: file })
    }
}
