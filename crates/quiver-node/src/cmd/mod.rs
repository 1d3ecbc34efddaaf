//! The commands. Each has one home here: a file per command or small family, with its
//! parsing (`parse(args) -> Result<_, Reply>`: every syntax error is found before anything
//! runs) and either its engine vector operation ([`vector::VectorOp`]: GET, MGET, plain SET,
//! DEL, UNLINK, EXISTS) or its effect on a transaction ([`common::TxnCommand`]: every other
//! command on keys). Commands about the connection or the server run on a [`ctx::Ctx`].
//!
//! What a command *is* (arity, flags, key positions, the vector it joins) is the table's
//! (`table`); which code runs it is decided here, in [`parse`] and [`run_server`] (and
//! which subcommands are refused before that, in [`refusal`]), and nowhere else. How parsed
//! commands are executed (vectors grouped, transactions retried, MULTI/EXEC) is the
//! executor's (`exec`).
//!
//! * keys and values: [`get`] (GET, MGET), [`set`] (SET with its options, SETNX, GETSET,
//!   SETEX, PSETEX), [`mset`] (MSET, MSETNX), [`del`] (DEL, UNLINK, GETDEL), [`exists`]
//!   (EXISTS, TOUCH, TYPE), [`incr`], [`float`] (INCRBYFLOAT), [`append`] (APPEND, STRLEN),
//!   [`range`] (GETRANGE, SUBSTR, SETRANGE), [`lcs`], [`rename`] (RENAME, RENAMENX, COPY),
//!   [`databases`] (MOVE, SWAPDB), [`hash`] (HSET, HGET and the other hash commands),
//!   [`object`] (OBJECT), [`expire`] (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL,
//!   EXPIRETIME, PEXPIRETIME, PERSIST, GETEX), [`batch`] (Quiver's BATCH), [`keyspace`] (SCAN,
//!   KEYS, RANDOMKEY, DBSIZE, FLUSHDB, FLUSHALL), [`cluster`] (CLUSTER KEYSLOT,
//!   COUNTKEYSINSLOT, GETKEYSINSLOT, HELP: hash slots, answered standalone too);
//! * the cluster: [`topology`] (CLUSTER SLOTS, SHARDS, NODES, INFO, MYID from the topology
//!   the node serves by; ASKING, READONLY, READWRITE), [`rangeimport`] (RANGEIMPORT: the
//!   receiving side of a range's move between nodes), [`chain`] (CHAIN APPLY: a chain's
//!   message from the predecessor; CHAIN STATUS);
//! * connection and server: [`connection`] (PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET),
//!   [`client`], [`transactions`] (MULTI, DISCARD, WATCH, UNWATCH), [`command`], [`config`],
//!   [`info`].

pub mod append;
pub mod batch;
pub mod chain;
pub mod cluster;
pub mod common;
pub mod ctx;
pub mod databases;
pub mod debug;
pub mod del;
pub mod exists;
pub mod expire;
pub mod float;
pub mod get;
pub mod hash;
pub mod incr;
pub mod keyspace;
pub mod lcs;
pub mod memory;
pub mod mset;
pub mod object;
pub mod parsed;
pub mod persistence;
pub mod range;
pub mod rangeimport;
pub mod rename;
pub mod set;
pub mod topology;
pub mod transactions;
pub mod vector;

use bytes::Bytes;

use common::Limits;
use ctx::Ctx;
use parsed::Command;
use quiver_service::cmd::{acl, client, command, config, connection, info, server};
use quiver_service::reply::Reply;
use quiver_service::table::{is_server_command, Cmd, CommandSpec};

