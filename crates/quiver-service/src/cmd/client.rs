//! CLIENT ID | GETNAME | SETNAME | SETINFO | INFO | LIST | KILL | PAUSE | UNPAUSE | NO-EVICT |
//! NO-TOUCH | REPLY | TRACKING | CACHING | TRACKINGINFO | GETREDIR | UNBLOCK | HELP.

use bytes::Bytes;

use crate::cmd::ConnCtx;
use crate::errors::{self, err, unknown_subcommand, wrong_arity};
use crate::frame::string2ll;
use crate::output::ReplyMode;
use crate::pause::PauseKind;
use crate::reply::Reply;
use crate::session::Caching;
use crate::tracking::Options;

/// Redis accepts client names of printable ASCII without blanks.
pub fn check_client_name(name: &[u8]) -> Option<Reply> {
    name.iter()
        .any(|&c| !(b'!'..=b'~').contains(&c))
        .then(|| err("ERR Client names cannot contain spaces, newlines or special characters."))
}

pub fn set_name(ctx: &ConnCtx<'_>, name: Bytes) {
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
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "NO-EVICT (ON|OFF)",
    "    Accepted (Quiver evicts nothing).",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client (Quiver has no blocking commands: 0).",
    "HELP",
    "    Print this help.",
];

pub fn run(ctx: &mut ConnCtx<'_>, args: &[Bytes]) -> Reply {
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
        b"no-evict" | b"no-touch" => {
            let name = String::from_utf8_lossy(&sub).into_owned();
            arity(args.len() == 3, &name).unwrap_or_else(|| on_off(&args[2]))
        }
        b"pause" => match args.len() {
            3 | 4 => pause(ctx, &args[2..]),
            2 => wrong_arity("client|pause"),
            _ => errors::subcommand_syntax(&args[1], "CLIENT"),
        },
        b"unpause" => arity(args.len() == 2, "unpause").unwrap_or_else(|| {
            ctx.core.pause.unpause();
            Reply::OK
        }),
        b"reply" => arity(args.len() == 3, "reply").unwrap_or_else(|| reply(ctx, &args[2])),
        b"tracking" => match args.len() {
            2 => wrong_arity("client|tracking"),
            _ => tracking(ctx, &args[2..]),
        },
        b"caching" => arity(args.len() == 3, "caching").unwrap_or_else(|| caching(ctx, &args[2])),
        b"trackinginfo" => {
            arity(args.len() == 2, "trackinginfo").unwrap_or_else(|| tracking_info(ctx))
        }
        b"getredir" => arity(args.len() == 2, "getredir").unwrap_or_else(|| {
            let info = ctx.core.tracking.info(ctx.session.id());
            Reply::Integer(info.map_or(-1, |i| i.options.redirect as i64))
        }),
        b"unblock" => match args.len() {
            3 | 4 => unblock(&args[2..]),
            2 => wrong_arity("client|unblock"),
            _ => errors::subcommand_syntax(&args[1], "CLIENT"),
        },
        b"info" => arity(args.len() == 2, "info")
            .unwrap_or_else(|| verbatim(ctx.session.info.list_line() + "\n")),
        b"list" => client_list(ctx, &args[2..]),
        b"kill" => client_kill(ctx, &args[2..]),
        b"help" => Reply::Array(CLIENT_HELP.iter().map(|l| Reply::simple(*l)).collect()),
        _ => unknown_subcommand(&args[1], "CLIENT"),
    }
}

/// CLIENT REPLY ON|OFF|SKIP: the connection's loop switches its replies before writing this
/// command's own, which OFF and SKIP drop (Redis sends them no reply).
fn reply(ctx: &mut ConnCtx<'_>, mode: &[u8]) -> Reply {
    let mode = if mode.eq_ignore_ascii_case(b"on") {
        ReplyMode::On
    } else if mode.eq_ignore_ascii_case(b"off") {
        ReplyMode::Off
    } else if mode.eq_ignore_ascii_case(b"skip") {
        ReplyMode::Skip(2)
    } else {
        return err(errors::SYNTAX);
    };
    ctx.session.reply_change = Some(mode);
    Reply::OK
}

