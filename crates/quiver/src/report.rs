//! `quiver bench report`: result files (JSON lines of `bench net`, `bench local` and
//! `sim vector-width`) in, PNG and SVG plots out (see `quiver_report` for which plots
//! and from which records). Prints the files written on stdout, one per line, and why a plot
//! was skipped on stderr.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use quiver_report::{ReportConfig, DEFAULT_OUT_DIR};

use crate::error::CliError;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files, JSON lines (several may follow one --input).
    #[arg(long, value_name = "FILE", required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Directory to write the plots into (created if absent; plots of the same name are
    /// replaced).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_OUT_DIR)]
    pub out: PathBuf,
    /// Logarithmic latency axis on the latency-vs-throughput plots.
    #[arg(long)]
    pub log_latency: bool,
}

pub fn run(a: &ReportArgs) -> Result<(), CliError> {
    let summary = quiver_report::run(&ReportConfig {
        inputs: a.input.clone(),
        out_dir: a.out.clone(),
        log_latency: a.log_latency,
    })?;
    for note in &summary.notes {
        eprintln!("quiver bench report: {note}");
    }
    if summary.written.is_empty() {
        return Err(CliError::Negative(format!(
            "error: no plot drawn from {} records (see the notes above)",
            summary.records
        )));
    }
    let mut out = std::io::stdout().lock();
    for path in &summary.written {
        writeln!(out, "{}", path.display())?;
    }
    out.flush()?;
    Ok(())
}
