//! The client side of the tests: CLUSTER SLOTS parsed, and [`Router`], a minimal cluster
//! client — a command goes to the owner of its first key's slot, one connection per node, and
//! a `-MOVED` reply updates the slot's owner and sends the command there.

use std::collections::HashMap;

use quiver_client::{Connection, Error, Value};
use quiver_store::slot::key_slot;

use crate::harness::connect;

/// Redirects followed for one command before it counts as failed.
const REDIRECTS_MAX: usize = 3;

/// One entry of CLUSTER SLOTS: a range and its owner (chains of one node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotsEntry {
    pub lo: u16,
    pub hi: u16,
    pub host: String,
    pub port: u16,
    pub id: String,
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
            assert_eq!(r.len(), 3, "a range and one node (no replicas): {r:?}");
            let Value::Array(node) = &r[2] else {
                panic!("CLUSTER SLOTS node: {:?}", r[2])
            };
            // host, port, id, and Redis 7's metadata map (here an empty array).
            assert_eq!(node.len(), 4, "{node:?}");
            SlotsEntry {
                lo: u16::try_from(int(&r[0])).unwrap(),
                hi: u16::try_from(int(&r[1])).unwrap(),
                host: crate::harness::text(&node[0]),
                port: u16::try_from(int(&node[1])).unwrap(),
                id: crate::harness::text(&node[2]),
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

/// Sends each command to the node owning its first key (see the module documentation).
pub struct Router {
    /// Per slot, the owner's `host:port`.
    owners: Vec<String>,
    conns: HashMap<String, Connection>,
}

impl Router {
    /// A router with the slot map of the node at `seed` (CLUSTER SLOTS).
    pub fn new(seed: &str) -> Router {
        let mut c = connect(seed).unwrap();
        let mut owners = vec![String::new(); quiver_store::slot::SLOTS as usize];
        for e in cluster_slots(&mut c) {
            let addr = format!("{}:{}", e.host, e.port);
            owners[e.lo as usize..=e.hi as usize].fill(addr);
        }
        Router {
            owners,
            conns: HashMap::from([(seed.to_string(), c)]),
        }
    }

    /// The address the router sends `key` to now.
    pub fn owner(&self, key: &[u8]) -> &str {
        &self.owners[key_slot(key) as usize]
    }

    /// `args` (whose `args[1]` is the key) at the key's owner; the reply, or the error as
    /// text. A broken connection is dropped (the next command to that node connects anew).
    pub fn command(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        let slot = key_slot(args[1]) as usize;
        for _ in 0..=REDIRECTS_MAX {
            let addr = self.owners[slot].clone();
            if !self.conns.contains_key(&addr) {
                let c = connect(&addr).map_err(|e| format!("connect to {addr}: {e}"))?;
                self.conns.insert(addr.clone(), c);
            }
            let conn = self.conns.get_mut(&addr).unwrap();
            match conn.command(args) {
                Err(Error::Server(text)) if text.starts_with("MOVED ") => {
                    let (_, to) = parse_moved(&text).ok_or_else(|| format!("bad {text:?}"))?;
                    self.owners[slot] = to;
                }
                Err(e) => {
                    if e.is_connection_error() {
                        self.conns.remove(&addr);
                    }
                    return Err(format!("{addr}: {e}"));
                }
                Ok(v) => return Ok(v),
            }
        }
        Err(format!("slot {slot}: more than {REDIRECTS_MAX} redirects"))
    }

    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match self.command(&[b"SET", key.as_bytes(), value.as_bytes()])? {
            Value::Simple(s) if s == "OK" => Ok(()),
            other => Err(format!("SET {key}: {other:?}")),
        }
    }

    pub fn get(&mut self, key: &str) -> Result<Option<String>, String> {
        match self.command(&[b"GET", key.as_bytes()])? {
            Value::Null => Ok(None),
            Value::Bulk(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
            other => Err(format!("GET {key}: {other:?}")),
        }
    }
}
