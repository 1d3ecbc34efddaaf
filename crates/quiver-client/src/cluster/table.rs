//! The slot table: for each of the 16384 hash slots, the index of the node serving it (its
//! master) and of its replicas, and the reading of a `CLUSTER SLOTS` reply into the ranges it
//! installs. No I/O.

use quiver_resp::redirect::join_addr;
use quiver_resp::SLOTS;

use crate::error::{Error, Result};
use crate::resp::Value;

/// The entry of a slot no node serves (before the first table, or a gap in `CLUSTER SLOTS`),
/// and of a slot without known replicas.
const NO_NODE: u16 = u16::MAX;

/// Slot → master's node index (into the router's node list), and slot → its replicas. Four
/// bytes a slot (64 KiB a client) and the distinct replica lists: a cluster has a few.
pub(crate) struct SlotTable {
    owners: Box<[u16]>,
    /// Per slot, the index into `replica_sets` of its replicas' list; `NO_NODE` for none.
    replicas: Box<[u16]>,
    /// The distinct lists of replicas (node indices, in `CLUSTER SLOTS` order): slots of one
    /// range, and ranges of one master, share theirs.
    replica_sets: Vec<Vec<usize>>,
}

impl SlotTable {
    /// A table where no slot has a node.
    pub(crate) fn empty() -> SlotTable {
        SlotTable {
            owners: vec![NO_NODE; SLOTS as usize].into_boxed_slice(),
            replicas: vec![NO_NODE; SLOTS as usize].into_boxed_slice(),
            replica_sets: Vec::new(),
        }
    }

    /// The node serving `slot` (its master), if the table names one.
    pub(crate) fn owner(&self, slot: u16) -> Option<usize> {
        match self.owners.get(slot as usize) {
            Some(&node) if node != NO_NODE => Some(node as usize),
            _ => None,
        }
    }

    /// The replicas of `slot` the table knows, in `CLUSTER SLOTS` order (none for a slot
    /// without a node, or set by [`SlotTable::set`]).
    pub(crate) fn replicas(&self, slot: u16) -> &[usize] {
        match self.replicas.get(slot as usize) {
            Some(&set) if set != NO_NODE => self
                .replica_sets
                .get(set as usize)
                .map_or(&[][..], Vec::as_slice),
            _ => &[],
        }
    }

    /// `slot` is served by `node` (an index below `NO_NODE`: the router keeps one node per
    /// address, and a cluster has at most one master per slot), its replicas unknown: a
    /// `MOVED` names the new master only, and a replica read must not go back to a node that
    /// no longer has the slot.
    pub(crate) fn set(&mut self, slot: u16, node: usize) {
        if let (Some(entry), Ok(node)) = (self.owners.get_mut(slot as usize), u16::try_from(node)) {
            if node != NO_NODE {
                *entry = node;
                if let Some(replicas) = self.replicas.get_mut(slot as usize) {
                    *replicas = NO_NODE;
                }
            }
        }
    }

    /// Every slot of `range` is served by `master`, and replicated on `replicas`.
    pub(crate) fn set_range(&mut self, range: &SlotsRange, master: usize, replicas: &[usize]) {
        let set = self.replica_set(replicas);
        for slot in range.lo..=range.hi {
            self.set(slot, master);
            if let Some(entry) = self.replicas.get_mut(slot as usize) {
                *entry = set;
            }
        }
    }

    /// The index of `replicas` in `replica_sets`, added if new; `NO_NODE` for none (or past
    /// what an entry can name: such a table is garbage, and masters alone still serve it).
    fn replica_set(&mut self, replicas: &[usize]) -> u16 {
        if replicas.is_empty() {
            return NO_NODE;
        }
        let index = match self.replica_sets.iter().position(|s| s == replicas) {
            Some(index) => index,
            None => {
                self.replica_sets.push(replicas.to_vec());
                self.replica_sets.len() - 1
            }
        };
        match u16::try_from(index) {
            Ok(index) if index != NO_NODE => index,
            _ => NO_NODE,
        }
    }

    /// Whether any slot is served by `node` as its master.
    pub(crate) fn serves_any(&self, node: usize) -> bool {
        self.owners.iter().any(|&n| n as usize == node)
    }
}

/// One range of a `CLUSTER SLOTS` reply: its slots, its master's address and its replicas'.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotsRange {
    pub(crate) lo: u16,
    pub(crate) hi: u16,
    /// `host:port` of the master, which serves every command.
    pub(crate) addr: String,
    /// `host:port` of each replica, in the reply's order (for Quiver, down the chain): they
    /// serve multigets of clients that read from replicas.
    pub(crate) replicas: Vec<String>,
}

