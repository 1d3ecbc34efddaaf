//! The allocator of every process that serves: jemalloc, as Redis uses. Against glibc's malloc
//! the serving thread spent 5-6% of a write load in `malloc`/`free`, and one core served 3-10%
//! more keys a second with jemalloc (BENCHMARKS §56). It also gives INFO's `used_memory` the
//! figure Redis gives there: the bytes the application holds allocated.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Bytes the allocator holds allocated to the process (jemalloc's `stats.allocated`, as of
/// now: the statistics' epoch is advanced first); 0 where it cannot tell.
pub fn allocated_bytes() -> u64 {
    if tikv_jemalloc_ctl::epoch::advance().is_err() {
        return 0;
    }
    tikv_jemalloc_ctl::stats::allocated::read().map_or(0, |n| n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_allocated_is_counted() {
        let before = allocated_bytes();
        let held: Vec<u8> = vec![1; 64 << 20];
        let during = allocated_bytes();
        drop(held);
        assert!(during >= before + (64 << 20), "{before} -> {during}");
        assert!(allocated_bytes() < during);
    }
}
