//! Authentication (`requirepass`) and protected mode.
//!
//! With a password set, a new connection may only run the commands Redis 7 flags `no_auth`
//! (AUTH, HELLO, QUIT, RESET); everything else answers `-NOAUTH`. Protected mode is decided
//! per connection: while the default user has no password, a client from a non-loopback
//! address gets `-DENIED` and is closed. An HTTP request runs nothing.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};

use quiver_node::node_config::ServeConfig;
use quiver_node::testing::TestServer;
use quiver_service::table::{Flags, COMMANDS};

use crate::bad_input::{
    client, client_with, expect_closed, expect_error_and_close, expect_reply, multibulk, raw,
    read_line, show,
};

const PASSWORD: &str = "correct horse";
const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";

fn server_with_password() -> TestServer {
    TestServer::start_with(|c| c.service.requirepass = Some(PASSWORD.into()))
}

/// The commands a client may run before authenticating (Redis 7's `no_auth` flag).
#[test]
fn only_auth_hello_quit_and_reset_skip_authentication() {
    let mut no_auth: Vec<&str> = COMMANDS
        .iter()
        .filter(|c| c.flags.contains(Flags::NO_AUTH))
        .map(|c| c.name)
        .collect();
    no_auth.sort_unstable();
    assert_eq!(no_auth, ["auth", "hello", "quit", "reset"]);
}

#[test]
fn every_other_command_answers_noauth_until_auth() {
    let server = server_with_password();
    let mut authed = client_with(server.addr, |o| o.password = Some(PASSWORD.into()));
    authed.set("secret", "data").unwrap();

    let mut s = raw(server.addr);
    let mut tried = 0;
    for spec in COMMANDS
        .iter()
        .filter(|c| !c.flags.contains(Flags::NO_AUTH))
    {
        // Enough arguments for the arity check, which Redis (and Quiver) make first; real
        // subcommands for the container commands (Redis looks those up before AUTH too).
        let args: Vec<&[u8]> = match spec.name {
            "client" => vec![b"CLIENT", b"ID"],
            "config" => vec![b"CONFIG", b"GET", b"maxclients"],
            "command" => vec![b"COMMAND", b"COUNT"],
            "slowlog" => vec![b"SLOWLOG", b"LEN"],
            "latency" => vec![b"LATENCY", b"LATEST"],
            "cluster" => vec![b"CLUSTER", b"KEYSLOT", b"secret"],
            name => {
                let argc = if spec.arity > 0 {
                    spec.arity as usize
                } else {
                    spec.arity.unsigned_abs().max(2) as usize
                };
                let mut args: Vec<&[u8]> = vec![name.as_bytes()];
                args.resize(argc, b"secret");
                args
            }
        };
        s.write_all(&multibulk(&args)).unwrap();
        let line = read_line(&mut s);
        let expected: &[u8] = if spec.name == "exec" {
            // Redis's execCommandAbort: a refused EXEC reports why the transaction is gone.
            b"-EXECABORT Transaction discarded because of: NOAUTH Authentication required.\r\n"
        } else {
            NOAUTH
        };
        assert_eq!(show(&line), show(expected), "{} before AUTH", spec.name);
        tried += 1;
    }
    assert!(
        tried > 30,
        "the command table has {tried} commands needing auth"
    );
    // The vectorised fast paths (pipelined GET / SET / DEL / EXISTS) are refused the same way.
    let mut run = Vec::new();
    for args in [
        &[&b"GET"[..], b"secret"][..],
        &[b"GET", b"secret"],
        &[b"SET", b"secret", b"overwritten"],
        &[b"SET", b"other", b"x"],
        &[b"DEL", b"secret"],
        &[b"EXISTS", b"secret"],
        &[b"MGET", b"secret"],
    ] {
        run.extend(multibulk(args));
    }
    run.extend(b"get secret\r\n");
    s.write_all(&run).unwrap();
    expect_reply(&mut s, &NOAUTH.repeat(8));
    assert_eq!(authed.get("secret").unwrap().as_deref(), Some(&b"data"[..]));
    assert_eq!(authed.get("other").unwrap(), None);

    // Unknown commands and wrong arity are reported as such, as Redis does.
    s.write_all(b"NOSUCHCOMMAND\r\nGET\r\n").unwrap();
    expect_reply(
        &mut s,
        b"-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: \r\n\
          -ERR wrong number of arguments for 'get' command\r\n",
    );

    // AUTH, then everything works on the same connection.
    s.write_all(format!("AUTH \"{PASSWORD}\"\r\nGET secret\r\nPING\r\n").as_bytes())
        .unwrap();
    expect_reply(&mut s, b"+OK\r\n$4\r\ndata\r\n+PONG\r\n");

    // QUIT needs no password.
    let mut q = raw(server.addr);
    q.write_all(b"QUIT\r\n").unwrap();
    expect_reply(&mut q, b"+OK\r\n");
    expect_closed(&mut q);
}

