//! The server the integration tests talk to, and scripted fake servers.
//!
//! Everything specific to the real server lives in [`TestServer`]: an in-process Quiver
//! server (`quiver_node::testing`) on a free loopback port with its own data directory.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use quiver_client::{ClientOptions, Connection};

/// Read timeout of test connections, so a broken server fails a test
/// instead of hanging it.
pub const TEST_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A Quiver server on a free loopback port, stopped on drop.
pub struct TestServer {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    password: Option<String>,
    server: quiver_node::testing::TestServer,
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::start_with(None)
    }

    /// A server that refuses commands until `AUTH password`.
    pub fn start_with_password(password: &str) -> TestServer {
        TestServer::start_with(Some(password.to_owned()))
    }

    fn start_with(password: Option<String>) -> TestServer {
        let requirepass = password.clone();
        let server =
            quiver_node::testing::TestServer::start_with(|c| c.service.requirepass = requirepass);
        TestServer {
            addr: server.addr.to_string(),
            password,
            server,
        }
    }

    /// Client options for this server: its password, a test read timeout.
    pub fn options(&self) -> ClientOptions {
        let mut options = ClientOptions::new(self.addr.clone());
        options.password = self.password.clone();
        options.read_timeout = Some(TEST_READ_TIMEOUT);
        options
    }

    pub fn connect(&self) -> Connection {
        Connection::connect_with(self.options()).expect("connect to the test server")
    }

    /// Closes every client connection from the server side.
    pub fn drop_connections(&self) {
        let mut admin = self.connect();
        admin
            .command(&[b"CLIENT", b"KILL", b"TYPE", b"normal", b"SKIPME", b"yes"])
            .expect("CLIENT KILL");
    }

    /// Stops the server and starts it again on the same port and data directory.
    pub fn restart(&mut self) {
        self.server.restart();
    }
}

/// A scripted server: a listener whose accepted connections are handed, in
/// order, to `handler` on a background thread.
pub struct FakeServer {
    pub addr: String,
    thread: Option<thread::JoinHandle<()>>,
}

impl FakeServer {
    /// Runs `handler(index, stream)` for each of the first `connections`
    /// connections.
    pub fn start(
        connections: usize,
        handler: impl Fn(usize, TcpStream) + Send + 'static,
    ) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap().to_string();
        let thread = thread::spawn(move || {
            for index in 0..connections {
                let (stream, _) = listener.accept().expect("accept");
                handler(index, stream);
            }
        });
        FakeServer {
            addr,
            thread: Some(thread),
        }
    }

    /// Waits until the handler has served all its connections.
    pub fn join(mut self) {
        self.thread
            .take()
            .unwrap()
            .join()
            .expect("fake server panicked");
    }
}

/// Reads from `stream` until `want` bytes arrived (or EOF); returns them.
pub fn read_exactly(stream: &mut TcpStream, want: usize) -> Vec<u8> {
    let mut got = vec![0u8; want];
    let mut at = 0;
    while at < want {
        match stream.read(&mut got[at..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => at += n,
        }
    }
    got.truncate(at);
    got
}
