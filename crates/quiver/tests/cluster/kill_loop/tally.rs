//! What the chain crash loop counts over its cycles, and the figures it prints at the end.

use std::collections::BTreeMap;
use std::time::Duration;

/// What the whole run counted.
#[derive(Default)]
pub struct Tally {
    pub cycles: usize,
    pub acked: u64,
    pub in_flight: u64,
    /// Of those, the operations on hash keys (HSET, HDEL, HINCRBY, DEL of a hash).
    pub hash_acked: u64,
    pub hash_in_flight: u64,
    /// Hashes found large by the checks (summed over cycles).
    pub large_hashes: u64,
    pub refused: u64,
    /// From each kill until every chain was whole again.
    pub wholes: Vec<Duration>,
    /// From each chain being whole again until the heads were spread (one per node).
    pub spreads: Vec<Duration>,
    /// Kills of a node that held the same position in every chain, and of one that headed
    /// every chain (the heads piled up).
    pub same_position: usize,
    pub head_of_all: usize,
    /// Kills by the role aimed at (`ROLES`: head, middle, tail).
    pub roles: [usize; 3],
    /// Kills of a node heading at least one chain.
    pub heads: usize,
    pub manager_kills: usize,
    pub late_restarts: usize,
    /// FLUSHALLs every node acknowledged, and those the kill caught in flight.
    pub flushes_acked: usize,
    pub flushes_in_flight: usize,
    pub reasons: BTreeMap<String, u64>,
}

impl Tally {
    /// The figures the issue asks for, in one line.
    pub fn line(&self) -> String {
        let (whole_median, whole_max) = median_max(&self.wholes);
        let (spread_median, spread_max) = median_max(&self.spreads);
        format!(
            "chain crash loop: {} cycles, {} acknowledged operations checked ({} on hashes; {} \
             large hashes checked), 0 lost, 0 wrong, {} in flight at kills ({} on hashes), \
             {whole_median:.2}/{whole_max:.2} seconds until whole (median/max), heads spread \
             {spread_median:.2}/{spread_max:.2} seconds after; {} kills of a node heading every \
             chain, {} of one in the same position in every chain",
            self.cycles,
            self.acked,
            self.hash_acked,
            self.large_hashes,
            self.in_flight,
            self.hash_in_flight,
            self.head_of_all,
            self.same_position,
        )
    }

    /// The rest of the figures.
    pub fn details(&self) -> String {
        format!(
            "kills: {} head, {} middle, {} tail (of a chain picked at random; {} of a node heading \
             a chain), {} with the elected manager, {} restarted once out of the chains; \
             FLUSHALL: {} acknowledged, {} in flight at a kill; {} operations refused; unknown \
             outcomes by reason: {:?}",
            self.roles[0],
            self.roles[1],
            self.roles[2],
            self.heads,
            self.manager_kills,
            self.late_restarts,
            self.flushes_acked,
            self.flushes_in_flight,
            self.refused,
            self.reasons
        )
    }
}

/// The median and the largest of `times`, in seconds.
pub fn median_max(times: &[Duration]) -> (f64, f64) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    let max = sorted.last().copied().unwrap_or_default();
    (median.as_secs_f64(), max.as_secs_f64())
}
