//! ACL SETUSER | GETUSER | DELUSER | LIST | USERS | WHOAMI | CAT | LOAD | SAVE | HELP, with
//! Redis 7.0's replies and errors (the users themselves: `acl`).

use bytes::Bytes;

use crate::acl::commands::{commands_in, CATEGORIES};
use crate::acl::user::hex;
use crate::cmd::ConnCtx;
use crate::errors::{err, subcommand_syntax, unknown_subcommand, wrong_arity};
use crate::reply::Reply;

const ACL_HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "GETUSER <username>",
    "    Get the user's details.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "HELP",
    "    Print this help.",
];

pub fn run(ctx: &mut ConnCtx<'_>, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let users = &ctx.core.users;
    let argc = args.len();
    let arity_ok = match &sub[..] {
        b"setuser" | b"deluser" => argc >= 3,
        b"getuser" => argc == 3,
        b"list" | b"users" | b"whoami" | b"load" | b"save" | b"help" => argc == 2,
        b"cat" => argc <= 3,
        b"dryrun" => argc >= 4,
        b"log" if argc > 3 => return subcommand_syntax(&args[1], "ACL"),
        b"log" => true,
        b"genpass" if argc > 3 => return subcommand_syntax(&args[1], "ACL"),
        b"genpass" => true,
        _ => return unknown_subcommand(&args[1], "ACL"),
    };
    if !arity_ok {
        return wrong_arity(&format!("acl|{}", String::from_utf8_lossy(&sub)));
    }
    match &sub[..] {
        b"setuser" => match users.set_user(&args[2], &args[3..]) {
            Ok(()) => Reply::OK,
            Err(why) => Reply::error(format!("ERR {why}")),
        },
        b"getuser" => {
            let Some(u) = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|n| users.get(n))
            else {
                return Reply::Null;
            };
            Reply::Map(vec![
                (
                    Reply::text("flags"),
                    Reply::Set(u.flags().into_iter().map(Reply::text).collect()),
                ),
                (
                    Reply::text("passwords"),
                    Reply::Array(u.passwords.iter().map(|h| Reply::text(hex(h))).collect()),
                ),
                (Reply::text("commands"), Reply::text(u.command_rules())),
                (Reply::text("keys"), Reply::text(u.keys_text())),
                (Reply::text("channels"), Reply::text(u.channels_text())),
                (Reply::text("selectors"), Reply::Array(Vec::new())),
            ])
        }
        b"deluser" => match users.delete(&args[2..]) {
            Ok(n) => {
                close_orphans(ctx);
                Reply::Integer(n as i64)
            }
            Err(why) => Reply::error(format!("ERR {why}")),
        },
        b"list" => Reply::Array(
            users
                .all()
                .iter()
                .map(|u| Reply::text(format!("user {} {}", u.name, u.describe())))
                .collect(),
        ),
        b"users" => Reply::Array(
            users
                .all()
                .iter()
                .map(|u| Reply::text(u.name.clone()))
                .collect(),
        ),
        b"whoami" => Reply::text(ctx.session.user.name.clone()),
        b"dryrun" => dryrun(ctx.core, &args[2], &args[3..]),
        b"log" => log(ctx.core, args.get(2)),
        b"genpass" => genpass(args.get(2)),
        b"cat" => match args.get(2) {
            None => Reply::Array(CATEGORIES.iter().map(|c| Reply::text(*c)).collect()),
            Some(c) => {
                let name = String::from_utf8_lossy(c).to_ascii_lowercase();
                if !CATEGORIES.contains(&name.as_str()) {
                    return Reply::error(format!("ERR Unknown category '{name}'"));
                }
                Reply::Array(commands_in(&name).map(|s| Reply::text(s.name)).collect())
            }
        },
        b"load" | b"save" => {
            let Some(path) = &ctx.core.config.aclfile else {
                return err(
                    "ERR This Redis instance is not configured to use an ACL file. You may want \
                     to specify users via the ACL SETUSER command and then issue a CONFIG \
                     REWRITE (assuming you have a Redis configuration file set) in order to \
                     store users in the Redis configuration.",
                );
            };
            let done = if &sub[..] == b"load" {
                users.load(path).inspect(|()| close_orphans(ctx))
            } else {
                users.save(path)
            };
            match done {
                Ok(()) => Reply::OK,
                Err(why) => Reply::error(format!("ERR {why}")),
            }
        }
        _ => Reply::Array(ACL_HELP.iter().map(|l| Reply::simple(*l)).collect()),
    }
}

