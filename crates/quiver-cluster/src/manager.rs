//! The manager (`quiver manager`): watches the nodes' leases and repairs the chains of those
//! that died, stalled past their lease, or restarted (`topology::repair` has the rules);
//! expels a node another cannot reach (a partition between nodes: the nodes report the
//! successors they cannot reach), and takes it out of its chains once it surely stopped
//! serving — a lease TTL later, by this manager's clock, counted from when it saw the
//! expulsion written; then has a healthy node join each chain short of members (its tail
//! streams the range to it: the node's `agent::join`).
//!
//! Run several: each holds a lease and campaigns through etcd's election; the one elected
//! checks the leases every [`CHECK_EVERY`] and writes each repair as one transaction that
//! applies only if the topology and every lease it was computed from are unchanged
//! ([`Meta::replace_checked`]). That condition, not the election, is what makes repairs safe:
//! two managers that both believe they lead cannot write conflicting repairs, and a node whose
//! lease came back before the repair was written is not removed. The election only spares
//! etcd the duplicate work.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::follow::follow;
use crate::meta::{Alive, EtcdSettings, LeaseCheck, Meta, MetaError, Result};
use crate::topology::{Finding, Repair, Topology, EXPELLED};

/// How often the elected manager reads the leases and the topology.
pub const CHECK_EVERY: Duration = Duration::from_millis(200);

/// A manager's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    pub etcd: EtcdSettings,
    /// Its name in the election (and the logs).
    pub name: String,
    /// Its lease's TTL: how long a dead leader keeps the others waiting.
    pub lease_ttl: Duration,
}

/// Runs until `shutdown` completes: connect, take a lease, campaign, repair while elected;
/// on any failure wait and start again.
pub async fn run(settings: Settings, shutdown: impl Future<Output = ()>) {
    let ended = |_, outcome: Result<()>| {
        if let Err(e) = outcome {
            tracing::warn!(name = %settings.name, error = %e, "manager: lost etcd or its lease; campaigning again");
        }
    };
    follow(|| session(&settings), ended, shutdown).await;
}

/// One lease's life: campaign, then repair while the lease holds.
async fn session(settings: &Settings) -> Result<()> {
    let meta = settings.etcd.connect().await?;
    let asked = Instant::now();
    let lease = meta.grant(settings.lease_ttl).await?;
    // Until when this manager surely holds its lease (renewals push it on).
    let holds = Mutex::new(asked + lease.ttl);
    let keep = meta.keep(lease, |r| *holds.lock() = r.sent + r.ttl);
    let lead = async {
        meta.campaign(&settings.name, lease).await?;
        tracing::info!(name = %settings.name, "manager: elected; watching the nodes' leases");
        // Per expelled node, when this manager first saw it expelled.
        let mut expelled: HashMap<String, Instant> = HashMap::new();
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if Instant::now() >= *holds.lock() {
                // Another manager may be elected by now: stand down and campaign again.
                return Err(MetaError::LeaseExpired {
                    endpoints: settings.etcd.endpoints.clone(),
                    id: lease.id,
                });
            }
            if let Some(repair) = repair_once(&meta, &mut expelled).await? {
                for finding in &repair.findings {
                    tracing::info!(name = %settings.name, epoch = repair.next.epoch, ?finding,
                        "manager: repaired the chains");
                }
            }
        }
    };
    tokio::select! {
        e = keep => Err(e),
        r = lead => r,
    }
}

