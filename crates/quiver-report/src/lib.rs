//! `quiver bench report`: result files (JSON lines) in, PNG and SVG plots out.
//!
//! # Inputs
//! Any mix of JSON-lines files; each line is one record, recognised by its fields:
//! - `quiver sim vector-width` records (`"sim": "vector-width"`);
//! - `quiver bench local` records (`"bench": "local"`);
//! - `quiver bench net` records (they have `system` or `mode`), and any other record with
//!   `keys_per_sec` (e.g. a figure script's raw backend row);
//! - `quiver bench net --sample-every-s` samples (`"bench": "net-sample"`: a soak's).
//!
//! Every record may carry `tags`, an object of strings (numbers are taken as their decimal
//! text), that the figure scripts set: `figure` (`fig3`, `fig9`..`fig12`, `compare`),
//! `pattern` (`direct` or `queue`), `G` (multiget width), `R` (storage vector width), `bar`
//! (a fig3 bar's label). Blank lines are skipped; an object of no known kind is ignored
//! (and counted in a note); a line that is not a JSON object is an error naming the file and
//! line.
//!
//! # Outputs
//! In the output directory, `NAME.png` and `NAME.svg` per plot; a plot without records is
//! skipped with a note. NAME, what it shows, and from which records:
//! - `latency_vs_throughput_direct`: Fig. 9-11 style, median latency vs keys/s, a line per G
//!   (`tags.pattern=direct`; G from `tags.G`, else the record's `width`);
//! - `latency_vs_throughput_queue`: the same, a line per R (`tags.pattern=queue`, `tags.R`);
//! - `peak_throughput_vs_width`: Fig. 12, peak keys/s vs width, a line for direct and one
//!   for the queue (`tags.figure=fig12` records if any, else the peaks of the curves above);
//! - `fig3_throughput_bars`: Fig. 3, a keys/s bar per `tags.bar` (`tags.figure=fig3`);
//! - `vector_width_vs_servers`: Fig. 13, `width_of_mean_exact` vs servers, a line per
//!   replication factor, and the replication-1 closed form dashed (sim records);
//! - `compare_throughput`: keys/s grouped by workload, a bar per system
//!   (`tags.figure=compare`); `compare_throughput_<V>B` per value size V when there are
//!   several;
//! - `local_throughput_vs_width`: in-process multiget keys/s vs width, a line per backend,
//!   distribution and thread count (`bench local` records without `tags.figure`);
//! - `soak_<run>` (`soak` without `tags.run`): a sampled run against time, four panels — the
//!   server's RSS, its open descriptors, its data directory on disk with the live records and
//!   the bound the compaction trigger sets, p50 and p99 per sample interval (samples; drawn
//!   only when there are some, without a note otherwise: see [`soak`]).
//!
//! Records tagged for fig3, fig12 or compare are not also drawn as latency curves. Repeated
//! records for one bar, one sim cell or one `bench local` point (several rounds, seeds) are
//! averaged; for one fig12 width the largest keys/s is the peak.

pub mod charts;
pub mod error;
pub mod plot;
pub mod records;
pub mod soak;

use std::path::PathBuf;

use crate::charts::build_charts;
use crate::records::read_records;

pub use crate::error::{Error, Result};

/// Where the plots go when `--out` is not given.
pub const DEFAULT_OUT_DIR: &str = "docs/bench";

#[derive(Clone, Debug)]
pub struct ReportConfig {
    pub inputs: Vec<PathBuf>,
    pub out_dir: PathBuf,
    /// Logarithmic latency axis on the latency-vs-throughput plots.
    pub log_latency: bool,
}

/// What a report run did.
#[derive(Clone, Debug, Default)]
pub struct ReportSummary {
    /// Records read, over all inputs.
    pub records: usize,
    /// Files written (a PNG and an SVG per plot).
    pub written: Vec<PathBuf>,
    /// Plots skipped and records ignored, with why: for the CLI to print on stderr.
    pub notes: Vec<String>,
}

/// Reads the inputs, builds every plot it has records for and writes them into `out_dir`.
pub fn run(cfg: &ReportConfig) -> Result<ReportSummary> {
    if cfg.inputs.is_empty() {
        return Err(Error::Invalid("no input files".into()));
    }
    let mut records = Vec::new();
    let mut ignored = 0;
    for path in &cfg.inputs {
        records.extend(read_records(path, &mut ignored)?);
    }
    let mut summary = ReportSummary {
        records: records.len(),
        ..ReportSummary::default()
    };
    if ignored > 0 {
        summary.notes.push(format!(
            "{ignored} record(s) of no known kind ignored (neither sim, bench local, nor \
             with keys_per_sec)"
        ));
    }
    let charts = build_charts(&records, cfg.log_latency, &mut summary.notes);
    if !charts.is_empty() {
        std::fs::create_dir_all(&cfg.out_dir).map_err(|e| Error::io("create", &cfg.out_dir, e))?;
    }
    for (name, chart) in &charts {
        summary
            .written
            .extend(crate::plot::write(chart, &cfg.out_dir, name)?);
    }
    Ok(summary)
}