/// Parses a request whose arity was checked into what runs it; a syntax error is the reply.
pub fn parse<'a>(
    spec: &'static CommandSpec,
    args: &'a [Bytes],
    limits: &Limits,
) -> Result<Command<'a>, Reply> {
    let cmd = spec.cmd;
    let keys = |c: Box<dyn common::TxnCommand + 'a>| Ok(Command::Keys(c));
    match cmd {
        Cmd::Get => Ok(vector(get::get(args))),
        Cmd::MGet => Ok(vector(get::mget(args))),
        Cmd::Set => set::Set::parse(args, limits),
        Cmd::Del | Cmd::Unlink => Ok(vector(del::del(cmd, args))),
        Cmd::Exists | Cmd::Touch => Ok(vector(exists::exists(cmd, args))),
        Cmd::SetNx => keys(Box::new(set::SetNx::parse(args, limits)?)),
        Cmd::GetSet => keys(Box::new(set::GetSet::parse(args, limits)?)),
        Cmd::GetDel => keys(Box::new(del::GetDel::parse(args))),
        Cmd::MSet => Ok(vector(mset::mset(args, limits)?)),
        Cmd::MSetNx => keys(Box::new(mset::MSet::parse(args, true, limits)?)),
        Cmd::StrLen => keys(Box::new(append::StrLen::parse(args))),
        Cmd::Append => keys(Box::new(append::Append::parse(args, limits)?)),
        Cmd::Incr | Cmd::IncrBy | Cmd::Decr | Cmd::DecrBy => {
            keys(Box::new(incr::IncrBy::parse(cmd, args)?))
        }
        Cmd::IncrByFloat => keys(Box::new(float::IncrByFloat::parse(args)?)),
        Cmd::Type => keys(Box::new(exists::Type::parse(args))),
        Cmd::GetRange | Cmd::Substr => keys(Box::new(range::GetRange::parse(args)?)),
        Cmd::SetRange => keys(Box::new(range::SetRange::parse(args, limits)?)),
        Cmd::Rename | Cmd::RenameNx => keys(Box::new(rename::Rename::parse(cmd, args)?)),
        Cmd::Copy => keys(Box::new(rename::Copy::parse(args, limits)?)),
        Cmd::Move => keys(Box::new(databases::Move::parse(args, limits)?)),
        Cmd::SwapDb => keys(Box::new(databases::SwapDb::parse(args, limits)?)),
        Cmd::Lcs => keys(Box::new(lcs::Lcs::parse(args, limits)?)),
        Cmd::Object => keys(Box::new(object::Object::parse(args))),
        Cmd::Cluster if topology::is_topology_subcommand(&args[1]) => Ok(Command::Server),
        Cmd::Cluster => keys(Box::new(cluster::Cluster::parse(args)?)),
        Cmd::SetEx | Cmd::PSetEx => keys(Box::new(set::Set::parse_setex(cmd, args, limits)?)),
        Cmd::GetEx => keys(Box::new(expire::GetEx::parse(args)?)),
        Cmd::Expire | Cmd::PExpire | Cmd::ExpireAt | Cmd::PExpireAt => {
            keys(Box::new(expire::Expire::parse(cmd, args)?))
        }
        Cmd::Ttl | Cmd::PTtl | Cmd::ExpireTime | Cmd::PExpireTime => {
            keys(Box::new(expire::Ttl::parse(cmd, args)))
        }
        Cmd::Persist => keys(Box::new(expire::Persist::parse(args))),
        Cmd::Batch => keys(Box::new(batch::Batch::parse(args, limits)?)),
        Cmd::HSet | Cmd::HMSet => keys(Box::new(hash::write::HSet::parse(cmd, args)?)),
        Cmd::HSetNx => keys(Box::new(hash::write::HSetNx::parse(args)?)),
        Cmd::HDel => keys(Box::new(hash::write::HDel::parse(args))),
        Cmd::HIncrBy | Cmd::HIncrByFloat => keys(Box::new(hash::write::HIncr::parse(cmd, args)?)),
        Cmd::HGet
        | Cmd::HMGet
        | Cmd::HGetAll
        | Cmd::HKeys
        | Cmd::HVals
        | Cmd::HLen
        | Cmd::HExists
        | Cmd::HStrLen => Ok(vector(get::hash_read(cmd, args))),
        Cmd::HRandField => keys(Box::new(hash::random::HRandField::parse(args)?)),
        Cmd::HScan => keys(Box::new(hash::scan::HScan::parse(args)?)),
        Cmd::Scan | Cmd::Keys | Cmd::RandomKey | Cmd::DbSize | Cmd::FlushDb | Cmd::FlushAll => {
            keys(Box::new(keyspace::Keyspace::parse(cmd, args)?))
        }
        Cmd::Exec => Ok(Command::Exec),
        server if is_server_command(server) => Ok(Command::Server),
        other => Err(Reply::error(format!(
            "ERR internal error: {other:?} has no parser"
        ))),
    }
}

