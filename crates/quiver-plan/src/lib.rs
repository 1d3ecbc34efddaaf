//! Quiver's multiget planning: which replica serves each key of a multiget so that it contacts
//! the fewest servers, and how wide the resulting vectors are expected to be.
//!
//! - `plan`: the planner's API: per key the servers holding it in, per key the server to ask
//!   out ([`plan()`], [`Planner`], [`Plan`]); exact up to [`EXACT_KEYS_MAX`] keys, greedy
//!   beyond. For the cluster's front-end.
//! - `cover`: minimum set cover on bit masks of at most 64 elements: exact branch and bound
//!   ([`cover::Solver`]) and greedy ([`cover::greedy_cover`]).
//! - `sim`: the Monte Carlo of the expected multiget width across a replicated cluster
//!   (`quiver sim vector-width`, the vector-interface paper's Fig. 13), and its result records
//!   (read back by `quiver bench report`).
//!
//! No I/O and no dependencies beyond `serde` (the simulation's records) and `thiserror`.

pub mod cover;
pub mod plan;
pub mod rng;
pub mod sim;

pub use plan::{plan, Plan, PlanError, Planner, EXACT_KEYS_MAX};
