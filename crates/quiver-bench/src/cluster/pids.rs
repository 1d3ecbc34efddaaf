//! Which node a server process serves: the TCP ports it listens on, from `/proc`, matched
//! against the nodes' ports.
//!
//! `--server-pids` come in any order, and the client knows nodes only by address; so each
//! process's listening sockets are found (its descriptors that are sockets, by inode, looked
//! up in its network namespace's `/proc/<pid>/net/tcp` and `tcp6`) and the node whose port is
//! among them is its node. A Redis Cluster node also listens on its bus port (port + 10000),
//! which matches no client port; a Quiver node listens on its port alone.

use std::collections::HashSet;

use crate::error::{Error, Result};

/// `st` of a listening socket in `/proc/net/tcp`.
const TCP_LISTEN: &str = "0A";

/// The ports process `pid` listens on (TCP, IPv4 and IPv6), sorted, without duplicates.
pub fn listening_ports(pid: u32) -> Result<Vec<u16>> {
    let fd_dir = format!("/proc/{pid}/fd");
    let entries = std::fs::read_dir(&fd_dir).map_err(|e| Error::io("read", &fd_dir, e))?;
    let mut inodes = HashSet::new();
    // A descriptor closed between the listing and the readlink is simply not a socket now.
    for entry in entries.flatten() {
        if let Ok(target) = std::fs::read_link(entry.path()) {
            if let Some(inode) = socket_inode(&target.to_string_lossy()) {
                inodes.insert(inode);
            }
        }
    }
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let path = format!("/proc/{pid}/net/{table}");
        match std::fs::read_to_string(&path) {
            Ok(text) => ports.extend(parse_listening(&text, &inodes)),
            // No IPv6 in this kernel: no tcp6 table.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("read", path, e)),
        }
    }
    ports.sort_unstable();
    ports.dedup();
    Ok(ports)
}

/// The inode of a descriptor's link text `socket:[12345]`.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The local ports of the listening sockets of a `/proc/net/tcp` (or `tcp6`) table whose
/// inode is in `inodes`. Lines: `sl local_address rem_address st ... uid timeout inode ...`,
/// the address `HEXADDR:HEXPORT`.
pub fn parse_listening(table: &str, inodes: &HashSet<u64>) -> Vec<u16> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            if *state != TCP_LISTEN || !inodes.contains(&inode.parse().ok()?) {
                return None;
            }
            u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()
        })
        .collect()
}

/// The port of `host:port` (`[::1]:7000` too).
pub fn addr_port(addr: &str) -> Option<u16> {
    addr.rsplit_once(':')?.1.parse().ok()
}

/// For each of `pids` (with `ports[i]` the ports pid `i` listens on), the index of the node
/// of `nodes` (`host:port`) it serves: the one whose port it listens on. Refused: a process
/// listening on no node's port, or on several, and two processes on one node.
pub fn match_nodes(pids: &[u32], ports: &[Vec<u16>], nodes: &[String]) -> Result<Vec<usize>> {
    let node_ports: Vec<Option<u16>> = nodes.iter().map(|a| addr_port(a)).collect();
    let mut owner: Vec<Option<u32>> = vec![None; nodes.len()];
    let mut out = Vec::with_capacity(pids.len());
    for (&pid, listening) in pids.iter().zip(ports) {
        let found: Vec<usize> = (0..nodes.len())
            .filter(|&n| node_ports[n].is_some_and(|p| listening.contains(&p)))
            .collect();
        let node = match found[..] {
            [n] => n,
            [] => {
                return Err(Error::Invalid(format!(
                    "server pid {pid} listens on ports {listening:?}, none of the cluster's \
                     nodes ({}): is it one of its servers?",
                    nodes.join(", ")
                )))
            }
            _ => {
                return Err(Error::Invalid(format!(
                    "server pid {pid} listens on the ports of several nodes ({})",
                    found
                        .iter()
                        .map(|&n| nodes[n].as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        };
        if let Some(other) = owner[node].replace(pid) {
            return Err(Error::Invalid(format!(
                "server pids {other} and {pid} both listen on node {}'s port",
                nodes[node]
            )));
        }
        out.push(node);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1B58 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:4268 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 112 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1B58 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 113 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1B59 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 999 1 0000000000000000 100 0 0 10 0
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1B5A 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 114 1 0000000000000000 100 0 0 10 0
";

    #[test]
    fn listening_sockets_of_the_process_only() {
        let ours: HashSet<u64> = [111, 112, 113, 114].into();
        // 7000 and its bus port 17000 listen; 113 is a connection, 999 another process's.
        assert_eq!(parse_listening(TCP, &ours), vec![7000, 17000]);
        assert_eq!(parse_listening(TCP6, &ours), vec![7002]);
        assert_eq!(parse_listening("header only\n", &ours), Vec::<u16>::new());
        assert_eq!(
            parse_listening("h\n  0: garbage\n", &ours),
            Vec::<u16>::new()
        );
        assert_eq!(socket_inode("socket:[4242]"), Some(4242));
        assert_eq!(socket_inode("pipe:[4242]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
    }

    #[test]
    fn pids_match_nodes_by_port() {
        let nodes: Vec<String> = ["127.0.0.1:7000", "127.0.0.1:7001", "[::1]:7002"]
            .map(String::from)
            .into();
        let m = match_nodes(
            &[30, 10, 20],
            &[vec![7002], vec![7000, 17000], vec![7001, 9121]],
            &nodes,
        )
        .unwrap();
        assert_eq!(m, vec![2, 0, 1]);
        let err = match_nodes(&[10], &[vec![6379]], &nodes).unwrap_err();
        assert!(err.to_string().contains("none of the cluster's"), "{err}");
        let err = match_nodes(&[10], &[vec![7000, 7001]], &nodes).unwrap_err();
        assert!(err.to_string().contains("several"), "{err}");
        let err = match_nodes(&[10, 11], &[vec![7000], vec![7000]], &nodes).unwrap_err();
        assert!(err.to_string().contains("both"), "{err}");
    }

    #[test]
    fn reads_a_listening_socket_of_this_process() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let ports = listening_ports(std::process::id()).unwrap();
        assert!(ports.contains(&port), "{port} not in {ports:?}");
        assert!(listening_ports(u32::MAX).is_err());
    }
}
