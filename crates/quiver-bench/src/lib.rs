//! Quiver's load generator and in-process engine benchmarks (`quiver load`, `quiver bench`).
//!
//! - `keys`: the deterministic key and value of index `i` (load, benchmarks and `quiver get`
//!   agree on them);
//! - `rng`, `distribution`: a fast PRNG, uniform and scrambled-Zipf key choice;
//! - `load`: bulk load through vectors of `multi_put`;
//! - `cluster`: multigets through the cluster client against a Quiver cluster or a Redis
//!   Cluster (`quiver bench cluster`): keys per node request, server CPU per node;
//! - `local`: multiget throughput of the engine in process (`quiver bench local`);
//! - `reopen`: open time from checkpoints and from a full log rebuild (`quiver bench reopen`);
//! - `benchdir`: what a benchmark data directory holds, and what it may delete;
//! - `sysinfo`: process memory figures;
//! - `net`: the networked load generator for any RESP server (`quiver bench net`): closed and
//!   open loop, HDR latency, server CPU from `/proc`, JSON and CSV records.

pub mod benchdir;
pub mod cluster;
pub mod distribution;
pub mod error;
pub mod keys;
pub mod load;
pub mod local;
pub mod net;
pub mod reopen;
/// The project's PRNG (one home: `quiver_plan::rng`).
pub use quiver_plan::rng;
pub mod split;
pub mod sysinfo;

pub use error::{Error, Result};
