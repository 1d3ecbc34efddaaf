//! What cluster clients ask a node about the cluster: CLUSTER SLOTS, SHARDS, NODES, REPLICAS
//! (SLAVES), INFO and MYID, answered from the topology the node serves by (`cluster::View`),
//! in Redis 7.0's formats; ASKING, READONLY, READWRITE; and the node's replication as ROLE,
//! WAIT and INFO show it ([`replication`]). On a standalone server each CLUSTER subcommand
//! answers what a standalone Redis answers, `ERR This instance has cluster support disabled`.
//!
//! Redis's tools see each node in one role (docs/cluster.md, "What Redis tools see"): a master
//! of the chains it heads (CLUSTER NODES lists those slots for it, DBSIZE counts their keys),
//! a replica of the head of its first chain if it heads none, a master without slots if it is
//! in no chain. CLUSTER SLOTS and SHARDS list every chain's members, head first.
//!
//! Quiver's cluster is configured in etcd (`quiver cluster ...`), not by CLUSTER MEET /
//! ADDSLOTS / SETSLOT / FAILOVER: in cluster mode those are refused with a message that says
//! so. Quiver moves a range of slots as a whole (the source serves it until the epoch that
//! hands it over), so it never sends `-ASK`; ASKING is accepted (`OK`) for clients that send
//! it anyway. READONLY / READWRITE are recorded on the connection: a READONLY connection's
//! reads of a range are served by any member of its chain (CRAQ: `chain`), a READWRITE one's
//! are sent to the head.

use bytes::Bytes;
use quiver_cluster::topology::{RedisRole, Topology};
use quiver_service::cmd::replication::Replication;

use crate::cluster::{ClusterNode, View};
use crate::cmd::cluster::DISABLED;
use crate::cmd::ctx::Ctx;
use quiver_service::errors::err;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// CLUSTER subcommands answered from the topology (the rest are KEYSLOT, COUNTKEYSINSLOT,
/// COUNTKEYSINRANGES, GETKEYSINSLOT, HELP, which read the store: `cmd::cluster`).
pub fn is_topology_subcommand(sub: &[u8]) -> bool {
    ![
        "keyslot",
        "countkeysinslot",
        "countkeysinranges",
        "getkeysinslot",
        "help",
    ]
    .iter()
    .any(|s| sub.eq_ignore_ascii_case(s.as_bytes()))
}

/// ASKING, READONLY, READWRITE.
pub fn run_connection(ctx: &mut Ctx<'_>, cmd: Cmd) -> Reply {
    if ctx.state.cluster.is_none() {
        return err(DISABLED);
    }
    match cmd {
        Cmd::ReadOnly => ctx.session.readonly = true,
        Cmd::ReadWrite => ctx.session.readonly = false,
        _ => {}
    }
    Reply::OK
}

/// FLUSHALL and FLUSHDB on a member of replicated chains (Redis Cluster has database 0
/// only: both are the same): the chains this node heads emptied, each at once, as one message
/// down the chain (`Chains::flush`); the reply waits for their commits (the run's barrier).
/// Watchers of the watched keys that existed there are marked, as Redis 7 marks them.
pub fn flush_chains(ctx: &mut Ctx<'_>) -> Reply {
    let Some(node) = &ctx.state.cluster else {
        return err(DISABLED);
    };
    let store = &ctx.state.store;
    let watches = &ctx.state.watches;
    let touched = match crate::txn::watched_existing(store, watches, 0, None) {
        Ok(keys) => keys,
        Err(e) => return crate::store_errors::store_error(&e),
    };
    match node.chains.flush(store, &mut ctx.conn.barrier) {
        Ok(_) => {
            // A watched key of a range another node heads was not flushed here; marking it
            // too only makes its transaction retry.
            watches.mark_watchers(touched.iter().map(|(db, k)| (*db, k)));
            watches.flushed();
            Reply::OK
        }
        Err(crate::chain::FlushError::Store(e)) => crate::store_errors::store_error(&e),
        Err(e) => Reply::error(e.to_string()),
    }
}

