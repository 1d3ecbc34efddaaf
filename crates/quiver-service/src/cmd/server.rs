//! Commands about the server itself that every RESP service answers alike: TIME, and SLOWLOG
//! GET / LEN / RESET / HELP over the service's slow log (`slowlog`).

use bytes::Bytes;

use crate::errors::{err, unknown_subcommand, wrong_arity};
use crate::frame::string2ll;
use crate::reply::Reply;
use crate::service::Core;
use crate::slowlog::Entry;

/// Entries SLOWLOG GET answers without a count.
const SLOWLOG_GET_DEFAULT: usize = 10;

const SLOWLOG_HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

/// TIME: the Unix time as seconds and microseconds, two bulk strings.
pub fn time() -> Reply {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Reply::Array(vec![
        Reply::text(now.as_secs().to_string()),
        Reply::text(now.subsec_micros().to_string()),
    ])
}

/// SLOWLOG `args[1]` ... (SLOWLOG's own arity was checked).
pub fn slowlog(core: &Core, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let fixed = |n: usize, name: &str, reply: &dyn Fn() -> Reply| {
        if args.len() == n {
            reply()
        } else {
            wrong_arity(&format!("slowlog|{name}"))
        }
    };
    match &sub[..] {
        // Redis 7.0's own words for this one.
        b"get" if args.len() > 3 => {
            err("ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.")
        }
        b"get" => match args.get(2).map(|c| string2ll(c)) {
            None => entries(core, Some(SLOWLOG_GET_DEFAULT)),
            Some(Some(-1)) => entries(core, None),
            Some(Some(n)) if n >= 0 => entries(core, Some(n as usize)),
            Some(_) => err("ERR count should be greater than or equal to -1"),
        },
        b"len" => fixed(2, "len", &|| Reply::Integer(core.slowlog.len() as i64)),
        b"reset" => fixed(2, "reset", &|| {
            core.slowlog.reset();
            Reply::OK
        }),
        b"help" => fixed(2, "help", &|| {
            Reply::Array(SLOWLOG_HELP.iter().map(|l| Reply::simple(*l)).collect())
        }),
        _ => unknown_subcommand(&args[1], "SLOWLOG"),
    }
}

/// The newest `count` entries (all for `None`), each as Redis sends it: id, time, duration,
/// arguments, client address, client name.
fn entries(core: &Core, count: Option<usize>) -> Reply {
    let entry = |e: Entry| {
        Reply::Array(vec![
            Reply::Integer(e.id as i64),
            Reply::Integer(e.time as i64),
            Reply::Integer(e.duration_us as i64),
            Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
            Reply::text(e.addr),
            Reply::Bulk(e.name),
        ])
    };
    Reply::Array(core.slowlog.newest(count).into_iter().map(entry).collect())
}