/// Reads a `CLUSTER SLOTS` reply (Redis 7: an array of `[start, end, master, replica...]`,
/// each node `[host, port, id, ...]`). `queried` is the address of the node that sent it: a
/// node whose host is empty, `?` or null (an unknown endpoint) is reached on that node's host,
/// as other clients do. A replica of port 0 (no known endpoint) is left out: it cannot be
/// reached.
pub(crate) fn parse_cluster_slots(reply: Value, queried: &str) -> Result<Vec<SlotsRange>> {
    let Value::Array(entries) = reply else {
        return Err(bad_slots("expected an array of slot ranges"));
    };
    let mut ranges = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(fields) = entry else {
            return Err(bad_slots("a slot range is not an array"));
        };
        let mut fields = fields.into_iter();
        let (Some(lo), Some(hi), Some(master)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(bad_slots("a slot range lacks its start, end or master"));
        };
        let slot = |v: Value| match v {
            Value::Integer(n) if (0..i64::from(SLOTS)).contains(&n) => Ok(n as u16),
            _ => Err(bad_slots("a slot number is not an integer below 16384")),
        };
        let (lo, hi) = (slot(lo)?, slot(hi)?);
        if lo > hi {
            return Err(bad_slots("a slot range ends before it starts"));
        }
        let (host, port) = parse_node(master, "master")?;
        let mut replicas = Vec::new();
        for replica in fields {
            let (host, port) = parse_node(replica, "replica")?;
            if port != 0 {
                replicas.push(node_addr(&host, port, queried));
            }
        }
        ranges.push(SlotsRange {
            lo,
            hi,
            addr: node_addr(&host, port, queried),
            replicas,
        });
    }
    Ok(ranges)
}

/// The error of a malformed `CLUSTER SLOTS` reply.
fn bad_slots(what: &str) -> Error {
    Error::UnexpectedReply(format!("CLUSTER SLOTS: {what}"))
}

/// A node of a `CLUSTER SLOTS` range, `[host, port, ...]` (the id and metadata that follow
/// are not needed): its host (empty if null) and port. `role` names it in errors.
fn parse_node(node: Value, role: &str) -> Result<(String, u16)> {
    let Value::Array(fields) = node else {
        return Err(bad_slots(&format!("a {role} is not an array")));
    };
    let mut fields = fields.into_iter();
    let host = match fields.next() {
        Some(Value::Bulk(host)) => String::from_utf8_lossy(&host).into_owned(),
        Some(Value::Simple(host)) => host,
        Some(Value::Null) => String::new(),
        _ => return Err(bad_slots(&format!("a {role}'s host is not a string"))),
    };
    let port = match fields.next() {
        Some(Value::Integer(port)) => {
            u16::try_from(port).map_err(|_| bad_slots(&format!("a {role}'s port is bad")))?
        }
        _ => return Err(bad_slots(&format!("a {role}'s port is not an integer"))),
    };
    Ok((host, port))
}

/// The address of a node `CLUSTER SLOTS` from `queried` names `host`, `port`.
fn node_addr(host: &str, port: u16, queried: &str) -> String {
    let host = match host {
        "" | "?" => host_of(queried),
        known => known,
    };
    join_addr(host, port)
}

