//! The command line's parsing, checked: clap's own consistency checks and the flags that need
//! more than a declaration.

use super::*;
use clap::CommandFactory;

#[test]
fn cli_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn lists_parse() {
    let cli = Cli::try_parse_from([
        "quiver",
        "bench",
        "local",
        "--width",
        "1,8,32",
        "--backend",
        "mmap,io_uring",
        "--distribution",
        "uniform,zipf",
        "--dir",
        "/tmp/x",
    ])
    .unwrap();
    let Command::Bench(BenchCommand::Local(a)) = cli.command else {
        panic!("parsed as {:?}", cli.command)
    };
    assert_eq!(a.width, vec![1, 8, 32]);
    assert_eq!(a.backend, vec![BackendKind::Mmap, BackendKind::Uring]);
    assert_eq!(
        a.distribution,
        vec![Distribution::Uniform, Distribution::Zipf]
    );
    assert_eq!(cli.dir, Some(PathBuf::from("/tmp/x")));
    assert!(Cli::try_parse_from(["quiver", "bench", "local", "--backend", "tape"]).is_err());
}

#[test]
fn connection_flags_parse() {
    let cli = Cli::try_parse_from(["quiver", "get", "k", "--port", "7380", "--timeout-s", "0.5"])
        .unwrap();
    let conn = cli.command.conn().expect("get is a server command");
    assert_eq!(conn.addr(), "127.0.0.1:7380");
    assert_eq!(conn.timeout_s, Duration::from_millis(500));
    for bad in ["0", "-1", "nan", "inf", "soon"] {
        assert!(
            Cli::try_parse_from(["quiver", "ping", "--timeout-s", bad]).is_err(),
            "{bad}"
        );
    }
    let cli = Cli::try_parse_from(["quiver", "ping", "--host", "::1"]).unwrap();
    assert_eq!(cli.command.conn().unwrap().addr(), "[::1]:7379");
    // serve keeps its own --port: the one it listens on.
    let cli = Cli::try_parse_from(["quiver", "serve", "--port", "0"]).unwrap();
    assert!(cli.command.conn().is_none());
    let Command::Serve(a) = cli.command else {
        panic!("parsed as {:?}", cli.command)
    };
    assert_eq!(a.listen.port, Some(0));
}

#[test]
fn bench_net_flags_parse() {
    let cli = Cli::try_parse_from([
        "quiver",
        "bench",
        "net",
        "--port",
        "6379",
        "--rate-sweep",
        "1000,2000.5",
        "--tag",
        "run=a=b",
        "--tag",
        "host=x",
        "--distribution",
        "zipf",
    ])
    .unwrap();
    let Command::Bench(BenchCommand::Net(a)) = cli.command else {
        panic!("parsed as {:?}", cli.command)
    };
    assert_eq!(a.rate_sweep, Some(vec![1000.0, 2000.5]));
    assert_eq!(
        a.tags,
        [("run".into(), "a=b".into()), ("host".into(), "x".into())]
    );
    assert_eq!(a.distribution, Distribution::Zipf);
    assert_eq!((a.connections, a.depth, a.width), (50, None, 1));
    let net = |extra: &[&str]| {
        let mut args = vec!["quiver", "bench", "net", "--port", "1"];
        args.extend_from_slice(extra);
        Cli::try_parse_from(args)
    };
    assert!(net(&["--depth", "4", "--rate", "100"]).is_err());
    assert!(net(&["--rate", "100", "--rate-sweep", "1,2"]).is_err());
    assert!(net(&["--tag", "novalue"]).is_err());
    assert!(net(&["--tag", "=v"]).is_err());
    assert!(
        Cli::try_parse_from(["quiver", "bench", "net"]).is_err(),
        "--port is required"
    );
    // A soak's mix and its sampling.
    let cli = net(&[
        "--get-ratio",
        "0.6",
        "--del-ratio",
        "0.1",
        "--expire-ratio",
        "0.1",
        "--ttl-ms",
        "500-2000",
        "--value-size-max",
        "1024",
        "--sample-every-s",
        "10",
        "--server-dir",
        "/tmp/d",
    ])
    .unwrap();
    let Command::Bench(BenchCommand::Net(a)) = cli.command else {
        panic!("parsed as {:?}", cli.command)
    };
    assert_eq!((a.del_ratio, a.expire_ratio), (0.1, 0.1));
    assert_eq!(a.ttl_ms, (500, 2000));
    assert_eq!(a.value_size_max, Some(1024));
    assert_eq!(a.sample_every_s, Some(10.0));
    assert_eq!(a.server_dir, Some(PathBuf::from("/tmp/d")));
    let Command::Bench(BenchCommand::Net(a)) = net(&["--ttl-ms", "750"]).unwrap().command else {
        panic!("bench net")
    };
    assert_eq!(a.ttl_ms, (750, 750));
    assert!(net(&["--ttl-ms", "2000-500"]).is_err());
    assert!(net(&["--ttl-ms", "soon"]).is_err());
    assert!(
        net(&["--server-dir", "/tmp/d"]).is_err(),
        "needs --sample-every-s"
    );
}

#[test]
fn bench_cluster_flags_parse() {
    let cli = Cli::try_parse_from([
        "quiver",
        "bench",
        "cluster",
        "--seeds",
        "127.0.0.1:7000,127.0.0.1:7001",
        "--server-pids",
        "10,11",
        "--keys",
        "1000",
        "--label",
        "quiver",
        "--tag",
        "round=1",
        "--load",
    ])
    .unwrap();
    let Command::Bench(BenchCommand::Cluster(a)) = cli.command else {
        panic!("parsed as {:?}", cli.command)
    };
    assert_eq!(a.seeds, ["127.0.0.1:7000", "127.0.0.1:7001"]);
    assert_eq!(a.server_pids, [10, 11]);
    assert_eq!((a.data.keys, a.width, a.threads), (1000, 32, 4));
    assert_eq!(a.tags, [("round".into(), "1".into())]);
    assert!(a.load && !a.load_only);
    assert_eq!((a.router, a.router_pid), (None, None));
    assert!(
        Cli::try_parse_from(["quiver", "bench", "cluster"]).is_err(),
        "--seeds is required"
    );
    let cli = Cli::try_parse_from([
        "quiver",
        "bench",
        "cluster",
        "--seeds",
        "h:1",
        "--router",
        "127.0.0.1:7380",
        "--router-pid",
        "12",
    ])
    .unwrap();
    let Command::Bench(BenchCommand::Cluster(a)) = cli.command else {
        panic!("parsed as {:?}", cli.command)
    };
    assert_eq!(
        (a.router.as_deref(), a.router_pid),
        (Some("127.0.0.1:7380"), Some(12))
    );
    assert!(
        Cli::try_parse_from([
            "quiver",
            "bench",
            "cluster",
            "--seeds",
            "h:1",
            "--router-pid",
            "12"
        ])
        .is_err(),
        "--router-pid needs --router"
    );
    assert!(Cli::try_parse_from([
        "quiver",
        "bench",
        "cluster",
        "--seeds",
        "h:1",
        "--server-pids",
        "x"
    ])
    .is_err());
}

#[test]
fn mset_takes_pairs_and_negative_values() {
    let cli = Cli::try_parse_from(["quiver", "mset", "a", "-1", "b", "2"]).unwrap();
    let Command::Mset(a) = cli.command else {
        panic!("parsed as {:?}", cli.command)
    };
    assert_eq!(a.pairs, ["a", "-1", "b", "2"]);
    assert!(Cli::try_parse_from(["quiver", "mset", "a"]).is_err());
}
