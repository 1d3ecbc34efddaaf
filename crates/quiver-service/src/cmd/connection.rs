//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, MONITOR.

use bytes::Bytes;

use crate::acl::DEFAULT_USER;
use crate::cmd::client::{check_client_name, set_name};
use crate::cmd::ConnCtx;
use crate::cmd::{db_index, int_arg};
use crate::errors::{self, err, wrong_arity};
use crate::frame::string2ll;
use crate::output::ReplyMode;
use crate::reply::Reply;
use crate::table::Cmd;

/// The Redis version Quiver's replies follow (Debian 12's Redis, which the compatibility tests
/// record); clients read it from HELLO and INFO to decide which commands they may send.
pub const REDIS_COMPAT_VERSION: &str = "7.0.15";

pub fn run(ctx: &mut ConnCtx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        // RESP2 in subscribed mode: `pong` and the argument, as a message would come.
        Cmd::Ping if ctx.session.subscribed_mode() && args.len() <= 2 => Reply::Array(vec![
            Reply::Bulk(Bytes::from_static(b"pong")),
            Reply::Bulk(args.get(1).cloned().unwrap_or_default()),
        ]),
        Cmd::Ping => match args.len() {
            1 => Reply::simple("PONG"),
            2 => Reply::Bulk(args[1].clone()),
            _ => wrong_arity("ping"),
        },
        Cmd::Echo => Reply::Bulk(args[1].clone()),
        Cmd::Select => match select_index(&args[1], ctx.core.config.databases) {
            Ok(db) => {
                ctx.session.select(db);
                Reply::OK
            }
            Err(e) => e,
        },
        Cmd::Quit => {
            ctx.session.closing = true;
            Reply::OK
        }
        Cmd::Reset => {
            // The caller forgets the watched keys, which only it knows.
            ctx.session.set_multi(None);
            ctx.session.set_resp3(false);
            ctx.session.select(0);
            ctx.session.readonly = false;
            ctx.session.reply_change = Some(ReplyMode::On);
            ctx.core.tracking.disable(&ctx.session.info);
            crate::cmd::pubsub::unsubscribe_all(ctx);
            ctx.session.tracking = false;
            ctx.session.tracking_caching = Default::default();
            *ctx.session.info.name.lock() = None;
            // Back to the default user, logged in if it needs no password (Redis's RESET).
            let version = ctx.core.users.version();
            let default = ctx.core.users.default_user();
            ctx.session.authenticated = default.enabled && default.nopass;
            log_in(ctx, default, version);
            Reply::simple("RESET")
        }
        Cmd::Auth => auth(ctx, &args[1..]),
        // The connection's loop streams the commands once this reply is out (`conn`).
        Cmd::Monitor => match ctx.core.monitors.subscribe() {
            Some(rx) => {
                ctx.session.monitor = Some(rx);
                Reply::OK
            }
            None => err("ERR too many MONITOR connections"),
        },
        Cmd::Hello => hello(ctx, args),
        // A service with no replication of its own (a cluster node answers from its chains).
        Cmd::Role => super::replication::role(&super::replication::Replication::alone()),
        Cmd::Wait => super::replication::wait(args, || 0),
        other => Reply::error(format!(
            "ERR internal error: {other:?} is not a connection command"
        )),
    }
}

/// SELECT's argument: a database number below `databases`, or Redis's error.
pub fn select_index(arg: &[u8], databases: u32) -> Result<u32, Reply> {
    db_index(int_arg(arg, None)?, databases)
}

/// AUTH [username] password: `default` when no user is named.
fn auth(ctx: &mut ConnCtx<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 2 {
        return err(errors::SYNTAX);
    }
    if args.len() == 1 && ctx.core.users.default_user().nopass {
        return err(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
    }
    let (user, pass) = match args {
        [pass] => (DEFAULT_USER.as_bytes(), pass),
        [user, pass] => (&user[..], pass),
        _ => return err(errors::SYNTAX),
    };
    if authenticate(ctx, user, pass) {
        Reply::OK
    } else {
        err(errors::WRONGPASS)
    }
}

/// Logs the connection in as `user` if the password is one of its (and the user is on).
fn authenticate(ctx: &mut ConnCtx<'_>, user: &[u8], pass: &[u8]) -> bool {
    // The version is read first: a change to the user made meanwhile is then picked up by
    // the next command's refresh, never missed.
    let version = ctx.core.users.version();
    match ctx.core.users.authenticate(user, pass) {
        Some(u) => {
            ctx.session.authenticated = true;
            log_in(ctx, u, version);
            true
        }
        None => {
            let client = ctx.session.info.list_line();
            let name = String::from_utf8_lossy(user).into_owned();
            let len_max = ctx.core.live.acllog_max_len();
            ctx.core
                .acl_log
                .add(("auth", "AUTH".into()), name, client, len_max);
            false
        }
    }
}

/// Makes `user` (as of users `version`) the connection's user.
fn log_in(ctx: &mut ConnCtx<'_>, user: std::sync::Arc<crate::acl::User>, version: u64) {
    user.name.clone_into(&mut ctx.session.info.user.lock());
    ctx.session.user = user;
    ctx.session.user_version = version;
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]].
fn hello(ctx: &mut ConnCtx<'_>, args: &[Bytes]) -> Reply {
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
            let (user, pass) = (args[j + 1].clone(), args[j + 2].clone());
            if !authenticate(ctx, &user, &pass) {
                return err(errors::WRONGPASS);
            }
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
