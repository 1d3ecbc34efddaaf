//! ACL users as in Redis 7.0: ACL SETUSER / GETUSER / DELUSER / LIST / USERS / WHOAMI / CAT,
//! AUTH user pass and HELLO AUTH, command, category and key-pattern permissions. The replies
//! and errors below are redis-server 7.0.15's, recorded by hand with redis-cli.

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;

use quiver_node::node_config::{NodeConfig, ServeConfig};
use quiver_node::testing::TestServer;
use quiver_node::Server;
use quiver_service::Config;
use quiver_testkit::tool;

use crate::bad_input::{expect_closed, expect_reply, multibulk, raw};

fn send(s: &mut TcpStream, args: &[&[u8]]) {
    s.write_all(&multibulk(args)).unwrap();
}

const PW_HASH: &str = "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4";

/// bob: on, password `pw`, keys `app:*`, the read commands and SET, not STRLEN.
fn with_bob(s: &mut TcpStream) {
    send(
        s,
        &[
            b"ACL", b"SETUSER", b"bob", b"on", b">pw", b"~app:*", b"&ch", b"+@read", b"+set",
            b"-strlen",
        ],
    );
    expect_reply(s, b"+OK\r\n");
}

#[test]
fn users_are_listed_described_and_deleted_as_in_redis() {
    let server = TestServer::start();
    let mut s = raw(server.addr);
    send(&mut s, &[b"ACL", b"WHOAMI"]);
    send(&mut s, &[b"ACL", b"LIST"]);
    send(&mut s, &[b"ACL", b"SETUSER", b"alice"]);
    send(&mut s, &[b"ACL", b"LIST"]);
    expect_reply(
        &mut s,
        b"$7\r\ndefault\r\n\
          *1\r\n$34\r\nuser default on nopass ~* &* +@all\r\n\
          +OK\r\n\
          *2\r\n$34\r\nuser alice off resetchannels -@all\r\n$34\r\nuser default on nopass ~* &* +@all\r\n",
    );
    with_bob(&mut s);
    send(&mut s, &[b"ACL", b"GETUSER", b"bob"]);
    let commands = "-@all +@read +set -strlen";
    expect_reply(
        &mut s,
        format!(
            "*12\r\n$5\r\nflags\r\n*1\r\n$2\r\non\r\n$9\r\npasswords\r\n*1\r\n$64\r\n{PW_HASH}\r\n\
             $8\r\ncommands\r\n${}\r\n{commands}\r\n$4\r\nkeys\r\n$6\r\n~app:*\r\n\
             $8\r\nchannels\r\n$3\r\n&ch\r\n$9\r\nselectors\r\n*0\r\n",
            commands.len()
        )
        .as_bytes(),
    );
    send(&mut s, &[b"ACL", b"GETUSER", b"nosuch"]);
    send(&mut s, &[b"ACL", b"USERS"]);
    send(&mut s, &[b"ACL", b"DELUSER", b"default"]);
    send(&mut s, &[b"ACL", b"DELUSER", b"nosuch", b"alice"]);
    send(&mut s, &[b"ACL", b"USERS"]);
    expect_reply(
        &mut s,
        b"$-1\r\n\
          *3\r\n$5\r\nalice\r\n$3\r\nbob\r\n$7\r\ndefault\r\n\
          -ERR The 'default' user cannot be removed\r\n\
          :1\r\n\
          *2\r\n$3\r\nbob\r\n$7\r\ndefault\r\n",
    );
}

