//! The slot table: for each of the 16384 hash slots, the index of the node serving it, and the
//! reading of a `CLUSTER SLOTS` reply into the ranges it installs. No I/O.

use quiver_resp::SLOTS;

use crate::error::{Error, Result};
use crate::resp::Value;

/// The entry of a slot no node serves (before the first table, or a gap in `CLUSTER SLOTS`).
const NO_NODE: u16 = u16::MAX;

/// Slot → node index (into the router's node list). Two bytes a slot: 32 KiB a client.
pub(crate) struct SlotTable {
    owners: Box<[u16]>,
}

impl SlotTable {
    /// A table where no slot has a node.
    pub(crate) fn empty() -> SlotTable {
        SlotTable {
            owners: vec![NO_NODE; SLOTS as usize].into_boxed_slice(),
        }
    }

    /// The node serving `slot`, if the table names one.
    pub(crate) fn owner(&self, slot: u16) -> Option<usize> {
        match self.owners.get(slot as usize) {
            Some(&node) if node != NO_NODE => Some(node as usize),
            _ => None,
        }
    }

    /// `slot` is served by `node` (an index below `NO_NODE`: the router keeps one node per
    /// address, and a cluster has at most one master per slot).
    pub(crate) fn set(&mut self, slot: u16, node: usize) {
        if let (Some(entry), Ok(node)) = (self.owners.get_mut(slot as usize), u16::try_from(node)) {
            if node != NO_NODE {
                *entry = node;
            }
        }
    }

    /// Every slot of `range` is served by `node`.
    pub(crate) fn set_range(&mut self, range: &SlotsRange, node: usize) {
        for slot in range.lo..=range.hi {
            self.set(slot, node);
        }
    }

    /// Whether any slot is served by `node`.
    pub(crate) fn serves_any(&self, node: usize) -> bool {
        self.owners.iter().any(|&n| n as usize == node)
    }
}

/// One range of a `CLUSTER SLOTS` reply: its slots and its master's address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotsRange {
    pub(crate) lo: u16,
    pub(crate) hi: u16,
    /// `host:port` of the master (replicas are not used: every command goes to the master).
    pub(crate) addr: String,
}

/// Reads a `CLUSTER SLOTS` reply (Redis 7: an array of `[start, end, [host, port, id, ...],
/// replicas...]`). `queried` is the address of the node that sent it: a master whose host is
/// empty, `?` or null (an unknown endpoint) is reached on that node's host, as other clients
/// do.
pub(crate) fn parse_cluster_slots(reply: Value, queried: &str) -> Result<Vec<SlotsRange>> {
    let bad = |what: &str| Error::UnexpectedReply(format!("CLUSTER SLOTS: {what}"));
    let Value::Array(entries) = reply else {
        return Err(bad("expected an array of slot ranges"));
    };
    let mut ranges = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(fields) = entry else {
            return Err(bad("a slot range is not an array"));
        };
        let mut fields = fields.into_iter();
        let (Some(lo), Some(hi), Some(Value::Array(master))) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(bad("a slot range lacks its start, end or master"));
        };
        let slot = |v: Value| match v {
            Value::Integer(n) if (0..i64::from(SLOTS)).contains(&n) => Ok(n as u16),
            _ => Err(bad("a slot number is not an integer below 16384")),
        };
        let (lo, hi) = (slot(lo)?, slot(hi)?);
        if lo > hi {
            return Err(bad("a slot range ends before it starts"));
        }
        let mut master = master.into_iter();
        let host = match master.next() {
            Some(Value::Bulk(host)) => String::from_utf8_lossy(&host).into_owned(),
            Some(Value::Simple(host)) => host,
            Some(Value::Null) => String::new(),
            _ => return Err(bad("a master's host is not a string")),
        };
        let port = match master.next() {
            Some(Value::Integer(port)) => u16::try_from(port).map_err(|_| bad("a bad port"))?,
            _ => return Err(bad("a master's port is not an integer")),
        };
        let host = match host.as_str() {
            "" | "?" => host_of(queried),
            known => known,
        };
        ranges.push(SlotsRange {
            lo,
            hi,
            addr: join_addr(host, port),
        });
    }
    Ok(ranges)
}

/// `host:port`, with an IPv6 host in brackets so that it resolves.
pub(crate) fn join_addr(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
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

        let mut table = SlotTable::empty();
        for (i, range) in ranges.iter().enumerate() {
            table.set_range(range, i);
        }
        assert_eq!(table.owner(0), Some(0));
        assert_eq!(table.owner(5461), Some(1));
        assert_eq!(table.owner(16383), Some(2));
        assert!(table.serves_any(2) && !table.serves_any(3));
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
        assert_eq!(join_addr("::1", 7), "[::1]:7");
    }
}
