//! `quiver cluster ...`: the cluster's management, against its metadata in etcd.
//!
//! Nodes join by starting (`quiver serve --cluster --etcd URL` registers the node); `create`
//! makes the first topology of registered nodes, `add-node` adds one owning nothing, and
//! `status` shows the topology with each node's key count. Every change is one etcd
//! transaction on the epoch (`quiver_cluster::meta`).

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use quiver_client::{ClientOptions, Connection};
use quiver_cluster::meta::{Meta, DEFAULT_PREFIX};
use quiver_cluster::{topology, MetaError, Node, Target, Topology, TopologyError};
use quiver_store::slot::SlotRange;

use crate::error::CliError;

/// Longest wait for a node's answer in `status`.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a move's (or a leave's) progress is read from etcd.
const MOVE_POLL: Duration = Duration::from_millis(50);

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
    /// Move its slots to the other nodes, then take a node out of the cluster. With replicas
    /// each chain it is in gets a replacement first (the node never leaves a chain before
    /// its replacement joined it), its head roles go to the next members, then it leaves.
    RemoveNode(NodeArgs),
    /// Move slots to a node while they are served; returns when every move is complete.
    ///
    /// The slots' owner copies them to the target, pauses writes to them for the last
    /// catch-up, and hands them over in one etcd transaction. Slots of several owners move
    /// one owner's run at a time. Exits non-zero if a move fails (its slots stay where they
    /// were, with all their data). With replicas the slots move to the chain the node heads
    /// (or a new chain of it and the nodes holding least), member by member: never fewer
    /// than R copies.
    MoveSlots(MoveArgs),
    /// Move slots between nodes until each owns an even share. With replicas each node
    /// heads its share and holds about as many copies as any other: a node just added ends
    /// up in R chains, heading one.
    Rebalance(RebalanceArgs),
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
    /// Nodes per chain (chain replication): 1 to 3, at most the number of nodes. Node i
    /// heads range i and the next R-1 nodes on the ring follow it.
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
    /// Longest wait for each move, or with replicas for the whole leave (remove-node), in
    /// seconds.
    #[arg(long, value_name = "S", default_value_t = 600)]
    pub timeout_s: u64,
}

#[derive(Debug, Args)]
pub struct MoveArgs {
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// The slots: `lo-hi` or one slot.
    #[arg(long, value_name = "LO-HI", value_parser = parse_range)]
    pub slots: SlotRange,
    /// The node receiving them: its id or its host:port address.
    #[arg(long, value_name = "NODE")]
    pub to: String,
    /// Longest wait for each move, in seconds; a move still running then is aborted.
    #[arg(long, value_name = "S", default_value_t = 600)]
    pub timeout_s: u64,
}

#[derive(Debug, Args)]
pub struct RebalanceArgs {
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// Longest wait for each move, in seconds.
    #[arg(long, value_name = "S", default_value_t = 600)]
    pub timeout_s: u64,
}

fn parse_range(s: &str) -> Result<SlotRange, String> {
    SlotRange::parse(s).ok_or_else(|| format!("{s:?} is not a slot range (lo-hi, 0..16383)"))
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
            ClusterCommand::RemoveNode(a) => remove_node(a).await,
            ClusterCommand::MoveSlots(a) => move_slots(a).await,
            ClusterCommand::Rebalance(a) => rebalance(a).await,
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
    /// Whether the node holds its lease in etcd now.
    alive: bool,
    /// Whether it holds it at another run than the topology's (it restarted and the
    /// manager has not repaired its chains yet, or it waits to rejoin them).
    restarted: bool,
    /// The topology expels it (a predecessor could not reach it): it serves nothing until it
    /// is readmitted.
    expelled: bool,
    /// The nodes reporting that they cannot reach it (it is their successor in a chain).
    unreachable_from: Vec<String>,
    /// Its part in each chain it is in (CHAIN STATUS), when it answered.
    chains: Vec<ChainFigures>,
}

/// A member's figures of one chain (CHAIN STATUS).
#[derive(serde::Serialize)]
struct ChainFigures {
    slots: String,
    version: u64,
    position: u64,
    applied: u64,
    committed: u64,
    /// Messages (and their bytes) applied and waiting for their commit: the lag behind the
    /// tail.
    waiting: u64,
    waiting_bytes: u64,
}