#[test]
fn bad_rules_and_subcommands_get_redis_errors() {
    let server = TestServer::start();
    let mut s = raw(server.addr);
    for (args, reply) in [
        (
            &[&b"ACL"[..], b"SETUSER", b"bob", b"+nosuch"][..],
            &b"-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n"[..],
        ),
        (
            &[b"ACL", b"SETUSER", b"bob", b"bogus"],
            b"-ERR Error in ACL SETUSER modifier 'bogus': Syntax error\r\n",
        ),
        (
            &[b"ACL", b"SETUSER", b"bob", b"allkeys", b"~x"],
            b"-ERR Error in ACL SETUSER modifier '~x': Adding a pattern after the * pattern (or \
              the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to \
              start with an empty list of patterns\r\n",
        ),
        (
            &[b"ACL", b"SETUSER", b"bob", b"<zz"],
            b"-ERR Error in ACL SETUSER modifier '<zz': The password you are trying to remove \
              from the user does not exist\r\n",
        ),
        (
            &[b"ACL", b"SETUSER", b"bob", b"#abc"],
            b"-ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 \
              characters and contain only lowercase hexadecimal characters\r\n",
        ),
        (
            &[b"ACL", b"SETUSER"],
            b"-ERR wrong number of arguments for 'acl|setuser' command\r\n",
        ),
        (
            &[b"ACL", b"WHOAMI", b"extra"],
            b"-ERR wrong number of arguments for 'acl|whoami' command\r\n",
        ),
        (
            &[b"ACL", b"NOSUCH"],
            b"-ERR unknown subcommand 'NOSUCH'. Try ACL HELP.\r\n",
        ),
        (
            &[b"ACL"],
            b"-ERR wrong number of arguments for 'acl' command\r\n",
        ),
        (
            &[b"ACL", b"CAT", b"nosuch"],
            b"-ERR Unknown category 'nosuch'\r\n",
        ),
        (
            &[b"AUTH", b"onlypass"],
            b"-ERR AUTH <password> called without any password configured for the default \
              user. Are you sure your configuration is correct?\r\n",
        ),
        (
            &[b"AUTH", b"nosuch", b"x"],
            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        ),
    ] {
        send(&mut s, args);
        expect_reply(&mut s, reply);
    }
    // A refused SETUSER changes nothing: bob was never made.
    send(&mut s, &[b"ACL", b"USERS"]);
    expect_reply(&mut s, b"*1\r\n$7\r\ndefault\r\n");
}

