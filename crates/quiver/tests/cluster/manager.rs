//! `quiver manager` processes and what the failover tests read of the chains: a cluster whose
//! nodes hold short leases, with managers that repair its chains.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use quiver_cluster::topology::same_chain;
use quiver_store::slot::SlotRange;
use quiver_testkit::process::{append, log_len, Guard, StartFailure};
use quiver_testkit::wait_until;

use crate::harness::{await_listening, Cluster, Env, Placement};

/// Lease of the failover tests' nodes and managers, in milliseconds: etcd's shortest, so a
/// failover takes a few seconds.
pub const NODE_TIMEOUT_MS: &str = "2000";

/// A `quiver manager`.
pub struct Manager {
    pub name: String,
    dir: PathBuf,
    etcd_url: String,
    process: Option<Guard>,
    /// Kept so the reading thread keeps draining the pipe.
    _stdout: Option<mpsc::Receiver<String>>,
}

impl Manager {
    /// Starts manager `name` on etcd at `etcd_url`, its log in `dir`; returns once it runs
    /// (it may not be elected yet).
    pub fn start(dir: &Path, etcd_url: &str, name: &str) -> Manager {
        let mut manager = Manager {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            etcd_url: etcd_url.to_string(),
            process: None,
            _stdout: None,
        };
        manager.spawn();
        manager
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.log()).unwrap_or_default()).into_owned()
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        self.process
            .take()
            .unwrap_or_else(|| panic!("{} is not running", self.name))
            .kill9();
    }

    /// Starts the manager again under the same name; returns once it runs.
    pub fn restart(&mut self) {
        assert!(self.process.is_none(), "{} is running", self.name);
        self.spawn();
    }

    fn spawn(&mut self) {
        let log_start = log_len(&self.log());
        let child = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["manager", "--etcd", &self.etcd_url, "--name", &self.name])
            .args(["--lease-ms", NODE_TIMEOUT_MS])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(append(&self.log()))
            .spawn()
            .expect("the quiver binary starts");
        let expected = format!("quiver manager {} running", self.name);
        match await_listening(child, &expected, &self.log(), log_start) {
            Ok((process, rx)) => {
                self.process = Some(process);
                self._stdout = Some(rx);
            }
            Err(StartFailure::PortInUse) => unreachable!("a manager listens on no port"),
            Err(StartFailure::Other(e)) => panic!("{}: {e}", self.name),
        }
    }
}

/// A chain as the topology in etcd has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// Its slots as the topology writes them (`lo-hi`), and parsed.
    pub slots: String,
    pub range: SlotRange,
    pub members: Vec<String>,
    pub version: u64,
}

/// The chain serving `key`.
pub fn chain_of<'a>(chains: &'a [Chain], key: &str) -> &'a Chain {
    let slot = quiver_store::slot::key_slot(key.as_bytes());
    chains
        .iter()
        .find(|c| c.range.contains(slot))
        .unwrap_or_else(|| panic!("no chain holds slot {slot} of {key}: {chains:?}"))
}

impl Cluster {
    /// etcd, `n` nodes with leases of [`NODE_TIMEOUT_MS`], chains of `replicas`, and
    /// `managers` managers (one of them elected before this returns).
    pub fn start_failover(n: usize, replicas: u8, managers: usize) -> Cluster {
        Cluster::start_failover_placed(n, replicas, managers, |_, url| Placement::at(url))
    }

    /// [`Cluster::start_failover`], node `id` placed by `place(id, etcd's URL)`.
    pub fn start_failover_placed(
        n: usize,
        replicas: u8,
        managers: usize,
        place: impl Fn(&str, &str) -> Placement,
    ) -> Cluster {
        let args = ["--node-timeout", NODE_TIMEOUT_MS];
        let mut cluster = Cluster::start_full_placed(n, replicas, &args, |_| Env::new(), place);
        for _ in 0..managers {
            cluster.start_manager();
        }
        wait_until(
            "a manager elected",
            || cluster.logs(),
            || {
                cluster
                    .managers
                    .iter()
                    .any(|m| m.log_text().contains("manager: elected"))
                    .then_some(())
                    .ok_or_else(|| "none yet".to_string())
            },
        );
        cluster
    }

    /// Starts a manager (`manager-1`, `manager-2`, ...); its index in [`Cluster::managers`].
    pub fn start_manager(&mut self) -> usize {
        let name = format!("manager-{}", self.managers.len() + 1);
        let manager = Manager::start(self.dir.path(), &self.etcd.url(), &name);
        self.managers.push(manager);
        self.managers.len() - 1
    }

    /// Waits until every chain in etcd has `replicas` members; how long that took.
    pub fn wait_chains_full(&self, replicas: usize) -> Duration {
        let start = Instant::now();
        wait_until(
            &format!("every chain of {replicas} members"),
            || self.logs(),
            || {
                let chains = self.chains()?;
                match chains.iter().find(|c| c.members.len() < replicas) {
                    Some(c) => Err(format!("{c:?} is short")),
                    None => Ok(()),
                }
            },
        );
        start.elapsed()
    }

