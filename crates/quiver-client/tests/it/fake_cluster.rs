//! A scripted cluster for the routing tests: N fake nodes on loopback ports sharing one model
//! of a cluster — the true owner of each slot, each node's keys, slots being migrated — and
//! answering like Redis Cluster: `MOVED` for a key another node owns, `ASK` for a key of a
//! migrating slot that already left, `TRYAGAIN` for a multi-key request split by a migration,
//! `CROSSSLOT` for keys of several slots (on nodes set to behave like Redis; a Quiver-like
//! node takes them). Scripted replies, consumed first, make a node answer anything.
//!
//! A node may list replicas (`Model::replicas`, by address: one may be a dead port); a fake
//! node listed as a replica of another serves reads of that node's keys on a connection that
//! sent `READONLY` (from the master's data: replication is instant here), and `MOVED`s them
//! otherwise, as Redis Cluster does.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use quiver_client::cluster::{key_slot, ClusterClient, ClusterOptions, SLOTS};
use quiver_client::ClientOptions;

use crate::common::TEST_READ_TIMEOUT;

/// A slot range and the address `CLUSTER SLOTS` names for it.
pub type SlotsReply = Vec<(u16, u16, String)>;

/// The model every fake node answers from.
pub struct Model {
    pub addrs: Vec<String>,
    /// The node that truly serves each slot.
    pub owners: Vec<usize>,
    /// Per node: refuse requests over several slots with `CROSSSLOT` (as Redis does).
    pub cross_slot: Vec<bool>,
    /// Per node: the addresses `CLUSTER SLOTS` lists as replicas of its ranges, in order.
    pub replicas: Vec<Vec<String>>,
    /// Slot → the node it is being migrated to (its owner answers `ASK` for missing keys).
    pub migrating: HashMap<u16, usize>,
    /// Per node: its keys.
    pub data: Vec<HashMap<Vec<u8>, Vec<u8>>>,
    /// Per node: replies to send to its next key commands instead of executing them.
    pub script: Vec<VecDeque<String>>,
    /// Replies to the next `CLUSTER SLOTS` (any node) instead of the true table.
    pub slots_replies: VecDeque<SlotsReply>,
    /// Per node: every command it received, in order.
    pub log: Vec<Vec<Vec<Vec<u8>>>>,
}

impl Model {
    /// Commands named `name` that node `node` received.
    pub fn received(&self, node: usize, name: &str) -> Vec<Vec<Vec<u8>>> {
        let name = name.as_bytes();
        self.log[node]
            .iter()
            .filter(|c| c[0].eq_ignore_ascii_case(name))
            .cloned()
            .collect()
    }

    /// The command names node `node` received, in order.
    pub fn names(&self, node: usize) -> Vec<String> {
        let name = |c: &Vec<Vec<u8>>| String::from_utf8_lossy(&c[0]).to_uppercase();
        self.log[node].iter().map(name).collect()
    }

    /// The true table as `CLUSTER SLOTS` ranges.
    pub fn true_slots(&self) -> SlotsReply {
        ranges(&self.owners, &self.addrs)
    }

    fn slot_reply(&mut self) -> String {
        let ranges = match self.slots_replies.pop_front() {
            Some(ranges) => ranges,
            None => self.true_slots(),
        };
        let node_entry = |addr: &str| {
            let (host, port) = addr.rsplit_once(':').unwrap();
            format!(
                "*3\r\n{}:{port}\r\n{}",
                bulk(host.as_bytes()),
                bulk(format!("id-{port}").as_bytes())
            )
        };
        let mut out = format!("*{}\r\n", ranges.len());
        for (lo, hi, addr) in ranges {
            let replicas = match self.addrs.iter().position(|a| *a == addr) {
                Some(master) => self.replicas[master].clone(),
                None => Vec::new(),
            };
            out += &format!("*{}\r\n:{lo}\r\n:{hi}\r\n", 3 + replicas.len());
            out += &node_entry(&addr);
            for replica in &replicas {
                out += &node_entry(replica);
            }
        }
        out
    }

