//! A network partition between two nodes that both still reach etcd (their leases hold:
//! only the nodes see it). Each node runs in a cgroup of its own, made by the test, and
//! `iptables` rules on loopback (`-m cgroup --path`) drop every packet one node sends to the
//! other's port — both ways — while clients and etcd reach both. The test sets the rules up
//! and deletes them, and removes its cgroups.
//!
//! While clients record a history, node-1 and node-2 are cut apart: node-1 precedes node-2
//! in two chains, cannot reach it, and reports it; the manager expels node-2, waits until it
//! surely stopped serving (a lease TTL), and takes it out of its chains; node-2 is readmitted
//! and joins back, as tail, where its predecessor reaches it, and everywhere once the
//! partition heals. The history — READONLY reads from node-2 included — must be
//! linearizable, and writes acknowledged while the partition lasts.
//!
//! Needs root, `iptables` (installed by scripts/test_deps.sh) and a cgroup v2 hierarchy;
//! without them the test says so and passes without running.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use quiver_testkit::process::run;
use quiver_testkit::{wait_until, WAIT};

use crate::failover::{acknowledged_writes_after, key_space, record_keys, Extra, RECORD_FOR};
use crate::harness::{Cluster, Placement};

/// How long the partition stays after node-2 is out of its chains (it rejoins, as tail,
/// where the link works).
const CUT_AFTER_OUT: Duration = Duration::from_secs(2);
/// Bound on the capability check's connection attempt, in seconds (`timeout`'s argument).
const PROBE_CONNECT_S: &str = "2";

/// This test's cgroups (under the cgroup v2 root) and iptables rules; removed on drop.
pub struct Netfilter {
    iptables: PathBuf,
    /// The cgroup v2 hierarchy's mount point.
    root: PathBuf,
    /// `root/quiver-test-PID`: the test's cgroups are made in it.
    base: PathBuf,
    /// Rules added (each an iptables rule's specification), deleted on heal.
    rules: Mutex<Vec<Vec<String>>>,
}

impl Netfilter {
    /// `None` (with a message) where the partition cannot be made.
    pub fn new() -> Option<Netfilter> {
        let skip = |why: &str| {
            eprintln!("SKIPPED partition test: {why}");
            None
        };
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return skip("iptables and cgroups need root");
        }
        let Some(iptables) = quiver_testkit::tool::find("iptables") else {
            return skip("iptables is not installed (scripts/test_deps.sh installs it)");
        };
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let Some(root) = mounts
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.len() > 2 && f[2] == "cgroup2")
            .map(|f| PathBuf::from(f[1]))
        else {
            return skip("no cgroup v2 hierarchy is mounted");
        };
        let base = root.join(format!("quiver-test-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir_all(&base) {
            return skip(&format!("cannot make a cgroup in {}: {e}", root.display()));
        }
        let net = Netfilter {
            iptables,
            root,
            base,
            rules: Mutex::new(Vec::new()),
        };
        match net.check() {
            Ok(()) => Some(net),
            Err(why) => skip(&why),
        }
    }

    /// Node `id`'s cgroup (made on first use).
    pub fn cgroup(&self, id: &str) -> PathBuf {
        let dir = self.base.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Drops what a process of cgroup `from` sends to loopback port `port`.
    fn drop_from(&self, from: &Path, port: u16) -> Result<(), String> {
        let path = from.strip_prefix(&self.root).unwrap().display().to_string();
        let spec: Vec<String> = [
            "OUTPUT",
            "-p",
            "tcp",
            "-d",
            "127.0.0.1",
            "--dport",
            &port.to_string(),
            "-m",
            "cgroup",
            "--path",
            &path,
            "-j",
            "DROP",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        self.iptables("-I", &spec)?;
        self.rules.lock().unwrap().push(spec);
        Ok(())
    }

    /// Cuts nodes `a` and `b` (cgroup, port) apart, both ways.
    pub fn cut(&self, a: (&Path, u16), b: (&Path, u16)) {
        self.drop_from(a.0, b.1).unwrap();
        self.drop_from(b.0, a.1).unwrap();
    }

    /// Deletes every rule added.
    pub fn heal(&self) {
        let rules = std::mem::take(&mut *self.rules.lock().unwrap());
        for spec in rules {
            if let Err(e) = self.iptables("-D", &spec) {
                eprintln!("partition: deleting a rule: {e}");
            }
        }
    }

    fn iptables(&self, op: &str, spec: &[String]) -> Result<(), String> {
        let (status, _, err) = run(
            Command::new(&self.iptables).args(["-w", op]).args(spec),
            "iptables",
            WAIT,
        );
        status
            .success()
            .then_some(())
            .ok_or_else(|| format!("iptables {op} {}: {status}: {err}", spec.join(" ")))
    }

    /// Whether a rule made here stops a connection from a process in a cgroup of ours (the
    /// kernel may lack the cgroup match, or resolve paths elsewhere).
    fn check(&self) -> Result<(), String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let cgroup = self.cgroup("check");
        self.drop_from(&cgroup, port)?;
        let connect = format!(
            "echo $$ > \"$0/cgroup.procs\" && exec timeout {PROBE_CONNECT_S} bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'"
        );
        let (status, _, _) = run(
            Command::new("bash").arg("-c").arg(connect).arg(&cgroup),
            "a connection from a cgroup",
            WAIT,
        );
        self.heal();
        let _ = std::fs::remove_dir(&cgroup);
        if status.success() {
            return Err("an iptables rule with -m cgroup does not stop connections here".into());
        }
        Ok(())
    }
}