/// ROLE and WAIT on a cluster node (standalone: `quiver_service::cmd::connection`).
pub fn run_replication(ctx: &mut Ctx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    let Some(node) = &ctx.state.cluster else {
        return err(DISABLED);
    };
    let view = node.view();
    match cmd {
        Cmd::Wait => quiver_service::cmd::replication::wait(args, || {
            wait(node, &view, ctx.conn.last_write_key.as_deref())
        }),
        _ => quiver_service::cmd::replication::role(&replication(node, &view)),
    }
}

/// A CLUSTER subcommand for which [`is_topology_subcommand`] holds (its arity was checked).
pub fn run_cluster(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some(node) = &ctx.state.cluster else {
        return err(DISABLED);
    };
    let view = node.view();
    let sub = args[1].to_ascii_lowercase();
    match &sub[..] {
        b"myid" => Reply::Bulk(Bytes::from(node.id.clone())),
        b"info" => Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from(info(node, &view)),
        },
        b"slots" => slots(&view),
        b"shards" => shards(node, &view),
        b"nodes" => Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from(nodes(node, &view)),
        },
        b"replicas" | b"slaves" => replicas(node, &view, &args[2]),
        _ => Reply::error(format!(
            "ERR CLUSTER {} is not supported: a Quiver cluster is configured in etcd with \
             `quiver cluster` (create, add-node, move-slots, ...)",
            String::from_utf8_lossy(&args[1]).to_uppercase()
        )),
    }
}

/// Whether every slot is served, and this node may serve its part (in a replicated cluster:
/// it holds its lease and is in its chains at its run): Redis's `cluster_state:ok`.
pub fn state_ok(node: &ClusterNode, view: &View) -> bool {
    node.not_serving(view).is_none()
        && view
            .topology
            .as_ref()
            .is_some_and(|t| t.assigned_slots() == quiver_store::slot::SLOTS)
}

/// CLUSTER INFO: Redis 7.0's fields (a node's failure detection is etcd's, so the pfail and
/// fail counts stay 0), then Quiver's own.
fn info(node: &ClusterNode, view: &View) -> String {
    let t = view.topology.as_ref();
    let assigned = t.map_or(0, Topology::assigned_slots);
    let nodes = t.map_or(0, |t| t.nodes.len());
    let size = t.map_or(0, |t| {
        t.nodes
            .iter()
            .filter(|n| !t.ranges_of(&n.id).is_empty())
            .count()
    });
    let epoch = view.epoch();
    let migrations = t.map_or(0, |t| t.migrations.len());
    let lines = [
        (
            "cluster_state",
            if state_ok(node, view) { "ok" } else { "fail" }.to_string(),
        ),
        ("cluster_slots_assigned", assigned.to_string()),
        ("cluster_slots_ok", assigned.to_string()),
        ("cluster_slots_pfail", "0".into()),
        ("cluster_slots_fail", "0".into()),
        ("cluster_known_nodes", nodes.to_string()),
        ("cluster_size", size.to_string()),
        ("cluster_current_epoch", epoch.to_string()),
        ("cluster_my_epoch", epoch.to_string()),
        ("cluster_stats_messages_sent", "0".into()),
        ("cluster_stats_messages_received", "0".into()),
        ("total_cluster_links_buffer_limit_exceeded", "0".into()),
        (
            "quiver_etcd_connected",
            u8::from(node.etcd_connected()).to_string(),
        ),
        ("quiver_migrations_in_flight", migrations.to_string()),
    ];
    lines.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect()
}

/// A node as CLUSTER SLOTS lists it: host, port, id, and (Redis 7) its metadata, none.
fn slots_node(t: &Topology, id: &str) -> Reply {
    let (host, port) = t.node(id).map_or(("", 0), |n| n.host_port());
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(host.to_string())),
        Reply::Integer(port.into()),
        Reply::Bulk(Bytes::from(id.to_string())),
        Reply::Array(Vec::new()),
    ])
}

