//! The system clock as the service reports it: the time of slow log entries, latency samples
//! and saves (a module of its own, which imports nothing of the crate).

/// Whole seconds since the Unix epoch (0 before it).
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
