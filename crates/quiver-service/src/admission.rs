//! Admission: what every RESP service checks of a request before it runs or queues it, as
//! Redis does — a known command (by its name after `rename-command`), its arity, what only the
//! table knows of subcommands (`subcommands`), authentication, the ACL user's
//! rules — and MULTI's queue. Refusals are counted here.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use crate::config::DebugCommand;
use crate::errors::{self, Refusal};
use crate::reply::Reply;
use crate::service::Core;
use crate::session::Session;
use crate::table::{Cmd, CommandSpec, Flags, KeyAccess, KeyFlags};

/// Commands a MULTI may queue (each holds its arguments until EXEC). Past it the transaction
/// is aborted: EXEC answers EXECABORT, as after any refused command.
pub const MULTI_QUEUED_MAX: usize = 1 << 20;

/// Why the session's ACL user may not run the request (Redis's NOPERM), after bringing the
/// session's copy of the user up to date; `None` if it may.
fn acl_refusal(
    core: &Core,
    session: &mut Session,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Option<Reply> {
    if core
        .users
        .refresh(&mut session.user, &mut session.user_version)
        .is_none()
    {
        // ACL DELUSER closes the user's connections; one caught between the two is refused.
        session.info.kill();
        return Some(errors::err(
            "NOPERM the user of this connection was deleted",
        ));
    }
    // The commands a client may send before logging in (AUTH, HELLO, QUIT, RESET) are
    // never refused by ACL rules, as in Redis.
    if session.user.unrestricted() || spec.flags.contains(Flags::NO_AUTH) {
        return None;
    }
    let keys = acl_keys(spec, args);
    let refused = crate::acl::refusal(&session.user, spec, args, &keys)?;
    // ACL LOG: the command refused, or the first key it may not use so.
    let user = &session.user;
    let (reason, object) = match keys.iter().find(|(k, a)| !user.may_access(k, *a)) {
        Some((k, _)) if user.may_run(spec, args) => {
            ("key", String::from_utf8_lossy(k).into_owned())
        }
        _ => ("command", crate::acl::shown_name(spec, args)),
    };
    let client = session.info.list_line();
    let len_max = core.live.acllog_max_len();
    core.acl_log
        .add((reason, object), user.name.clone(), client, len_max);
    Some(refused)
}

/// ACL's channel rules: SUBSCRIBE and PUBLISH need a pattern matching each channel,
/// PSUBSCRIBE one equal to each pattern (Redis 7.0); a refusal is logged (reason `channel`).
fn channel_refusal(
    core: &Core,
    session: &Session,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Option<Reply> {
    let (names, literal) = match spec.cmd {
        Cmd::Subscribe => (&args[1..], false),
        Cmd::Publish => (&args[1..2], false),
        Cmd::PSubscribe => (&args[1..], true),
        _ => return None,
    };
    let user = &session.user;
    let denied = names.iter().find(|c| !user.may_use_channel(c, literal))?;
    let object = String::from_utf8_lossy(denied).into_owned();
    let client = session.info.list_line();
    let len_max = core.live.acllog_max_len();
    core.acl_log
        .add(("channel", object), user.name.clone(), client, len_max);
    Some(errors::err(
        "NOPERM this user has no permissions to access one of the channels used as arguments",
    ))
}

/// A RESP2 connection with a subscription runs only the Pub/Sub commands, PING, QUIT and
/// RESET (Redis's words, naming the command as Redis does: `config|get`).
fn subscribed_mode_refusal(session: &Session, spec: &CommandSpec, args: &[Bytes]) -> Option<Reply> {
    let allowed = matches!(
        spec.cmd,
        Cmd::Subscribe
            | Cmd::Unsubscribe
            | Cmd::PSubscribe
            | Cmd::PUnsubscribe
            | Cmd::Ping
            | Cmd::Quit
            | Cmd::Reset
    );
    (session.subscribed_mode() && !allowed)
        .then(|| crate::cmd::pubsub::subscribed_mode_refusal(&crate::acl::shown_name(spec, args)))
}

/// A request answered without running, by [`check`].
pub struct Refused {
    pub reply: Reply,
    /// A refused EXEC: the caller discards the transaction and forgets its watched keys.
    pub discard: bool,
}

/// Looks a request up and checks it as Redis does before running or queueing it (known,
/// arity, subcommand, authentication). Refusals are counted here.
pub fn check(
    core: &Core,
    session: &mut Session,
    args: &[Bytes],
) -> Result<&'static CommandSpec, Refused> {
    let Some(spec) = core.config.rename_command.lookup(&args[0]) else {
        core.stats.unknown_commands.fetch_add(1, Relaxed);
        flag_transaction(session);
        return Err(Refused {
            reply: errors::unknown_command(args),
            discard: false,
        });
    };
    let refused = if !spec.arity_ok(args.len()) {
        Some(errors::wrong_arity(spec.name))
    } else if let Some(reply) = crate::subcommands::refusal(spec.cmd, args) {
        Some(reply)
    } else if !session.authenticated && !spec.flags.contains(Flags::NO_AUTH) {
        Some(errors::err(errors::NOAUTH))
    } else if spec.flags.contains(Flags::PROTECTED) && !protected_allowed(core, session) {
        Some(errors::err(errors::DEBUG_NOT_ALLOWED))
    } else {
        acl_refusal(core, session, spec, args)
            .or_else(|| channel_refusal(core, session, spec, args))
            .or_else(|| subscribed_mode_refusal(session, spec, args))
    };
    let Some(reply) = refused else {
        return Ok(spec);
    };
    // Redis finds no command to count an unknown subcommand against.
    if errors::refusal(&reply) != Some(Refusal::UnknownSubcommand) {
        core.stats.rejected(spec.cmd.index());
    }
    flag_transaction(session);
    if spec.cmd == Cmd::Exec {
        // Redis's execCommandAbort: a refused EXEC discards the transaction.
        session.set_multi(None);
        return Err(Refused {
            reply: errors::exec_abort(&reply),
            discard: true,
        });
    }
    Err(Refused {
        reply,
        discard: false,
    })
}

/// Inside MULTI, queues a request that does not run at once: its reply (QUEUED, or the
/// error that aborts the transaction past [`MULTI_QUEUED_MAX`]). `None`: run it now.
pub fn queue(session: &mut Session, spec: &'static CommandSpec, args: &[Bytes]) -> Option<Reply> {
    let multi = session.multi.as_mut()?;
    if spec.flags.contains(Flags::NOT_QUEUED) {
        return None;
    }
    if spec.flags.contains(Flags::NO_MULTI) {
        multi.aborted = true;
        return Some(errors::err(errors::NOT_IN_MULTI));
    }
    if multi.queued.len() >= MULTI_QUEUED_MAX {
        multi.aborted = true;
        return Some(errors::multi_queue_full(MULTI_QUEUED_MAX));
    }
    multi.queued.push((spec.cmd.index(), args.to_vec()));
    let queued = multi.queued.len() as u64;
    session.info.multi.store(queued, Relaxed);
    Some(Reply::simple("QUEUED"))
}

/// Whether `enable-debug-command` lets `session` run a protected command: `local` for a
/// client on a loopback address or the Unix socket.
fn protected_allowed(core: &Core, session: &Session) -> bool {
    match core.config.enable_debug_command {
        DebugCommand::Yes => true,
        DebugCommand::No => false,
        DebugCommand::Local => {
            let addr = &session.info.addr;
            addr.parse::<std::net::SocketAddr>()
                .map_or(true, |a| a.ip().is_loopback())
        }
    }
}

/// A refused command inside MULTI makes EXEC fail (Redis's `flagTransaction`).
pub fn flag_transaction(session: &mut Session) {
    if let Some(m) = &mut session.multi {
        m.aborted = true;
    }
}

/// The keys of a request: those its table row names, or a BATCH's among its operations (none
/// when it does not parse). What ACL key patterns are checked against, and what a cluster
/// routes by.
pub fn keys_of(spec: &CommandSpec, args: &[Bytes]) -> Vec<Bytes> {
    match spec.cmd {
        Cmd::Batch => crate::batch::keys(args),
        _ => spec.keys(args).cloned().collect(),
    }
}

/// The keys of a request with Redis's key-spec flags for each (COMMAND GETKEYSANDFLAGS), by
/// its table row; as Redis's `setGetKeys`, SET overwrites its key (`OW update`) unless GET
/// reads it too (`RW access update`). OBJECT's subcommands take one key, which the
/// container's row does not name (`RO`); a BATCH's keys are among its operations. Read
/// without the value limit: a value too long is refused when it runs.
pub fn keys_and_flags(spec: &CommandSpec, args: &[Bytes]) -> Vec<(Bytes, KeyFlags)> {
    match spec.cmd {
        Cmd::Object => args
            .get(2)
            .map(|k| (k.clone(), KeyFlags::RO))
            .into_iter()
            .collect(),
        Cmd::Batch => crate::batch::keys(args)
            .into_iter()
            .map(|k| (k, spec.key_flags[0]))
            .collect(),
        _ => {
            let mut flags = spec.key_flags;
            if spec.cmd == Cmd::Set {
                let get = args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
                let f = match get {
                    true => KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE),
                    false => KeyFlags::OW.or(KeyFlags::UPDATE),
                };
                flags = [f, f];
            }
            spec.key_positions(args.len())
                .enumerate()
                .map(|(n, i)| (args[i].clone(), flags[usize::from(n > 0)]))
                .collect()
        }
    }
}

/// The keys of a request as ACL patterns check them, each with what the request does with it
/// (`KeyFlags::access`).
pub fn acl_keys(spec: &CommandSpec, args: &[Bytes]) -> Vec<(Bytes, KeyAccess)> {
    keys_and_flags(spec, args)
        .into_iter()
        .map(|(k, f)| (k, f.access()))
        .collect()
}

/// Redis Cluster has one database: what addresses another is refused, with Redis's texts.
pub fn forbidden_in_cluster(cmd: Cmd, args: &[Bytes]) -> Option<&'static str> {
    match cmd {
        Cmd::Select if &args[1][..] != b"0" => Some("ERR SELECT is not allowed in cluster mode"),
        Cmd::Move => Some("ERR MOVE is not allowed in cluster mode"),
        Cmd::SwapDb => Some("ERR SWAPDB is not allowed in cluster mode"),
        Cmd::Copy if args[3..].iter().any(|a| a.eq_ignore_ascii_case(b"db")) => {
            Some("ERR Copying to another database is not allowed in cluster mode")
        }
        _ => None,
    }
}
