//! GET and MGET (and HGET, HMGET: a hash's key read as GET reads a key): one engine
//! `multi_get` vector. Consecutive GETs (and MGETs, HGETs, HMGETs) of a pipelined run are one
//! engine call (`exec::vector`); an MGET wider than one engine call is read
//! through a transaction in several, checked unchanged at the end (`txn`), so its reply is
//! still one state of the store.

use bytes::Bytes;

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

/// HGET key field: its hash's key read as a GET's is, the field found in what it read.
pub fn hget(args: &[Bytes]) -> VectorOp<'_> {
    VectorOp::hash_read(Cmd::HGet, &args[1..2], &args[2..], Shape::Field)
}

/// HMGET key field [field ...], as HGET.
pub fn hmget(args: &[Bytes]) -> VectorOp<'_> {
    VectorOp::hash_read(Cmd::HMGet, &args[1..2], &args[2..], Shape::Fields)
}