impl Drop for Netfilter {
    fn drop(&mut self) {
        self.heal();
        // The processes are gone (the cluster is dropped first): the cgroups are empty.
        if let Ok(dirs) = std::fs::read_dir(&self.base) {
            for d in dirs.flatten() {
                let _ = std::fs::remove_dir(d.path());
            }
        }
        let _ = std::fs::remove_dir(&self.base);
    }
}

/// node-1 and node-2 cut apart under the recorded load: node-2 is expelled, out of its
/// chains a lease TTL later, readmitted and rejoining where it can; once the partition
/// heals, every chain is whole again. Nothing acknowledged is lost, nothing stale is read.
#[test]
fn a_partition_between_nodes_expels_one_and_loses_nothing() {
    let Some(net) = Netfilter::new() else {
        return;
    };
    let cgroups = [net.cgroup("node-1"), net.cgroup("node-2")];
    let mut cluster = Cluster::start_failover_placed(3, 3, 2, |id, url| Placement {
        etcd: Some(url.to_string()),
        cgroup: match id {
            "node-1" => Some(cgroups[0].clone()),
            "node-2" => Some(cgroups[1].clone()),
            _ => None,
        },
    });
    // READONLY clients read from node-2 as a replica all along: it must not answer from a
    // copy its chains moved past.
    let cut_off = cluster.nodes[1].addr();
    let (recorder, (out, healed_after, out_at)) = record_keys(
        &mut cluster,
        "partition_nodes",
        key_space(),
        RECORD_FOR,
        Some((Extra::ReplicaReads(&cut_off), 2)),
        |cluster, recorder| {
            let ports = (cluster.nodes[0].port, cluster.nodes[1].port);
            let cut = Instant::now();
            net.cut((&cgroups[0], ports.0), (&cgroups[1], ports.1));
            cluster.wait_out_of_chains("node-2");
            let out = cut.elapsed();
            let out_at = recorder.now();
            std::thread::sleep(CUT_AFTER_OUT);
            net.heal();
            let healed = cluster.wait_chains_full(3);
            (out, healed, out_at)
        },
    );
    eprintln!(
        "partition node-1 | node-2: node-2 out of its chains {out:?} after the cut; chains whole {healed_after:?} after the heal"
    );
    let expelled = cluster.managers.iter().any(|m| {
        m.log_text()
            .lines()
            .any(|l| l.contains("expelled a node") && l.contains("node-2"))
    });
    assert!(expelled, "no manager expelled node-2\n{}", cluster.logs());
    assert!(
        acknowledged_writes_after(&recorder, out_at) > 0,
        "no write acknowledged after node-2 left its chains\n{}",
        cluster.logs()
    );
    wait_until(
        "node-2 back at its run, reported by nobody",
        || cluster.logs(),
        || {
            let status = cluster.try_status()?;
            let nodes = status["nodes"].as_array().ok_or("no nodes")?;
            let ok = nodes.iter().all(|n| {
                n["alive"] == true
                    && n["expelled"] == false
                    && n["restarted"] == false
                    && n["unreachable_from"].as_array().is_some_and(Vec::is_empty)
            });
            ok.then_some(()).ok_or_else(|| format!("{status}"))
        },
    );
}
