//! ACL SETUSER | GETUSER | DELUSER | LIST | USERS | WHOAMI | CAT | LOAD | SAVE | HELP, with
//! Redis 7.0's replies and errors (the users themselves: `acl`).

use bytes::Bytes;

use crate::acl::user::{commands_in, hex, CATEGORIES};
use crate::cmd::ConnCtx;
use crate::errors::{err, unknown_subcommand, wrong_arity};
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
