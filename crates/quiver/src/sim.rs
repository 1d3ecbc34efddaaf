//! `quiver sim`: simulations. `quiver sim vector-width` is the Monte Carlo of the
//! vector-interface paper's Fig. 13 (the model and the figures are documented in
//! `quiver_plan::sim`): one JSON line (or CSV row) per (servers, replication) cell on stdout,
//! a summary on stderr.

use std::io::Write;
use std::time::Instant;

use clap::{Args, Subcommand};
use quiver_plan::sim::{self, VectorWidthConfig, VectorWidthResult};

use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Expected multiget width per server when K random keys are read from S servers with R
    /// replicas per key (the vector-interface paper's Fig. 13).
    ///
    /// Each key's replicas are R distinct servers chosen uniformly at random (consistent
    /// hashing with random placement). Per trial the client contacts the fewest servers that
    /// hold every key: a minimum set cover, solved exactly and greedily. One JSON line per
    /// (S, R) cell: mean servers contacted, mean of K/servers (`mean_width_*`), K / mean
    /// servers (`width_of_mean_*`, what the paper plots), the greedy-exact gap, and for R = 1
    /// the closed form S(1 - (1 - 1/S)^K). Cells with R > S are skipped.
    VectorWidth(VectorWidthArgs),
}

/// A list of integers as `1,2,4`, `1-128` or `1-4,8,16`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntList(pub Vec<usize>);

fn parse_int_list(s: &str) -> Result<IntList, String> {
    sim::parse_list(s).map(IntList).map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct VectorWidthArgs {
    /// Keys per multiget (at most 64).
    #[arg(long, value_name = "K", default_value_t = 32)]
    pub keys: usize,
    /// Cluster sizes: a list (1,2,4), a range (1-128) or both (1-4,8,16).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "1,2,3,4,6,8,12,16,24,32,48,64,96,128",
        value_parser = parse_int_list
    )]
    pub servers: IntList,
    /// Replicas per key, as a list or range like --servers.
    #[arg(long, value_name = "LIST", default_value = "1,2,3,4,5,10", value_parser = parse_int_list)]
    pub replication: IntList,
    /// Trials per (servers, replication) cell.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub trials: u64,
    /// PRNG seed; each cell's draws depend only on it, the cell's S and R.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// One JSON object per line (the default).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV with a header line instead of JSON lines.
    #[arg(long)]
    pub csv: bool,
}

pub fn run(cmd: &SimCommand) -> Result<(), CliError> {
    match cmd {
        SimCommand::VectorWidth(a) => vector_width(a),
    }
}

fn vector_width(a: &VectorWidthArgs) -> Result<(), CliError> {
    let cfg = VectorWidthConfig {
        keys: a.keys,
        servers: a.servers.0.clone(),
        replication: a.replication.0.clone(),
        trials: a.trials,
        seed: a.seed,
    };
    cfg.validate()?;
    let (cells, skipped) = cfg.cells();
    if !skipped.is_empty() {
        let list: Vec<String> = skipped
            .iter()
            .map(|(s, r)| format!("S={s} R={r}"))
            .collect();
        eprintln!(
            "quiver sim: skipping {} with more replicas than servers: {}",
            plural(skipped.len(), "cell"),
            list.join(", ")
        );
    }
    let started = Instant::now();
    let mut out = std::io::stdout().lock();
    // The first stdout error (a closed pipe) stops the output; the simulation is cheap.
    let mut output_error: Option<std::io::Error> = None;
    if a.csv {
        output_error = writeln!(out, "{}", VectorWidthResult::CSV_HEADER).err();
    }
    let csv = a.csv;
    sim::run(&cfg, &mut |r| {
        if output_error.is_none() {
            let line = if csv {
                Ok(r.csv_row())
            } else {
                serde_json::to_string(r).map_err(std::io::Error::from)
            };
            output_error = line
                .and_then(|line| writeln!(out, "{line}"))
                .and_then(|()| out.flush())
                .err();
        }
    })?;
    if let Some(e) = output_error {
        return Err(CliError::Output(e));
    }
    eprintln!(
        "quiver sim: {} x {} trials in {:.2} s",
        plural(cells.len(), "cell"),
        a.trials,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `1 cell`, `2 cells`.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
