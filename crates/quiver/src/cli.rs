//! The command line: every subcommand and flag of `quiver` (clap derive).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use quiver_bench::distribution::Distribution;
use quiver_store::{BackendKind, Durability};

/// Where offline commands find the store when `--dir` is not given.
pub const DEFAULT_STORE_DIR: &str = "./quiver-data";
/// Where `quiver bench` keeps its data when `--dir` is not given.
pub const DEFAULT_BENCH_DIR: &str = "./quiver-bench-data";

/// Quiver: a persistent key-value store whose work travels as vectors.
#[derive(Debug, Parser)]
#[command(name = "quiver", version, about, propagate_version = true)]
pub struct Cli {
    /// Data directory [default: ./quiver-data; for bench: ./quiver-bench-data]
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bulk-load COUNT deterministic keys (key i is i in zero-padded decimal) through vectors of
    /// multi_put; creates the store if the directory holds none.
    Load(LoadArgs),
    /// Print a key's value (exit code 1 and a message on stderr if the key is absent).
    Get {
        #[arg(value_name = "KEY")]
        key: OsString,
    },
    /// Set a key to a value (creates the store if the directory holds none).
    Set {
        #[arg(value_name = "KEY")]
        key: OsString,
        #[arg(value_name = "VALUE")]
        value: OsString,
    },
    /// Delete keys; prints how many existed.
    Del {
        #[arg(value_name = "KEY", required = true)]
        keys: Vec<OsString>,
    },
    /// Print the store's figures as JSON.
    Stats,
    /// Compact every partition now; prints what was done as JSON.
    Compact,
    /// Verify every record and index entry; exit code 1 if anything is damaged.
    Check,
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Number of keys (keys 0..COUNT).
    #[arg(long, value_name = "N")]
    pub count: u64,
    /// Key size in bytes (at least 8).
    #[arg(long, value_name = "K", default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, value_name = "V", default_value_t = 32)]
    pub value_size: usize,
    /// Pairs per multi_put vector.
    #[arg(long, value_name = "W", default_value_t = 256)]
    pub width: usize,
    /// What an acknowledged write survives: none, os (process crash) or fsync (power loss).
    #[arg(long, value_name = "MODE", default_value_t = Durability::Os)]
    pub durability: Durability,
    /// Partitions of a new store (an existing store keeps its own).
    #[arg(long, value_name = "P")]
    pub partitions: Option<u32>,
    /// Read backend: mmap, pread or io_uring.
    #[arg(long, value_name = "B", default_value_t = BackendKind::Mmap)]
    pub backend: BackendKind,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// In-process multiget throughput: load once, then one JSON line per configuration of the
    /// grid backend x distribution x width.
    Local(BenchLocalArgs),
    /// Time to open the store in --dir from its checkpoints, then without them (full rebuild
    /// from the logs); JSON lines.
    Reopen(BenchReopenArgs),
}

#[derive(Debug, Args)]
pub struct BenchLocalArgs {
    /// Keys to load and read.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub keys: u64,
    #[arg(long, value_name = "K", default_value_t = 16)]
    pub key_size: usize,
    #[arg(long, value_name = "V", default_value_t = 32)]
    pub value_size: usize,
    /// Multiget widths, comma-separated.
    #[arg(
        long,
        value_name = "W,...",
        value_delimiter = ',',
        default_value = "32"
    )]
    pub width: Vec<usize>,
    /// Backends, comma-separated: mmap, pread, io_uring.
    #[arg(
        long,
        value_name = "B,...",
        value_delimiter = ',',
        default_value = "mmap"
    )]
    pub backend: Vec<BackendKind>,
    /// Key distributions, comma-separated: uniform, zipf.
    #[arg(
        long,
        value_name = "D,...",
        value_delimiter = ',',
        default_value = "uniform"
    )]
    pub distribution: Vec<Distribution>,
    /// Reader threads.
    #[arg(long, value_name = "T", default_value_t = 1)]
    pub threads: usize,
    /// Measured seconds per configuration (after a warm-up of a fifth of it, at most 1 s).
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub duration_s: f64,
    /// Zipf exponent, in (0, 1).
    #[arg(long, value_name = "THETA", default_value_t = 0.99)]
    pub zipf_theta: f64,
    /// Skip the load if --dir already holds a complete load with the same keys and sizes.
    #[arg(long)]
    pub reuse: bool,
    /// Partitions of the loaded store.
    #[arg(long, value_name = "P", default_value_t = 16)]
    pub partitions: u32,
}

#[derive(Debug, Args)]
pub struct BenchReopenArgs {
    /// Drop the page cache before each timed open (needs root): a cold start.
    #[arg(long)]
    pub cold: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn lists_parse() {
        let cli = Cli::try_parse_from([
            "quiver",
            "bench",
            "local",
            "--width",
            "1,8,32",
            "--backend",
            "mmap,io_uring",
            "--distribution",
            "uniform,zipf",
            "--dir",
            "/tmp/x",
        ])
        .unwrap();
        let Command::Bench(BenchCommand::Local(a)) = cli.command else {
            panic!("parsed as {:?}", cli.command)
        };
        assert_eq!(a.width, vec![1, 8, 32]);
        assert_eq!(a.backend, vec![BackendKind::Mmap, BackendKind::Uring]);
        assert_eq!(
            a.distribution,
            vec![Distribution::Uniform, Distribution::Zipf]
        );
        assert_eq!(cli.dir, Some(PathBuf::from("/tmp/x")));
        assert!(Cli::try_parse_from(["quiver", "bench", "local", "--backend", "tape"]).is_err());
    }
}