    /// What node `node` answers to `args` (`asking`: the command follows `ASKING`;
    /// `readonly`: the connection sent `READONLY`).
    fn answer(&mut self, node: usize, args: &[Vec<u8>], asking: bool, readonly: bool) -> String {
        let name = String::from_utf8_lossy(&args[0]).to_uppercase();
        let keys: Vec<&[u8]> = match name.as_str() {
            "GET" | "SET" | "INCR" => vec![&args[1]],
            "MGET" | "DEL" | "EXISTS" => args[1..].iter().map(Vec::as_slice).collect(),
            "MSET" => args[1..].iter().step_by(2).map(Vec::as_slice).collect(),
            _ => return format!("-ERR unknown command '{name}'\r\n"),
        };
        if let Some(reply) = self.script[node].pop_front() {
            return reply;
        }
        let slots: Vec<u16> = keys.iter().map(|k| key_slot(k)).collect();
        if self.cross_slot[node] && slots.iter().any(|&s| s != slots[0]) {
            return "-CROSSSLOT Keys in request don't hash to the same slot\r\n".into();
        }
        let read = matches!(name.as_str(), "GET" | "MGET" | "EXISTS");
        // Per key, the node whose data answers it: this one, or the master it replicates.
        let mut sources = Vec::with_capacity(slots.len());
        for &slot in &slots {
            let owner = self.owners[slot as usize];
            let importing = asking && self.migrating.get(&slot) == Some(&node);
            let replica_read = readonly && read && self.replicas[owner].contains(&self.addrs[node]);
            if owner != node && !importing && !replica_read {
                return format!("-MOVED {slot} {}\r\n", self.addrs[owner]);
            }
            sources.push(if replica_read { owner } else { node });
        }
        if read && sources.iter().any(|&s| s != node) {
            let value = |i: usize| self.data[sources[i]].get(keys[i]);
            return match name.as_str() {
                "GET" => value(0).map_or("$-1\r\n".into(), |v| bulk(v)),
                "MGET" => {
                    let mut out = format!("*{}\r\n", keys.len());
                    for i in 0..keys.len() {
                        out += &value(i).map_or("$-1\r\n".into(), |v| bulk(v));
                    }
                    out
                }
                _ => format!(
                    ":{}\r\n",
                    (0..keys.len()).filter(|&i| value(i).is_some()).count()
                ),
            };
        }
        // Keys of a migrating slot that already left: all of the slot's → ASK (naming the
        // slot), some → TRYAGAIN.
        for (&slot, &target) in &self.migrating {
            if self.owners[slot as usize] != node {
                continue;
            }
            let in_slot: Vec<&[u8]> = keys
                .iter()
                .zip(&slots)
                .filter(|(_, &s)| s == slot)
                .map(|(k, _)| *k)
                .collect();
            let missing = in_slot
                .iter()
                .filter(|k| !self.data[node].contains_key(**k))
                .count();
            if missing > 0 && missing == in_slot.len() {
                return format!("-ASK {slot} {}\r\n", self.addrs[target]);
            }
            if missing > 0 {
                return "-TRYAGAIN Multiple keys request during rehashing of slot\r\n".into();
            }
        }
        let data = &mut self.data[node];
        match name.as_str() {
            "GET" => data.get(&args[1]).map_or("$-1\r\n".into(), |v| bulk(v)),
            "SET" => {
                data.insert(args[1].clone(), args[2].clone());
                "+OK\r\n".into()
            }
            "INCR" => {
                let n = data
                    .get(&args[1])
                    .map_or(0, |v| String::from_utf8_lossy(v).parse::<i64>().unwrap())
                    + 1;
                data.insert(args[1].clone(), n.to_string().into_bytes());
                format!(":{n}\r\n")
            }
            "MGET" => {
                let mut out = format!("*{}\r\n", keys.len());
                for k in &keys {
                    out += &data.get(*k).map_or("$-1\r\n".into(), |v| bulk(v));
                }
                out
            }
            "MSET" => {
                for pair in args[1..].chunks(2) {
                    data.insert(pair[0].clone(), pair[1].clone());
                }
                "+OK\r\n".into()
            }
            "DEL" => {
                let n = keys.iter().filter(|k| data.remove(**k).is_some()).count();
                format!(":{n}\r\n")
            }
            "EXISTS" => {
                let n = keys.iter().filter(|k| data.contains_key(**k)).count();
                format!(":{n}\r\n")
            }
            _ => unreachable!(),
        }
    }
}

/// A bulk string reply (bytes shown lossily: test values are text).
fn bulk(v: &[u8]) -> String {
    format!("${}\r\n{}\r\n", v.len(), String::from_utf8_lossy(v))
}

