//! `rename-command` in the config file: a disabled command is unknown to every client, a
//! renamed one answers to its new name only (in MULTI too, through redis-cli too), COMMAND
//! tells the same story, and a setting Redis would refuse stops the server from starting.

use std::io::Write;
use std::process::Command;

use quiver_node::node_config::ServeConfig;
use quiver_node::testing::TestServer;
use quiver_service::table::COMMANDS;
use quiver_service::Config;
use quiver_testkit::tool;

use crate::bad_input::{expect_reply, multibulk, raw, read_line, show};

const SETTINGS: &str = r#"
[rename-command]
FLUSHALL = ""
config = "Cfg-7c1e"
"#;

fn server() -> TestServer {
    let renames = Config::from_toml(SETTINGS).unwrap().rename_command;
    TestServer::start_with(|c| c.service.rename_command = renames)
}

#[test]
fn disabled_and_renamed_commands_answer_as_in_redis() {
    let server = server();
    let mut s = raw(server.addr);
    let mut send = |args: &[&[u8]]| s.write_all(&multibulk(args)).unwrap();

    send(&[b"SET", b"k", b"v"]);
    send(&[b"FLUSHALL"]);
    send(&[b"flushall", b"async"]);
    send(&[b"CONFIG", b"GET", b"maxclients"]);
    send(&[b"cfg-7C1E", b"GET", b"maxclients"]);
    send(&[b"GET", b"k"]);
    expect_reply(
        &mut s,
        b"+OK\r\n\
          -ERR unknown command 'FLUSHALL', with args beginning with: \r\n\
          -ERR unknown command 'flushall', with args beginning with: 'async' \r\n\
          -ERR unknown command 'CONFIG', with args beginning with: 'GET' 'maxclients' \r\n\
          *2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n\
          $1\r\nv\r\n",
    );

    // In a transaction: the new name is queued and runs; the old one aborts it as Redis does.
    let mut send = |args: &[&[u8]]| s.write_all(&multibulk(args)).unwrap();
    send(&[b"MULTI"]);
    send(&[b"cfg-7c1e", b"GET", b"databases"]);
    send(&[b"EXEC"]);
    send(&[b"MULTI"]);
    send(&[b"FLUSHALL"]);
    send(&[b"EXEC"]);
    send(&[b"EXISTS", b"k"]);
    expect_reply(
        &mut s,
        b"+OK\r\n+QUEUED\r\n*1\r\n*2\r\n$9\r\ndatabases\r\n$2\r\n16\r\n\
          +OK\r\n\
          -ERR unknown command 'FLUSHALL', with args beginning with: \r\n\
          -EXECABORT Transaction discarded because of previous errors.\r\n\
          :1\r\n",
    );
}

#[test]
fn command_leaves_out_a_disabled_command_and_finds_a_renamed_one() {
    let server = server();
    let mut s = raw(server.addr);
    s.write_all(&multibulk(&[b"COMMAND", b"COUNT"])).unwrap();
    let count = read_line(&mut s);
    assert_eq!(
        show(&count),
        show(format!(":{}\r\n", COMMANDS.len() - 1).as_bytes())
    );
    s.write_all(&multibulk(&[b"COMMAND", b"INFO", b"flushall", b"config"]))
        .unwrap();
    expect_reply(&mut s, b"*2\r\n$-1\r\n$-1\r\n");
    // A renamed command is described under its own name, as Redis does.
    s.write_all(&multibulk(&[b"COMMAND", b"INFO", b"cfg-7c1e"]))
        .unwrap();
    expect_reply(&mut s, b"*1\r\n*10\r\n$6\r\nconfig\r\n:-2\r\n");
}

/// A real client sees the same: redis-cli runs the renamed command and reports the old name
/// unknown.
#[test]
fn redis_cli_runs_the_new_name() {
    let server = server();
    let cli = |args: &[&str]| {
        let out = Command::new(tool::require("redis-cli"))
            .args(["-p", &server.port().to_string()])
            .args(args)
            .output()
            .expect("redis-cli (scripts/test_deps.sh installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        cli(&["cfg-7c1e", "GET", "port"]),
        format!("port\n{}\n", server.port())
    );
    assert!(
        cli(&["FLUSHALL"]).contains("ERR unknown command 'FLUSHALL'"),
        "{}",
        cli(&["FLUSHALL"])
    );
}

#[test]
fn a_setting_redis_refuses_stops_the_start() {
    for (toml, expected) in [
        ("[rename-command]\nNOSUCH = \"x\"\n", "no such command"),
        ("[rename-command]\nGET = \"set\"\n", "already exists"),
        ("[rename-command]\nGET = \"two words\"\n", "printable"),
        (
            "[rename-command]\nGET = \"a\"\nSET = \"A\"\n",
            "already the new name",
        ),
        (
            "[rename-command]\nGET = \"x\"\nget = \"y\"\n",
            "renamed twice",
        ),
    ] {
        let err = Config::from_toml(toml).unwrap_err().to_string();
        assert!(err.contains(expected), "{toml:?}: {err}");
    }
    // A cluster node may not rename what the cluster's members send each other.
    let mut config = ServeConfig::from_toml("[rename-command]\nCHAIN = \"\"\n").unwrap();
    config.node.cluster_enabled = true;
    config.node.cluster_etcd = Some("127.0.0.1:2379".into());
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("\"chain\""), "{err}");
    // The same rename on a standalone server is fine.
    config.node.cluster_enabled = false;
    config.validate().unwrap();
}
