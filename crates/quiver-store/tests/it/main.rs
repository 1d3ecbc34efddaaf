//! Integration tests of the engine, one binary (link time is CI time).

mod basic;
mod checkpoint;
mod common;
mod concurrency;
mod corruption;
mod crash;
mod deletes;
mod full_disk;
mod model;
