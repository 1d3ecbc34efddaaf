//! An in-process server for tests (of this crate, the client and the CLI): a fresh data
//! directory, a free loopback port, stopped gracefully on drop.

// A harness for tests: when it cannot start or stop a server, the test fails right there.
#![allow(clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use quiver_store::Clock;

use crate::node::Server;
use crate::node_config::{NodeConfig, ServeConfig};
use quiver_service::server::ShutdownHandle;

/// A running server; see the module documentation.
pub struct TestServer {
    pub addr: SocketAddr,
    /// The TLS port's address, when the settings give a `tls-port`.
    pub tls_addr: Option<SocketAddr>,
    config: ServeConfig,
    dir: PathBuf,
    /// Whether `dir` was made here (and is removed on drop).
    owns_dir: bool,
    /// What the store measures key expiry on (kept across restarts).
    clock: Clock,
    handle: Option<(ShutdownHandle, JoinHandle<Result<(), crate::NodeError>>)>,
}

impl TestServer {
    /// A server with default settings on a new empty data directory.
    pub fn start() -> TestServer {
        TestServer::start_with(|_| {})
    }

    /// Like [`TestServer::start`], with settings changed by `configure` first (the data
    /// directory and port are set before, and may be overridden).
    pub fn start_with(configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
        TestServer::start_with_clock(Clock::system(), configure)
    }

    /// Like [`TestServer::start_with`], with the store measuring key expiry on `clock`
    /// (a [`Clock::manual`] that the test moves: expiry without waiting).
    pub fn start_with_clock(clock: Clock, configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
        let dir = unique_temp_dir();
        std::fs::create_dir_all(&dir).expect("create the test data directory");
        let mut config = ServeConfig {
            service: quiver_service::Config {
                port: 0,
                threads: 2,
                ..quiver_service::Config::default()
            },
            node: NodeConfig {
                dir: dir.clone(),
                ..NodeConfig::default()
            },
        };
        configure(&mut config);
        let owns_dir = config.node.dir == dir;
        let mut server = TestServer {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls_addr: None,
            config,
            dir,
            owns_dir,
            clock,
            handle: None,
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let server = Server::bind_with_clock(self.config.clone(), self.clock.clone())
            .expect("start the test server");
        self.addr = server.bound().local_addr();
        self.tls_addr = server.bound().tls_addr();
        let shutdown = server.bound().shutdown_handle();
        let thread = std::thread::Builder::new()
            .name("quiver-test-server".into())
            .spawn(move || server.run(false))
            .expect("spawn the server thread");
        self.handle = Some((shutdown, thread));
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn dir(&self) -> &Path {
        &self.config.node.dir
    }

    /// Stops the server gracefully (checkpointing the store) and returns how `run` ended.
    pub fn stop(&mut self) -> Result<(), crate::NodeError> {
        match self.handle.take() {
            Some((shutdown, thread)) => {
                shutdown.shutdown();
                thread.join().expect("the server thread panicked")
            }
            None => Ok(()),
        }
    }

    /// Stops the server and starts it again on the same port and data directory.
    pub fn restart(&mut self) {
        self.stop().expect("clean shutdown");
        self.config.service.port = self.addr.port();
        if let Some(tls) = self.tls_addr {
            self.config.service.tls_port = Some(tls.port());
        }
        self.launch();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let stopped = self.stop();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        if let Err(e) = stopped {
            if !std::thread::panicking() {
                panic!("test server did not shut down cleanly: {e}");
            }
        }
    }
}

fn unique_temp_dir() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "quiver-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A non-loopback IPv4 address of this machine, if it has one: a client connecting to it
/// from here reaches the server from that address, not from loopback.
pub fn non_loopback_ipv4() -> Option<std::net::IpAddr> {
    let mut addrs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `addrs` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut addrs) } != 0 {
        return None;
    }
    let mut found = None;
    let mut at = addrs;
    while !at.is_null() && found.is_none() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*at };
        // SAFETY: ifa_addr is null or points at a sockaddr of the list.
        let family = unsafe { ifa.ifa_addr.as_ref() }.map(|a| i32::from(a.sa_family));
        if family == Some(libc::AF_INET) {
            // SAFETY: an AF_INET ifa_addr points at a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            if !ip.is_loopback() && !ip.is_unspecified() {
                found = Some(std::net::IpAddr::V4(ip));
            }
        }
        at = ifa.ifa_next;
    }
    // SAFETY: the list came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(addrs) };
    found
}
