//! What cluster clients ask a node about the cluster: CLUSTER SLOTS, SHARDS, NODES, INFO and
//! MYID, answered from the topology the node serves by (`cluster::View`), in Redis 7.0's
//! formats; and ASKING, READONLY, READWRITE. On a standalone server each answers what a
//! standalone Redis answers, `ERR This instance has cluster support disabled`.
//!
//! Quiver's cluster is configured in etcd (`quiver cluster ...`), not by CLUSTER MEET /
//! ADDSLOTS / SETSLOT / FAILOVER: in cluster mode those are refused with a message that says
//! so. Quiver moves a range of slots as a whole (the source serves it until the epoch that
//! hands it over), so it never sends `-ASK`; ASKING is accepted (`OK`) for clients that send
//! it anyway. READONLY / READWRITE are recorded on the connection: a READONLY connection's
//! reads of a range are served by any member of its chain (CRAQ: `chain`), a READWRITE one's
//! are sent to the head.

use bytes::Bytes;
use quiver_cluster::topology::Topology;

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
    let bulk = |s: &str| Reply::Bulk(Bytes::from(s.to_string()));
    let member = |id: &str, role: &str| {
        let (host, port) = t.node(id).map_or(("", 0), |n| n.host_port());
        Reply::Map(vec![
            (bulk("id"), bulk(id)),
            (bulk("port"), Reply::Integer(port.into())),
            (bulk("ip"), bulk(host)),
            (bulk("endpoint"), bulk(host)),
            (bulk("role"), bulk(role)),
            (bulk("replication-offset"), Reply::Integer(0)),
            (
                bulk("health"),
                bulk(if id == node.id || node.etcd_connected() {
                    "online"
                } else {
                    "loading"
                }),
            ),
        ])
    };
    let shard = |slots: Vec<Reply>, nodes: Vec<Reply>| {
        Reply::Map(vec![
            (bulk("slots"), Reply::Array(slots)),
            (bulk("nodes"), Reply::Array(nodes)),
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
/// pong received, config epoch, link state, slot ranges. Quiver has no cluster bus: the bus
/// port is written 0.
fn nodes(node: &ClusterNode, view: &View) -> String {
    let Some(t) = &view.topology else {
        return format!(
            "{} {}@0 myself,master - 0 0 0 connected\n",
            node.id, node.addr
        );
    };
    let mut out = String::new();
    for n in &t.nodes {
        let flags = if n.id == node.id {
            "myself,master"
        } else {
            "master"
        };
        out.push_str(&format!(
            "{} {}@0 {flags} - 0 0 {} connected",
            n.id, n.addr, t.epoch
        ));
        for r in t.ranges_of(&n.id) {
            if r.lo == r.hi {
                out.push_str(&format!(" {}", r.lo));
            } else {
                out.push_str(&format!(" {}-{}", r.lo, r.hi));
            }
        }
        out.push('\n');
    }
    out
}
