//! The cluster's metadata in etcd (v3 API, the `etcd-client` crate):
//!
//! ```text
//! {prefix}/topology      the Topology document (JSON); its epoch orders versions
//! {prefix}/nodes/{id}    a node's registration: {"id", "addr", "run"}, written by the node at start
//! {prefix}/alive/{id}    the same, under the node's lease: present while the node lives
//! {prefix}/suspects/{id} the successors node `id` cannot reach (a JSON list of ids), under
//!                        its lease: present while it has some
//! {prefix}/manager/...   the managers' election (etcd's election API, under their leases)
//! ```
//!
//! A node holds a lease ([`Meta::grant`], renewed by [`Meta::keep`]) and puts its `alive`
//! key under it: when the node dies or stalls past the lease's TTL, etcd deletes the key, and
//! the elected manager repairs the chains the node was in (`manager`). Such a repair is
//! written only if what it was computed from still holds: the node's key still absent (or
//! still at the revision that showed another run), compared in the same transaction
//! ([`LeaseCheck`]).
//!
//! Every change of the topology is one transaction that compares the document's etcd
//! revision with the one it was computed from and writes the next epoch ([`Meta::update`]):
//! two changes computed from the same version cannot both apply. Consensus is etcd's; Quiver
//! has none of its own.
//!
//! Each unary request is bounded by [`REQUEST_TIMEOUT`]; a watch has no deadline (it lives as
//! long as the node) and notices a dead etcd by HTTP/2 keep-alive pings.

use std::future::Future;
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, Txn, TxnOp,
    WatchOptions, WatchStream,
};

use crate::topology::{Node, Topology, TopologyError};

/// Bound on one request to etcd (connecting included).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Keep-alive ping interval and timeout of the connection to etcd: how soon a watch notices
/// that etcd is gone.
pub const KEEPALIVE: Duration = Duration::from_secs(2);
/// Attempts of a read-modify-write of the topology before giving up (each lost a race).
pub const UPDATE_ATTEMPTS_MAX: usize = 16;
/// Prefix of the keys of a cluster unless told otherwise.
pub const DEFAULT_PREFIX: &str = "/quiver";

#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("etcd at {endpoints}: {what}: {source}")]
    Etcd {
        endpoints: String,
        what: &'static str,
        source: etcd_client::Error,
    },
    #[error("etcd at {endpoints}: {what}: no answer within {timeout:?}")]
    Timeout {
        endpoints: String,
        what: &'static str,
        timeout: Duration,
    },
    #[error("no cluster under {prefix} in etcd at {endpoints} (create one with `quiver cluster create`)")]
    NoCluster { endpoints: String, prefix: String },
    #[error("a cluster already exists under {prefix} (epoch {epoch})")]
    Exists { prefix: String, epoch: u64 },
    #[error("the topology changed {UPDATE_ATTEMPTS_MAX} times while this change was computed: try again")]
    Contended,
    #[error("{key} in etcd: {source}")]
    Document { key: String, source: TopologyError },
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("etcd at {endpoints}: lease {id:x} expired (it was not renewed in time)")]
    LeaseExpired { endpoints: String, id: i64 },
    #[error("etcd at {endpoints}: the lease renewals ended")]
    LeaseEnded { endpoints: String },
}

/// A lease granted by etcd: keys put under it vanish when it is not renewed within `ttl`.
#[derive(Clone, Copy, Debug)]
pub struct Lease {
    pub id: i64,
    pub ttl: Duration,
}

/// Shortest lease etcd grants (with its default election timeout it rounds shorter ones up).
pub const LEASE_TTL_MIN: Duration = Duration::from_secs(2);

/// A condition on a node's lease under which a change of the topology was computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseCheck {
    /// The node's `alive` key is absent: its lease expired.
    Gone(String),
    /// The node's `alive` key is the one read at `revision` (the same run).
    Unchanged { id: String, revision: i64 },
}

/// A node holding a lease: its registration, the revision of its `alive` key and the lease
/// it is under.
#[derive(Clone, Debug)]
pub struct Alive {
    pub node: Node,
    pub revision: i64,
    pub lease: i64,
}

/// A node's report of the successors it cannot reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub reporter: String,
    pub suspects: Vec<String>,
}

/// What a registration or an `alive` key holds, for [`Meta::records_under`]'s errors.
const NODE_RECORD: &str = "a node's record";

