//! A sleep to the nanosecond deadline, for the open loop's issuers and the run's window edges.
//!
//! tokio's own timer rounds every deadline up to the next millisecond: at 100K requests/s an
//! issuer would send its requests in 1 ms clumps, each up to 1 ms after its intended time, and
//! that lag would be measured as server latency. A `timerfd` armed with an absolute
//! `CLOCK_MONOTONIC` deadline and registered with the runtime's epoll wakes the task within
//! microseconds of the deadline, at the cost of one fd per sleeper.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::net::token_bucket::monotonic_ns;

/// One task's deadline timer; see the module documentation.
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
}

impl PreciseTimer {
    /// Must be called inside the runtime (the fd registers with its reactor).
    pub fn new() -> io::Result<PreciseTimer> {
        // SAFETY: plain system call; the result is checked before use.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the `OwnedFd` keeps the timerfd open, unchanged, for the AsyncFd's life.
        let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }?;
        Ok(PreciseTimer { fd })
    }

    /// Returns at or after `deadline_ns` (on [`monotonic_ns`]'s clock), at once if it passed.
    pub async fn sleep_until(&self, deadline_ns: u64) -> io::Result<()> {
        if monotonic_ns() >= deadline_ns {
            return Ok(());
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
            },
        };
        let fd = self.fd.as_raw_fd();
        // SAFETY: `fd` is a timerfd we own; `spec` is a valid itimerspec.
        let rc = unsafe {
            libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut guard = self.fd.readable().await?;
            let read = guard.try_io(|inner| {
                let mut expirations = 0u64;
                // SAFETY: reads 8 bytes into a u64 from a timerfd we own.
                let n = unsafe {
                    libc::read(
                        inner.as_raw_fd(),
                        &mut expirations as *mut u64 as *mut libc::c_void,
                        8,
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            match read {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                // Spurious readiness: not expired yet.
                Err(_would_block) => continue,
            }
        }
    }
}
