//! Probes of this node's successors in its chains: a partition between two nodes that both
//! still reach etcd leaves both leases alive, so only the nodes themselves can see it.
//!
//! Every [`PROBE_DIVISOR`]th of the node timeout each successor gets a `PING` on a connection
//! of its own (not the chain's: there a reply waits for the commit of everything before it,
//! so a stall further down the chain would look like one here). Any reply, an error
//! included, shows the link works. A successor that answered none for a whole node timeout
//! (`cluster-node-timeout`) is reported in etcd (`meta::Meta::report_suspects`, under the
//! node's lease); the manager expels it (`quiver_cluster::topology::repair`). A report ends
//! when the successor answers again or is a successor no longer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_cluster::meta::{Lease, Meta, MetaError};
use quiver_peer::{PeerConn, PeerError};

use crate::cluster::ClusterNode;

/// Probes per node timeout.
const PROBE_DIVISOR: u32 = 4;
/// The probe: one PING.
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// One successor's link, as probed.
struct Link {
    addr: Arc<str>,
    conn: Option<PeerConn>,
    /// The last reply (or when probing began).
    answered: Instant,
}

/// Probes until reporting fails (etcd unreachable): then the session ends.
pub async fn run(
    node: &Arc<ClusterNode>,
    meta: &Meta,
    lease: Lease,
    timeout: Duration,
) -> MetaError {
    let every = timeout / PROBE_DIVISOR;
    let mut links: BTreeMap<String, Link> = BTreeMap::new();
    // What etcd holds from this session: nothing yet.
    let mut reported: Vec<String> = Vec::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let successors = successors(node);
        links.retain(|id, l| successors.get(id).is_some_and(|a| **a == *l.addr));
        for (id, addr) in successors {
            links.entry(id).or_insert_with(|| Link {
                addr: addr.into(),
                conn: None,
                answered: Instant::now(),
            });
        }
        let pings = links.values_mut().map(|l| ping(l, every));
        futures_util::future::join_all(pings).await;
        let suspects: Vec<String> = links
            .iter()
            .filter(|(_, l)| l.answered.elapsed() >= timeout)
            .map(|(id, _)| id.clone())
            .collect();
        if suspects != reported {
            if let Err(e) = meta.report_suspects(&node.id, &suspects, lease).await {
                return e;
            }
            if !suspects.is_empty() {
                tracing::warn!(
                    ?suspects,
                    "cluster: successors not answering; reported to the manager"
                );
            }
            reported = suspects;
        }
    }
}

/// This node's successors in its chains now: id → address.
fn successors(node: &ClusterNode) -> BTreeMap<String, String> {
    let view = node.view();
    let Some(t) = &view.topology else {
        return BTreeMap::new();
    };
    node.chains
        .streams()
        .iter()
        .filter_map(|s| s.role().successor)
        .filter_map(|addr| {
            let n = t.nodes.iter().find(|n| n.addr == addr)?;
            Some((n.id.clone(), addr))
        })
        .collect()
}

/// One PING on `link`'s connection (made first if need be), bounded by `within`; a reply
/// (an error included) marks the link answered, a failure drops the connection.
async fn ping(link: &mut Link, within: Duration) {
    let round = async {
        let conn = match &mut link.conn {
            Some(conn) => conn,
            None => link.conn.insert(PeerConn::open(link.addr.clone()).await?),
        };
        conn.send(PING, 1).await?;
        Ok::<(), PeerError>(())
    };
    match tokio::time::timeout(within, round).await {
        Ok(Ok(())) => link.answered = Instant::now(),
        _ => link.conn = None,
    }
}