/// A key under a prefix, as [`Meta::records_under`] reads it.
struct Record<T> {
    /// The key after the prefix (a node's id).
    name: String,
    value: T,
    revision: i64,
    /// 0: none.
    lease: i64,
}

/// One renewal of a lease (see [`Meta::keep`]).
#[derive(Clone, Copy, Debug)]
pub struct Renewal {
    /// When the renewal was sent: the lease holds for `ttl` from then.
    pub sent: Instant,
    pub ttl: Duration,
    /// The etcd revision of the topology read after the renewal was answered (0: none).
    pub topology_revision: i64,
}

pub type Result<T> = std::result::Result<T, MetaError>;

/// A topology and the etcd revision it was read at (what a change compares against).
#[derive(Clone, Debug)]
pub struct Versioned {
    pub topology: Topology,
    pub revision: i64,
}

/// Where a cluster lives in etcd: what every node, router and manager connects to.
#[derive(Clone, Debug)]
pub struct EtcdSettings {
    /// Comma-separated URLs (`http://host:port`).
    pub endpoints: String,
    /// The prefix of the cluster's keys ([`DEFAULT_PREFIX`] unless told).
    pub prefix: String,
}

impl EtcdSettings {
    /// A connection to the cluster's metadata ([`Meta::connect`]).
    pub async fn connect(&self) -> Result<Meta> {
        Meta::connect(&self.endpoints, &self.prefix).await
    }
}

/// A connection to the cluster's metadata.
#[derive(Clone)]
pub struct Meta {
    client: Client,
    endpoints: String,
    prefix: String,
}

impl Meta {
    /// Connects to etcd at `endpoints` (comma-separated URLs, `http://host:port`); the
    /// cluster's keys live under `prefix`.
    pub async fn connect(endpoints: &str, prefix: &str) -> Result<Meta> {
        let list: Vec<&str> = endpoints
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        let options = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(KEEPALIVE, KEEPALIVE)
            .with_keep_alive_while_idle(true);
        let what = "connect";
        let client = bounded(endpoints, what, Client::connect(list, Some(options))).await?;
        Ok(Meta {
            client,
            endpoints: endpoints.to_string(),
            prefix: prefix.trim_end_matches('/').to_string(),
        })
    }

