//! scripts/cluster.sh: `up` starts etcd, three nodes and a router that outlive it and prints
//! one JSON line saying where they are; `down` stops every one of them by PID.

use std::path::{Path, PathBuf};
use std::process::Command;

use quiver_store::slot::key_slot;
use quiver_testkit::process::{run, tail};
use quiver_testkit::{tool, WAIT};

use crate::harness::{cluster_client, connect, info_number, NODE_CONFIG};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/cluster.sh");

/// `scripts/cluster.sh ARGS...` to its end; its status, stdout and stderr.
fn cluster_sh(args: &[&str], dir: &Path) -> (std::process::ExitStatus, String, String) {
    run(
        Command::new("bash")
            .arg(SCRIPT)
            .args(args)
            .arg("--dir")
            .arg(dir),
        &format!("cluster.sh {}", args.join(" ")),
        // up waits for etcd, each node, the topology and the router, each bounded by the
        // script's own 60 s.
        WAIT * 5,
    )
}

/// Whether process `pid` is gone (a zombie, exited but not reaped yet by its new parent,
/// counts as gone).
fn gone(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// The cluster a test brought up: `down` (then SIGKILL by PID for anything left) if the test
/// did not get there.
struct Up {
    dir: PathBuf,
    pids: Vec<u64>,
    down: bool,
}

impl Drop for Up {
    fn drop(&mut self) {
        if self.down {
            return;
        }
        let _ = cluster_sh(&["down"], &self.dir);
        for &pid in &self.pids {
            if !gone(pid) {
                // SAFETY: kill(2) of a process this test started (through the script).
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

#[test]
fn scripts_cluster_sh() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let bin = env!("CARGO_BIN_EXE_quiver");
    // Every node with the harness's small disk reserve (the default 1 GiB each would be taken
    // on the test machine's disk).
    let node_config = tmp.path().join("node.toml");
    std::fs::write(&node_config, NODE_CONFIG).unwrap();
    let (status, out, err) = cluster_sh(
        &[
            "up",
            "--nodes",
            "3",
            "--bin",
            bin,
            "--node-config",
            node_config.to_str().unwrap(),
        ],
        &dir,
    );
    // Whatever happened, what the script recorded is stopped at the end.
    let recorded: serde_json::Value = std::fs::read(dir.join("cluster.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut pids: Vec<u64> = recorded["nodes"]
        .as_array()
        .map(|nodes| nodes.iter().filter_map(|n| n["pid"].as_u64()).collect())
        .unwrap_or_default();
    pids.extend(recorded["etcd_pid"].as_u64());
    pids.extend(recorded["router_pid"].as_u64());
    pids.extend(recorded["manager_pid"].as_u64());
    let mut up = Up {
        dir: dir.clone(),
        pids,
        down: false,
    };
    let logs = || {
        [
            "etcd.log",
            "node-1.log",
            "node-2.log",
            "node-3.log",
            "router.log",
            "manager.log",
        ]
        .iter()
        .map(|f| format!("--- {f}:\n{}\n", tail(&dir.join(f))))
        .collect::<String>()
    };
    assert!(
        status.success(),
        "cluster.sh up: {status}\n{err}\n{}",
        logs()
    );

    // One JSON line: etcd's URL, the three nodes, the router. The file says the same.
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let printed: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(printed, recorded, "the line and D/cluster.json");
    let router_port = printed["router"].as_u64().expect("the router's port");
    let router_pid = printed["router_pid"].as_u64().expect("the router's pid");
    assert!(!gone(router_pid), "{printed}");
    let manager_pid = printed["manager_pid"].as_u64().expect("the manager's pid");
    assert!(!gone(manager_pid), "{printed}");
    let etcd = printed["etcd"].as_str().unwrap();
    assert!(etcd.starts_with("http://127.0.0.1:"), "{printed}");
    let nodes = printed["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{printed}");
    let mut addrs = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n["id"], format!("node-{}", i + 1), "{printed}");
        assert!(n["pid"].as_u64().is_some_and(|p| !gone(p)), "{printed}");
        addrs.push(format!("127.0.0.1:{}", n["port"].as_u64().unwrap()));
    }
    assert_eq!(
        up.pids.len(),
        6,
        "three nodes, etcd, the manager and the router: {printed}"
    );

    // The processes outlived the script: the cluster serves.
    for addr in &addrs {
        let info = connect(addr)
            .unwrap()
            .command(&[b"CLUSTER", b"INFO"])
            .unwrap();
        let info = String::from_utf8_lossy(info.as_bytes().unwrap()).into_owned();
        assert!(info.contains("cluster_state:ok\r\n"), "{addr}: {info}");
        assert!(info.contains("cluster_known_nodes:3\r\n"), "{addr}: {info}");
        let reserve = connect(addr)
            .unwrap()
            .command(&[b"CONFIG", b"GET", b"disk-reserve"])
            .unwrap();
        let quiver_client::Value::Array(pair) = reserve else {
            panic!("{addr}: CONFIG GET disk-reserve: {reserve:?}");
        };
        assert_eq!(
            pair.get(1).and_then(|v| v.as_bytes()),
            Some((32u64 << 20).to_string().as_bytes()),
            "{addr}: the --node-config file's disk-reserve"
        );
    }
    let mut client = cluster_client(&addrs[..1]);
    for i in 0..50 {
        client.set(format!("sh:{i}"), format!("v{i}")).unwrap();
    }
    for i in 0..50 {
        let got = client.get(format!("sh:{i}")).unwrap();
        assert_eq!(got.as_deref(), Some(format!("v{i}").as_bytes()));
    }
    let owners: std::collections::BTreeSet<&str> = (0..50)
        .map(|i| {
            client
                .slot_owner(key_slot(format!("sh:{i}").as_bytes()))
                .unwrap()
        })
        .collect();
    assert_eq!(owners.len(), 3, "the keys span every node");

    // The router, with plain redis-cli (no -c): it routes by the topology it read from etcd.
    let router = format!("127.0.0.1:{router_port}");
    let info = connect(&router).unwrap().info(Some("router")).unwrap();
    assert!(
        info_number(&info, "router_epoch").is_some_and(|e| e > 0),
        "{info}"
    );
    assert_eq!(info_number(&info, "router_backends"), Some(3), "{info}");
    let cli = tool::require("redis-cli");
    let port = router_port.to_string();
    let redis_cli = |args: &[&str]| -> String {
        let (status, out, err) = run(
            Command::new(&cli).args(["-p", &port]).args(args),
            "redis-cli",
            WAIT,
        );
        assert!(status.success(), "redis-cli {args:?}: {status}: {err}");
        out.trim_end_matches('\n').to_string()
    };
    for i in 0..50 {
        let key = format!("sh:router:{i}");
        assert_eq!(redis_cli(&["SET", &key, &format!("r{i}")]), "OK", "{key}");
    }
    for i in 0..50 {
        // Written through the router, read from the nodes; and the other way round.
        let got = client.get(format!("sh:router:{i}")).unwrap();
        assert_eq!(got.as_deref(), Some(format!("r{i}").as_bytes()));
        assert_eq!(redis_cli(&["GET", &format!("sh:{i}")]), format!("v{i}"));
    }
    let mut mget = vec!["MGET".to_string()];
    mget.extend((0..50).map(|i| format!("sh:{i}")));
    let mget: Vec<&str> = mget.iter().map(String::as_str).collect();
    let want: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
    assert_eq!(redis_cli(&mget), want.join("\n"), "MGET across the nodes");

    let (status, _, err) = cluster_sh(&["down"], &dir);
    assert!(status.success(), "cluster.sh down: {status}\n{err}");
    up.down = true;
    for &pid in &up.pids {
        assert!(gone(pid), "process {pid} still runs after down\n{err}");
    }
}
