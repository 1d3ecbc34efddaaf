//! The node's link to etcd: registers the node, reads the topology, watches it, and adopts
//! each newer version. When etcd is unreachable (or the watch breaks) the node keeps serving
//! what it has — the ranges it owns at its last epoch — and tries again with a bounded
//! backoff; nothing changes ownership until etcd is back.

use std::sync::Arc;
use std::time::Duration;

use quiver_cluster::meta::{Meta, MetaError, Versioned};
use tokio::sync::watch;

use super::ClusterNode;

/// First wait after a failed attempt to reach etcd; doubled up to [`RETRY_DELAY_MAX`].
const RETRY_DELAY_MIN: Duration = Duration::from_millis(100);
const RETRY_DELAY_MAX: Duration = Duration::from_secs(2);

/// Where the node's cluster lives in etcd.
#[derive(Clone, Debug)]
pub struct EtcdSettings {
    /// Comma-separated URLs.
    pub endpoints: String,
    pub prefix: String,
}

/// Runs until `shutdown` fires: connect, register, read, watch; on any failure wait and start
/// again.
pub async fn run(node: Arc<ClusterNode>, etcd: EtcdSettings, mut shutdown: watch::Receiver<bool>) {
    let mut delay = RETRY_DELAY_MIN;
    let mut failures: u64 = 0;
    loop {
        let outcome = tokio::select! {
            r = session(&node, &etcd) => r,
            _ = shutdown.wait_for(|&s| s) => return,
        };
        node.set_etcd_connected(false);
        failures += 1;
        match outcome {
            // Logged on the first failure and then every 16th, so a long outage does not
            // flood the log.
            Err(e) if failures == 1 || failures % 16 == 0 => {
                tracing::warn!(error = %e, failures, "cluster: etcd unreachable; serving the last topology")
            }
            Err(_) => {}
            Ok(()) => tracing::warn!("cluster: the topology watch ended; reconnecting"),
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.wait_for(|&s| s) => return,
        }
        delay = (delay * 2).min(RETRY_DELAY_MAX);
    }
}

/// One connection's life: returns when the watch ends (Ok) or etcd fails (Err).
async fn session(node: &ClusterNode, etcd: &EtcdSettings) -> Result<(), MetaError> {
    let meta = Meta::connect(&etcd.endpoints, &etcd.prefix).await?;
    meta.register(&node.me()).await?;
    let current = meta.topology().await?;
    let after = current.as_ref().map(|v| v.revision);
    if let Some(v) = current {
        adopt(node, v);
    }
    let mut watch = meta.watch(after).await?;
    node.set_etcd_connected(true);
    tracing::info!(endpoints = %etcd.endpoints, epoch = node.view().epoch(), "cluster: watching etcd");
    while let Some(v) = watch.next().await? {
        adopt(node, v);
    }
    Ok(())
}

fn adopt(node: &ClusterNode, v: Versioned) {
    let epoch = v.topology.epoch;
    match node.adopt(v.topology) {
        Ok(true) => tracing::info!(epoch, "cluster: adopted a new topology"),
        Ok(false) => {}
        Err(e) => {
            tracing::error!(error = %e, epoch, "cluster: adopted a topology but could not save it")
        }
    }
}