/// CLUSTER SLOTS: per range, its slots and its chain, the head first (the master).
fn slots(view: &View) -> Reply {
    let Some(t) = &view.topology else {
        return Reply::Array(Vec::new());
    };
    Reply::Array(
        t.shards
            .iter()
            .map(|s| {
                let mut entry = vec![
                    Reply::Integer(s.slots.lo.into()),
                    Reply::Integer(s.slots.hi.into()),
                ];
                entry.extend(s.chain.iter().map(|id| slots_node(t, id)));
                Reply::Array(entry)
            })
            .collect(),
    )
}

/// CLUSTER SHARDS: one shard per chain (its slots as a start, end pair; its members, the
/// head as master and the rest as replicas, with how far each has applied what it was sent
/// — unknown here for other nodes, so 0), then one per node heading no chain, as Redis 7.0
/// lists them.
fn shards(node: &ClusterNode, view: &View) -> Reply {
    let Some(t) = &view.topology else {
        return Reply::Array(Vec::new());
    };
    let member = |id: &str, role: &str| {
        let (host, port) = t.node(id).map_or(("", 0), |n| n.host_port());
        Reply::Map(vec![
            (Reply::text("id"), Reply::text(id)),
            (Reply::text("port"), Reply::Integer(port.into())),
            (Reply::text("ip"), Reply::text(host)),
            (Reply::text("endpoint"), Reply::text(host)),
            (Reply::text("role"), Reply::text(role)),
            (Reply::text("replication-offset"), Reply::Integer(0)),
            (
                Reply::text("health"),
                Reply::text(if id == node.id || node.etcd_connected() {
                    "online"
                } else {
                    "loading"
                }),
            ),
        ])
    };
    let shard = |slots: Vec<Reply>, nodes: Vec<Reply>| {
        Reply::Map(vec![
            (Reply::text("slots"), Reply::Array(slots)),
            (Reply::text("nodes"), Reply::Array(nodes)),
        ])
    };
    let chains = t.shards.iter().map(|s| {
        let nodes = s
            .chain
            .iter()
            .enumerate()
            .map(|(i, id)| member(id, if i == 0 { "master" } else { "replica" }))
            .collect();
        shard(
            vec![
                Reply::Integer(s.slots.lo.into()),
                Reply::Integer(s.slots.hi.into()),
            ],
            nodes,
        )
    });
    let idle = t
        .nodes
        .iter()
        .filter(|n| t.ranges_of(&n.id).is_empty())
        .map(|n| shard(Vec::new(), vec![member(&n.id, "master")]));
    Reply::Array(chains.chain(idle).collect())
}

/// CLUSTER NODES: Redis's line per node — id, `ip:port@cport`, flags, master, ping sent,
/// pong received, config epoch, link state, slot ranges — each node in its Redis role
/// (`Topology::redis_role`). Quiver has no cluster bus: the bus port is written 0.
fn nodes(node: &ClusterNode, view: &View) -> String {
    let Some(t) = &view.topology else {
        return format!(
            "{} {}@0 myself,master - 0 0 0 connected\n",
            node.id, node.addr
        );
    };
    t.nodes
        .iter()
        .map(|n| node_line(t, &n.id, n.id == node.id))
        .collect()
}

/// One CLUSTER NODES line (`myself`: the node answering).
fn node_line(t: &Topology, id: &str, myself: bool) -> String {
    let addr = t.node(id).map_or("", |n| n.addr.as_str());
    let mine = if myself { "myself," } else { "" };
    let (role, master) = match t.redis_role(id) {
        RedisRole::Master => ("master", "-"),
        RedisRole::Replica { of } => ("slave", of),
    };
    let mut line = format!(
        "{id} {addr}@0 {mine}{role} {master} 0 0 {} connected",
        t.epoch
    );
    for r in t.ranges_of(id) {
        if r.lo == r.hi {
            line.push_str(&format!(" {}", r.lo));
        } else {
            line.push_str(&format!(" {}-{}", r.lo, r.hi));
        }
    }
    line.push('\n');
    line
}