#[test]
fn a_user_runs_only_its_commands_on_its_keys() {
    let server = TestServer::start();
    let mut admin = raw(server.addr);
    with_bob(&mut admin);
    send(&mut admin, &[b"SET", b"app:1", b"one"]);
    expect_reply(&mut admin, b"+OK\r\n");

    let mut s = raw(server.addr);
    send(&mut s, &[b"AUTH", b"bob", b"wrong"]);
    send(&mut s, &[b"AUTH", b"bob", b"pw"]);
    send(&mut s, &[b"GET", b"app:1"]);
    send(&mut s, &[b"SET", b"other", b"1"]);
    send(&mut s, &[b"DEL", b"app:1"]);
    send(&mut s, &[b"STRLEN", b"app:1"]);
    send(&mut s, &[b"MGET", b"app:1", b"other"]);
    send(
        &mut s,
        &[b"BATCH", b"PUT", b"app:2", b"x", b"PUT", b"other", b"y"],
    );
    send(&mut s, &[b"MULTI"]);
    send(&mut s, &[b"EXEC"]);
    send(&mut s, &[b"ACL", b"WHOAMI"]);
    expect_reply(
        &mut s,
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n\
          +OK\r\n\
          $3\r\none\r\n\
          -NOPERM this user has no permissions to access one of the keys used as arguments\r\n\
          -NOPERM this user has no permissions to run the 'del' command\r\n\
          -NOPERM this user has no permissions to run the 'strlen' command\r\n\
          -NOPERM this user has no permissions to access one of the keys used as arguments\r\n\
          -NOPERM this user has no permissions to run the 'batch' command\r\n\
          -NOPERM this user has no permissions to run the 'multi' command\r\n\
          -EXECABORT Transaction discarded because of: NOPERM this user has no permissions to run the 'exec' command\r\n\
          -NOPERM this user has no permissions to run the 'acl|whoami' command\r\n",
    );

    // A change to bob applies to his connection at its next command; BATCH's keys are checked.
    send(
        &mut admin,
        &[b"ACL", b"SETUSER", b"bob", b"-get", b"+batch"],
    );
    expect_reply(&mut admin, b"+OK\r\n");
    send(&mut s, &[b"GET", b"app:1"]);
    send(
        &mut s,
        &[b"BATCH", b"PUT", b"app:2", b"x", b"PUT", b"other", b"y"],
    );
    send(&mut s, &[b"BATCH", b"PUT", b"app:2", b"x"]);
    expect_reply(
        &mut s,
        b"-NOPERM this user has no permissions to run the 'get' command\r\n\
          -NOPERM this user has no permissions to access one of the keys used as arguments\r\n\
          +OK\r\n",
    );

    // Switched off, bob cannot log in again; deleted, his connection is closed.
    send(&mut admin, &[b"ACL", b"SETUSER", b"bob", b"off"]);
    expect_reply(&mut admin, b"+OK\r\n");
    let mut again = raw(server.addr);
    send(&mut again, &[b"AUTH", b"bob", b"pw"]);
    expect_reply(
        &mut again,
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    send(&mut admin, &[b"ACL", b"DELUSER", b"bob"]);
    expect_reply(&mut admin, b":1\r\n");
    expect_closed(&mut s);
}

#[test]
fn requirepass_is_the_default_users_password() {
    let server = TestServer::start_with(|c| c.service.requirepass = Some("secret".into()));
    let mut s = raw(server.addr);
    send(&mut s, &[b"GET", b"k"]);
    send(&mut s, &[b"AUTH", b"default", b"secret"]);
    send(
        &mut s,
        &[
            b"ACL", b"SETUSER", b"reader", b"on", b"nopass", b"allkeys", b"+@read",
        ],
    );
    send(&mut s, &[b"HELLO", b"2", b"AUTH", b"reader", b"anything"]);
    expect_reply(
        &mut s,
        b"-NOAUTH Authentication required.\r\n+OK\r\n+OK\r\n*14\r\n",
    );
    let mut r = raw(server.addr);
    send(&mut r, &[b"AUTH", b"reader", b"x"]);
    send(&mut r, &[b"ACL", b"WHOAMI"]);
    send(&mut r, &[b"SET", b"k", b"v"]);
    send(&mut r, &[b"RESET"]);
    send(&mut r, &[b"GET", b"k"]);
    expect_reply(
        &mut r,
        b"+OK\r\n-NOPERM this user has no permissions to run the 'acl|whoami' command\r\n\
          -NOPERM this user has no permissions to run the 'set' command\r\n\
          +RESET\r\n-NOAUTH Authentication required.\r\n",
    );
}

/// A real client logs in as a user and gets Redis's NoPermissionError.
#[test]
fn redis_py_logs_in_as_a_user() {
    let server = TestServer::start();
    let mut admin = raw(server.addr);
    with_bob(&mut admin);
    let script = r#"
import sys, redis
r = redis.Redis(port=int(sys.argv[1]), username="bob", password="pw")
r.set("app:x", "1")
print(r.get("app:x").decode())
try:
    r.set("elsewhere", "1")
except redis.exceptions.NoPermissionError as e:
    print("refused:", e)
"#;
    let out = Command::new(tool::require("python3"))
        .arg("-c")
        .arg(script)
        .arg(server.port().to_string())
        .output()
        .expect("python3");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1\nrefused: this user has no permissions to access one of the keys used as arguments\n",
        "{out:?}"
    );
}

#[test]
fn the_acl_file_is_read_at_start_by_acl_load_and_written_by_acl_save() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("users.acl");
    std::fs::write(&file, format!("user bob on #{PW_HASH} ~app:* +@read\n")).unwrap();
    let server = TestServer::start_with(|c| c.service.aclfile = Some(file.clone()));
    let mut bob = raw(server.addr);
    send(&mut bob, &[b"AUTH", b"bob", b"pw"]);
    send(&mut bob, &[b"SET", b"app:1", b"x"]);
    expect_reply(
        &mut bob,
        b"+OK\r\n-NOPERM this user has no permissions to run the 'set' command\r\n",
    );

    // The file has no default user: it is made as Redis makes it.
    let mut admin = raw(server.addr);
    send(
        &mut admin,
        &[
            b"ACL", b"SETUSER", b"carol", b"on", b"nopass", b"allkeys", b"+get",
        ],
    );
    send(&mut admin, &[b"ACL", b"SAVE"]);
    expect_reply(&mut admin, b"+OK\r\n+OK\r\n");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!(
            "user bob on #{PW_HASH} ~app:* resetchannels -@all +@read\n\
             user carol on nopass ~* resetchannels -@all +get\n\
             user default on nopass ~* &* +@all\n"
        )
    );

    // ACL LOAD replaces every user; bob is gone, and so is his connection.
    std::fs::write(&file, "user carol on nopass ~* +@all\n").unwrap();
    send(&mut admin, &[b"ACL", b"LOAD"]);
    send(&mut admin, &[b"ACL", b"USERS"]);
    expect_reply(&mut admin, b"+OK\r\n*2\r\n$5\r\ncarol\r\n$7\r\ndefault\r\n");
    expect_closed(&mut bob);

    // A bad file changes nothing and says which line.
    std::fs::write(&file, "user dave on\nuser erin +nosuch\n").unwrap();
    send(&mut admin, &[b"ACL", b"LOAD"]);
    send(&mut admin, &[b"ACL", b"USERS"]);
    expect_reply(
        &mut admin,
        format!(
            "-ERR {}: line 2: Error in user declaration '+nosuch': Unknown command or category \
             name in ACL\r\n*2\r\n$5\r\ncarol\r\n$7\r\ndefault\r\n",
            file.display()
        )
        .as_bytes(),
    );
}

