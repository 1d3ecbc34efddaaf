//! ROLE, WAIT and INFO's `# Replication`: how a service presents its replication in Redis's
//! terms. A standalone node or the router is a master without replicas; a cluster node's
//! role comes from its chains (`quiver_cluster::topology::Topology::redis_role`, argued in
//! docs/cluster.md, "What Redis tools see"), which its service passes in as a [`Replication`].
//!
//! Quiver's chains number writes per chain, so there is no single replication offset: every
//! offset is 0. A write is acknowledged only once every member of its chain has applied it,
//! so WAIT never waits: it answers at once with the number of other members holding the
//! connection's last write (Redis would block until the timeout for more replicas than
//! there are; here no more can come).

use bytes::Bytes;

use crate::errors::{err, NOT_INTEGER};
use crate::frame::string2ll;
use crate::reply::Reply;
use crate::service::{line, Line};

/// A service's replication role, as ROLE and INFO show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replication {
    /// A master, with the (host, port) of each node it sends writes to.
    Master { replicas: Vec<(String, u16)> },
    /// A replica of the master at (host, port), whose id is `master_id`.
    Replica {
        host: String,
        port: u16,
        master_id: String,
    },
}

impl Replication {
    /// A master without replicas: a standalone server, the router.
    pub fn alone() -> Replication {
        Replication::Master {
            replicas: Vec::new(),
        }
    }
}

/// ROLE's reply, Redis's shape.
pub fn role(r: &Replication) -> Reply {
    match r {
        Replication::Master { replicas } => Reply::Array(vec![
            Reply::text("master"),
            Reply::Integer(0),
            Reply::Array(
                replicas
                    .iter()
                    .map(|(host, port)| {
                        Reply::Array(vec![
                            Reply::text(host),
                            Reply::text(port.to_string()),
                            Reply::text("0"),
                        ])
                    })
                    .collect(),
            ),
        ]),
        Replication::Replica { host, port, .. } => Reply::Array(vec![
            Reply::text("slave"),
            Reply::text(host),
            Reply::Integer((*port).into()),
            Reply::text("connected"),
            Reply::Integer(0),
        ]),
    }
}

/// WAIT's reply: its arguments checked as Redis checks them, then at once the number of
/// other members holding the connection's last write (`others`: every service's own count).
pub fn wait(args: &[Bytes], others: impl FnOnce() -> i64) -> Reply {
    check_wait(args).map_or_else(|e| e, |()| Reply::Integer(others()))
}

/// WAIT's arguments: `numreplicas` and `timeout` integers, the timeout not negative.
fn check_wait(args: &[Bytes]) -> Result<(), Reply> {
    let number = |a: &Bytes| string2ll(a).ok_or_else(|| err(NOT_INTEGER));
    number(&args[1])?;
    if number(&args[2])? < 0 {
        return Err(err("ERR timeout is negative"));
    }
    Ok(())
}

/// The replication id INFO shows: 40 hex digits derived from the id of the master (a replica
/// shows its master's, as in Redis).
fn replid(master_id: &str) -> String {
    // FNV-1a, twice with different offsets: stable across builds and nodes.
    let fnv = |seed: u64| {
        master_id.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let (a, b, c) = (
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x8422_2325_cbf2_9ce4),
        fnv(0x1234_5678_9abc_def0),
    );
    format!("{a:016x}{b:016x}{:08x}", c as u32)
}

/// INFO's `# Replication` lines (Redis 7.0's fields) of a service whose own id is `my_id`.
pub fn info_lines(r: &Replication, my_id: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    let master_id = match r {
        Replication::Master { replicas } => {
            lines.push(line("role", "master".into()));
            lines.push(line("connected_slaves", replicas.len().to_string()));
            for (i, (host, port)) in replicas.iter().enumerate() {
                lines.push(line(
                    &format!("slave{i}"),
                    format!("ip={host},port={port},state=online,offset=0,lag=0"),
                ));
            }
            my_id
        }
        Replication::Replica {
            host,
            port,
            master_id,
        } => {
            lines.extend([
                line("role", "slave".into()),
                line("master_host", host.clone()),
                line("master_port", port.to_string()),
                line("master_link_status", "up".into()),
                line("master_last_io_seconds_ago", "0".into()),
                line("master_sync_in_progress", "0".into()),
                line("slave_read_repl_offset", "0".into()),
                line("slave_repl_offset", "0".into()),
                line("slave_priority", "100".into()),
                line("slave_read_only", "1".into()),
                line("replica_announced", "1".into()),
                line("connected_slaves", "0".into()),
            ]);
            master_id
        }
    };
    lines.extend([
        line("master_failover_state", "no-failover".into()),
        line("master_replid", replid(master_id)),
        line("master_replid2", "0".repeat(40)),
        line("master_repl_offset", "0".into()),
        line("second_repl_offset", "-1".into()),
        line("repl_backlog_active", "0".into()),
        line("repl_backlog_size", "0".into()),
        line("repl_backlog_first_byte_offset", "0".into()),
        line("repl_backlog_histlen", "0".into()),
    ]);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn role_and_info_in_redis_shapes() {
        let master = Replication::Master {
            replicas: vec![("127.0.0.1".into(), 7001)],
        };
        assert_eq!(
            role(&master),
            Reply::Array(vec![
                Reply::text("master"),
                Reply::Integer(0),
                Reply::Array(vec![Reply::Array(vec![
                    Reply::text("127.0.0.1"),
                    Reply::text("7001"),
                    Reply::text("0")
                ])])
            ])
        );
        let replica = Replication::Replica {
            host: "127.0.0.1".into(),
            port: 7000,
            master_id: "n0".into(),
        };
        assert_eq!(
            role(&replica),
            Reply::Array(vec![
                Reply::text("slave"),
                Reply::text("127.0.0.1"),
                Reply::Integer(7000),
                Reply::text("connected"),
                Reply::Integer(0)
            ])
        );
        let of_master = info_lines(&master, "n0");
        let of_replica = info_lines(&replica, "n1");
        let field = |lines: &[Line], k: &str| {
            lines
                .iter()
                .find(|l| l.0 == k)
                .map(|l| l.1.clone())
                .unwrap()
        };
        assert_eq!(field(&of_master, "role"), "master");
        assert_eq!(
            field(&of_master, "slave0"),
            "ip=127.0.0.1,port=7001,state=online,offset=0,lag=0"
        );
        assert_eq!(field(&of_replica, "role"), "slave");
        assert_eq!(field(&of_replica, "master_port"), "7000");
        // A replica shows its master's replication id.
        assert_eq!(
            field(&of_master, "master_replid"),
            field(&of_replica, "master_replid")
        );
        assert_eq!(field(&of_master, "master_replid").len(), 40);
    }

    #[test]
    fn wait_arguments_are_checked_as_redis_checks_them() {
        assert_eq!(check_wait(&args(&["WAIT", "1", "0"])), Ok(()));
        assert_eq!(
            check_wait(&args(&["WAIT", "x", "0"])),
            Err(err(NOT_INTEGER))
        );
        assert_eq!(
            check_wait(&args(&["WAIT", "1", "-1"])),
            Err(err("ERR timeout is negative"))
        );
    }
}
