//! Progress bars on stderr, drawn only when stderr is a terminal.

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use quiver_store::{Options, RecoveryProgress, Store};

/// Steps of one partition on the open bar.
const OPEN_STEPS_PER_PARTITION: u64 = 1000;

pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar over `total` units, hidden unless stderr is a terminal.
pub fn bar(total: u64, template: &str) -> ProgressBar {
    let target = if stderr_is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(total), target);
    // The templates below are valid (a test parses every one); were one not, the bar would
    // still count, in indicatif's default style.
    let style =
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style.progress_chars("=> "));
    pb
}

pub const LOAD_TEMPLATE: &str =
    "{msg} [{bar:40}] {human_pos}/{human_len} keys ({per_sec}, eta {eta})";
pub const PERCENT_TEMPLATE: &str = "{msg} [{bar:40}] {percent}%";
const OPEN_TEMPLATE: &str = "{msg} [{bar:40}] {percent}% ({elapsed})";

/// Opens the store, with a bar while partitions' indexes are loaded or rebuilt when stderr is
/// a terminal.
pub fn open_store(dir: &Path, opts: Options) -> quiver_store::Result<Store> {
    if !stderr_is_terminal() {
        return Store::open(dir, opts);
    }
    let partitions_hint = opts.partitions as u64;
    let pb = bar(partitions_hint * OPEN_STEPS_PER_PARTITION, OPEN_TEMPLATE);
    pb.set_message("opening store");
    // Partitions are recovered in parallel: the bar shows the sum of their progress.
    let mut done_per_partition: Vec<u64> = Vec::new();
    let mut on_progress = |p: RecoveryProgress| {
        let parts = p.partitions.max(1) as u64;
        pb.set_length(parts * OPEN_STEPS_PER_PARTITION);
        let frac = if p.bytes_total == 0 {
            OPEN_STEPS_PER_PARTITION
        } else {
            (p.bytes_done.min(p.bytes_total) as u128 * OPEN_STEPS_PER_PARTITION as u128
                / p.bytes_total as u128) as u64
        };
        done_per_partition.resize(parts as usize, 0);
        if let Some(d) = done_per_partition.get_mut(p.partition as usize) {
            *d = frac;
        }
        pb.set_position(done_per_partition.iter().sum());
        pb.set_message(format!("opening store: {parts} partitions"));
    };
    let res = Store::open_with_progress(dir, opts, &mut on_progress);
    pb.finish_and_clear();
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_parse() {
        for t in [LOAD_TEMPLATE, PERCENT_TEMPLATE, OPEN_TEMPLATE] {
            assert!(ProgressStyle::with_template(t).is_ok(), "{t}");
        }
    }
}
