//! TLS on `tls-port` with Redis's settings: redis-cli --tls and redis-py with ssl work against
//! it (certificates made here: a CA, the server's, a client's), client certificates are
//! required, optional or not asked for as `tls-auth-clients` says, a client that does not speak
//! TLS is dropped without harm, and bad settings or files stop the start with the file named.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use quiver_node::node_config::{NodeConfig, ServeConfig};
use quiver_node::testing::TestServer;
use quiver_node::Server;
use quiver_service::tls::AuthClients;
use quiver_service::Config;
use quiver_testkit::tool;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::bad_input::{expect_reply, multibulk, raw};

/// PEM files of a test CA, a server certificate for 127.0.0.1 / localhost, and a client
/// certificate, all signed by the CA; and a second CA's client certificate (not trusted).
struct Certs {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    ca_key: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    stranger_cert: PathBuf,
    stranger_key: PathBuf,
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (p.self_signed(&key).unwrap(), key)
}

fn leaf(
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
    ca: &(rcgen::Certificate, KeyPair),
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut p =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, names[0]);
    p.extended_key_usages = vec![usage];
    let cert = p.signed_by(&key, &ca.0, &ca.1).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Certs {
    fn new() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let authority = ca("Quiver test CA");
        let (server_cert, server_key) = leaf(
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
            &authority,
        );
        let (client_cert, client_key) =
            leaf(&["client"], ExtendedKeyUsagePurpose::ClientAuth, &authority);
        let other = ca("Some other CA");
        let (stranger_cert, stranger_key) =
            leaf(&["stranger"], ExtendedKeyUsagePurpose::ClientAuth, &other);
        Certs {
            ca: write("ca.pem", &authority.0.pem()),
            ca_key: write("ca.key", &authority.1.serialize_pem()),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server.key", &server_key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client.key", &client_key),
            stranger_cert: write("stranger.pem", &stranger_cert),
            stranger_key: write("stranger.key", &stranger_key),
            _dir: dir,
        }
    }

    fn configure(&self, c: &mut ServeConfig, auth: AuthClients) {
        let c = &mut c.service;
        c.tls_port = Some(0);
        c.tls_cert_file = Some(self.server_cert.clone());
        c.tls_key_file = Some(self.server_key.clone());
        c.tls_ca_cert_file = Some(self.ca.clone());
        c.tls_auth_clients = auth;
    }
}

/// redis-cli over TLS to `server`, trusting the test CA, with `cert` as its client certificate.
fn cli(server: &TestServer, certs: &Certs, cert: Option<(&Path, &Path)>, args: &[&str]) -> Output {
    let port = server.tls_addr.unwrap().port().to_string();
    let mut c = Command::new(tool::require("redis-cli"));
    c.args(["-h", "127.0.0.1", "-p", &port, "--tls", "--cacert"])
        .arg(&certs.ca);
    if let Some((cert, key)) = cert {
        c.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    c.args(args)
        .output()
        .expect("redis-cli (scripts/test_deps.sh installs it)")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn redis_cli_and_redis_py_speak_tls_with_client_certificates() {
    let certs = Certs::new();
    let server = TestServer::start_with(|c| certs.configure(c, AuthClients::Yes));
    let mine = Some((certs.client_cert.as_path(), certs.client_key.as_path()));
    let set = cli(
        &server,
        &certs,
        mine,
        &["SET", "greeting", "hello over tls"],
    );
    assert_eq!(stdout(&set), "OK\n", "{set:?}");
    let get = cli(&server, &certs, mine, &["GET", "greeting"]);
    assert_eq!(stdout(&get), "hello over tls\n", "{get:?}");
    let setting = cli(
        &server,
        &certs,
        mine,
        &["CONFIG", "GET", "tls-auth-clients"],
    );
    assert_eq!(stdout(&setting), "tls-auth-clients\nyes\n", "{setting:?}");

    // Without a certificate, or with one the CA did not sign: no connection.
    for cert in [
        None,
        Some((certs.stranger_cert.as_path(), certs.stranger_key.as_path())),
    ] {
        let refused = cli(&server, &certs, cert, &["GET", "greeting"]);
        assert!(
            !stdout(&refused).contains("hello over tls"),
            "{cert:?} read the key: {refused:?}"
        );
    }

    // redis-py with ssl, the same CA and client certificate.
    let script = r#"
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), ssl=True, ssl_ca_certs=sys.argv[2],
                ssl_certfile=sys.argv[3], ssl_keyfile=sys.argv[4])
r.set("from-python", "42")
print(r.get("greeting").decode(), r.incr("from-python"))
"#;
    let py = Command::new(tool::require("python3"))
        .arg("-c")
        .arg(script)
        .arg(server.tls_addr.unwrap().port().to_string())
        .args([&certs.ca, &certs.client_cert, &certs.client_key])
        .output()
        .expect("python3");
    assert_eq!(stdout(&py), "hello over tls 43\n", "{py:?}");

    // The plain port serves the same data.
    let mut s = raw(server.addr);
    s.write_all(&multibulk(&[b"GET", b"from-python"])).unwrap();
    expect_reply(&mut s, b"$2\r\n43\r\n");
}