    /// Waits until every member of the topology says `cluster_state:ok` (it holds its lease
    /// and the topology names its run: a node restarted a moment ago still holds its old
    /// lease, so only it knows that it must be repaired out of its chains first).
    pub fn wait_members_serving(&self) {
        wait_until(
            "every member serving at its run",
            || self.logs(),
            || {
                let status = self.try_status()?;
                for node in status["topology"]["nodes"].as_array().ok_or("no nodes")? {
                    let id = node["id"].as_str().ok_or("a node without an id")?;
                    self.nodes[self.node(id)].info_has("cluster_state:ok")?;
                }
                Ok(())
            },
        );
    }

    /// Waits until restarted node `id` has announced its new run and the manager has taken
    /// it in at that run (out of the chains it shared).
    pub fn wait_readmitted(&self, id: &str) {
        let node = &self.nodes[self.node(id)];
        wait_until(
            &format!("{id} connected to etcd"),
            || self.logs(),
            || node.info_has("quiver_etcd_connected:1"),
        );
        wait_until(
            &format!("{id} readmitted at its new run"),
            || self.logs(),
            || {
                let status = self.try_status()?;
                let nodes = status["nodes"].as_array().ok_or("no nodes")?;
                let n = nodes.iter().find(|n| n["id"] == id).ok_or("not a member")?;
                match (n["alive"].as_bool(), n["restarted"].as_bool()) {
                    (Some(true), Some(false)) => Ok(()),
                    other => Err(format!("{id}: (alive, restarted) {other:?}")),
                }
            },
        );
    }

    /// Waits until no two neighbouring chains have the same head and members (their head
    /// merges them once the cluster is whole: `topology::reshape`); how many chains there
    /// are then. Bounded by `wait_until`'s limit.
    pub fn wait_chains_merged(&self) -> usize {
        let mut count = 0;
        wait_until(
            "neighbouring chains of the same members merged",
            || self.logs(),
            || {
                let chains = self.chains()?;
                count = chains.len();
                let same = |pair: &&[Chain]| same_chain(&pair[0].members, &pair[1].members);
                match chains.windows(2).find(same) {
                    Some(pair) => Err(format!("not merged: {pair:?}")),
                    None => Ok(()),
                }
            },
        );
        count
    }

    /// Waits until no node heads more than its share of the chains (`ceil(chains / nodes)`:
    /// the head balance, after a restart); how long that took. Bounded by `wait_until`'s
    /// limit.
    pub fn wait_heads_spread(&self) -> Duration {
        let start = Instant::now();
        wait_until(
            "the heads spread over the nodes",
            || self.logs(),
            || {
                let chains = self.chains()?;
                let max = chains.len().div_ceil(self.nodes.len());
                for node in &self.nodes {
                    let heads = chains.iter().filter(|c| c.members[0] == node.id).count();
                    if heads > max {
                        return Err(format!("{} heads {heads} chains: {chains:?}", node.id));
                    }
                }
                Ok(())
            },
        );
        start.elapsed()
    }

    /// Waits until node `id` is in every chain in etcd; how long that took.
    pub fn wait_in_every_chain(&self, id: &str) -> Duration {
        let start = Instant::now();
        wait_until(
            &format!("{id} in every chain"),
            || self.logs(),
            || {
                let chains = self.chains()?;
                match chains.iter().find(|c| !c.members.iter().any(|m| m == id)) {
                    Some(c) => Err(format!("{id} is not in {c:?}")),
                    None => Ok(()),
                }
            },
        );
        start.elapsed()
    }

    /// The index of the elected manager (etcd's election says which), if one is.
    pub fn elected_manager(&self) -> Option<usize> {
        let status = self.try_status().ok()?;
        let name = status["manager"].as_str()?;
        self.managers
            .iter()
            .position(|m| m.name == name && m.process.is_some())
    }

    /// The chains in etcd now.
    pub fn chains(&self) -> Result<Vec<Chain>, String> {
        let status = self.try_status()?;
        let shards = status["topology"]["shards"]
            .as_array()
            .ok_or("no shards in the topology")?;
        shards
            .iter()
            .map(|s| {
                let slots = s["slots"].as_str().ok_or("no slots")?.to_string();
                Ok(Chain {
                    range: SlotRange::parse(&slots).ok_or(format!("slots {slots}"))?,
                    slots,
                    members: s["chain"]
                        .as_array()
                        .ok_or("no chain")?
                        .iter()
                        .filter_map(|m| m.as_str().map(str::to_string))
                        .collect(),
                    version: s["version"].as_u64().unwrap_or(0),
                })
            })
            .collect()
    }

    /// Waits until no chain in etcd has node `id`; how long that took.
    pub fn wait_out_of_chains(&self, id: &str) -> Duration {
        self.wait_one_out_of_chains(&[id]).1
    }

    /// Waits until no chain in etcd has one of nodes `ids`; which one, and how long that took.
    pub fn wait_one_out_of_chains(&self, ids: &[&str]) -> (String, Duration) {
        let start = Instant::now();
        let out = Mutex::new(String::new());
        wait_until(
            &format!("one of {ids:?} taken out of every chain"),
            || self.logs(),
            || {
                let chains = self.chains()?;
                let gone = ids
                    .iter()
                    .find(|id| !chains.iter().any(|c| c.members.iter().any(|m| m == *id)));
                match gone {
                    Some(id) => {
                        *out.lock().unwrap() = id.to_string();
                        Ok(())
                    }
                    None => Err(format!("each of {ids:?} is still in a chain: {chains:?}")),
                }
            },
        );
        (out.into_inner().unwrap(), start.elapsed())
    }
}