/// The host part of `host:port` (brackets of an IPv6 host removed).
pub(crate) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn node(host: Value, port: i64) -> Value {
        Value::Array(vec![
            host,
            Value::Integer(port),
            bulk("id"),
            Value::Array(vec![]),
        ])
    }

    #[test]
    fn cluster_slots_are_read() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Integer(0),
                Value::Integer(5460),
                node(bulk("127.0.0.1"), 7000),
                node(bulk("127.0.0.1"), 7003),
            ]),
            Value::Array(vec![
                Value::Integer(5461),
                Value::Integer(10922),
                node(bulk(""), 7001),
            ]),
            Value::Array(vec![
                Value::Integer(10923),
                Value::Integer(16383),
                node(bulk("::1"), 7002),
            ]),
        ]);
        let ranges = parse_cluster_slots(reply, "10.1.1.1:7000").unwrap();
        let addrs: Vec<_> = ranges.iter().map(|r| r.addr.as_str()).collect();
        assert_eq!(addrs, ["127.0.0.1:7000", "10.1.1.1:7001", "[::1]:7002"]);
        assert_eq!((ranges[1].lo, ranges[1].hi), (5461, 10922));
        assert_eq!(ranges[0].replicas, ["127.0.0.1:7003"]);
        assert!(ranges[1].replicas.is_empty() && ranges[2].replicas.is_empty());

        let mut table = SlotTable::empty();
        for (i, range) in ranges.iter().enumerate() {
            table.set_range(range, i, &[]);
        }
        assert_eq!(table.owner(0), Some(0));
        assert_eq!(table.owner(5461), Some(1));
        assert_eq!(table.owner(16383), Some(2));
        assert!(table.serves_any(2) && !table.serves_any(3));
    }

    /// Quiver's chains and Redis's replicas: every node after the master, in order, its host
    /// resolved like a master's; the table keeps them per slot.
    #[test]
    fn replicas_are_read_after_the_master() {
        let range = |lo, hi, nodes: Vec<Value>| {
            let mut fields = vec![Value::Integer(lo), Value::Integer(hi)];
            fields.extend(nodes);
            Value::Array(fields)
        };
        // A Redis < 7 node entry: host, port and id only.
        let short =
            |host: &str, port| Value::Array(vec![bulk(host), Value::Integer(port), bulk("id")]);
        let reply = Value::Array(vec![
            range(
                0,
                99,
                vec![node(bulk("h1"), 1), node(bulk("h2"), 2), node(bulk("?"), 3)],
            ),
            range(
                100,
                199,
                vec![node(bulk("h2"), 2), node(Value::Null, 3), short("h1", 1)],
            ),
            // A replica of no known endpoint (port 0) cannot be reached: left out.
            range(200, 16383, vec![node(bulk("h3"), 3), node(bulk(""), 0)]),
        ]);
        let ranges = parse_cluster_slots(reply, "q:9").unwrap();
        let nodes: Vec<(&str, Vec<&str>)> = ranges
            .iter()
            .map(|r| {
                let replicas = r.replicas.iter().map(String::as_str).collect();
                (r.addr.as_str(), replicas)
            })
            .collect();
        assert_eq!(
            nodes,
            [
                ("h1:1", vec!["h2:2", "q:3"]),
                ("h2:2", vec!["q:3", "h1:1"]),
                ("h3:3", vec![]),
            ]
        );

        let mut table = SlotTable::empty();
        table.set_range(&ranges[0], 0, &[1, 2]);
        table.set_range(&ranges[1], 1, &[2, 0]);
        table.set_range(&ranges[2], 2, &[]);
        assert_eq!(
            (table.owner(99), table.replicas(99)),
            (Some(0), &[1, 2][..])
        );
        assert_eq!(
            (table.owner(100), table.replicas(100)),
            (Some(1), &[2, 0][..])
        );
        assert_eq!((table.owner(200), table.replicas(200)), (Some(2), &[][..]));
        // Two ranges of one chain share its list.
        table.set_range(&ranges[2], 0, &[1, 2]);
        assert_eq!(table.replica_sets.len(), 2);
        assert_eq!(table.replicas(16383), [1, 2]);
        // A MOVED names the new master alone: the slot's replicas are forgotten.
        table.set(99, 2);
        assert_eq!((table.owner(99), table.replicas(99)), (Some(2), &[][..]));
        assert_eq!(table.replicas(98), [1, 2]);
        assert_eq!(table.replicas(16384), [0usize; 0]);
    }

    #[test]
    fn malformed_cluster_slots_are_refused() {
        let range = |lo, hi| {
            Value::Array(vec![
                Value::Integer(lo),
                Value::Integer(hi),
                node(bulk("h"), 1),
            ])
        };
        for reply in [
            bulk("no"),
            Value::Array(vec![bulk("x")]),
            Value::Array(vec![range(0, 16384)]),
            Value::Array(vec![range(9, 3)]),
            Value::Array(vec![Value::Array(vec![
                Value::Integer(0),
                Value::Integer(1),
            ])]),
            Value::Array(vec![Value::Array(vec![
                Value::Integer(0),
                Value::Integer(1),
                node(bulk("h"), 70000),
            ])]),
            // Replicas are read like masters.
            Value::Array(vec![Value::Array(vec![
                Value::Integer(0),
                Value::Integer(1),
                node(bulk("h"), 1),
                node(bulk("h"), -2),
            ])]),
            Value::Array(vec![Value::Array(vec![
                Value::Integer(0),
                Value::Integer(1),
                node(bulk("h"), 1),
                node(Value::Integer(3), 2),
            ])]),
            Value::Array(vec![Value::Array(vec![
                Value::Integer(0),
                Value::Integer(1),
                node(bulk("h"), 1),
                bulk("h:2"),
            ])]),
        ] {
            assert!(
                parse_cluster_slots(reply.clone(), "h:1").is_err(),
                "{reply:?}"
            );
        }
    }

    #[test]
    fn empty_table_has_no_owner() {
        let mut table = SlotTable::empty();
        assert_eq!(table.owner(7), None);
        table.set(7, 3);
        assert_eq!(table.owner(7), Some(3));
        assert_eq!(table.owner(16384), None);
        assert_eq!(host_of("[::1]:7000"), "::1");
        assert_eq!(host_of("h:1"), "h");
    }
}