/// `owners` (one node per slot) as consecutive ranges.
pub fn ranges(owners: &[usize], addrs: &[String]) -> SlotsReply {
    let mut out: SlotsReply = Vec::new();
    for (slot, &node) in owners.iter().enumerate() {
        match out.last_mut() {
            Some((_, hi, addr)) if *addr == addrs[node] => *hi = slot as u16,
            _ => out.push((slot as u16, slot as u16, addrs[node].clone())),
        }
    }
    out
}

/// The fake nodes, stopped on drop.
pub struct FakeCluster {
    pub model: Arc<Mutex<Model>>,
    stop: Arc<AtomicBool>,
    acceptors: Vec<thread::JoinHandle<()>>,
}

impl FakeCluster {
    /// `nodes` nodes serving equal thirds (or whatever share) of the slots, in order;
    /// `cross_slot`: they refuse multi-slot requests, as Redis does.
    pub fn start(nodes: usize, cross_slot: bool) -> FakeCluster {
        let listeners: Vec<TcpListener> = (0..nodes)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let addrs: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect();
        let owners = (0..SLOTS as usize)
            .map(|s| s * nodes / SLOTS as usize)
            .collect();
        let model = Arc::new(Mutex::new(Model {
            addrs,
            owners,
            cross_slot: vec![cross_slot; nodes],
            replicas: vec![Vec::new(); nodes],
            migrating: HashMap::new(),
            data: vec![HashMap::new(); nodes],
            script: vec![VecDeque::new(); nodes],
            slots_replies: VecDeque::new(),
            log: vec![Vec::new(); nodes],
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let acceptors = listeners
            .into_iter()
            .enumerate()
            .map(|(node, listener)| {
                let (model, stop) = (model.clone(), stop.clone());
                thread::spawn(move || accept_loop(node, &listener, &model, &stop))
            })
            .collect();
        FakeCluster {
            model,
            stop,
            acceptors,
        }
    }

    pub fn addr(&self, node: usize) -> String {
        self.model.lock().unwrap().addrs[node].clone()
    }

    /// Options for a client of this cluster: node 0 as the seed, test timeouts, a 1 ms pause.
    pub fn options(&self) -> ClusterOptions {
        let mut options = ClusterOptions::new([self.addr(0)]);
        options.connection = ClientOptions::new("");
        options.connection.read_timeout = Some(TEST_READ_TIMEOUT);
        options.retry_delay = std::time::Duration::from_millis(1);
        options
    }

    pub fn client(&self) -> ClusterClient {
        ClusterClient::connect_with(self.options()).expect("connect to the fake cluster")
    }

    pub fn model(&self) -> std::sync::MutexGuard<'_, Model> {
        self.model.lock().unwrap()
    }

    /// The node a key lives on in the model.
    pub fn owner_of(&self, key: &[u8]) -> usize {
        self.model().owners[key_slot(key) as usize]
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let addrs = self
            .model
            .lock()
            .map(|m| m.addrs.clone())
            .unwrap_or_default();
        for addr in addrs {
            // Wakes the acceptor, which then sees `stop`.
            let _ = TcpStream::connect(addr);
        }
        for acceptor in self.acceptors.drain(..) {
            let _ = acceptor.join();
        }
    }
}

fn accept_loop(node: usize, listener: &TcpListener, model: &Arc<Mutex<Model>>, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let model = model.clone();
        // Ends when the client closes the connection.
        thread::spawn(move || serve(node, stream, &model));
    }
}

/// One connection: commands read one by one, answered from the model.
fn serve(node: usize, stream: TcpStream, model: &Mutex<Model>) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    // The previous command was ASKING (it applies to the next command only).
    let mut asking = false;
    // The connection sent READONLY (for its whole life).
    let mut readonly = false;
    while let Some(args) = read_command(&mut reader) {
        let name = String::from_utf8_lossy(&args[0]).to_uppercase();
        let reply = {
            let mut model = model.lock().unwrap();
            model.log[node].push(args.clone());
            match name.as_str() {
                "ASKING" => "+OK\r\n".to_owned(),
                "READONLY" => {
                    readonly = true;
                    "+OK\r\n".to_owned()
                }
                "CLUSTER" => model.slot_reply(),
                _ => model.answer(node, &args, asking, readonly),
            }
        };
        asking = name == "ASKING";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// A multibulk request, or `None` at the end of the connection.
fn read_command(reader: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let n: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let len: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut arg = vec![0; len + 2];
        std::io::Read::read_exact(reader, &mut arg).ok()?;
        arg.truncate(len);
        args.push(arg);
    }
    Some(args)
}