#[test]
fn a_bad_acl_file_stops_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("users.acl");
    std::fs::write(&file, "user a on\nnot a user line\n").unwrap();
    let config = |aclfile: std::path::PathBuf| ServeConfig {
        service: Config {
            port: 0,
            aclfile: Some(aclfile),
            ..Config::default()
        },
        node: NodeConfig {
            dir: tmp.path().join("store"),
            ..NodeConfig::default()
        },
    };
    let err = match Server::bind(config(file.clone())) {
        Ok(_) => panic!("started with a bad ACL file"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("users.acl: line 2: should start with user keyword"),
        "{err}"
    );
    let err = match Server::bind(config(tmp.path().join("missing.acl"))) {
        Ok(_) => panic!("started without its ACL file"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("missing.acl"), "{err}");
    assert!(
        !tmp.path().join("store").exists(),
        "the store was opened first"
    );
}

/// ACL GENPASS: random hex of the bits asked (256 by default), never twice the same.
#[test]
fn acl_genpass_makes_random_passwords_of_the_size_asked() {
    let server = TestServer::start();
    let mut c = crate::bad_input::client(server.addr);
    let pass = |c: &mut quiver_client::Connection, args: &[&[u8]]| {
        let v = c.command(args).unwrap();
        String::from_utf8(v.as_bytes().unwrap().to_vec()).unwrap()
    };
    let a = pass(&mut c, &[b"ACL", b"GENPASS"]);
    let b = pass(&mut c, &[b"ACL", b"GENPASS"]);
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|h| h.is_ascii_hexdigit()), "{a}");
    assert_ne!(a, b);
    assert_eq!(pass(&mut c, &[b"ACL", b"GENPASS", b"32"]).len(), 8);
    assert_eq!(pass(&mut c, &[b"ACL", b"GENPASS", b"5"]).len(), 2);
}

/// ACL LOG: failed logins and NOPERM refusals (the command, or the key), newest first, like
/// events counted on one entry; RESET empties it.
#[test]
fn acl_log_records_failed_logins_and_refusals() {
    use quiver_client::Value;
    let server = TestServer::start();
    let mut admin = crate::bad_input::client(server.addr);
    let run = |c: &mut quiver_client::Connection, args: &[&str]| {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        c.command(&a)
    };
    run(
        &mut admin,
        &["ACL", "SETUSER", "ro", "on", ">pw", "~a*", "+get", "+auth"],
    )
    .unwrap();
    let mut s = raw(server.addr);
    for _ in 0..2 {
        s.write_all(&multibulk(&[b"AUTH", b"ro", b"wrong"]))
            .unwrap();
        let line = crate::bad_input::read_line(&mut s);
        assert!(line.starts_with(b"-WRONGPASS"), "{line:?}");
    }
    s.write_all(&multibulk(&[b"AUTH", b"ro", b"pw"])).unwrap();
    expect_reply(&mut s, b"+OK\r\n");
    s.write_all(&multibulk(&[b"SET", b"a1", b"v"])).unwrap();
    let line = crate::bad_input::read_line(&mut s);
    assert!(line.starts_with(b"-NOPERM"), "{line:?}");
    s.write_all(&multibulk(&[b"GET", b"b"])).unwrap();
    let line = crate::bad_input::read_line(&mut s);
    assert!(line.starts_with(b"-NOPERM"), "{line:?}");

    let Value::Array(entries) = run(&mut admin, &["ACL", "LOG"]).unwrap() else {
        panic!("ACL LOG")
    };
    let field = |e: &Value, name: &str| match e {
        Value::Array(f) => f
            .chunks(2)
            .find(|p| p[0].as_bytes() == Some(name.as_bytes()))
            .map(|p| p[1].clone())
            .unwrap_or_else(|| panic!("no {name} in {e:?}")),
        other => panic!("{other:?}"),
    };
    let text = |v: Value| String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned();
    let seen: Vec<(String, String, String)> = entries
        .iter()
        .map(|e| {
            (
                text(field(e, "reason")),
                text(field(e, "object")),
                text(field(e, "username")),
            )
        })
        .collect();
    let want = |r: &str, o: &str| (r.to_string(), o.to_string(), "ro".to_string());
    assert_eq!(
        seen,
        [
            want("key", "b"),
            want("command", "set"),
            want("auth", "AUTH")
        ]
    );
    assert_eq!(field(&entries[2], "count"), Value::Integer(2));
    assert_eq!(text(field(&entries[0], "context")), "toplevel");
    assert!(text(field(&entries[0], "client-info")).contains("user=ro"));
    let Value::Array(one) = run(&mut admin, &["ACL", "LOG", "1"]).unwrap() else {
        panic!("ACL LOG 1")
    };
    assert_eq!(one.len(), 1);
    assert_eq!(
        run(&mut admin, &["ACL", "LOG", "RESET"]).unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        run(&mut admin, &["ACL", "LOG"]).unwrap(),
        Value::Array(vec![])
    );
}