#[test]
fn wrong_passwords_are_refused() {
    let server = server_with_password();
    let mut s = raw(server.addr);
    for auth in [
        multibulk(&[b"AUTH", b"wrong"]),
        multibulk(&[b"AUTH", b""]),
        multibulk(&[b"AUTH", b"correct horse "]),
        multibulk(&[b"AUTH", b"default", b"wrong"]),
        multibulk(&[b"AUTH", b"admin", PASSWORD.as_bytes()]),
        multibulk(&[b"HELLO", b"3", b"AUTH", b"default", b"wrong"]),
        multibulk(&[b"HELLO", b"2", b"AUTH", b"admin", PASSWORD.as_bytes()]),
    ] {
        s.write_all(&auth).unwrap();
        expect_reply(&mut s, WRONGPASS);
        // Still not authenticated, still connected.
        s.write_all(b"PING\r\n").unwrap();
        expect_reply(&mut s, NOAUTH);
    }
    // HELLO without AUTH does not switch protocols for an unauthenticated client.
    s.write_all(b"HELLO 3\r\n").unwrap();
    let line = read_line(&mut s);
    assert!(
        line.starts_with(b"-NOAUTH HELLO must be called with the client already authenticated"),
        "{:?}",
        show(&line)
    );
    s.write_all(b"GET k\r\n").unwrap();
    expect_reply(&mut s, NOAUTH);

    // A wrong password does not undo an earlier authentication (as in Redis).
    s.write_all(format!("AUTH \"{PASSWORD}\"\r\nAUTH wrong\r\nPING\r\n").as_bytes())
        .unwrap();
    expect_reply(&mut s, &[&b"+OK\r\n"[..], WRONGPASS, b"+PONG\r\n"].concat());
    s.write_all(&multibulk(&[b"HELLO", b"2", b"AUTH", b"default", b"wrong"]))
        .unwrap();
    expect_reply(&mut s, WRONGPASS);
    s.write_all(b"GET k\r\n").unwrap();
    expect_reply(&mut s, b"$-1\r\n");

    // The typed client reports the refusal as an authentication failure.
    let mut options = quiver_client::ClientOptions::new(server.addr.to_string());
    options.password = Some("wrong".into());
    options.reconnect = false;
    let err = quiver_client::Connection::connect_with(options).unwrap_err();
    assert!(
        matches!(err, quiver_client::Error::AuthFailed(_)),
        "{err:?}"
    );
}