/// ACL DRYRUN user command arg...: whether `user` could run it, in Redis's words (a bulk
/// string saying why not; an error for an unknown user or command, or a wrong arity).
fn dryrun(core: &crate::service::Core, name: &[u8], request: &[Bytes]) -> Reply {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let Some(user) = std::str::from_utf8(name)
        .ok()
        .and_then(|n| core.users.get(n))
    else {
        return Reply::error(format!("ERR User '{}' not found", lossy(name)));
    };
    let Some(spec) = core.config.rename_command.lookup(&request[0]) else {
        return Reply::error(format!("ERR Command '{}' not found", lossy(&request[0])));
    };
    if !spec.arity_ok(request.len()) {
        return wrong_arity(spec.name);
    }
    if user.unrestricted() {
        return Reply::OK;
    }
    if !user.may_run(spec, request) {
        return Reply::text(format!(
            "This user has no permissions to run the '{}' command",
            crate::acl::shown_name(spec, request)
        ));
    }
    match crate::admission::acl_keys(spec, request)
        .into_iter()
        .find(|(k, a)| !user.may_access(k, *a))
    {
        Some((k, _)) => Reply::text(format!(
            "This user has no permissions to access the '{}' key",
            lossy(&k)
        )),
        None => Reply::OK,
    }
}

/// Entries ACL LOG shows without a count.
const LOG_DEFAULT: usize = 10;

/// ACL LOG [count | RESET]: the newest entries, each as Redis 7.0 shows it.
fn log(core: &crate::service::Core, arg: Option<&Bytes>) -> Reply {
    let count = match arg {
        None => Some(LOG_DEFAULT),
        Some(a) if a.eq_ignore_ascii_case(b"reset") => {
            core.acl_log.reset();
            return Reply::OK;
        }
        // A negative count is all of them, as Redis counts it down.
        Some(a) => match crate::frame::string2ll(a) {
            Some(n) if n >= 0 => Some(n as usize),
            Some(_) => None,
            None => return err(crate::errors::NOT_INTEGER),
        },
    };
    let entry = |e: crate::acl::log::LogEntry| {
        Reply::Map(vec![
            (Reply::text("count"), Reply::Integer(e.count as i64)),
            (Reply::text("reason"), Reply::text(e.reason)),
            (Reply::text("context"), Reply::text(e.context)),
            (Reply::text("object"), Reply::text(e.object)),
            (Reply::text("username"), Reply::text(e.username)),
            (
                Reply::text("age-seconds"),
                Reply::Double(e.at.elapsed().as_secs_f64()),
            ),
            (Reply::text("client-info"), Reply::text(e.client_info)),
        ])
    };
    Reply::Array(core.acl_log.newest(count).into_iter().map(entry).collect())
}

/// Bits of a password ACL GENPASS makes without an argument, and at most.
const GENPASS_BITS_DEFAULT: i64 = 256;
const GENPASS_BITS_MAX: i64 = 4096;

/// ACL GENPASS [bits]: that many random bits (from the kernel) as hex, rounded up to a
/// whole hex digit.
fn genpass(bits: Option<&Bytes>) -> Reply {
    let bits = match bits.map(|b| crate::frame::string2ll(b)) {
        None => GENPASS_BITS_DEFAULT,
        Some(None) => return err(crate::errors::NOT_INTEGER),
        Some(Some(n)) if (1..=GENPASS_BITS_MAX).contains(&n) => n,
        Some(Some(_)) => {
            return err(
                "ERR ACL GENPASS argument must be the number of bits for the output password, \
                 a positive number up to 4096",
            )
        }
    };
    let digits = (bits as usize).div_ceil(4);
    let mut random = vec![0u8; digits.div_ceil(2)];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random));
    if let Err(e) = read {
        return Reply::error(format!("ERR cannot read random bytes: {e}"));
    }
    let mut hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(digits);
    Reply::text(hex)
}

/// Closes the connections whose user no longer exists (after ACL DELUSER or ACL LOAD), as
/// Redis does.
fn close_orphans(ctx: &ConnCtx<'_>) {
    for c in ctx.core.clients.all() {
        let gone = ctx.core.users.get(&c.user.lock()).is_none();
        if gone {
            c.kill();
        }
    }
}
