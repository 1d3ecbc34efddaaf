//! COMMAND [COUNT | LIST [FILTERBY ...] | INFO name... | DOCS name... | GETKEYS command... |
//! HELP]: the command table as clients see it (redis-py's cluster client reads key positions
//! from it).

use bytes::Bytes;

use crate::errors::{self, err, unknown_subcommand, wrong_arity};
use crate::names::Renames;
use crate::reply::Reply;
use crate::table::{CommandSpec, KeyFlags, COMMANDS};
use quiver_resp::glob_match;

/// COMMAND as the configuration's `rename-command` leaves the table: a disabled command is
/// missing; a renamed one is listed under its own name (as Redis does) and found by its new
/// one.
pub fn run(names: &Renames, args: &[Bytes]) -> Reply {
    command(names, args)
}

/// COMMAND [COUNT | LIST | INFO name... | DOCS name... | HELP].
fn command(names: &Renames, args: &[Bytes]) -> Reply {
    let all = || COMMANDS.iter().filter(|c| !names.is_disabled(c.cmd));
    let Some(sub) = args.get(1) else {
        return Reply::Array(all().map(command_info).collect());
    };
    let sub = sub.to_ascii_lowercase();
    match &sub[..] {
        b"count" if args.len() == 2 => Reply::Integer(all().count() as i64),
        b"count" => wrong_arity("command|count"),
        b"list" => list(all(), &args[2..]),
        b"getkeys" if args.len() >= 4 => getkeys(names, &args[2..], false),
        b"getkeys" => wrong_arity("command|getkeys"),
        b"getkeysandflags" if args.len() >= 4 => getkeys(names, &args[2..], true),
        b"getkeysandflags" => wrong_arity("command|getkeysandflags"),
        b"info" => Reply::Array(
            args[2..]
                .iter()
                .map(|n| names.lookup(n).map_or(Reply::Null, command_info))
                .collect(),
        ),
        b"docs" => {
            let specs: Vec<&CommandSpec> = if args.len() == 2 {
                all().collect()
            } else {
                args[2..].iter().filter_map(|n| names.lookup(n)).collect()
            };
            Reply::Map(
                specs
                    .into_iter()
                    .map(|c| (Reply::text(c.name), command_docs(c)))
                    .collect(),
            )
        }
        b"help" => Reply::Array(
            [
                "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "(no subcommand)",
                "    Return details about all Quiver commands.",
                "COUNT",
                "    Return the total number of commands in this Quiver server.",
                "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
                "    Return a list of all commands in this Quiver server.",
                "GETKEYS <full-command>",
                "    Return the keys from a full Quiver command.",
                "GETKEYSANDFLAGS <full-command>",
                "    Return the keys and the access flags from a full Quiver command.",
                "INFO [<command-name> ...]",
                "    Return details about multiple commands.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple commands.",
                "HELP",
                "    Print this help.",
            ]
            .iter()
            .map(|l| Reply::simple(*l))
            .collect(),
        ),
        _ => unknown_subcommand(&args[1], "COMMAND"),
    }
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern] (Quiver has no
/// modules: MODULE lists nothing).
fn list<'a>(all: impl Iterator<Item = &'a CommandSpec>, filter: &[Bytes]) -> Reply {
    let keep: Box<dyn Fn(&CommandSpec) -> bool> = match filter {
        [] => Box::new(|_| true),
        [by, kind, value] if by.eq_ignore_ascii_case(b"filterby") => {
            let value = value.to_ascii_lowercase();
            match &kind.to_ascii_lowercase()[..] {
                b"module" => Box::new(|_| false),
                b"aclcat" => Box::new(move |c: &CommandSpec| {
                    c.acl_categories()
                        .any(|cat| cat.as_bytes()[1..] == value[..])
                }),
                b"pattern" => {
                    Box::new(move |c: &CommandSpec| glob_match(&value, c.name.as_bytes()))
                }
                _ => return err(errors::SYNTAX),
            }
        }
        _ => return err(errors::SYNTAX),
    };
    Reply::Array(
        all.filter(|c| keep(c))
            .map(|c| Reply::text(c.name))
            .collect(),
    )
}

/// COMMAND GETKEYS command arg... (and GETKEYSANDFLAGS, `with_flags`: each key with its
/// key-spec flags, a set): the keys the command names, by its key positions (or a BATCH's
/// operations), with Redis's errors.
fn getkeys(names: &Renames, request: &[Bytes], with_flags: bool) -> Reply {
    let Some(spec) = names.lookup(&request[0]) else {
        return err("ERR Invalid command specified");
    };
    if !spec.arity_ok(request.len()) {
        return err("ERR Invalid number of arguments specified for command");
    }
    let keys = crate::admission::keys_and_flags(spec, request);
    if keys.is_empty() {
        return err("ERR The command has no key arguments");
    }
    let key = |(k, flags): (Bytes, KeyFlags)| match with_flags {
        false => Reply::Bulk(k),
        true => Reply::Array(vec![
            Reply::Bulk(k),
            Reply::Set(flags.names().map(Reply::simple).collect()),
        ]),
    };
    Reply::Array(keys.into_iter().map(key).collect())
}

/// One command in Redis 7's COMMAND INFO shape: name, arity, flags, first key, last key,
/// step, ACL categories, tips, key specifications, subcommands.
fn command_info(c: &CommandSpec) -> Reply {
    Reply::Array(vec![
        Reply::text(c.name),
        Reply::Integer(c.arity.into()),
        Reply::Set(c.flags.names().map(Reply::simple).collect()),
        Reply::Integer(c.keys.first.into()),
        Reply::Integer(c.keys.last.into()),
        Reply::Integer(c.keys.step.into()),
        Reply::Set(c.acl_categories().map(Reply::simple).collect()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

fn command_docs(c: &CommandSpec) -> Reply {
    Reply::Map(vec![
        (Reply::text("summary"), Reply::text(c.summary)),
        (Reply::text("since"), Reply::text(c.since)),
        (Reply::text("group"), Reply::text(c.group)),
    ])
}