#[test]
fn auth_hello_and_reset() {
    let server = server_with_password();
    // AUTH <password> and AUTH default <password>.
    for auth in [
        multibulk(&[b"AUTH", PASSWORD.as_bytes()]),
        multibulk(&[b"AUTH", b"default", PASSWORD.as_bytes()]),
    ] {
        let mut s = raw(server.addr);
        s.write_all(&auth).unwrap();
        expect_reply(&mut s, b"+OK\r\n");
        s.write_all(b"SET k v\r\nGET k\r\n").unwrap();
        expect_reply(&mut s, b"+OK\r\n$1\r\nv\r\n");
    }

    // HELLO 3 AUTH default <password>: authenticated and in RESP3 in one step.
    let mut s = raw(server.addr);
    s.write_all(&multibulk(&[
        b"HELLO",
        b"3",
        b"AUTH",
        b"default",
        PASSWORD.as_bytes(),
    ]))
    .unwrap();
    let header = read_line(&mut s);
    assert_eq!(show(&header), show(b"%7\r\n"), "HELLO 3 answers a map");
    for _ in 0..14 {
        // Keys and values: bulk strings, an integer or an empty array.
        let line = read_line(&mut s);
        if line[0] == b'$' {
            read_line(&mut s);
        }
    }
    s.write_all(b"GET missing\r\nGET k\r\n").unwrap();
    expect_reply(&mut s, b"_\r\n$1\r\nv\r\n");

    // RESET: back to RESP2 and unauthenticated.
    s.write_all(b"RESET\r\nGET k\r\nPING\r\n").unwrap();
    expect_reply(&mut s, &[&b"+RESET\r\n"[..], NOAUTH, NOAUTH].concat());
    s.write_all(format!("AUTH \"{PASSWORD}\"\r\nGET missing\r\n").as_bytes())
        .unwrap();
    expect_reply(&mut s, b"+OK\r\n$-1\r\n");

    // RESET needs no password itself.
    let mut fresh = raw(server.addr);
    fresh.write_all(b"RESET\r\nPING\r\n").unwrap();
    expect_reply(&mut fresh, &[&b"+RESET\r\n"[..], NOAUTH].concat());

    // The typed client authenticates on connect.
    let mut c = client_with(server.addr, |o| o.password = Some(PASSWORD.into()));
    assert_eq!(c.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    let mut c = client_with(server.addr, |o| {
        o.password = Some(PASSWORD.into());
        o.resp3 = true;
    });
    assert_eq!(c.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// Redis 7.0.15 (the version Quiver's replies follow) words the HELLO refusal
/// "... otherwise the HELLO AUTH <user> <pass> option can be used ..."; the
/// "HELLO <proto> AUTH" wording is Redis 7.2's. Checked against Redis 7.0.15.
#[test]
fn hello_refusal_has_redis_7_0_text() {
    let server = server_with_password();
    let mut s = raw(server.addr);
    s.write_all(b"HELLO 3\r\n").unwrap();
    expect_reply(
        &mut s,
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the \
          HELLO AUTH <user> <pass> option can be used to authenticate the client and select the \
          RESP protocol version at the same time\r\n",
    );
}

/// Without a password, AUTH <password> is an error and HELLO AUTH accepts the default user
/// with any password (Redis's `nopass` default user).
#[test]
fn no_password_configured() {
    let server = TestServer::start();
    let mut s = raw(server.addr);
    s.write_all(b"PING\r\nAUTH secret\r\n").unwrap();
    expect_reply(
        &mut s,
        b"+PONG\r\n-ERR AUTH <password> called without any password configured for the \
          default user. Are you sure your configuration is correct?\r\n",
    );
    s.write_all(b"AUTH default anything\r\nAUTH admin anything\r\n")
        .unwrap();
    expect_reply(&mut s, &[&b"+OK\r\n"[..], WRONGPASS].concat());
    let mut c = client(server.addr);
    c.ping().unwrap();
}

/// Redis 7 caps what an unauthenticated client may send: at most 10 arguments and bulks of at
/// most 16 KiB (`networking.c`: "unauthenticated multibulk length" / "unauthenticated bulk
/// length"), so an anonymous client cannot make the server buffer a large request. Checked
/// against Redis 7.0.15 with `requirepass` set.
#[test]
fn unauthenticated_clients_get_redis_frame_limits() {
    let server = server_with_password();
    expect_error_and_close(
        server.addr,
        b"*11\r\n",
        b"-ERR Protocol error: unauthenticated multibulk length\r\n",
    );
    expect_error_and_close(
        server.addr,
        b"*2\r\n$4\r\nECHO\r\n$20000\r\n",
        b"-ERR Protocol error: unauthenticated bulk length\r\n",
    );
    // Within the limits, an unauthenticated request is just refused.
    let mut s = raw(server.addr);
    s.write_all(b"*10\r\n$4\r\nMGET\r\n").unwrap();
    for _ in 0..9 {
        s.write_all(b"$1\r\nk\r\n").unwrap();
    }
    expect_reply(&mut s, NOAUTH);
    // Once authenticated, the limits are the configured ones.
    s.write_all(format!("AUTH \"{PASSWORD}\"\r\n").as_bytes())
        .unwrap();
    expect_reply(&mut s, b"+OK\r\n");
    let big = vec![b'b'; 20_000];
    s.write_all(&multibulk(&[b"ECHO", &big])).unwrap();
    expect_reply(&mut s, &[&b"$20000\r\n"[..], &big, b"\r\n"].concat());
}

/// The address a test reaches a server bound to 0.0.0.0 from outside loopback, or `None`
/// (and a SKIPPED line) on a machine with loopback only.
fn outside_address(test: &str) -> Option<IpAddr> {
    let found = quiver_node::testing::non_loopback_ipv4();
    if found.is_none() {
        eprintln!("SKIPPED {test}: this machine has no non-loopback IPv4 address");
    }
    found
}

const DENIED: &[u8] = b"-DENIED Quiver is running in protected mode because protected mode is \
enabled and no password is set for the default user.";

/// A connection from `ip` to `server` is refused: the DENIED line, then closed.
fn expect_denied(ip: IpAddr, server: &TestServer) {
    let mut s = raw(SocketAddr::new(ip, server.addr.port()));
    let line = read_line(&mut s);
    assert!(line.starts_with(DENIED), "{}", show(&line));
    expect_closed(&mut s);
}

/// A connection from `ip` to `server` is served: PING answers `expect` (PONG, or NOAUTH
/// while the default user has a password).
fn expect_served(ip: IpAddr, server: &TestServer, expect: &[u8]) {
    let mut s = raw(SocketAddr::new(ip, server.addr.port()));
    s.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut s, expect);
}

fn public_server(configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
    TestServer::start_with(|c| {
        c.service.bind = "0.0.0.0".parse().unwrap();
        configure(c);
    })
}

const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// Protected mode is decided per connection, as in Redis 7: while the default user has no
/// password, clients from a non-loopback address get -DENIED and are closed; loopback and
/// the Unix socket are served. A password set at run time (ACL SETUSER) lets them in, and
/// taking it away (`nopass`) shuts them out again.
#[test]
fn protected_mode_is_decided_per_connection() {
    let Some(outside) = outside_address("protected_mode_is_decided_per_connection") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("q.sock");
    let server = public_server(|c| c.service.unixsocket = Some(sock.clone()));
    expect_denied(outside, &server);
    expect_served(LOCAL, &server, b"+PONG\r\n");
    let mut unix = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    unix.write_all(b"PING\r\n").unwrap();
    let mut pong = [0u8; 7];
    unix.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");

    let mut admin = client(server.addr);
    admin
        .command(&[b"ACL", b"SETUSER", b"default", b"on", b">pw"])
        .unwrap();
    expect_served(outside, &server, NOAUTH);
    let mut s = raw(SocketAddr::new(outside, server.addr.port()));
    s.write_all(b"AUTH pw\r\nPING\r\n").unwrap();
    expect_reply(&mut s, b"+OK\r\n+PONG\r\n");

    // A password taken away at run time: new connections from outside are refused again
    // (this one, authenticated before, stays).
    let mut admin = client_with(server.addr, |o| o.password = Some("pw".into()));
    admin
        .command(&[b"ACL", b"SETUSER", b"default", b"nopass"])
        .unwrap();
    expect_denied(outside, &server);
    s.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut s, b"+PONG\r\n");
    let mut info = client(server.addr);
    let rejected = crate::bad_input::info_field(&mut info, "stats", "rejected_connections");
    assert_eq!(rejected.as_deref(), Some("2"));
}

/// The default user's password may come from the aclfile alone (the server starts on a
/// public address without requirepass, and serves authenticated clients from outside), and
/// an aclfile's password-less default wins over requirepass (then outside clients are
/// refused). `protected-mode no` serves everyone.
#[test]
fn protected_mode_follows_the_aclfile_and_can_be_turned_off() {
    let Some(outside) = outside_address("protected_mode_follows_the_aclfile") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let with_password = tmp.path().join("with.acl");
    std::fs::write(&with_password, "user default on >secret ~* &* +@all\n").unwrap();
    let server = public_server(|c| c.service.aclfile = Some(with_password.clone()));
    expect_served(outside, &server, NOAUTH);
    drop(server);

    let without = tmp.path().join("without.acl");
    std::fs::write(&without, "user default on nopass ~* &* +@all\n").unwrap();
    let server = public_server(|c| {
        c.service.aclfile = Some(without.clone());
        c.service.requirepass = Some(PASSWORD.into());
    });
    expect_denied(outside, &server);
    expect_served(LOCAL, &server, b"+PONG\r\n");
    drop(server);

    let server = public_server(|c| c.service.protected_mode = false);
    expect_served(outside, &server, b"+PONG\r\n");
}

/// An HTTP request (cross-protocol scripting: a web page posting to a local port) runs
/// nothing: the connection is closed at `POST` or at a `Host:` header, before any line after
/// it, without a reply to it. Commands before it in the same read still ran, as in Redis.
#[test]
fn an_http_request_runs_nothing_and_is_closed() {
    let server = TestServer::start();
    for request in [
        &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\nSET pwned 1\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\nSET pwned 1\r\n",
        b"host: x\r\nSET pwned 1\r\n",
        b"*1\r\n$4\r\npost\r\n*3\r\n$3\r\nSET\r\n$5\r\npwned\r\n$1\r\n1\r\n",
    ] {
        let mut s = raw(server.addr);
        s.write_all(request).unwrap();
        // Nothing is answered, but the first line of `GET / HTTP/1.1` (a GET of two
        // arguments, refused) when it arrived in a read of its own.
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        let refused_get = request.starts_with(b"GET") && got.starts_with(b"-ERR");
        assert!(got.is_empty() || refused_get, "{}", show(&got));
        let mut c = client(server.addr);
        assert_eq!(c.get("pwned").unwrap(), None, "{}", show(request));
    }
    // A command before the request line runs (its reply is not sent when both arrived in
    // one read).
    let mut s = raw(server.addr);
    s.write_all(b"SET before 1\r\nPOST / HTTP/1.1\r\n").unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert!(got.is_empty() || got == b"+OK\r\n", "{}", show(&got));
    let mut c = client(server.addr);
    assert_eq!(c.get("before").unwrap().as_deref(), Some(&b"1"[..]));
}
