//! Integration tests of the engine, one binary (link time is CI time).

mod basic;
mod common;
