//! How the router splits a command on keys between the nodes: one part per node that owns
//! some of its keys, and how the parts' replies become the command's reply.
//!
//! A command whose keys one node owns goes to it whole. MGET, MSET, DEL, UNLINK, EXISTS and
//! TOUCH whose keys several nodes own become one command per node, each carrying that node's
//! keys in the caller's order (FAWN-KV's front-end: one vector per back-end, never one request
//! per key); any other command across nodes is refused with CROSSSLOT, as Redis Cluster
//! refuses it across slots. With replicas a write is split per chain, not per node: a node
//! refuses a write whose keys lie in two of its chains (its message goes down one chain), so
//! an MSET over two chains headed by one node is two commands in that node's batch.
//!
//! With replicas, an MGET across nodes may read each key from any member of its chain (the
//! router's connections are READONLY; a member answers a key once its value is committed:
//! CRAQ). Which member serves which key is the **multiget planner**'s choice
//! (`quiver_plan::Planner`, the minimum set cover `quiver sim vector-width` simulates): the
//! fewest nodes that together hold every key, so each gets the widest vector.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::table::SlotTable;
use quiver_service::errors::err;
use quiver_service::reply::Reply;
use quiver_service::table::{Cmd, CommandSpec, Flags};

pub const NO_TOPOLOGY: &str = "CLUSTERDOWN the router has no topology yet (is etcd reachable?)";
pub const UNSERVED: &str = "CLUSTERDOWN Hash slot not served";
pub const CROSS_NODE: &str = "CROSSSLOT Keys in request don't hash to the same node (with \
     replicas, a write's keys to the same chain; the router splits MGET, MSET, DEL, UNLINK, \
     EXISTS and TOUCH only)";

/// Times one command is routed again after a redirect before the node's error goes to the
/// client.
pub const REROUTES_MAX: u32 = 5;
/// Longest wait for a newer topology once a node has said the router's is old.
pub const TOPOLOGY_WAIT: Duration = Duration::from_millis(1000);

/// How the replies of a command's parts make its reply.
#[derive(Debug)]
pub enum Shape {
    /// One part: its reply is the command's.
    Whole,
    /// MGET: for each key in the caller's order, (part, index of its value in that part's
    /// array).
    Values(Vec<(u32, u32)>),
    /// DEL, UNLINK, EXISTS, TOUCH: the sum of the parts' integers.
    Sum,
    /// MSET: OK when every part says OK.
    AllOk,
}

/// The command for one node.
#[derive(Debug)]
pub struct Part<'a> {
    pub addr: Arc<str>,
    /// The command's arguments; the part carries `args[0]` and, when `keys` is set, only the
    /// arguments at those positions (each key with its value for MSET).
    pub args: &'a [Bytes],
    pub keys: Option<Vec<u32>>,
    /// Sent after ASKING (a node answered ASK for it).
    pub asking: bool,
}

impl Part<'_> {
    /// Arguments of the part's command.
    fn argc(&self, pairs: bool) -> usize {
        match &self.keys {
            None => self.args.len(),
            Some(k) => 1 + k.len() * if pairs { 2 } else { 1 },
        }
    }

    /// Appends the part's command (after ASKING when asked) in RESP.
    pub fn encode(&self, out: &mut BytesMut, pairs: bool) {
        if self.asking {
            quiver_resp::request::encode_command(out, &[b"ASKING"]);
        }
        quiver_resp::request::put_header(out, b'*', self.argc(pairs));
        match &self.keys {
            None => {
                for a in self.args {
                    quiver_resp::request::put_bulk(out, a);
                }
            }
            Some(keys) => {
                quiver_resp::request::put_bulk(out, &self.args[0]);
                for &k in keys {
                    let k = k as usize;
                    quiver_resp::request::put_bulk(out, &self.args[k]);
                    if pairs {
                        quiver_resp::request::put_bulk(out, &self.args[k + 1]);
                    }
                }
            }
        }
    }

    /// The part's arguments as a command of their own (to route it again).
    pub fn to_args(&self, pairs: bool) -> Vec<Bytes> {
        match &self.keys {
            None => self.args.to_vec(),
            Some(keys) => {
                let mut v = Vec::with_capacity(self.argc(pairs));
                v.push(self.args[0].clone());
                for &k in keys {
                    v.push(self.args[k as usize].clone());
                    if pairs {
                        v.push(self.args[k as usize + 1].clone());
                    }
                }
                v
            }
        }
    }

    /// Replies the node sends for the part (ASKING's OK and the command's).
    pub fn replies(&self) -> usize {
        1 + usize::from(self.asking)
    }
}

/// A command on keys, routed.
#[derive(Debug)]
pub struct Forward<'a> {
    pub spec: &'static CommandSpec,
    pub shape: Shape,
    pub parts: Vec<Part<'a>>,
}

impl Forward<'_> {
    /// Whether parts carry key-value pairs (MSET).
    pub fn pairs(&self) -> bool {
        self.spec.cmd == Cmd::MSet
    }

    /// The whole command to the node at `addr` (after a MOVED or an ASK).
    pub fn to<'b>(
        spec: &'static CommandSpec,
        args: &'b [Bytes],
        addr: Arc<str>,
        asking: bool,
    ) -> Forward<'b> {
        Forward {
            spec,
            shape: Shape::Whole,
            parts: vec![Part {
                addr,
                args,
                keys: None,
                asking,
            }],
        }
    }
}

