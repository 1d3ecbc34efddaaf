//! Integration tests of the engine, one binary (link time is CI time).

// A failure in a test's helpers is the test failing: they may unwrap and expect like the
// tests themselves (which clippy.toml already allows).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod basic;
mod batch_parts;
mod checkpoint;
mod common;
mod concurrency;
mod corruption;
mod crash;
mod dbs;
mod deletes;
mod expiry;
mod fault_model;
mod faults;
mod full_disk;
mod garbage;
mod kill9;
mod kinds;
mod migrate;
mod migrate_crash;
mod model;
mod pipeline;
mod resize;
mod split;
mod upgrade;
