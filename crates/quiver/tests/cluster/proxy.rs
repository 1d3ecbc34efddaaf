//! A TCP proxy that can be cut: a network partition between one process and the server it
//! reaches through it (here, a node and etcd), made without root. Cut, it closes every
//! connection through it and holds new ones open without forwarding anything (a partition:
//! nothing passes, nothing is refused); healed, it forwards new connections again.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a forwarding thread looks at the cut (its reads wait at most this long).
const TICK: Duration = Duration::from_millis(20);
/// Bytes copied at once.
const CHUNK: usize = 64 * 1024;

/// The proxy's state shared with its threads.
struct Shared {
    upstream: String,
    cut: AtomicBool,
    /// Grows at each cut: a connection opened in an earlier generation is closed.
    generation: AtomicU64,
    stop: AtomicBool,
    /// Connections accepted while cut, held open unanswered.
    held: Mutex<Vec<TcpStream>>,
}

pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            upstream: upstream.to_string(),
            cut: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            held: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let acceptor = std::thread::spawn(move || accept_loop(&listener, &s));
        Proxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// `http://127.0.0.1:PORT` (for `--etcd`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Partitions: every connection through it closes; new ones hang.
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Heals: new connections are forwarded (those held while cut are closed).
    pub fn heal(&self) {
        self.shared.held.lock().unwrap().clear();
        self.shared.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                if shared.cut.load(Ordering::SeqCst) {
                    shared.held.lock().unwrap().push(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&shared.upstream) else {
                    continue;
                };
                let generation = shared.generation.load(Ordering::SeqCst);
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let s = shared.clone();
                    std::thread::spawn(move || forward(from, to, &s, generation));
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
            Err(_) => std::thread::sleep(TICK),
        }
    }
}

/// Copies `from` to `to` until either closes or the proxy is cut (a new generation).
fn forward(mut from: TcpStream, mut to: TcpStream, shared: &Shared, generation: u64) {
    let _ = from.set_nonblocking(false);
    let _ = from.set_read_timeout(Some(TICK));
    let mut buf = vec![0u8; CHUNK];
    while shared.generation.load(Ordering::SeqCst) == generation {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