/// Reads the topology and the leases and writes the repair they call for, if any (and if
/// nothing changed meanwhile: then the next round computes it again); else an expulsion
/// the nodes' reports call for; else joins. Returns the repair written. `expelled`: per
/// expelled node, when this manager first saw it so (kept from round to round).
pub async fn repair_once(
    meta: &Meta,
    expelled: &mut HashMap<String, Instant>,
) -> Result<Option<Repair>> {
    let Some(current) = meta.topology().await? else {
        return Ok(None);
    };
    let alive: Vec<Alive> = meta.alive().await?;
    let runs: HashMap<String, u64> = alive
        .iter()
        .map(|a| (a.node.id.clone(), a.node.run))
        .collect();
    let revision_of = |id: &str| {
        alive
            .iter()
            .find(|a| a.node.id == id)
            .map_or(0, |a| a.revision)
    };
    let fencing = fencing(meta, &current.topology, &alive, expelled).await?;
    let Some(repair) = current.topology.repaired(&runs, &fencing) else {
        let reports: HashMap<String, Vec<String>> = meta
            .suspects()
            .await?
            .into_iter()
            .map(|r| (r.reporter, r.suspects))
            .collect();
        if let Some(id) = current.topology.expel_candidate(&runs, &reports) {
            let Some(next) = current.topology.with_expelled(&id) else {
                return Ok(None);
            };
            let reporters: Vec<&String> = reports
                .iter()
                .filter(|(_, s)| s.contains(&id))
                .map(|(r, _)| r)
                .collect();
            // Written only if the node is still at the run it was reported at.
            let checks = [LeaseCheck::Unchanged {
                id: id.clone(),
                revision: revision_of(&id),
            }];
            if meta.replace_checked(&current, &next, &checks).await? {
                expelled.insert(id.clone(), Instant::now());
                tracing::warn!(node = %id, ?reporters, epoch = next.epoch,
                    "manager: expelled a node its predecessors cannot reach; it leaves its chains once its lease TTL has passed");
            }
            return Ok(None);
        }
        // Nothing to repair: joins, each on the lease of the node chosen; else members on
        // their way out (leaving, or not in a target) spliced out of the chains where their
        // replacements joined, and targets reached forgotten.
        let Some((next, chosen)) = current.topology.with_joins(&runs) else {
            if let Some(next) = current.topology.with_spliced() {
                if meta.replace(&current, &next).await? {
                    tracing::info!(leaving = ?next.leaving, targets = next.targets.len(), epoch = next.epoch,
                        "manager: members on their way out spliced out of chains with their replacements");
                }
            }
            return Ok(None);
        };
        let checks: Vec<LeaseCheck> = chosen
            .iter()
            .map(|id| LeaseCheck::Unchanged {
                id: id.clone(),
                revision: revision_of(id),
            })
            .collect();
        if meta.replace_checked(&current, &next, &checks).await? {
            for (slots, id, tail) in next
                .joins()
                .filter(|(_, id, _)| chosen.iter().any(|c| c == id))
            {
                tracing::info!(%slots, node = id, tail, epoch = next.epoch, "manager: a node joins a chain");
            }
        }
        return Ok(None);
    };
    let checks: Vec<LeaseCheck> = repair
        .findings
        .iter()
        .map(|f| match f {
            Finding::Dead(id) => LeaseCheck::Gone(id.clone()),
            Finding::Restarted { id, .. } => LeaseCheck::Unchanged {
                id: id.clone(),
                revision: revision_of(id),
            },
        })
        .collect();
    let written = meta
        .replace_checked(&current, &repair.next, &checks)
        .await?;
    Ok(written.then_some(repair))
}

/// The expelled nodes that may still serve: those holding a lease whose TTL has not passed
/// since this manager first saw them expelled (a node counts on a renewal only once it has
/// seen the topology of its time, so one TTL after the expulsion was written it has seen it
/// and stopped, or its lease lapsed). A node without a lease stopped when it lost it.
async fn fencing(
    meta: &Meta,
    topology: &Topology,
    alive: &[Alive],
    expelled: &mut HashMap<String, Instant>,
) -> Result<HashSet<String>> {
    let now = Instant::now();
    expelled.retain(|id, _| topology.node(id).is_some_and(|n| n.run == EXPELLED));
    let mut fencing = HashSet::new();
    for node in topology.nodes.iter().filter(|n| n.run == EXPELLED) {
        let since = *expelled.entry(node.id.clone()).or_insert(now);
        let Some(a) = alive.iter().find(|a| a.node.id == node.id) else {
            continue;
        };
        if let Some(ttl) = meta.lease_ttl(a.lease).await? {
            if now < since + ttl {
                fencing.insert(node.id.clone());
            }
        }
    }
    Ok(fencing)
}
