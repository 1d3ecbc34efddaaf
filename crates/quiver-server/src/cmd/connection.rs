//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT.

use bytes::Bytes;

use crate::cmd::Cmd;
use crate::errors::{self, err, unknown_subcommand, wrong_arity};
use crate::exec::Ctx;
use crate::frame::string2ll;
use crate::reply::Reply;

/// The Redis version Quiver's replies follow (Debian 12's Redis, which the compatibility tests
/// record); clients read it from HELLO and INFO to decide which commands they may send.
pub const REDIS_COMPAT_VERSION: &str = "7.0.15";

pub fn run(ctx: &mut Ctx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        Cmd::Ping => match args.len() {
            1 => Reply::simple("PONG"),
            2 => Reply::Bulk(args[1].clone()),
            _ => wrong_arity("ping"),
        },
        Cmd::Echo => Reply::Bulk(args[1].clone()),
        Cmd::Select => match string2ll(&args[1]) {
            None => err(errors::NOT_INTEGER),
            Some(n) if i32::try_from(n).is_err() => {
                err("ERR value is out of range, value must between -2147483648 and 2147483647")
            }
            Some(0) => Reply::OK,
            Some(_) => err(errors::DB_OUT_OF_RANGE),
        },
        Cmd::Quit => {
            ctx.session.closing = true;
            Reply::OK
        }
        Cmd::Reset => {
            ctx.session.set_multi(None);
            ctx.session.unwatch(ctx.state);
            ctx.session.set_resp3(false);
            *ctx.session.info.name.lock() = None;
            ctx.session.authenticated = ctx.state.config.requirepass.is_none();
            Reply::simple("RESET")
        }
        Cmd::Auth => auth(ctx, &args[1..]),
        Cmd::Hello => hello(ctx, args),
        Cmd::Client => client(ctx, args),
        other => unreachable!("{other:?} is not a connection command"),
    }
}

/// AUTH [username] password. The only user is `default`.
fn auth(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 2 {
        return err(errors::SYNTAX);
    }
    if args.len() == 1 && ctx.state.config.requirepass.is_none() {
        return err(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
    }
    let (user, pass) = match args {
        [pass] => (&b"default"[..], pass),
        [user, pass] => (&user[..], pass),
        _ => unreachable!("arity checked"),
    };
    if check_password(ctx, user, pass) {
        ctx.session.authenticated = true;
        Reply::OK
    } else {
        err(errors::WRONGPASS)
    }
}

fn check_password(ctx: &Ctx<'_>, user: &[u8], pass: &[u8]) -> bool {
    match &ctx.state.config.requirepass {
        // With no password set, the default user accepts any password (Redis's `nopass`).
        None => user == b"default",
        Some(p) => user == b"default" && constant_time_eq(p.as_bytes(), pass),
    }
}

/// Compares without stopping at the first difference, so timing does not leak the password.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]].
fn hello(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut version = None;
    if args.len() >= 2 {
        match string2ll(&args[1]) {
            None => return err("ERR Protocol version is not an integer or out of range"),
            Some(v) if !(2..=3).contains(&v) => return err("NOPROTO unsupported protocol version"),
            Some(v) => version = Some(v),
        }
    }
    let mut name = None;
    let mut j = 2;
    while j < args.len() {
        let more = args.len() - j - 1;
        let opt = &args[j];
        if opt.eq_ignore_ascii_case(b"auth") && more >= 2 {
            if !check_password(ctx, &args[j + 1], &args[j + 2]) {
                return err(errors::WRONGPASS);
            }
            ctx.session.authenticated = true;
            j += 3;
        } else if opt.eq_ignore_ascii_case(b"setname") && more >= 1 {
            if let Some(e) = check_client_name(&args[j + 1]) {
                return e;
            }
            name = Some(args[j + 1].clone());
            j += 2;
        } else {
            let mut m = bytes::BytesMut::from(&b"ERR Syntax error in HELLO option '"[..]);
            m.extend_from_slice(opt);
            m.extend_from_slice(b"'");
            return Reply::Error(errors::sanitize(m));
        }
    }
    if !ctx.session.authenticated {
        return err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
    }
    if let Some(name) = name {
        set_name(ctx, name);
    }
    if let Some(v) = version {
        ctx.session.set_resp3(v == 3);
    }
    let s = |t: &'static str| Reply::Bulk(Bytes::from_static(t.as_bytes()));
    Reply::Map(vec![
        (s("server"), s("redis")),
        (s("version"), s(REDIS_COMPAT_VERSION)),
        (
            s("proto"),
            Reply::Integer(if ctx.session.resp3 { 3 } else { 2 }),
        ),
        (s("id"), Reply::Integer(ctx.session.id() as i64)),
        (s("mode"), s("standalone")),
        (s("role"), s("master")),
        (s("modules"), Reply::Array(Vec::new())),
    ])
}

/// Redis accepts client names of printable ASCII without blanks.
fn check_client_name(name: &[u8]) -> Option<Reply> {
    name.iter()
        .any(|&c| !(b'!'..=b'~').contains(&c))
        .then(|| err("ERR Client names cannot contain spaces, newlines or special characters."))
}

fn set_name(ctx: &Ctx<'_>, name: Bytes) {
    *ctx.session.info.name.lock() = (!name.is_empty()).then_some(name);
}

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are: ID <client-id>, ADDR <ip:port>, LADDR <ip:port>.",
    "LIST [TYPE normal] [ID <id> [<id> ...]]",
    "    Return information about client connections.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Accepted and ignored (client libraries send it on connect).",
    "HELP",
    "    Print this help.",
];

