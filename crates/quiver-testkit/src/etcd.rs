//! One etcd member on loopback for the cluster tests, on two free ports (client and peer) kept
//! across restarts, its data in `DIR/data`, its log in `DIR/etcd.log`; stopped by PID (kill -9)
//! and killed when dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::port::free_port;
use crate::process::{
    append, log_len, start_retrying, tail, Guard, StartFailure, REBIND_ATTEMPTS_MAX, REBIND_PAUSE,
    START_ATTEMPTS_MAX,
};
use crate::{tool, wait_until};

/// Bound on one probe of etcd's health (a connection, a request, its answer).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A running (or stopped, see [`Etcd::stop`]) etcd member.
pub struct Etcd {
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    process: Option<Guard>,
}

impl Etcd {
    /// Starts etcd on two free ports and waits until it is healthy.
    pub fn start(dir: &Path) -> Etcd {
        std::fs::create_dir_all(dir).unwrap();
        let mut etcd = Etcd {
            dir: dir.to_path_buf(),
            client_port: 0,
            peer_port: 0,
            process: None,
        };
        let log = etcd.log();
        start_retrying("etcd", START_ATTEMPTS_MAX, Duration::ZERO, &log, || {
            etcd.client_port = free_port();
            etcd.peer_port = free_port();
            // A new member's data names its ports: each attempt starts afresh.
            let _ = std::fs::remove_dir_all(etcd.dir.join("data"));
            etcd.spawn()
        });
        etcd
    }

    /// `http://127.0.0.1:PORT`, the client URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join("etcd.log")
    }

    /// kill -9 (etcd syncs its WAL before it acknowledges: nothing acknowledged is lost).
    pub fn stop(&mut self) {
        self.process.take().expect("etcd is not running").kill9();
    }

    /// Starts etcd again on the same ports and data directory, and waits until it is healthy.
    pub fn restart(&mut self) {
        assert!(self.process.is_none(), "etcd is running");
        let log = self.log();
        start_retrying(
            "etcd restart",
            REBIND_ATTEMPTS_MAX,
            REBIND_PAUSE,
            &log,
            || self.spawn(),
        );
    }

    /// Spawns etcd and waits until it is healthy (or has exited).
    fn spawn(&mut self) -> Result<(), StartFailure> {
        let client = self.url();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log_path = self.log();
        let log_start = log_len(&log_path);
        let log = append(&log_path);
        let child = Command::new(tool::require("etcd"))
            .args(["--name", "quiver-test", "--data-dir"])
            .arg(self.dir.join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("quiver-test={peer}")])
            .args(["--logger", "zap"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("etcd starts");
        // Kept in `self` while waiting: a failed wait unwinds through the guard, which kills it.
        let process = self.process.insert(Guard::new(child));
        let port = self.client_port;
        let mut exited = None;
        wait_until(
            "etcd healthy",
            || tail(&log_path),
            || {
                if let Some(status) = process.child().try_wait().unwrap() {
                    exited = Some(status);
                    return Ok(());
                }
                healthy(port)
            },
        );
        match exited {
            None => Ok(()),
            Some(status) => {
                self.process = None;
                Err(StartFailure::from_log(
                    &log_path,
                    log_start,
                    format!("etcd exited ({status})"),
                ))
            }
        }
    }
}

/// `GET /health` on etcd's client port answers `"health":"true"`.
fn healthy(port: u16) -> Result<(), String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(PROBE_TIMEOUT)).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    if response.contains(r#""health":"true""#) {
        Ok(())
    } else {
        Err(format!("/health: {response:?}"))
    }
}
