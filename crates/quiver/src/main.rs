//! `quiver`: the server (`serve`), the commands that talk to it (`get`, `set`, `load`, ...),
//! offline commands on a store directory and the benchmarks.
//!
//! Every failure ends with a message on stderr and exit code 1 (a usage error, an unreachable
//! server and an error reply included); `get` of an absent key also exits 1, like `grep`
//! finding nothing.

mod bench;
mod cli;
mod cluster;
mod commands;
mod error;
mod progress;
mod remote;
mod report;
mod serve;
mod sim;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::CliError;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and --version go to stdout with success; usage errors exit 1.
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`quiver get k | head -c1`) is not worth a message.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprintln!("quiver: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    // `--dir` is global for serve and the offline commands; a server command ignoring it
    // would silently act on whatever store the server has, so it is refused instead.
    if cli.dir.is_some() && cli.command.conn().is_some() {
        return Err(CliError::Usage(
            "--dir is for serve and the offline commands; this command talks to a running \
             server (see --host and --port)"
                .into(),
        ));
    }
    let store_dir = || {
        cli.dir
            .clone()
            .unwrap_or_else(|| cli::DEFAULT_STORE_DIR.into())
    };
    let bench_dir = || {
        cli.dir
            .clone()
            .unwrap_or_else(|| cli::DEFAULT_BENCH_DIR.into())
    };
    match &cli.command {
        Command::Serve(a) => serve::serve(cli.dir.clone(), a),
        Command::Router(a) => serve::router(a),
        Command::Manager(a) => serve::manager(a),
        Command::Ping(a) => remote::ping(&a.conn),
        Command::Get(a) => remote::get(a),
        Command::Set(a) => remote::set(a),
        Command::Del(a) => remote::del(a),
        Command::Mget(a) => remote::mget(a),
        Command::Mset(a) => remote::mset(a),
        Command::Scan(a) => remote::scan(a),
        Command::Info(a) => remote::info(a),
        Command::Load(a) => remote::load(a),
        Command::Stats => commands::stats(&store_dir()),
        Command::Compact => commands::compact(&store_dir()),
        Command::Check(a) => commands::check(&store_dir(), a.repair),
        Command::Upgrade => commands::upgrade(&store_dir()),
        Command::Bench(cli::BenchCommand::Local(a)) => bench::local(&bench_dir(), a),
        Command::Bench(cli::BenchCommand::Reopen(a)) => bench::reopen(&bench_dir(), a),
        Command::Bench(cli::BenchCommand::Split(a)) => bench::split(&bench_dir(), a),
        Command::Bench(cli::BenchCommand::Net(a)) => bench::net(cli.dir.as_deref(), a),
        Command::Bench(cli::BenchCommand::Cluster(a)) => bench::cluster(cli.dir.as_deref(), a),
        Command::Bench(cli::BenchCommand::Report(a)) => report::run(a),
        Command::Sim(c) => sim::run(c),
        Command::Cluster(c) => cluster::run(c),
    }
}