/// CLIENT TRACKING ON|OFF [options] (`tracking`), with Redis 7.0's checks in its order.
fn tracking(ctx: &mut ConnCtx<'_>, args: &[Bytes]) -> Reply {
    let mut options = Options::default();
    let mut i = 1;
    while i < args.len() {
        let (opt, more) = (args[i].to_ascii_lowercase(), i + 1 < args.len());
        match &opt[..] {
            b"redirect" if more => {
                i += 1;
                if options.redirect != 0 {
                    return err("ERR A client can only redirect to a single other client");
                }
                match string2ll(&args[i]) {
                    Some(id) if ctx.core.clients.get(id as u64).is_some() && id > 0 => {
                        options.redirect = id as u64;
                    }
                    Some(_) => return err("ERR The client ID you want redirect to does not exist"),
                    None => return err(errors::NOT_INTEGER),
                }
            }
            b"bcast" => options.bcast = true,
            b"optin" => options.optin = true,
            b"optout" => options.optout = true,
            b"noloop" => options.noloop = true,
            b"prefix" if more => {
                i += 1;
                options.prefixes.push(args[i].clone());
            }
            _ => return err(errors::SYNTAX),
        }
        i += 1;
    }
    if args[0].eq_ignore_ascii_case(b"on") {
        if let Some(e) = tracking_on(ctx, options) {
            return e;
        }
    } else if args[0].eq_ignore_ascii_case(b"off") {
        ctx.core.tracking.disable(&ctx.session.info);
        ctx.session.tracking = false;
    } else {
        return err(errors::SYNTAX);
    }
    Reply::OK
}

