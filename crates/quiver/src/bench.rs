//! `quiver bench local` and `quiver bench reopen`: the CLI side (bars on stderr, one JSON
//! object per line on stdout); the benchmarks themselves are in `quiver-bench`.

use std::io::Write;
use std::path::Path;

use indicatif::ProgressBar;
use quiver_bench::load::LoadReport;
use quiver_bench::local::{self, LocalConfig, LocalResult, Observer};
use quiver_bench::reopen::{self, ReopenConfig};

use crate::cli::{BenchLocalArgs, BenchReopenArgs};
use crate::progress::{self, LOAD_TEMPLATE};
use crate::CliError;

struct CliObserver {
    bar: Option<ProgressBar>,
    /// The first stdout error (a closed pipe): later lines are not attempted.
    output_error: Option<std::io::Error>,
}

impl Observer for CliObserver {
    fn load_started(&mut self, total: u64) {
        let pb = progress::bar(total, LOAD_TEMPLATE);
        pb.set_message("loading");
        self.bar = Some(pb);
    }

    fn load_progress(&mut self, done: u64) {
        if let Some(pb) = &self.bar {
            pb.set_position(done);
        }
    }

    fn load_finished(&mut self, r: &LoadReport) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
        eprintln!(
            "quiver bench: loaded {} keys in {:.2} s ({:.0} keys/s, {:.1} MB/s; flush {:.2} s)",
            r.keys,
            r.seconds,
            r.keys_per_sec(),
            r.mb_per_sec(),
            r.flush_seconds
        );
    }

    fn result(&mut self, r: &LocalResult) {
        if self.output_error.is_none() {
            if let Err(e) = print_line(r) {
                self.output_error = Some(e);
            }
        }
    }
}

fn print_line(v: &impl serde::Serialize) -> std::io::Result<()> {
    let line = serde_json::to_string(v).expect("plain structs serialize");
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

pub fn local(dir: &Path, a: &BenchLocalArgs) -> Result<(), CliError> {
    let cfg = LocalConfig {
        keys: a.keys,
        key_size: a.key_size,
        value_size: a.value_size,
        widths: a.width.clone(),
        backends: a.backend.clone(),
        distributions: a.distribution.clone(),
        threads: a.threads,
        duration_s: a.duration_s,
        dir: dir.to_path_buf(),
        zipf_theta: a.zipf_theta,
        reuse: a.reuse,
        partitions: a.partitions,
    };
    let mut obs = CliObserver {
        bar: None,
        output_error: None,
    };
    let results = local::run(&cfg, &mut obs);
    if let Some(pb) = obs.bar.take() {
        pb.finish_and_clear();
    }
    let results = results?;
    if let Some(e) = obs.output_error {
        return Err(CliError::Output(e));
    }
    let misses: u64 = results.iter().map(|r| r.misses).sum();
    let wrong: u64 = results.iter().map(|r| r.wrong_values).sum();
    if misses + wrong > 0 {
        return Err(CliError::Negative(format!(
            "error: {misses} keys missing and {wrong} wrong values read back: \
             every key asked for was loaded, so this is an engine bug"
        )));
    }
    Ok(())
}

pub fn reopen(dir: &Path, a: &BenchReopenArgs) -> Result<(), CliError> {
    let cfg = ReopenConfig {
        dir: dir.to_path_buf(),
        cold: a.cold,
    };
    let pb = progress::bar(0, "{msg} [{bar:40}] {percent}%");
    let mut on_progress = |p: quiver_store::RecoveryProgress| {
        pb.set_length(p.partitions as u64);
        pb.set_position(p.partition as u64 + 1);
        pb.set_message(format!(
            "opening: partition {}/{}",
            p.partition + 1,
            p.partitions
        ));
    };
    let mut output_error = None;
    let res = reopen::run(&cfg, &mut on_progress, &mut |r| {
        pb.set_position(0);
        if output_error.is_none() {
            output_error = print_line(r).err();
        }
    });
    pb.finish_and_clear();
    res?;
    output_error.map_or(Ok(()), |e| Err(CliError::Output(e)))
}
