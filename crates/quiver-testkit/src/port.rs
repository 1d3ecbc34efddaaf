//! Free loopback ports. A port is free when the kernel hands it out for `127.0.0.1:0`; it is
//! released at once, so another process may take it before the test uses it (the harnesses
//! that start servers on a chosen port retry on another). Tests of one process run in
//! parallel: a port is handed out at most once per process.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// Ports asked of the kernel before giving up on one not handed out yet.
const PORT_ATTEMPTS_MAX: usize = 200;

/// Every port handed out in this test process.
static PORTS_TAKEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A loopback port nothing listens on now, and never returned before in this process.
pub fn free_port() -> u16 {
    free_port_where(|_| true)
}

/// `n` distinct free ports (see [`free_port`]).
pub fn free_ports(n: usize) -> Vec<u16> {
    (0..n).map(|_| free_port()).collect()
}

/// A free port `port` for which `also(port)` holds, e.g. that a companion port is free too
/// (`also` reserves what it needs with [`take`]).
pub fn free_port_where(mut also: impl FnMut(u16) -> bool) -> u16 {
    for _ in 0..PORT_ATTEMPTS_MAX {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = l.local_addr().unwrap().port();
        drop(l);
        if !PORTS_TAKEN.lock().unwrap().contains(&port) && also(port) && take(port) {
            return port;
        }
    }
    panic!("no fresh loopback port in {PORT_ATTEMPTS_MAX} attempts");
}

/// Marks `port` handed out; false when it already was.
pub fn take(port: u16) -> bool {
    PORTS_TAKEN.lock().unwrap().insert(port)
}

/// Whether nothing listens on loopback port `port` now (it can be bound).
pub fn is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (Whether a port is still free when the test looks again is not asserted: any process
    /// may take a port of the ephemeral range meanwhile, an outgoing connection's included.)
    #[test]
    fn ports_are_distinct_and_never_handed_out_twice() {
        let ports = free_ports(20);
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        assert!(ports.iter().all(|&p| p != 0 && !take(p)), "{ports:?}");
    }
}