/// CLUSTER REPLICAS (SLAVES) <node-id>: the CLUSTER NODES lines of the nodes shown as its
/// replicas, with Redis's errors for an unknown node or one that is no master.
fn replicas(node: &ClusterNode, view: &View, id: &[u8]) -> Reply {
    let id = String::from_utf8_lossy(id);
    let Some(t) = view.topology.as_ref().filter(|t| t.node(&id).is_some()) else {
        return Reply::error(format!("ERR Unknown node {id}"));
    };
    if t.redis_role(&id) != RedisRole::Master {
        return err("ERR The specified node is not a master");
    }
    Reply::Array(
        t.nodes
            .iter()
            .filter(|n| t.redis_role(&n.id) == (RedisRole::Replica { of: &id }))
            .map(|n| Reply::Bulk(Bytes::from(node_line(t, &n.id, n.id == node.id))))
            .collect(),
    )
}

/// The node's replication in Redis's terms (ROLE, INFO): as a master, the nodes it sends its
/// chains' writes to; as a replica, its master.
pub fn replication(node: &ClusterNode, view: &View) -> Replication {
    let Some(t) = &view.topology else {
        return Replication::alone();
    };
    match t.redis_role(&node.id) {
        RedisRole::Master => Replication::Master {
            replicas: t
                .successors_of(&node.id)
                .iter()
                .map(|n| {
                    let (host, port) = n.host_port();
                    (host.to_string(), port)
                })
                .collect(),
        },
        RedisRole::Replica { of } => {
            let (host, port) = t.node(of).map_or(("", 0), |n| n.host_port());
            Replication::Replica {
                host: host.to_string(),
                port,
                master_id: of.to_string(),
            }
        }
    }
}

/// WAIT on a cluster node: the other members of the chain of the connection's last write
/// (every member applied it before it was acknowledged); with no write yet, of the node's
/// shortest chain.
pub fn wait(node: &ClusterNode, view: &View, last_write_key: Option<&[u8]>) -> i64 {
    let Some(t) = &view.topology else {
        return 0;
    };
    let members = |s: &quiver_cluster::Shard| s.chain.len() as i64 - 1;
    match last_write_key.map(quiver_store::slot::key_slot) {
        Some(slot) => t
            .shards
            .iter()
            .find(|s| s.slots.contains(slot))
            .map_or(0, members),
        None => t
            .shards
            .iter()
            .filter(|s| s.position(&node.id).is_some())
            .map(members)
            .min()
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_cluster::topology::Node;

    fn topology() -> Topology {
        let nodes = (0..3)
            .map(|i| Node {
                id: format!("n{i}"),
                addr: format!("127.0.0.1:{}", 7000 + i),
                run: 1,
            })
            .collect();
        let mut t = Topology::create(nodes, 3).unwrap();
        // n0 restarted: it follows every chain, heads none.
        for s in &mut t.shards {
            s.chain.retain(|m| m != "n0");
            s.chain.push("n0".into());
        }
        t
    }

    /// A head's line lists its slots as a master; a node heading none is a replica of the
    /// head of its first chain, without slots, as Redis writes a replica's line.
    #[test]
    fn cluster_nodes_lines_show_each_node_in_its_redis_role() {
        let t = topology();
        let epoch = t.epoch;
        let head = t.shards[0].owner().to_string();
        assert_eq!(
            node_line(&t, "n0", true),
            format!("n0 127.0.0.1:7000@0 myself,slave {head} 0 0 {epoch} connected\n")
        );
        let n1 = node_line(&t, "n1", false);
        assert!(n1.starts_with(&format!(
            "n1 127.0.0.1:7001@0 master - 0 0 {epoch} connected "
        )));
        let slots: u32 = ["n1", "n2"]
            .iter()
            .flat_map(|n| t.ranges_of(n))
            .map(|r| r.len())
            .sum();
        assert_eq!(slots, quiver_store::slot::SLOTS);
    }
}