    pub fn endpoints(&self) -> &str {
        &self.endpoints
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn topology_key(&self) -> String {
        format!("{}/topology", self.prefix)
    }

    fn nodes_prefix(&self) -> String {
        format!("{}/nodes/", self.prefix)
    }

    fn alive_prefix(&self) -> String {
        format!("{}/alive/", self.prefix)
    }

    fn suspects_prefix(&self) -> String {
        format!("{}/suspects/", self.prefix)
    }

    fn election(&self) -> String {
        format!("{}/manager", self.prefix)
    }

    /// The current topology, or `None` before `quiver cluster create`.
    pub async fn topology(&self) -> Result<Option<Versioned>> {
        let key = self.topology_key();
        let mut kv = self.client.kv_client();
        let resp = bounded(
            &self.endpoints,
            "read the topology",
            kv.get(key.clone(), None),
        )
        .await?;
        let Some(item) = resp.kvs().first() else {
            return Ok(None);
        };
        let topology = Topology::from_json(item.value())
            .map_err(|source| MetaError::Document { key, source })?;
        Ok(Some(Versioned {
            topology,
            revision: item.mod_revision(),
        }))
    }

    /// [`Meta::topology`], or [`MetaError::NoCluster`].
    pub async fn existing(&self) -> Result<Versioned> {
        self.topology().await?.ok_or_else(|| MetaError::NoCluster {
            endpoints: self.endpoints.clone(),
            prefix: self.prefix.clone(),
        })
    }

    /// Writes the first topology; refused when one exists.
    pub async fn create(&self, topology: &Topology) -> Result<()> {
        let key = self.topology_key();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, topology.to_json(), None)]);
        let mut kv = self.client.kv_client();
        let resp = bounded(&self.endpoints, "create the topology", kv.txn(txn)).await?;
        if resp.succeeded() {
            return Ok(());
        }
        let epoch = self.topology().await?.map_or(0, |v| v.topology.epoch);
        Err(MetaError::Exists {
            prefix: self.prefix.clone(),
            epoch,
        })
    }

    /// Replaces the topology read at `expected` with `next` (whose epoch must be the next
    /// one): true when it applied, false when another change came first.
    pub async fn replace(&self, expected: &Versioned, next: &Topology) -> Result<bool> {
        self.replace_checked(expected, next, &[]).await
    }

    /// [`Meta::replace`], applied only if every one of `checks` holds too (in the same
    /// transaction): false when one does not.
    pub async fn replace_checked(
        &self,
        expected: &Versioned,
        next: &Topology,
        checks: &[LeaseCheck],
    ) -> Result<bool> {
        if next.epoch != expected.topology.epoch + 1 {
            return Err(TopologyError::Invalid(format!(
                "epoch {} does not follow {}",
                next.epoch, expected.topology.epoch
            ))
            .into());
        }
        next.validate()?;
        let key = self.topology_key();
        let mut when = vec![Compare::mod_revision(
            key.clone(),
            CompareOp::Equal,
            expected.revision,
        )];
        for check in checks {
            when.push(match check {
                LeaseCheck::Gone(id) => {
                    Compare::version(format!("{}{id}", self.alive_prefix()), CompareOp::Equal, 0)
                }
                LeaseCheck::Unchanged { id, revision } => Compare::mod_revision(
                    format!("{}{id}", self.alive_prefix()),
                    CompareOp::Equal,
                    *revision,
                ),
            });
        }
        let txn = Txn::new()
            .when(when)
            .and_then([TxnOp::put(key, next.to_json(), None)]);
        let mut kv = self.client.kv_client();
        let resp = bounded(&self.endpoints, "change the topology", kv.txn(txn)).await?;
        Ok(resp.succeeded())
    }

    /// A read-modify-write of the topology: `change` computes the next version from the
    /// current one (or refuses), retried on a lost race at most [`UPDATE_ATTEMPTS_MAX`] times.
    /// Returns the version written.
    pub async fn update<F>(&self, mut change: F) -> Result<Topology>
    where
        F: FnMut(&Topology) -> std::result::Result<Topology, TopologyError>,
    {
        for _ in 0..UPDATE_ATTEMPTS_MAX {
            let current = self.existing().await?;
            let next = change(&current.topology)?;
            if self.replace(&current, &next).await? {
                return Ok(next);
            }
        }
        Err(MetaError::Contended)
    }

    /// Records `node` as started and reachable at its address (`quiver cluster create` and
    /// `add-node` take members from these).
    pub async fn register(&self, node: &Node) -> Result<()> {
        let key = format!("{}{}", self.nodes_prefix(), node.id);
        // A struct of two strings always serializes.
        let value = serde_json::to_vec(node).unwrap_or_default();
        let mut kv = self.client.kv_client();
        bounded(
            &self.endpoints,
            "register the node",
            kv.put(key, value, None),
        )
        .await?;
        Ok(())
    }

    /// A lease of `ttl` (at least [`LEASE_TTL_MIN`], whole seconds).
    pub async fn grant(&self, ttl: Duration) -> Result<Lease> {
        let secs = ttl.max(LEASE_TTL_MIN).as_secs_f64().ceil() as i64;
        let mut leases = self.client.lease_client();
        let resp = bounded(&self.endpoints, "grant a lease", leases.grant(secs, None)).await?;
        Ok(Lease {
            id: resp.id(),
            ttl: Duration::from_secs(resp.ttl().max(1) as u64),
        })
    }

    /// Renews `lease` every third of its TTL until a renewal fails (etcd unreachable, or the
    /// lease expired meanwhile); after each, `renewed` with the [`Renewal`]: the lease holds
    /// at least until `sent + ttl` (`sent`: when the renewal's request went out). Returns why
    /// it stopped.
    ///
    /// Each round also reads the topology's revision after the renewal's answer: a node
    /// counts on a renewal only if it has seen that version (`agent`), so that a change of
    /// the topology written at time t is seen, or the node's lease lapses, by t + TTL.
    pub async fn keep(&self, lease: Lease, mut renewed: impl FnMut(Renewal)) -> MetaError {
        let mut leases = self.client.lease_client();
        let what = "renew a lease";
        let (mut keeper, mut answers) =
            match bounded(&self.endpoints, what, leases.keep_alive(lease.id)).await {
                Ok(k) => k,
                Err(e) => return e,
            };
        let mut tick = tokio::time::interval(lease.ttl / 3);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let sent = Instant::now();
            let round = async {
                keeper.keep_alive().await?;
                answers.message().await
            };
            match bounded(&self.endpoints, what, round).await {
                Ok(Some(answer)) if answer.ttl() > 0 => {
                    let topology_revision = match self.topology_revision().await {
                        Ok(r) => r,
                        Err(e) => return e,
                    };
                    renewed(Renewal {
                        sent,
                        ttl: Duration::from_secs(answer.ttl() as u64),
                        topology_revision,
                    })
                }
                Ok(Some(_)) => {
                    return MetaError::LeaseExpired {
                        endpoints: self.endpoints.clone(),
                        id: lease.id,
                    }
                }
                Ok(None) => {
                    return MetaError::LeaseEnded {
                        endpoints: self.endpoints.clone(),
                    }
                }
                Err(e) => return e,
            }
        }
    }

    /// The etcd revision of the topology's last version (0: none), without reading it.
    pub async fn topology_revision(&self) -> Result<i64> {
        let mut kv = self.client.kv_client();
        let get = kv.get(
            self.topology_key(),
            Some(GetOptions::new().with_keys_only()),
        );
        let resp = bounded(&self.endpoints, "read the topology's revision", get).await?;
        Ok(resp.kvs().first().map_or(0, |kv| kv.mod_revision()))
    }

    /// The TTL lease `id` was granted with; `None` once it expired.
    pub async fn lease_ttl(&self, id: i64) -> Result<Option<Duration>> {
        let mut leases = self.client.lease_client();
        let resp = bounded(
            &self.endpoints,
            "read a lease's TTL",
            leases.time_to_live(id, None),
        )
        .await?;
        Ok((resp.ttl() > 0).then(|| Duration::from_secs(resp.granted_ttl().max(1) as u64)))
    }

    /// Puts node `id`'s report of the successors it cannot reach under `lease`, or deletes
    /// it when `suspects` is empty.
    pub async fn report_suspects(&self, id: &str, suspects: &[String], lease: Lease) -> Result<()> {
        let key = format!("{}{id}", self.suspects_prefix());
        let mut kv = self.client.kv_client();
        let what = "report unreachable successors";
        if suspects.is_empty() {
            bounded(&self.endpoints, what, kv.delete(key, None)).await?;
        } else {
            // A list of strings always serializes.
            let value = serde_json::to_vec(suspects).unwrap_or_default();
            let put = kv.put(key, value, Some(PutOptions::new().with_lease(lease.id)));
            bounded(&self.endpoints, what, put).await?;
        }
        Ok(())
    }

    /// Every node's report of successors it cannot reach, in reporter order.
    pub async fn suspects(&self) -> Result<Vec<Report>> {
        let what = "list the reports of suspects";
        let records = self
            .records_under::<Vec<String>>(self.suspects_prefix(), what, "a list of node ids")
            .await?;
        Ok(records
            .into_iter()
            .map(|r| Report {
                reporter: r.name,
                suspects: r.value,
            })
            .collect())
    }

    /// Puts `node`'s `alive` key under `lease` (it says the node lives, at its run).
    pub async fn announce(&self, node: &Node, lease: Lease) -> Result<()> {
        let key = format!("{}{}", self.alive_prefix(), node.id);
        // A struct of strings and an integer always serializes.
        let value = serde_json::to_vec(node).unwrap_or_default();
        let mut kv = self.client.kv_client();
        let put = kv.put(key, value, Some(PutOptions::new().with_lease(lease.id)));
        bounded(&self.endpoints, "announce the node", put).await?;
        Ok(())
    }

    /// Every node holding a lease now, in id order.
    pub async fn alive(&self) -> Result<Vec<Alive>> {
        let what = "list the live nodes";
        let records = self
            .records_under::<Node>(self.alive_prefix(), what, NODE_RECORD)
            .await?;
        Ok(records
            .into_iter()
            .map(|r| Alive {
                node: r.value,
                revision: r.revision,
                lease: r.lease,
            })
            .collect())
    }

    /// Every key under `prefix` in key order (by id), its value read as JSON `T` (`kind`
    /// names it in the error of one that is not).
    async fn records_under<T: serde::de::DeserializeOwned>(
        &self,
        prefix: String,
        what: &'static str,
        kind: &str,
    ) -> Result<Vec<Record<T>>> {
        let mut kv = self.client.kv_client();
        let get = kv.get(prefix.clone(), Some(GetOptions::new().with_prefix()));
        let resp = bounded(&self.endpoints, what, get).await?;
        let mut records = Vec::with_capacity(resp.kvs().len());
        for item in resp.kvs() {
            let key = String::from_utf8_lossy(item.key()).into_owned();
            let value = serde_json::from_slice(item.value()).map_err(|e| MetaError::Document {
                key: key.clone(),
                source: TopologyError::Invalid(format!("not {kind}: {e}")),
            })?;
            records.push(Record {
                name: key.strip_prefix(&prefix).unwrap_or(&key).to_string(),
                value,
                revision: item.mod_revision(),
                lease: item.lease(),
            });
        }
        Ok(records)
    }

    /// Waits until `name` is elected the cluster's manager (etcd's election: the first
    /// candidate under `lease` wins; the next when the leader's lease ends). No deadline: a
    /// candidate waits as long as the leader lives.
    pub async fn campaign(&self, name: &str, lease: Lease) -> Result<()> {
        let mut election = self.client.election_client();
        election
            .campaign(self.election(), name, lease.id)
            .await
            .map_err(|source| MetaError::Etcd {
                endpoints: self.endpoints.clone(),
                what: "campaign to manage the cluster",
                source,
            })?;
        Ok(())
    }

    /// The elected manager's name, if one is elected.
    pub async fn manager(&self) -> Result<Option<String>> {
        let mut election = self.client.election_client();
        let leader = bounded(
            &self.endpoints,
            "ask for the manager",
            election.leader(self.election()),
        )
        .await;
        match leader {
            Ok(resp) => Ok(resp
                .kv()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())),
            // etcd answers "election: no leader" as an error.
            Err(MetaError::Etcd { source, .. }) if source.to_string().contains("no leader") => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Every node that has registered, in id order.
    pub async fn registered(&self) -> Result<Vec<Node>> {
        let records = self
            .records_under::<Node>(self.nodes_prefix(), "list the nodes", NODE_RECORD)
            .await?;
        Ok(records.into_iter().map(|r| r.value).collect())
    }

    /// Every version of the topology written after revision `after` (from now on without
    /// one), in order.
    pub async fn watch(&self, after: Option<i64>) -> Result<TopologyWatch> {
        let key = self.topology_key();
        let mut watch = self.client.watch_client();
        let options = match after {
            Some(rev) => WatchOptions::new().with_start_revision(rev + 1),
            None => WatchOptions::new(),
        };
        let stream = bounded(
            &self.endpoints,
            "watch the topology",
            watch.watch(key.clone(), Some(options)),
        )
        .await?;
        Ok(TopologyWatch {
            stream,
            key,
            endpoints: self.endpoints.clone(),
        })
    }
}

