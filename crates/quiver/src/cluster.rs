//! `quiver cluster ...`: the cluster's management, against its metadata in etcd.
//!
//! Nodes join by starting (`quiver serve --cluster --etcd URL` registers the node); `create`
//! makes the first topology of registered nodes, `add-node` adds one owning nothing, and
//! `status` shows the topology with each node's key count. Every change is one etcd
//! transaction on the epoch (`quiver_cluster::meta`).

use std::time::Duration;

use clap::{Args, Subcommand};
use quiver_client::{ClientOptions, Connection};
use quiver_cluster::meta::{Meta, DEFAULT_PREFIX};
use quiver_cluster::{Node, Topology};

use crate::error::CliError;

/// Longest wait for a node's answer in `status`.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Make the first topology: the slots split evenly between the given nodes, in order.
    ///
    /// Each node must have been started with `quiver serve --cluster --etcd URL` (which
    /// registers it); name it by id or by its address. Refused if the cluster exists.
    Create(CreateArgs),
    /// Print the topology: epoch, nodes, slot ranges, keys per node, migrations in flight.
    Status(StatusArgs),
    /// Add a registered node to the cluster, owning no slots yet.
    AddNode(NodeArgs),
}

/// Where the cluster's metadata is.
#[derive(Debug, Args)]
pub struct EtcdArgs {
    /// etcd endpoints, comma-separated (http://host:port).
    #[arg(long, value_name = "URLS")]
    pub etcd: String,
    /// Prefix of the cluster's keys in etcd.
    #[arg(long, value_name = "PREFIX", default_value = DEFAULT_PREFIX)]
    pub etcd_prefix: String,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// The nodes, comma-separated: ids or host:port addresses of registered nodes.
    #[arg(long, value_name = "A,B,C", value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Nodes per chain (chain replication: 1 until it is implemented).
    #[arg(long, value_name = "R", default_value_t = 1)]
    pub replicas: u8,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// Print the topology and the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct NodeArgs {
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// The node: its id or its host:port address.
    #[arg(long, value_name = "NODE")]
    pub node: String,
}

pub fn run(command: &ClusterCommand) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Output)?;
    runtime.block_on(async {
        match command {
            ClusterCommand::Create(a) => create(a).await,
            ClusterCommand::Status(a) => status(a).await,
            ClusterCommand::AddNode(a) => add_node(a).await,
        }
    })
}

async fn connect(a: &EtcdArgs) -> Result<Meta, CliError> {
    Ok(Meta::connect(&a.etcd, &a.etcd_prefix).await?)
}

/// The registered node named `name` (an id or an address).
fn find<'a>(registered: &'a [Node], name: &str) -> Result<&'a Node, CliError> {
    registered
        .iter()
        .find(|n| n.id == name || n.addr == name)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "node {name} has not registered: start it with `quiver serve --cluster --etcd \
                 URL` (registered: {})",
                registered
                    .iter()
                    .map(|n| format!("{} at {}", n.id, n.addr))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

async fn create(a: &CreateArgs) -> Result<(), CliError> {
    let meta = connect(&a.etcd).await?;
    let registered = meta.registered().await?;
    let nodes = a
        .nodes
        .iter()
        .map(|name| find(&registered, name).cloned())
        .collect::<Result<Vec<_>, _>>()?;
    let topology = Topology::create(nodes, a.replicas).map_err(quiver_cluster::MetaError::from)?;
    meta.create(&topology).await?;
    print!("{topology}");
    Ok(())
}

async fn add_node(a: &NodeArgs) -> Result<(), CliError> {
    let meta = connect(&a.etcd).await?;
    let node = find(&meta.registered().await?, &a.node)?.clone();
    let topology = meta.update(|t| t.with_node(node.clone())).await?;
    print!("{topology}");
    Ok(())
}

/// A node's figures as `status` shows them.
#[derive(serde::Serialize)]
struct NodeStatus {
    id: String,
    addr: String,
    slots: u32,
    ranges: Vec<String>,
    /// DBSIZE, or `None` when the node did not answer.
    keys: Option<u64>,
    /// The epoch the node serves by (CLUSTER INFO), when it answered.
    epoch: Option<u64>,
}

async fn status(a: &StatusArgs) -> Result<(), CliError> {
    let meta = connect(&a.etcd).await?;
    let versioned = meta.existing().await?;
    let t = versioned.topology;
    let nodes: Vec<NodeStatus> = t
        .nodes
        .iter()
        .map(|n| {
            let ranges = t.ranges_of(&n.id);
            let (keys, epoch) = ask_node(&n.addr);
            NodeStatus {
                id: n.id.clone(),
                addr: n.addr.clone(),
                slots: ranges.iter().map(|r| r.len()).sum(),
                ranges: ranges.iter().map(|r| r.to_string()).collect(),
                keys,
                epoch,
            }
        })
        .collect();
    if a.json {
        let out = serde_json::json!({ "topology": t, "nodes": nodes });
        println!("{out}");
        return Ok(());
    }
    print!("{t}");
    for n in &nodes {
        let figure = |v: Option<u64>| v.map_or("unreachable".to_string(), |v| v.to_string());
        println!(
            "  node {} at {}: {} slots, keys {}, serving epoch {}",
            n.id,
            n.addr,
            n.slots,
            figure(n.keys),
            figure(n.epoch)
        );
    }
    Ok(())
}

/// A node's DBSIZE and the epoch it serves by, or `None`s when it does not answer.
fn ask_node(addr: &str) -> (Option<u64>, Option<u64>) {
    let mut options = ClientOptions::new(addr.to_string());
    options.connect_timeout = Some(NODE_TIMEOUT);
    options.read_timeout = Some(NODE_TIMEOUT);
    options.write_timeout = Some(NODE_TIMEOUT);
    options.reconnect = false;
    let Ok(mut conn) = Connection::connect_with(options) else {
        return (None, None);
    };
    let keys = conn.command(&[b"DBSIZE"]).ok().and_then(|v| match v {
        quiver_client::Value::Integer(n) => u64::try_from(n).ok(),
        _ => None,
    });
    let epoch = conn
        .command(&[b"CLUSTER", b"INFO"])
        .ok()
        .and_then(|v| {
            v.as_bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned())
        })
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("cluster_current_epoch:"))
                .and_then(|v| v.trim().parse().ok())
        });
    (keys, epoch)
}
