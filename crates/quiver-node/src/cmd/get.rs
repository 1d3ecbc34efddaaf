//! GET and MGET: one engine `multi_get` vector. Consecutive GETs (and MGETs, and reads of
//! one hash: `hash::read`) of a pipelined run are one engine call (`exec::vector`); an MGET
//! wider than one engine call is read through a transaction in several, checked unchanged at
//! the end (`txn`), so its reply is still one state of the store.

use bytes::Bytes;

use crate::cmd::hash::read::HashRead;
use crate::cmd::vector::{Shape, VectorOp};
use quiver_service::table::Cmd;

/// GET key.
pub fn get(args: &[Bytes]) -> VectorOp<'_> {
    VectorOp::new(Cmd::Get, &args[1..2], Shape::Value)
}

/// MGET key [key ...].
pub fn mget(args: &[Bytes]) -> VectorOp<'_> {
    VectorOp::new(Cmd::MGet, &args[1..], Shape::Values)
}

/// A read of one hash (HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN; its arity
/// checked) as a vector operation on its key: the arguments after the key are the fields it
/// names, its reply `hash::read::reply`.
pub fn hash_read(cmd: Cmd, args: &[Bytes]) -> VectorOp<'_> {
    let read = match cmd {
        Cmd::HGet => HashRead::Field,
        Cmd::HMGet => HashRead::Fields,
        Cmd::HGetAll => HashRead::All,
        Cmd::HKeys => HashRead::Keys,
        Cmd::HVals => HashRead::Vals,
        Cmd::HLen => HashRead::Len,
        Cmd::HExists => HashRead::Exists,
        _ => HashRead::StrLen,
    };
    VectorOp::hash_read(cmd, &args[1..2], &args[2..], Shape::Hash(read))
}
