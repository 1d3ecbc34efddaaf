//! The long run of the failover tests (ignored: run it by hand, write its counts in
//! docs/testing.md): a replicated cluster (chains of 3 on 3 nodes, 2-s leases, two managers)
//! through many fault cycles, each recorded and checked on keys of its own. The faults turn
//! through: kill -9 and restart of a node; SIGSTOP of a node past its lease, then SIGCONT; a
//! node cut off from etcd past its lease, then healed; kill -9 of the elected manager together
//! with kill -9 and restart of a node (the other manager repairs); a partition between the node
//! and the next (iptables on loopback, `partition`; where it cannot be made, a kill -9 and
//! restart instead), healed once one of the two is out. After each the faulted node must be
//! out of its chains, and every chain whole again (the node rejoined as tail) before the next
//! cycle.
//!
//! ```text
//! QUIVER_FAULT_CYCLES=200 cargo test --release -p quiver --test cluster -- --ignored \
//!     fault_cycles --nocapture
//! ```

use std::sync::Mutex;
use std::time::Duration;

use crate::failover::record_keys;
use crate::harness::{Cluster, Placement};
use crate::history::{Counts, KeySpace};
use crate::partition::Netfilter;
use crate::proxy::Proxy;

/// Cycles unless `QUIVER_FAULT_CYCLES` says otherwise.
const CYCLES_DEFAULT: usize = 200;
/// How long each cycle records (the fault comes after the failover module's warm-up).
const RECORD_FOR: Duration = Duration::from_secs(6);
/// How long a stopped or cut-off node stays so once it is out of its chains.
const OUT_FOR: Duration = Duration::from_millis(500);

#[test]
#[ignore = "long: 200 fault cycles, about half an hour; run by hand"]
fn fault_cycles() {
    let cycles: usize = std::env::var("QUIVER_FAULT_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CYCLES_DEFAULT);
    let net = Netfilter::new();
    let proxies: Mutex<Vec<(String, Proxy)>> = Mutex::new(Vec::new());
    let mut cluster = Cluster::start_failover_placed(3, 3, 2, |id, url| {
        let p = Proxy::start(url.trim_start_matches("http://"));
        let through = p.url();
        proxies.lock().unwrap().push((id.to_string(), p));
        Placement {
            etcd: Some(through),
            cgroup: net.as_ref().map(|net| net.cgroup(id)),
        }
    });
    let proxies = proxies.into_inner().unwrap();
    let mut total = Counts::default();
    let mut outs: Vec<Duration> = Vec::new();
    let mut rejoins: Vec<Duration> = Vec::new();
    for cycle in 0..cycles {
        let n = cycle % 3;
        let id = format!("node-{}", n + 1);
        let kind = match (cycle / 3) % 5 {
            4 if net.is_none() => 0,
            k => k,
        };
        let keys = KeySpace::new(&format!("cy{cycle}-"), 6, 2, 1);
        let name = format!("cycle{cycle}");
        let (recorder, (out, back)) =
            record_keys(&mut cluster, &name, keys, RECORD_FOR, None, |cluster, _| {
                // Stopped and cut-off nodes stay so until they are out of their chains (the
                // time it took is the failover's); a restarted one is out at once, and may be
                // back before a look at etcd could see it out.
                let out = match kind {
                    0 => {
                        cluster.nodes[n].kill9();
                        cluster.nodes[n].restart();
                        cluster.wait_readmitted(&id);
                        None
                    }
                    1 => {
                        cluster.nodes[n].pause(true);
                        let out = cluster.wait_out_of_chains(&id);
                        std::thread::sleep(OUT_FOR);
                        cluster.nodes[n].pause(false);
                        Some(out)
                    }
                    2 => {
                        let proxy = &proxies.iter().find(|(p, _)| *p == id).unwrap().1;
                        proxy.cut();
                        let out = cluster.wait_out_of_chains(&id);
                        std::thread::sleep(OUT_FOR);
                        proxy.heal();
                        Some(out)
                    }
                    4 => {
                        let net = net.as_ref().expect("kind 4 only with a partition");
                        let m = (n + 1) % 3;
                        let other = format!("node-{}", m + 1);
                        let (a, b) = (&cluster.nodes[n], &cluster.nodes[m]);
                        net.cut((&net.cgroup(&id), a.port), (&net.cgroup(&other), b.port));
                        let (gone, out) = cluster.wait_one_out_of_chains(&[&id, &other]);
                        eprintln!("cycle {cycle}: {id} | {other}: {gone} out");
                        std::thread::sleep(OUT_FOR);
                        net.heal();
                        Some(out)
                    }
                    _ => {
                        let elected = cluster.elected_manager().expect("a manager elected");
                        cluster.managers[elected].kill9();
                        cluster.nodes[n].kill9();
                        cluster.nodes[n].restart();
                        cluster.managers[elected].restart();
                        cluster.wait_readmitted(&id);
                        None
                    }
                };
                (out, cluster.wait_chains_full(3))
            });
        let counts = recorder.counts();
        total.ok += counts.ok;
        total.fail += counts.fail;
        total.unknown += counts.unknown;
        outs.extend(out);
        rejoins.push(back);
        eprintln!(
            "cycle {cycle}: fault {kind} on {id}: {counts:?}, out {out:?}, whole again {back:?}"
        );
    }
    outs.sort();
    rejoins.sort();
    let median = |v: &[Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
    eprintln!(
        "fault cycles: {cycles}, operations {total:?} ({} in all), every history linearizable; \
         out of the chains (median / max) {:?} / {:?}, chains whole again {:?} / {:?}",
        total.total(),
        median(&outs),
        outs.last().copied().unwrap_or_default(),
        median(&rejoins),
        rejoins.last().copied().unwrap_or_default(),
    );
}