#[test]
fn client_certificates_may_be_optional_or_not_asked_for() {
    let certs = Certs::new();
    for auth in [AuthClients::Optional, AuthClients::No] {
        let server = TestServer::start_with(|c| certs.configure(c, auth));
        let ping = cli(&server, &certs, None, &["PING"]);
        assert_eq!(stdout(&ping), "PONG\n", "{auth}: {ping:?}");
    }
    // Optional still checks a certificate that is presented.
    let server = TestServer::start_with(|c| certs.configure(c, AuthClients::Optional));
    let stranger = Some((certs.stranger_cert.as_path(), certs.stranger_key.as_path()));
    let refused = cli(&server, &certs, stranger, &["PING"]);
    assert_ne!(stdout(&refused), "PONG\n", "{refused:?}");
}

#[test]
fn a_client_that_does_not_speak_tls_is_dropped_and_the_server_serves_on() {
    let certs = Certs::new();
    let server = TestServer::start_with(|c| certs.configure(c, AuthClients::No));
    let mut plain = raw(server.tls_addr.unwrap());
    plain.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut buf = Vec::new();
    // The handshake fails: at most a TLS alert comes back, then the connection closes.
    let _ = plain.read_to_end(&mut buf);
    assert!(!String::from_utf8_lossy(&buf).contains("PONG"), "{buf:?}");
    let ping = cli(&server, &certs, None, &["PING"]);
    assert_eq!(stdout(&ping), "PONG\n", "{ping:?}");
    let mut s = raw(server.addr);
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    expect_reply(&mut s, b"+PONG\r\n");
}

#[test]
fn bad_tls_settings_stop_the_start() {
    let certs = Certs::new();
    let tmp = tempfile::tempdir().unwrap();
    let base = || {
        let mut c = ServeConfig {
            service: Config {
                port: 0,
                ..Config::default()
            },
            node: NodeConfig {
                dir: tmp.path().join("store"),
                ..NodeConfig::default()
            },
        };
        certs.configure(&mut c, AuthClients::Yes);
        c
    };
    let start = |c: ServeConfig| match Server::bind(c) {
        Ok(_) => panic!("the server started"),
        Err(e) => e.to_string(),
    };

    let mut c = base();
    c.service.tls_key_file = None;
    assert!(start(c).contains("tls-port needs tls-cert-file and tls-key-file"));
    let mut c = base();
    c.service.tls_ca_cert_file = None;
    assert!(start(c).contains("tls-auth-clients yes needs tls-ca-cert-file"));
    let mut c = base();
    c.service.tls_cert_file = Some(tmp.path().join("missing.pem"));
    let e = start(c);
    assert!(
        e.contains("tls-cert-file") && e.contains("missing.pem"),
        "{e}"
    );
    let mut c = base();
    c.service.tls_key_file = Some(certs.client_key.clone());
    let e = start(c);
    assert!(
        e.contains("tls-key-file"),
        "a key of another certificate: {e}"
    );
    let mut c = base();
    c.service.tls_ca_cert_file = Some(certs.server_key.clone());
    let e = start(c);
    assert!(
        e.contains("tls-ca-cert-file"),
        "a key where the CA should be: {e}"
    );
    assert!(
        !tmp.path().join("store").exists(),
        "the store was opened before the refusal"
    );
    // The settings parse from TOML with Redis's names.
    let c = Config::from_toml(
        "tls-port = 6380\ntls-cert-file = \"a.pem\"\ntls-key-file = \"a.key\"\n\
         tls-ca-cert-file = \"ca.pem\"\ntls-auth-clients = \"optional\"\n",
    )
    .unwrap();
    assert_eq!(c.tls_port, Some(6380));
    assert_eq!(c.tls_auth_clients, AuthClients::Optional);
    assert!(Config::from_toml("tls-auth-clients = \"maybe\"\n").is_err());
}

/// A client certificate made as an operator makes one with `openssl x509 -req`: without an
/// extension file it is X.509 version 1, which rustls refuses (the connection is closed);
/// with the README's extension file it is version 3 and works.
#[test]
fn openssl_client_certificates_need_the_readmes_extension_file() {
    let certs = Certs::new();
    let server = TestServer::start_with(|c| certs.configure(c, AuthClients::Yes));
    let dir = certs._dir.path();
    let openssl = |args: &[&str]| {
        let out = Command::new(tool::require("openssl"))
            .current_dir(dir)
            .args(args)
            .output()
            .expect("openssl (scripts/test_deps.sh installs it)");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "op.key",
        "-out",
        "op.csr",
        "-subj",
        "/CN=operator",
    ]);
    let ca_key = certs.ca_key.to_str().unwrap();
    let sign = [
        "x509", "-req", "-in", "op.csr", "-CA", "ca.pem", "-CAkey", ca_key,
    ];
    openssl(
        &[
            &sign[..],
            &["-CAcreateserial", "-days", "1", "-out", "v1.pem"],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("client.ext"),
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    let v3 = [
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "client.ext",
        "-out",
        "v3.pem",
    ];
    openssl(&[&sign[..], &v3[..]].concat());
    let key = dir.join("op.key");
    let v1 = cli(
        &server,
        &certs,
        Some((&dir.join("v1.pem"), &key)),
        &["PING"],
    );
    assert_ne!(
        stdout(&v1),
        "PONG\n",
        "a version 1 certificate was accepted: {v1:?}"
    );
    let v3 = cli(
        &server,
        &certs,
        Some((&dir.join("v3.pem"), &key)),
        &["PING"],
    );
    assert_eq!(stdout(&v3), "PONG\n", "{v3:?}");
}