/// CLIENT TRACKING ON with `options` parsed; the refusal, if any.
fn tracking_on(ctx: &mut ConnCtx<'_>, options: Options) -> Option<Reply> {
    if !options.bcast && !options.prefixes.is_empty() {
        return Some(err("ERR PREFIX option requires BCAST mode to be enabled"));
    }
    if options.bcast && (options.optin || options.optout) {
        return Some(err("ERR OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if options.optin && options.optout {
        return Some(err("ERR You can't specify both OPTIN mode and OPTOUT mode"));
    }
    let redirect = match options.redirect {
        0 => None,
        id => ctx.core.clients.get(id),
    };
    let info = ctx.session.info.clone();
    if let Err(e) = ctx.core.tracking.enable(&info, options, redirect.as_ref()) {
        return Some(Reply::error(e));
    }
    ctx.session.tracking = true;
    None
}

/// CLIENT CACHING YES|NO (`caching`): the next command's keys are (YES, in OPTIN mode) or are
/// not (NO, in OPTOUT mode) remembered.
fn caching(ctx: &mut ConnCtx<'_>, choice: &[u8]) -> Reply {
    let Some(info) = ctx.core.tracking.info(ctx.session.id()) else {
        return err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if choice.eq_ignore_ascii_case(b"yes") {
        if !info.options.optin {
            return err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if choice.eq_ignore_ascii_case(b"no") {
        if !info.options.optout {
            return err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return err(errors::SYNTAX);
    }
    ctx.session.tracking_caching = Caching::Next;
    Reply::OK
}

/// CLIENT TRACKINGINFO: flags (a set), redirect, prefixes, as Redis 7.0 lists them.
fn tracking_info(ctx: &ConnCtx<'_>) -> Reply {
    let info = ctx.core.tracking.info(ctx.session.id());
    let caching = ctx.session.tracking_caching != Caching::None;
    let mut flags = vec![if info.is_some() { "on" } else { "off" }];
    if let Some(i) = &info {
        let o = &i.options;
        let named = [
            (o.bcast, "bcast"),
            (o.optin, "optin"),
            (o.optin && caching, "caching-yes"),
            (o.optout, "optout"),
            (o.optout && caching, "caching-no"),
            (o.noloop, "noloop"),
            (i.broken, "broken_redirect"),
        ];
        flags.extend(named.iter().filter(|(on, _)| *on).map(|(_, f)| *f));
    }
    let bulk = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let redirect = info.as_ref().map_or(-1, |i| i.options.redirect as i64);
    let prefixes = info.map(|i| i.prefixes).unwrap_or_default();
    Reply::Map(vec![
        (
            bulk("flags"),
            Reply::Set(flags.into_iter().map(bulk).collect()),
        ),
        (bulk("redirect"), Reply::Integer(redirect)),
        (
            bulk("prefixes"),
            Reply::Array(prefixes.into_iter().map(Reply::Bulk).collect()),
        ),
    ])
}

/// ON or OFF, accepted (NO-EVICT, NO-TOUCH).
fn on_off(value: &[u8]) -> Reply {
    if value.eq_ignore_ascii_case(b"on") || value.eq_ignore_ascii_case(b"off") {
        Reply::OK
    } else {
        err(errors::SYNTAX)
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL] (`pause`).
fn pause(ctx: &ConnCtx<'_>, args: &[Bytes]) -> Reply {
    let ms = match string2ll(&args[0]) {
        None => return err("ERR timeout is not an integer or out of range"),
        Some(n) if n < 0 => return err("ERR timeout is negative"),
        Some(n) => n as u64,
    };
    let kind = match args.get(1) {
        None => PauseKind::All,
        Some(m) if m.eq_ignore_ascii_case(b"all") => PauseKind::All,
        Some(m) if m.eq_ignore_ascii_case(b"write") => PauseKind::Write,
        Some(_) => return err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    ctx.core
        .pause
        .pause(std::time::Duration::from_millis(ms), kind);
    Reply::OK
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: no Quiver command blocks, so none is unblocked.
fn unblock(args: &[Bytes]) -> Reply {
    if string2ll(&args[0]).is_none() {
        return err(errors::NOT_INTEGER);
    }
    match args.get(1) {
        Some(r) if !r.eq_ignore_ascii_case(b"timeout") && !r.eq_ignore_ascii_case(b"error") => {
            err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
        }
        _ => Reply::Integer(0),
    }
}

fn verbatim(text: String) -> Reply {
    Reply::Verbatim {
        format: *b"txt",
        text: Bytes::from(text),
    }
}

/// CLIENT LIST [TYPE type] [ID id ...] (every Quiver client is a normal one).
fn client_list(ctx: &ConnCtx<'_>, args: &[Bytes]) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut normal = true;
    let mut j = 0;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"type") && j + 1 < args.len() {
            let name = String::from_utf8_lossy(&args[j + 1]);
            match CLIENT_TYPES.iter().find(|t| t.eq_ignore_ascii_case(&name)) {
                Some(t) => normal &= *t == "normal",
                None => return unknown_type(&args[j + 1]),
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
    for c in ctx.core.clients.all() {
        if normal && ids.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
            text.push_str(&c.list_line());
            text.push('\n');
        }
    }
    verbatim(text)
}

/// Redis's refusal of a client type it does not know (CLIENT LIST, CLIENT KILL).
fn unknown_type(name: &[u8]) -> Reply {
    let mut m = bytes::BytesMut::from(&b"ERR Unknown client type '"[..]);
    m.extend_from_slice(name);
    m.extend_from_slice(b"'");
    Reply::Error(errors::sanitize(m))
}

/// The client types Redis knows: every Quiver client is a normal one.
const CLIENT_TYPES: &[&str] = &["normal", "master", "replica", "slave", "pubsub"];

/// CLIENT KILL addr | CLIENT KILL [ID id] [TYPE type] [USER name] [ADDR addr] [LADDR addr]
/// [SKIPME yes/no].
fn client_kill(ctx: &mut ConnCtx<'_>, args: &[Bytes]) -> Reply {
    if args.len() == 1 {
        let addr = String::from_utf8_lossy(&args[0]);
        let victims: Vec<_> = ctx
            .core
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
    let (mut normal, mut user) = (true, None);
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
            b"type" => match CLIENT_TYPES.iter().find(|t| t.eq_ignore_ascii_case(&value)) {
                Some(t) => normal &= *t == "normal",
                None => return unknown_type(&pair[1]),
            },
            b"user" => {
                if ctx.core.users.get(&value).is_none() {
                    return Reply::error(format!("ERR No such user '{value}'"));
                }
                user = Some(value);
            }
            b"skipme" => match crate::config::parse_yes_no(&value) {
                Ok(b) => skipme = b,
                Err(_) => return err(errors::SYNTAX),
            },
            _ => return err(errors::SYNTAX),
        }
    }
    let mut victims = Vec::new();
    for c in ctx.core.clients.all() {
        let matches = normal
            && id.is_none_or(|i| c.id == i)
            && addr.as_ref().is_none_or(|a| &c.addr == a)
            && laddr.as_ref().is_none_or(|a| &c.laddr == a)
            && user.as_ref().is_none_or(|u| *c.user.lock() == *u)
            && !(skipme && c.id == ctx.session.id());
        if matches {
            victims.push(c);
        }
    }
    kill_and_wait(ctx, &victims);
    Reply::Integer(victims.len() as i64)
}

/// Kills `victims`; the reply waits (`Clients::wait_gone`, run by the connection's executor
/// after the command) until their sockets are closed. The caller's own connection closes
/// after its reply instead.
fn kill_and_wait(ctx: &mut ConnCtx<'_>, victims: &[std::sync::Arc<crate::clients::ClientInfo>]) {
    let me = ctx.session.id();
    for c in victims {
        c.kill();
        if c.id != me {
            ctx.session.killed.push(c.id);
        }
    }
}