fn client(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let arity = |ok: bool, name: &str| (!ok).then(|| wrong_arity(&format!("client|{name}")));
    match &sub[..] {
        b"id" => arity(args.len() == 2, "id").unwrap_or(Reply::Integer(ctx.session.id() as i64)),
        b"getname" => arity(args.len() == 2, "getname").unwrap_or_else(|| {
            ctx.session
                .info
                .name
                .lock()
                .clone()
                .map_or(Reply::Null, Reply::Bulk)
        }),
        b"setname" => {
            if let Some(e) = arity(args.len() == 3, "setname") {
                return e;
            }
            if let Some(e) = check_client_name(&args[2]) {
                return e;
            }
            set_name(ctx, args[2].clone());
            Reply::OK
        }
        b"setinfo" => arity(args.len() == 4, "setinfo").unwrap_or(Reply::OK),
        b"no-evict" | b"no-touch" => arity(args.len() == 3, "no-evict").unwrap_or(Reply::OK),
        b"info" => arity(args.len() == 2, "info")
            .unwrap_or_else(|| verbatim(ctx.session.info.list_line() + "\n")),
        b"list" => client_list(ctx, &args[2..]),
        b"kill" => client_kill(ctx, &args[2..]),
        b"help" => Reply::Array(CLIENT_HELP.iter().map(|l| Reply::simple(*l)).collect()),
        _ => unknown_subcommand(&args[1], "CLIENT"),
    }
}

fn verbatim(text: String) -> Reply {
    Reply::Verbatim {
        format: *b"txt",
        text: Bytes::from(text),
    }
}

/// CLIENT LIST [TYPE normal] [ID id ...].
fn client_list(ctx: &Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut j = 0;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"type") && j + 1 < args.len() {
            if !args[j + 1].eq_ignore_ascii_case(b"normal") {
                let mut m = bytes::BytesMut::from(&b"ERR Unknown client type '"[..]);
                m.extend_from_slice(&args[j + 1]);
                m.extend_from_slice(b"'");
                return Reply::Error(errors::sanitize(m));
            }
            j += 2;
        } else if args[j].eq_ignore_ascii_case(b"id") && j + 1 < args.len() {
            let mut list = Vec::new();
            for a in &args[j + 1..] {
                match string2ll(a) {
                    Some(n) if n > 0 => list.push(n as u64),
                    _ => return err("ERR Invalid client ID"),
                }
            }
            ids = Some(list);
            j = args.len();
        } else {
            return err(errors::SYNTAX);
        }
    }
    let mut text = String::new();
    for c in ctx.state.clients.all() {
        if ids.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
            text.push_str(&c.list_line());
            text.push('\n');
        }
    }
    verbatim(text)
}

/// CLIENT KILL addr | CLIENT KILL [ID id] [TYPE normal] [ADDR addr] [LADDR addr] [SKIPME yes/no].
fn client_kill(ctx: &Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() == 1 {
        let addr = String::from_utf8_lossy(&args[0]);
        let victims: Vec<_> = ctx
            .state
            .clients
            .all()
            .into_iter()
            .filter(|c| c.addr == addr)
            .collect();
        if victims.is_empty() {
            return err("ERR No such client");
        }
        kill_and_wait(ctx, &victims);
        return Reply::OK;
    }
    if args.is_empty() || args.len() % 2 != 0 {
        return err(errors::SYNTAX);
    }
    let (mut id, mut addr, mut laddr, mut skipme) = (None, None, None, true);
    let mut normal = true;
    for pair in args.chunks(2) {
        let value = String::from_utf8_lossy(&pair[1]).into_owned();
        let opt = pair[0].to_ascii_lowercase();
        match &opt[..] {
            b"id" => match string2ll(&pair[1]) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return err("ERR client-id should be greater than 0"),
            },
            b"addr" => addr = Some(value),
            b"laddr" => laddr = Some(value),
            // Every Quiver client is a normal one.
            b"type" if value.eq_ignore_ascii_case("normal") => {}
            b"type" => normal = false,
            b"skipme" => match crate::config::parse_yes_no(&value) {
                Ok(b) => skipme = b,
                Err(_) => return err(errors::SYNTAX),
            },
            _ => return err(errors::SYNTAX),
        }
    }
    let mut victims = Vec::new();
    for c in ctx.state.clients.all() {
        let matches = normal
            && id.is_none_or(|i| c.id == i)
            && addr.as_ref().is_none_or(|a| &c.addr == a)
            && laddr.as_ref().is_none_or(|a| &c.laddr == a)
            && !(skipme && c.id == ctx.session.id());
        if matches {
            victims.push(c);
        }
    }
    kill_and_wait(ctx, &victims);
    Reply::Integer(victims.len() as i64)
}

/// How long CLIENT KILL waits for its victims' connections to be closed.
const KILL_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Kills `victims` and waits (briefly) until their sockets are closed, so that, as with
/// Redis, a client that sees the reply can rely on the victims being disconnected. The
/// caller's own connection closes after its reply instead.
fn kill_and_wait(ctx: &Ctx<'_>, victims: &[std::sync::Arc<crate::clients::ClientInfo>]) {
    for c in victims {
        c.kill();
    }
    let deadline = std::time::Instant::now() + KILL_WAIT;
    let me = ctx.session.id();
    // The victims' tasks may be queued on this very worker thread: hand its queue to another
    // thread while waiting.
    tokio::task::block_in_place(|| {
        while victims
            .iter()
            .any(|c| c.id != me && ctx.state.clients.get(c.id).is_some())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}
