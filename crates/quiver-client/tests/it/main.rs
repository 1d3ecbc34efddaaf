//! Integration tests of `quiver-client` against a live server ([`common::TestServer`])
//! and against scripted fake servers (timeouts, disconnects, bad replies); `ClusterClient`
//! against a scripted cluster (`fake_cluster`) and a real Redis Cluster (`cluster`).

// Test helpers outside `#[test]` functions may unwrap too: a failure there is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod batch;
mod cluster;
mod cluster_replicas;
mod cluster_routing;
mod commands;
mod common;
mod errors;
mod fake_cluster;
mod pipeline;
mod reconnect;
mod resp3;

/// A key unique to the calling test, so tests never see each other's data
/// even if they share a server.
pub fn key(test: &str, name: &str) -> Vec<u8> {
    format!("{test}:{name}").into_bytes()
}