/// A hardening file written for Redis starts: rules and renames naming Redis commands Quiver
/// does not have (EVAL, SCRIPT) are accepted to no effect, as Redis accepts them, and those
/// naming Quiver's (DEBUG, SHUTDOWN, CONFIG SET) apply.
#[test]
fn an_acl_file_and_renames_written_for_redis_start() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("users.acl");
    std::fs::write(
        &file,
        "user x on nopass ~* +@all -debug -eval -shutdown -script|flush -config|set\n\
         user default on nopass ~* +@all\n",
    )
    .unwrap();
    let renames = Config::from_toml("[rename-command]\nEVAL = \"\"\nKEYS = \"\"\nDEBUG = \"\"\n")
        .unwrap()
        .rename_command;
    let server = TestServer::start_with(|c| {
        c.service.aclfile = Some(file.clone());
        c.service.rename_command = renames;
    });
    let mut s = raw(server.addr);
    send(&mut s, &[b"ACL", b"GETUSER", b"x"]);
    let rules = b"+@all -debug -eval -shutdown -script|flush -config|set";
    let mut expected =
        b"*12\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$6\r\nnopass\r\n$9\r\npasswords\r\n\
        *0\r\n$8\r\ncommands\r\n"
            .to_vec();
    expected.extend_from_slice(format!("${}\r\n", rules.len()).as_bytes());
    expected.extend_from_slice(rules);
    expected.extend_from_slice(
        b"\r\n$4\r\nkeys\r\n$2\r\n~*\r\n$8\r\nchannels\r\n$0\r\n\r\n$9\r\nselectors\r\n*0\r\n",
    );
    expect_reply(&mut s, &expected);
    send(&mut s, &[b"AUTH", b"x", b"any"]);
    send(&mut s, &[b"CONFIG", b"SET", b"maxclients", b"10"]);
    send(&mut s, &[b"SHUTDOWN"]);
    send(&mut s, &[b"KEYS", b"*"]);
    send(&mut s, &[b"GET", b"k"]);
    expect_reply(
        &mut s,
        b"+OK\r\n-NOPERM this user has no permissions to run the 'config|set' command\r\n\
          -NOPERM this user has no permissions to run the 'shutdown' command\r\n\
          -ERR unknown command 'KEYS', with args beginning with: '*' \r\n$-1\r\n",
    );
    // The refusal is logged under the subcommand's name, as Redis logs it.
    send(&mut s, &[b"AUTH", b"default", b"any"]);
    send(&mut s, &[b"ACL", b"LOG", b"1"]);
    expect_reply(&mut s, b"+OK\r\n*1\r\n*14\r\n$5\r\ncount\r\n:1\r\n$6\r\nreason\r\n$7\r\ncommand\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$8\r\nshutdown\r\n");
}