/// A vector operation whose keys the engine refuses (empty, too long) is answered through a
/// transaction, which reads such keys as absent.
fn vector(op: vector::VectorOp<'_>) -> Command<'_> {
    if op.keys_valid() {
        Command::Vector(op)
    } else {
        Command::Keys(Box::new(op))
    }
}

/// Runs a command about the connection or the server ([`Command::Server`]).
pub fn run_server(ctx: &mut Ctx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        Cmd::Client => client::run(&mut ctx.conn_ctx(), args),
        Cmd::Command => command::run(&ctx.state.core.config.rename_command, args),
        Cmd::Config => config::run(&ctx.state.core, Some(ctx.state), args),
        Cmd::SlowLog => server::slowlog(&ctx.state.core, args),
        Cmd::Latency => {
            ctx.state.note_stalls();
            server::latency(&ctx.state.core, args)
        }
        Cmd::Save | Cmd::BgSave | Cmd::LastSave => persistence::run(ctx.state, cmd, args),
        Cmd::Memory => memory::run(ctx, args),
        Cmd::Debug => debug::run(ctx, args),
        Cmd::Time => server::time(),
        Cmd::Subscribe
        | Cmd::Unsubscribe
        | Cmd::PSubscribe
        | Cmd::PUnsubscribe
        | Cmd::Publish
        | Cmd::PubSub => quiver_service::cmd::pubsub::run(&mut ctx.conn_ctx(), cmd, args),
        Cmd::Acl => acl::run(&mut ctx.conn_ctx(), args),
        Cmd::Info => info::run(ctx.state, args),
        Cmd::Multi | Cmd::Discard | Cmd::Watch | Cmd::Unwatch => transactions::run(ctx, cmd, args),
        Cmd::Cluster => topology::run_cluster(ctx, args),
        Cmd::Asking | Cmd::ReadOnly | Cmd::ReadWrite => topology::run_connection(ctx, cmd),
        Cmd::Role | Cmd::Wait if ctx.state.cluster.is_some() => {
            topology::run_replication(ctx, cmd, args)
        }
        Cmd::FlushAll | Cmd::FlushDb => topology::flush_chains(ctx),
        Cmd::RangeImport => rangeimport::run(ctx, args),
        Cmd::Chain => chain::run(ctx, args),
        Cmd::Reset => {
            ctx.conn.unwatch(ctx.session.id(), &ctx.state.watches);
            connection::run(&mut ctx.conn_ctx(), cmd, args)
        }
        _ => connection::run(&mut ctx.conn_ctx(), cmd, args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_service::table::COMMANDS;

    /// `parse`'s last arm is for a command the table has and nothing parses: none may reach it
    /// (a new row needs a parser here, or `is_server_command`).
    #[test]
    fn every_command_has_a_parser() {
        let limits = Limits {
            value_len_max: 1 << 20,
            databases: 16,
        };
        for spec in COMMANDS {
            let argc = spec.arity.unsigned_abs() as usize;
            let mut args = vec![Bytes::from_static(spec.name.as_bytes())];
            args.extend((1..argc).map(|_| Bytes::from_static(b"1")));
            let parsed = parse(spec, &args, &limits);
            if let Err(Reply::Error(e)) = &parsed {
                assert!(
                    !e.starts_with(b"ERR internal error"),
                    "{}: {}",
                    spec.name,
                    String::from_utf8_lossy(e)
                );
            }
        }
    }
}
