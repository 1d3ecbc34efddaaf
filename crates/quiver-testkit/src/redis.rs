//! redis-server instances for the tests that run against real Redis (the client's Redis
//! Cluster tests): each on a free loopback port, its output in a log file, stopped by PID
//! (SIGKILL) when dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::port::{free_port_where, is_free, take};
use crate::process::Guard;
use crate::tool;

/// A cluster-mode redis-server also listens on its port + 10000 (the cluster bus).
pub const BUS_PORT_OFFSET: u16 = 10000;
/// Polls (every `POLL_INTERVAL`) for a server to answer PING.
const POLLS_MAX: usize = 600;
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Bound on one PING (a connection, the request, its answer).
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// A free loopback port whose cluster bus port (+[`BUS_PORT_OFFSET`]) is free too; neither is
/// handed out again in this process.
pub fn cluster_port() -> u16 {
    free_port_where(|port| {
        port.checked_add(BUS_PORT_OFFSET)
            .is_some_and(|bus| is_free(bus) && take(bus))
    })
}

/// A running redis-server.
pub struct RedisServer {
    pub port: u16,
    log: PathBuf,
    process: Guard,
}

impl RedisServer {
    /// Spawns `redis-server --port PORT --bind 127.0.0.1` with the arguments `args` adds, its
    /// stdout and stderr in `log`; [`RedisServer::wait_ready`] waits until it answers.
    pub fn spawn(port: u16, log: &Path, args: impl FnOnce(&mut Command)) -> RedisServer {
        let out = std::fs::File::create(log).unwrap();
        let mut cmd = Command::new(tool::require("redis-server"));
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"]);
        args(&mut cmd);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn redis-server");
        RedisServer {
            port,
            log: log.to_path_buf(),
            process: Guard::new(child),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until it answers PING; fails the test, with its log, if it exits or never does.
    pub fn wait_ready(&mut self) {
        for _ in 0..POLLS_MAX {
            if let Some(status) = self.process.child().try_wait().unwrap() {
                panic!(
                    "redis-server on port {} exited ({status}):\n{}",
                    self.port,
                    self.log_text()
                );
            }
            if ping(self.port) {
                return;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        panic!(
            "redis-server on port {} never answered PING:\n{}",
            self.port,
            self.log_text()
        );
    }
}

/// Whether the server on `port` answers PING with PONG.
fn ping(port: u16) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, PING_TIMEOUT) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(PING_TIMEOUT));
    if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    s.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

/// redis-benchmark's output as lines: progress lines end in `\r`, results in `\n`.
pub fn benchmark_lines(output: &str) -> Vec<&str> {
    output
        .split(['\r', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}