/// Routes a command on keys by `table`; the error is the command's reply.
pub fn plan<'a>(
    spec: &'static CommandSpec,
    args: &'a [Bytes],
    table: &SlotTable,
) -> Result<Forward<'a>, Reply> {
    if table.epoch == 0 || table.addrs.is_empty() {
        return Err(err(NO_TOPOLOGY));
    }
    let positions: Vec<usize> = spec.key_positions(args.len()).collect();
    let write = spec.flags.contains(Flags::WRITE);
    let first = if spec.cmd == Cmd::Batch {
        // BATCH names its keys among its operations: they must share a node (a chain, with
        // replicas: a batch may write).
        let keys = quiver_service::batch::keys(args);
        Some(one_node(table, keys.iter().map(|k| &k[..]), true)?.unwrap_or(0))
    } else if positions.is_empty() {
        // No key: any node answers (OBJECT HELP, ...).
        Some(0)
    } else {
        None
    };
    let whole = |node: usize| Forward::to(spec, args, table.addrs[node].clone(), false);
    if let Some(node) = first {
        return Ok(whole(node));
    }
    // (unit, node) per key: a part per unit (`SlotTable::route_of`), sent to its node.
    let routes: Vec<(usize, usize)> = positions
        .iter()
        .map(|&i| table.route_of(&args[i], write).ok_or_else(|| err(UNSERVED)))
        .collect::<Result<_, _>>()?;
    if routes.iter().all(|r| r.0 == routes[0].0) {
        return Ok(whole(routes[0].1));
    }
    if spec.cmd == Cmd::MGet && table.replicated() {
        return replica_mget(spec, args, &positions, table);
    }
    let shape = match spec.cmd {
        Cmd::MGet => Shape::Values(Vec::with_capacity(routes.len())),
        Cmd::Del | Cmd::Unlink | Cmd::Exists | Cmd::Touch => Shape::Sum,
        Cmd::MSet => Shape::AllOk,
        _ => return Err(err(CROSS_NODE)),
    };
    let mut forward = Forward {
        spec,
        shape,
        parts: Vec::new(),
    };
    // Unit -> part index, for the few units a command touches.
    let mut part_of: Vec<(usize, usize)> = Vec::new();
    for (&pos, &(unit, node)) in positions.iter().zip(&routes) {
        let p = match part_of.iter().find(|(u, _)| *u == unit) {
            Some(&(_, p)) => p,
            None => {
                forward.parts.push(Part {
                    addr: table.addrs[node].clone(),
                    args,
                    keys: Some(Vec::new()),
                    asking: false,
                });
                part_of.push((unit, forward.parts.len() - 1));
                forward.parts.len() - 1
            }
        };
        let keys = forward.parts[p].keys.get_or_insert_with(Vec::new);
        if let Shape::Values(order) = &mut forward.shape {
            order.push((p as u32, keys.len() as u32));
        }
        keys.push(pos as u32);
    }
    Ok(forward)
}

thread_local! {
    /// The planner of this thread's requests (it keeps its buffers between them), and the
    /// turn of the next: each MGET takes the next, so that equally good nodes share the reads.
    static PLANNER: RefCell<(quiver_plan::Planner, usize)> =
        RefCell::new((quiver_plan::Planner::default(), 0));
}

/// An MGET whose keys' heads are several nodes, over replicas: one part per node the planner
/// chose, each carrying the keys it serves in the caller's order.
fn replica_mget<'a>(
    spec: &'static CommandSpec,
    args: &'a [Bytes],
    positions: &[usize],
    table: &SlotTable,
) -> Result<Forward<'a>, Reply> {
    let readers: Vec<&[u16]> = positions
        .iter()
        .map(|&i| table.readers_of(&args[i]))
        .collect();
    // Only a key no node serves has no reader.
    let plan = PLANNER
        .with(|p| {
            let (planner, turn) = &mut *p.borrow_mut();
            *turn = turn.wrapping_add(1);
            planner.plan_turned(&readers, *turn)
        })
        .map_err(|_| err(UNSERVED))?;
    let mut order = vec![(0u32, 0u32); positions.len()];
    let mut parts = Vec::with_capacity(plan.groups.len());
    for (p, (node, keys)) in plan.groups.iter().enumerate() {
        for (j, &k) in keys.iter().enumerate() {
            order[k] = (p as u32, j as u32);
        }
        parts.push(Part {
            addr: table.addrs[*node as usize].clone(),
            args,
            keys: Some(keys.iter().map(|&k| positions[k] as u32).collect()),
            asking: false,
        });
    }
    Ok(Forward {
        spec,
        shape: Shape::Values(order),
        parts,
    })
}

/// The node owning every key, `None` without keys; CROSSSLOT across nodes (across chains,
/// with replicas, when the keys may be written: `SlotTable::route_of`).
pub fn one_node<'k>(
    table: &SlotTable,
    keys: impl Iterator<Item = &'k [u8]>,
    write: bool,
) -> Result<Option<usize>, Reply> {
    if table.epoch == 0 {
        return Err(err(NO_TOPOLOGY));
    }
    let mut first = None;
    for k in keys {
        let (unit, node) = table.route_of(k, write).ok_or_else(|| err(UNSERVED))?;
        if first.is_some_and(|(u, _)| u != unit) {
            return Err(err(CROSS_NODE));
        }
        first = Some((unit, node));
    }
    Ok(first.map(|(_, node)| node))
}
