//! Injected I/O faults, for tests: EIO on a read, a write or an fsync, a short write, a full
//! disk, and a torn write (the process dies in the middle of one). Every file operation of the
//! engine's logs, checkpoints and metadata asks `check` first. The hooks are live only with the
//! `faults` feature (and in this crate's own unit tests); without it `check` is an empty
//! inline function and the engine pays nothing for them.
//!
//! A test installs an injector for a store directory (`inject`), a function that sees each
//! operation on a path inside that directory (its kind, path and length) and may answer with a
//! `Fault`. The injector is removed when the returned `Injection` is dropped.
//!
//! Not covered: reads through a mapping (the `mmap` backend, and replay's mapped reads where
//! they are used) and the `io_uring` backend's reads — a mapped read's EIO is a SIGBUS, not an
//! error return, and the ring's completions are the kernel's; the `pread` backend and every
//! read the engine makes with `pread` (recovery, compaction, sweeps, checks) are.

use std::io;

/// The kind of a file operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileOp {
    Read,
    /// A write (pwrite, or a copy into the appender's mapping), including a file's creation.
    Write,
    /// fdatasync / fsync of a file or a directory.
    Sync,
    /// fallocate of disk blocks for a log's next bytes.
    Allocate,
}

/// What an injector does to an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails with EIO; nothing of a write reaches the file.
    Eio,
    /// The operation fails with ENOSPC (a write or an allocation).
    NoSpace,
    /// A write: its first `keep` bytes (at most its length) reach the file, then EIO.
    Short { keep: usize },
    /// A write: its first `keep` bytes reach the file and the process dies there. This
    /// operation and every later one under the directory fail with EIO until the injection is
    /// dropped (a dead process does nothing more); the test then drops the store as a crash
    /// (`Store::simulate_crash`) and reopens it.
    Torn { keep: usize },
}

/// An injected failure, as the hooked operation carries it out: of a write, the first `keep`
/// bytes reach the file; then the operation returns `error`.
pub(crate) struct Injected {
    pub keep: usize,
    pub error: io::Error,
}

#[cfg(any(test, feature = "faults"))]
pub use live::{inject, Injection};

#[cfg(any(test, feature = "faults"))]
pub(crate) use live::check;

/// Without the `faults` feature: no injection, at no cost.
#[cfg(not(any(test, feature = "faults")))]
#[inline(always)]
pub(crate) fn check(_path: &std::path::Path, _op: FileOp, _len: usize) -> Option<Injected> {
    None
}

#[cfg_attr(not(any(test, feature = "faults")), allow(dead_code))]
impl Injected {
    fn of(fault: Fault, len: usize) -> Injected {
        let (keep, errno) = match fault {
            Fault::Eio => (0, libc::EIO),
            Fault::NoSpace => (0, libc::ENOSPC),
            Fault::Short { keep } | Fault::Torn { keep } => (keep.min(len), libc::EIO),
        };
        Injected {
            keep,
            error: io::Error::from_raw_os_error(errno),
        }
    }

    /// The failure of an operation of a process that died (a torn write happened).
    fn dead() -> Injected {
        Injected {
            keep: 0,
            error: io::Error::from_raw_os_error(libc::EIO),
        }
    }
}

/// Runs the write `write(prefix)` of the first bytes an injected fault lets through, if any,
/// and returns the fault's error: the caller wraps it as its own operation's error.
pub(crate) fn partial_write(
    injected: Injected,
    buf: &[u8],
    write: impl FnOnce(&[u8]) -> io::Result<()>,
) -> io::Error {
    if injected.keep > 0 {
        // The prefix a failing device took: best effort, as a real short write is.
        let _ = write(&buf[..injected.keep]);
    }
    injected.error
}

#[cfg(any(test, feature = "faults"))]
mod live {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::{Fault, FileOp, Injected};

    type Decide = Box<dyn FnMut(FileOp, &Path, usize) -> Option<Fault> + Send>;

    struct Injector {
        id: u64,
        dir: PathBuf,
        decide: Decide,
        state: Arc<State>,
    }

    /// What a test reads back from its injection.
    #[derive(Default)]
    struct State {
        injected: AtomicU64,
        dead: AtomicBool,
    }

    /// The installed injectors. `ANY` is false while there are none: the hooks then cost an
    /// atomic load (the unit tests of this crate run with the hooks compiled in).
    static INJECTORS: Mutex<Vec<Injector>> = Mutex::new(Vec::new());
    static ANY: AtomicBool = AtomicBool::new(false);
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);

    /// Faults injected into the file operations under `dir` (compared as given: pass the path
    /// the store is opened with) while the returned `Injection` lives. `decide` sees each
    /// operation (kind, path, length in bytes; 0 where it has none) and answers with a fault
    /// or `None`. It runs under a global lock: it must not touch the store.
    pub fn inject(
        dir: &Path,
        decide: impl FnMut(FileOp, &Path, usize) -> Option<Fault> + Send + 'static,
    ) -> Injection {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(State::default());
        let mut all = INJECTORS.lock();
        all.push(Injector {
            id,
            dir: dir.to_path_buf(),
            decide: Box::new(decide),
            state: state.clone(),
        });
        ANY.store(true, Ordering::Release);
        Injection { id, state }
    }

    /// An installed injector; dropping it removes it.
    pub struct Injection {
        id: u64,
        state: Arc<State>,
    }

    impl Injection {
        /// Faults injected so far.
        pub fn injected(&self) -> u64 {
            self.state.injected.load(Ordering::Relaxed)
        }

        /// A torn write happened: the process is as good as dead.
        pub fn dead(&self) -> bool {
            self.state.dead.load(Ordering::Relaxed)
        }
    }

    impl Drop for Injection {
        fn drop(&mut self) {
            let mut all = INJECTORS.lock();
            all.retain(|i| i.id != self.id);
            ANY.store(!all.is_empty(), Ordering::Release);
        }
    }

    /// The fault, if any, for an operation on `path`.
    pub(crate) fn check(path: &Path, op: FileOp, len: usize) -> Option<Injected> {
        if !ANY.load(Ordering::Acquire) {
            return None;
        }
        let mut all = INJECTORS.lock();
        let injector = all.iter_mut().find(|i| path.starts_with(&i.dir))?;
        if injector.state.dead.load(Ordering::Relaxed) {
            return Some(Injected::dead());
        }
        let fault = (injector.decide)(op, path, len)?;
        injector.state.injected.fetch_add(1, Ordering::Relaxed);
        if matches!(fault, Fault::Torn { .. }) {
            injector.state.dead.store(true, Ordering::Relaxed);
        }
        Some(Injected::of(fault, len))
    }
}