/// The versions of the topology as etcd commits them.
pub struct TopologyWatch {
    stream: WatchStream,
    key: String,
    endpoints: String,
}

impl TopologyWatch {
    /// The next version written (the latest of a batch of events), or `None` when the watch
    /// ended (etcd went away or cancelled it: read the topology again and watch anew).
    pub async fn next(&mut self) -> Result<Option<Versioned>> {
        loop {
            let resp = self
                .stream
                .message()
                .await
                .map_err(|source| MetaError::Etcd {
                    endpoints: self.endpoints.clone(),
                    what: "watch the topology",
                    source,
                })?;
            let Some(resp) = resp else { return Ok(None) };
            if resp.canceled() {
                return Ok(None);
            }
            let latest = resp
                .events()
                .iter()
                .rev()
                .find(|e| e.event_type() == EventType::Put)
                .and_then(|e| e.kv());
            if let Some(kv) = latest {
                let topology =
                    Topology::from_json(kv.value()).map_err(|source| MetaError::Document {
                        key: self.key.clone(),
                        source,
                    })?;
                return Ok(Some(Versioned {
                    topology,
                    revision: kv.mod_revision(),
                }));
            }
        }
    }
}

/// `request`, bounded by [`REQUEST_TIMEOUT`], its error named.
async fn bounded<T>(
    endpoints: &str,
    what: &'static str,
    request: impl Future<Output = std::result::Result<T, etcd_client::Error>>,
) -> Result<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(MetaError::Etcd {
            endpoints: endpoints.to_string(),
            what,
            source,
        }),
        Err(_) => Err(MetaError::Timeout {
            endpoints: endpoints.to_string(),
            what,
            timeout: REQUEST_TIMEOUT,
        }),
    }
}
