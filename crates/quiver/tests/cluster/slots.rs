//! What the tests read of the protocol itself, for their assertions: CLUSTER SLOTS parsed
//! (its shape checked) and a `-MOVED` reply's text parsed. Routing is not here: every test
//! routes through `quiver_client::ClusterClient`, the one home of cluster routing.

use quiver_client::{Connection, Value};

/// One entry of CLUSTER SLOTS: a range, its owner (the chain's head: host, port, id) and its
/// whole chain (id, port), the head first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotsEntry {
    pub lo: u16,
    pub hi: u16,
    pub host: String,
    pub port: u16,
    pub id: String,
    pub members: Vec<(String, u16)>,
}

/// CLUSTER SLOTS of the node behind `c`, in slot order.
pub fn cluster_slots(c: &mut Connection) -> Vec<SlotsEntry> {
    let reply = c.command(&[b"CLUSTER", b"SLOTS"]).unwrap();
    let Value::Array(ranges) = reply else {
        panic!("CLUSTER SLOTS: {reply:?}")
    };
    let int = |v: &Value| match v {
        Value::Integer(i) => *i,
        other => panic!("CLUSTER SLOTS: an integer expected, got {other:?}"),
    };
    let mut entries: Vec<SlotsEntry> = ranges
        .iter()
        .map(|r| {
            let Value::Array(r) = r else {
                panic!("CLUSTER SLOTS entry: {r:?}")
            };
            assert!(r.len() >= 3, "a range and its chain: {r:?}");
            let members: Vec<&Vec<Value>> = r[2..]
                .iter()
                .map(|n| match n {
                    // host, port, id, and Redis 7's metadata map (here an empty array).
                    Value::Array(node) if node.len() == 4 => node,
                    other => panic!("CLUSTER SLOTS node: {other:?}"),
                })
                .collect();
            let node = members[0];
            SlotsEntry {
                lo: u16::try_from(int(&r[0])).unwrap(),
                hi: u16::try_from(int(&r[1])).unwrap(),
                host: crate::harness::text(&node[0]),
                port: u16::try_from(int(&node[1])).unwrap(),
                id: crate::harness::text(&node[2]),
                members: members
                    .iter()
                    .map(|n| {
                        (
                            crate::harness::text(&n[2]),
                            u16::try_from(int(&n[1])).unwrap(),
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    entries.sort_by_key(|e| e.lo);
    entries
}

/// `MOVED <slot> <host:port>` parsed.
pub fn parse_moved(text: &str) -> Option<(u16, String)> {
    let mut words = text.strip_prefix("MOVED ")?.split(' ');
    let slot = words.next()?.parse().ok()?;
    let addr = words.next()?.to_string();
    words.next().is_none().then_some((slot, addr))
}
