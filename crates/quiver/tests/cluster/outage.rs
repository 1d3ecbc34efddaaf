//! etcd is the cluster's configuration, not its data path: while it is down every node keeps
//! serving the ranges of its last topology (also after a restart, from its `CLUSTER` file), and
//! once it is back the nodes reconnect and follow new epochs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use quiver_client::Error;
use quiver_store::slot::key_slot;
use quiver_testkit::wait_until;

use crate::harness::{cluster_client, Cluster};
use crate::slots::parse_moved;

/// Failures of the load kept for the report (all are counted).
const FAILURES_KEPT: usize = 20;
/// Keys per MGET when the acknowledged writes are read back.
const VERIFY_BATCH: usize = 500;
/// Operations the load must complete in each phase (before, during and after the outage):
/// a count, so the test waits for work done, never for a time.
const PHASE_OPS: usize = 300;

/// What the load thread did.
#[derive(Default)]
struct LoadReport {
    /// Writes acknowledged, in order.
    acked: Vec<(String, String)>,
    failures: Vec<String>,
    failed: usize,
}

impl LoadReport {
    fn fail(&mut self, what: String) {
        self.failed += 1;
        if self.failures.len() < FAILURES_KEPT {
            self.failures.push(what);
        }
    }
}

/// A thread writing new keys and reading back earlier ones through a cluster client until
/// told to stop; `ops` counts its iterations.
struct Load {
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicUsize>,
    thread: JoinHandle<LoadReport>,
}

impl Load {
    fn start(seed: String) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicUsize::new(0));
        let (s, o) = (stop.clone(), ops.clone());
        let thread = std::thread::spawn(move || {
            let mut client = cluster_client(&[seed]);
            let mut report = LoadReport::default();
            let mut i = 0usize;
            while !s.load(Ordering::SeqCst) {
                let (key, value) = (format!("load:{i}"), format!("value-{i}"));
                match client.set(&key, &value) {
                    Ok(()) => report.acked.push((key, value)),
                    Err(e) => report.fail(format!("SET {key}: {e}")),
                }
                // An earlier acknowledged write, spread over the whole history.
                if !report.acked.is_empty() {
                    let (k, v) = report.acked[i.wrapping_mul(7919) % report.acked.len()].clone();
                    match client.get(&k) {
                        Ok(Some(got)) if got == v.as_bytes() => {}
                        other => report.fail(format!("GET {k}: {other:?}, wanted {v}")),
                    }
                }
                i += 1;
                o.store(i, Ordering::SeqCst);
            }
            report
        });
        Load { stop, ops, thread }
    }

    /// Waits until the load has done `more` operations beyond what it has done now.
    fn wait_progress(&self, cluster: &Cluster, more: usize, what: &str) {
        let target = self.ops.load(Ordering::SeqCst) + more;
        wait_until(
            &format!("{more} operations {what}"),
            || cluster.logs(),
            || {
                let done = self.ops.load(Ordering::SeqCst);
                if done >= target {
                    Ok(())
                } else if self.thread.is_finished() {
                    Err("the load thread ended".into())
                } else {
                    Err(format!("{done} of {target}"))
                }
            },
        );
    }

    fn finish(self) -> LoadReport {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the load thread")
    }
}

/// Every acknowledged write reads back, with multigets: one MGET of many slots per owner.
fn verify(cluster: &Cluster, acked: &[(String, String)]) {
    let mut client = cluster.client();
    for chunk in acked.chunks(VERIFY_BATCH) {
        let keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
        let values = client
            .multi_get(&keys)
            .unwrap_or_else(|e| panic!("MGET: {e}\n{}", cluster.logs()));
        for ((k, v), got) in chunk.iter().zip(&values) {
            assert_eq!(got.as_deref(), Some(v.as_bytes()), "{k}");
        }
    }
}

#[test]
fn etcd_restart_under_load() {
    let mut cluster = Cluster::start(3);
    // The node the cluster grows by once etcd is back, registered before the outage.
    let fourth = cluster.start_node("node-4");
    let load = Load::start(cluster.nodes[0].addr());
    load.wait_progress(&cluster, PHASE_OPS, "before the outage");

    cluster.etcd.stop();
    cluster.wait_all("every node sees etcd gone", "quiver_etcd_connected:0");
    load.wait_progress(&cluster, PHASE_OPS, "with etcd down");
    cluster.etcd.restart();
    cluster.wait_all("every node back on etcd", "quiver_etcd_connected:1");
    load.wait_progress(&cluster, PHASE_OPS, "after the outage");

    let report = load.finish();
    assert!(
        report.failed == 0,
        "{} commands failed, the first: {:#?}\n{}",
        report.failed,
        report.failures,
        cluster.logs()
    );
    assert!(report.acked.len() >= 3 * PHASE_OPS);
    verify(&cluster, &report.acked);

    // etcd's changes reach every node again: node-4 joins at epoch 2.
    cluster.quiver_ok(&["add-node", "--node", &cluster.nodes[fourth].id]);
    cluster.wait_all("every node sees node-4", "cluster_known_nodes:4");
    cluster.wait_all("every node at the new epoch", "cluster_current_epoch:2");
}

#[test]
fn node_restart_without_etcd() {
    let mut cluster = Cluster::start(3);
    let mut client = cluster.client();
    let pairs: Vec<(String, String)> = (0..300)
        .map(|i| (format!("restart:{i}"), format!("value-{i}")))
        .collect();
    for (k, v) in &pairs {
        client.set(k, v).unwrap();
    }
    let owner = |k: &str| {
        client
            .slot_owner(key_slot(k.as_bytes()))
            .unwrap()
            .to_string()
    };

    cluster.etcd.stop();
    cluster.wait_all("every node sees etcd gone", "quiver_etcd_connected:0");
    let node = &mut cluster.nodes[1];
    node.kill9();
    node.restart();

    // It serves its slots from its last topology: its keys are there, the others MOVED.
    let node = &cluster.nodes[1];
    let mut c = node.conn();
    let (mine, others): (Vec<_>, Vec<_>) = pairs.iter().partition(|(k, _)| owner(k) == node.addr());
    assert!(!mine.is_empty() && !others.is_empty());
    for (k, v) in &mine {
        assert_eq!(c.get(k).unwrap().as_deref(), Some(v.as_bytes()), "{k}");
    }
    for (k, _) in &others {
        let reply = c.command(&[b"GET", k.as_bytes()]);
        let Err(Error::Server(text)) = reply else {
            panic!("GET {k} on {}: {reply:?}", node.id)
        };
        let (slot, addr) = parse_moved(&text).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(slot, key_slot(k.as_bytes()), "{k}");
        assert_eq!(addr, owner(k), "{k}");
    }
    for line in [
        "cluster_state:ok",
        "cluster_current_epoch:1",
        "cluster_known_nodes:3",
        "quiver_etcd_connected:0",
    ] {
        node.info_has(line).unwrap();
    }
    // The whole cluster serves every key meanwhile.
    let mut fresh = cluster.client();
    for (k, v) in &pairs {
        assert_eq!(fresh.get(k).unwrap().as_deref(), Some(v.as_bytes()), "{k}");
    }

    cluster.etcd.restart();
    let node = &cluster.nodes[1];
    wait_until(
        "the restarted node back on etcd",
        || cluster.logs(),
        || node.info_has("quiver_etcd_connected:1"),
    );
    node.info_has("cluster_current_epoch:1").unwrap();
}