async fn status(a: &StatusArgs) -> Result<(), CliError> {
    let meta = connect(&a.etcd).await?;
    let versioned = meta.existing().await?;
    let t = versioned.topology;
    let alive = meta.alive().await?;
    let manager = meta.manager().await?;
    let reports = meta.suspects().await?;
    let nodes: Vec<NodeStatus> = t
        .nodes
        .iter()
        .map(|n| {
            let ranges = t.ranges_of(&n.id);
            let answer = ask_node(&n.addr);
            let lease = alive.iter().find(|a| a.node.id == n.id);
            NodeStatus {
                id: n.id.clone(),
                addr: n.addr.clone(),
                slots: ranges.iter().map(|r| r.len()).sum(),
                ranges: ranges.iter().map(|r| r.to_string()).collect(),
                keys: answer.keys,
                epoch: answer.epoch,
                alive: lease.is_some(),
                restarted: lease.is_some_and(|a| a.node.run != n.run)
                    && n.run != topology::EXPELLED,
                expelled: n.run == topology::EXPELLED,
                unreachable_from: reports
                    .iter()
                    .filter(|r| r.suspects.contains(&n.id))
                    .map(|r| r.reporter.clone())
                    .collect(),
                chains: answer.chains,
            }
        })
        .collect();
    // Chains short of `replicas` members: a repair took members out, none has rejoined yet.
    let short: Vec<String> = t
        .shards
        .iter()
        .filter(|s| s.chain.len() < t.replicas as usize)
        .map(|s| s.slots.to_string())
        .collect();
    if a.json {
        let out = serde_json::json!({
            "topology": t, "nodes": nodes, "manager": manager, "short_chains": short,
        });
        println!("{out}");
        return Ok(());
    }
    print!("{t}");
    for n in &nodes {
        let figure = |v: Option<u64>| v.map_or("unreachable".to_string(), |v| v.to_string());
        let lease = match (n.alive, n.restarted, n.expelled) {
            (false, _, _) => "no lease",
            (true, _, true) => "lease held, expelled (not serving)",
            (true, true, false) => "lease at a new run (restarted)",
            (true, false, false) => "lease held",
        };
        println!(
            "  node {} at {}: {} slots, keys {}, serving epoch {}, {lease}",
            n.id,
            n.addr,
            n.slots,
            figure(n.keys),
            figure(n.epoch)
        );
        if !n.unreachable_from.is_empty() {
            println!("    unreachable from {}", n.unreachable_from.join(", "));
        }
        for c in &n.chains {
            println!(
                "    chain {} v{} position {}: applied {}, committed {}, waiting {} ({} bytes)",
                c.slots, c.version, c.position, c.applied, c.committed, c.waiting, c.waiting_bytes
            );
        }
    }
    if t.replicas > 1 {
        println!(
            "  manager: {}",
            manager.as_deref().unwrap_or("none elected")
        );
        if !short.is_empty() {
            println!(
                "  chains short of {} members: {}",
                t.replicas,
                short.join(", ")
            );
        }
    }
    Ok(())
}

/// What a node answered to `status`'s questions (nothing when it did not answer).
#[derive(Default)]
struct NodeAnswer {
    keys: Option<u64>,
    epoch: Option<u64>,
    chains: Vec<ChainFigures>,
}

