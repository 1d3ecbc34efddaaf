//! CPU time and resident memory of a process (the server) or of the client's own thread, from
//! `/proc`.
//!
//! CPU time is `utime + stime` of `/proc/<pid>/stat` (all of the process's threads), in clock
//! ticks (`sysconf(_SC_CLK_TCK)`, 100 per second on Linux): over a run of seconds, a tick of
//! 10 ms is precise enough, and it is what the kernel accounts for any process, which is what
//! makes Quiver and redis-server comparable. RSS is `VmRSS` of `/proc/<pid>/status`; a
//! sample ([`crate::net::sample`]) also splits it into `RssAnon` and `RssFile`, and counts the
//! process's open descriptors (the entries of `/proc/<pid>/fd`).

use std::path::{Path, PathBuf};

/// CPU seconds (user + system) of the process `pid`; `None` if it cannot be read (gone, or
/// not ours to see).
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    cpu_s_of(&PathBuf::from(format!("/proc/{pid}/stat")))
}

/// CPU seconds of the calling thread. The client runs all its connections on one thread, so
/// this is the client's cost; `/proc/thread-self` rather than `/proc/self` leaves out other
/// threads of the process (an in-process test server, a progress bar).
pub fn this_thread_cpu_s() -> Option<f64> {
    cpu_s_of(Path::new("/proc/thread-self/stat"))
}

/// Resident memory of process `pid` in bytes.
pub fn process_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

/// A process's resident memory, from one read of its `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`, bytes.
    pub rss: u64,
    /// `RssAnon` (heap, stacks, anonymous mappings) and `RssFile` (mapped files' pages: the
    /// segment files a Quiver server maps), bytes; `None` on kernels without them.
    pub anon: Option<u64>,
    pub file: Option<u64>,
}

/// Resident memory of process `pid`; `None` if it cannot be read.
pub fn process_memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |field| crate::sysinfo::parse_status_kb(&status, field).map(|k| k * 1024);
    Some(Memory {
        rss: parse_vm_rss(&status)?,
        anon: kb("RssAnon:"),
        file: kb("RssFile:"),
    })
}

/// Open file descriptors of process `pid` (sockets, files, epoll and event descriptors...);
/// `None` if its `fd` directory cannot be read (gone, or not ours to see).
pub fn process_fds(pid: u32) -> Option<u64> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    // Finite: a process's descriptors are bounded by its RLIMIT_NOFILE.
    Some(dir.filter(|e| e.is_ok()).count() as u64)
}

fn cpu_s_of(path: &Path) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    let ticks = parse_cpu_ticks(&stat)?;
    Some(ticks as f64 / clock_ticks_per_s())
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// `utime + stime` (fields 14 and 15) of a `stat` line. The command name (field 2) is in
/// parentheses and may itself hold spaces and parentheses, so fields are counted from the
/// last `)`.
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    // After the name come field 3 (state), 4, ...: utime is the 12th, stime the 13th.
    let mut fields = after.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS:   1234 kB` of a `status` file, in bytes.
pub fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut parts = line["VmRSS:".len()..].split_ascii_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => Some(n * 1024),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let stat = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 \
                    1 0 12345 1000000 200 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("garbage"), None);
        assert_eq!(parse_cpu_ticks("1 (x) S 1 2"), None);
    }

    #[test]
    fn vm_rss_in_bytes() {
        let status = "Name:\tquiver\nVmPeak:\t  9000 kB\nVmRSS:\t    5120 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss(status), Some(5120 * 1024));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
    }

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        // Burn a little CPU so the figures are not all zero.
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu_s(pid).unwrap() >= 0.0);
        assert!(this_thread_cpu_s().unwrap() >= 0.0);
        assert!(process_rss_bytes(pid).unwrap() > 0);
        assert_eq!(process_cpu_s(u32::MAX), None);
        let m = process_memory(pid).unwrap();
        assert!(m.rss > 0 && m.anon.unwrap() > 0, "{m:?}");
        // The directory being read is one of them.
        assert!(process_fds(pid).unwrap() >= 1);
        assert_eq!(process_fds(u32::MAX), None);
    }
}