/// A node's DBSIZE, the epoch it serves by and its CHAIN STATUS.
fn ask_node(addr: &str) -> NodeAnswer {
    let mut options = ClientOptions::new(addr.to_string());
    options.connect_timeout = Some(NODE_TIMEOUT);
    options.read_timeout = Some(NODE_TIMEOUT);
    options.write_timeout = Some(NODE_TIMEOUT);
    options.reconnect = false;
    let Ok(mut conn) = Connection::connect_with(options) else {
        return NodeAnswer::default();
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
    let chains = match conn.command(&[b"CHAIN", b"STATUS"]) {
        Ok(quiver_client::Value::Array(rows)) => rows.iter().filter_map(chain_figures).collect(),
        _ => Vec::new(),
    };
    NodeAnswer {
        keys,
        epoch,
        chains,
    }
}

/// One row of CHAIN STATUS: slots, version, position, length, applied, committed, waiting
/// messages, waiting bytes.
fn chain_figures(row: &quiver_client::Value) -> Option<ChainFigures> {
    let quiver_client::Value::Array(f) = row else {
        return None;
    };
    let n = |i: usize| match f.get(i) {
        Some(quiver_client::Value::Integer(v)) => u64::try_from(*v).ok(),
        _ => None,
    };
    Some(ChainFigures {
        slots: String::from_utf8_lossy(f.first()?.as_bytes()?).into_owned(),
        version: n(1)?,
        position: n(2)?,
        applied: n(4)?,
        committed: n(5)?,
        waiting: n(6)?,
        waiting_bytes: n(7)?,
    })
}

/// The id of the topology's member `name` (an id or an address).
fn member(t: &Topology, name: &str) -> Result<String, CliError> {
    t.nodes
        .iter()
        .find(|n| n.id == name || n.addr == name)
        .map(|n| n.id.clone())
        .ok_or_else(|| CliError::Usage(format!("node {name} is not a member of the cluster")))
}

async fn move_slots(a: &MoveArgs) -> Result<(), CliError> {
    let meta = connect(&a.etcd).await?;
    let t = meta.existing().await?.topology;
    let to = member(&t, &a.to)?;
    if t.replicas > 1 {
        let target = Target {
            slots: a.slots,
            chain: t.chain_for(&to),
        };
        return reshape(&meta, vec![target], Duration::from_secs(a.timeout_s)).await;
    }
    // One run per owner: a migration has one source.
    let runs: Vec<SlotRange> = t
        .shards
        .iter()
        .filter(|s| s.owner() != to)
        .filter_map(|s| {
            let lo = s.slots.lo.max(a.slots.lo);
            let hi = s.slots.hi.min(a.slots.hi);
            (lo <= hi).then_some(SlotRange { lo, hi })
        })
        .collect();
    if runs.is_empty() {
        println!("node {to} owns slots {} already", a.slots);
        return Ok(());
    }
    for run in runs {
        move_one(&meta, run, &to, Duration::from_secs(a.timeout_s)).await?;
    }
    Ok(())
}

/// Records the migration of `slots` to `to` and waits until its source has ended it; on
/// timeout aborts it. Ok only when `to` owns the slots.
async fn move_one(
    meta: &Meta,
    slots: SlotRange,
    to: &str,
    timeout: Duration,
) -> Result<(), CliError> {
    let t = meta.update(|t| t.with_migration(slots, to)).await?;
    let from = t.owner_of_range(slots).unwrap_or("?").to_string();
    eprintln!(
        "moving slots {slots} from {from} to {to} (epoch {})",
        t.epoch
    );
    let started = Instant::now();
    loop {
        tokio::time::sleep(MOVE_POLL).await;
        let Some(t) = progress(meta, started, timeout).await? else {
            continue;
        };
        if t.migrations.iter().any(|m| m.slots == slots) {
            if started.elapsed() < timeout {
                continue;
            }
            // The abort is one transaction: if the source's hand-over came first, the abort
            // is refused and the owner below says what happened.
            match meta.update(|t| t.with_migration_ended(slots, false)).await {
                Ok(_) | Err(MetaError::Topology(TopologyError::Refused(_))) => {}
                Err(e) => return Err(e.into()),
            }
            continue;
        }
        let owner = t.owner_of_range(slots).unwrap_or("?");
        if owner == to {
            println!(
                "moved slots {slots} from {from} to {to} in {:.3} s (epoch {})",
                started.elapsed().as_secs_f64(),
                t.epoch
            );
            return Ok(());
        }
        return Err(CliError::Negative(format!(
            "the move of slots {slots} to {to} failed or timed out: they stay with {owner} \
             (the nodes' logs say why)"
        )));
    }
}

/// The topology now, for a wait on a change that goes on without this process: an etcd that
/// does not answer for a while (each read is bounded) gives `None`, to read again, until
/// `timeout` has passed since `started`.
async fn progress(
    meta: &Meta,
    started: Instant,
    timeout: Duration,
) -> Result<Option<Topology>, CliError> {
    match meta.existing().await {
        Ok(v) => Ok(Some(v.topology)),
        Err(e @ (MetaError::Timeout { .. } | MetaError::Etcd { .. }))
            if started.elapsed() < timeout =>
        {
            eprintln!("reading the move's progress: {e}; reading again");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

async fn remove_node(a: &NodeArgs) -> Result<(), CliError> {
    let meta = connect(&a.etcd).await?;
    let t = meta.existing().await?.topology;
    let id = member(&t, &a.node)?;
    if t.replicas > 1 {
        return leave(&meta, &id, Duration::from_secs(a.timeout_s)).await;
    }
    let others: Vec<String> = t
        .nodes
        .iter()
        .map(|n| n.id.clone())
        .filter(|n| *n != id)
        .collect();
    if others.is_empty() && !t.ranges_of(&id).is_empty() {
        return Err(CliError::Usage(format!(
            "node {id} is the last node owning slots"
        )));
    }
    // Each range goes to the other node owning the fewest slots then.
    for range in t.ranges_of(&id) {
        let t = meta.existing().await?.topology;
        let to = others
            .iter()
            .min_by_key(|n| t.ranges_of(n).iter().map(|r| r.len()).sum::<u32>())
            .cloned()
            .unwrap_or_default();
        move_one(&meta, range, &to, Duration::from_secs(a.timeout_s)).await?;
    }
    let t = meta.update(|t| t.without_node(&id)).await?;
    print!("{t}");
    Ok(())
}

/// remove-node with replicas (`topology::leave`): marks the node leaving, waits until it is
/// in no chain (the manager and the chains' tails bring replacements in, the node hands its
/// head roles over, the manager splices it out), then removes it.
async fn leave(meta: &Meta, id: &str, timeout: Duration) -> Result<(), CliError> {
    meta.update(|t| t.with_leaving(id)).await?;
    let started = Instant::now();
    loop {
        tokio::time::sleep(MOVE_POLL).await;
        let Some(t) = progress(meta, started, timeout).await? else {
            continue;
        };
        let chains = t.shards.iter().filter(|s| s.position(id).is_some()).count();
        if chains == 0 {
            break;
        }
        if started.elapsed() > timeout {
            return Err(CliError::Negative(format!(
                "node {id} is still in {chains} chains after {} s: it stays leaving (run \
                 remove-node again to go on waiting; the nodes' and managers' logs say why)",
                timeout.as_secs()
            )));
        }
    }
    let t = meta.update(|t| t.without_node(id)).await?;
    println!(
        "node {id} left every chain and the cluster in {:.3} s (epoch {})",
        started.elapsed().as_secs_f64(),
        t.epoch
    );
    print!("{t}");
    Ok(())
}

/// `move-slots` and `rebalance` with replicas (`topology::reshape`): records `targets`, waits
/// until the chains have reached them; on timeout gives them up (the chains stay wherever
/// they got, each whole).
async fn reshape(meta: &Meta, targets: Vec<Target>, timeout: Duration) -> Result<(), CliError> {
    let t = meta.update(|t| t.with_targets(&targets)).await?;
    for target in &targets {
        eprintln!(
            "moving slots {} to the chain {} (epoch {})",
            target.slots,
            target.chain.join(" -> "),
            t.epoch
        );
    }
    let slots: Vec<SlotRange> = targets.iter().map(|t| t.slots).collect();
    let started = Instant::now();
    loop {
        tokio::time::sleep(MOVE_POLL).await;
        let Some(t) = progress(meta, started, timeout).await? else {
            continue;
        };
        let pending = t
            .targets
            .iter()
            .filter(|p| slots.iter().any(|r| r.overlaps(&p.slots)))
            .count();
        // The manager forgets a target only once its chains reached it (only a timeout
        // below gives one up); a failure since may have changed them again, which the
        // repairs handle as anywhere else.
        if pending == 0 {
            println!(
                "moved {} range(s) in {:.3} s (epoch {})",
                targets.len(),
                started.elapsed().as_secs_f64(),
                t.epoch
            );
            print!("{t}");
            return Ok(());
        }
        if started.elapsed() > timeout {
            meta.update(|t| Ok(t.without_targets(&slots))).await?;
            return Err(CliError::Negative(format!(
                "{pending} range(s) had not reached their chains after {} s: given up, their                  chains stay as they are now (the nodes' and managers' logs say why)",
                timeout.as_secs()
            )));
        }
    }
}

async fn rebalance(a: &RebalanceArgs) -> Result<(), CliError> {
    let meta = connect(&a.etcd).await?;
    let t = meta.existing().await?.topology;
    if t.replicas > 1 {
        let targets = t.rebalance_targets();
        if targets.is_empty() {
            println!("balanced already");
            return Ok(());
        }
        return reshape(&meta, targets, Duration::from_secs(a.timeout_s)).await;
    }
    let plan = t.rebalance_plan();
    if plan.is_empty() {
        println!("balanced already");
    }
    for (slots, to) in plan {
        move_one(&meta, slots, &to, Duration::from_secs(a.timeout_s)).await?;
    }
    print!("{}", meta.existing().await?.topology);
    Ok(())
}
