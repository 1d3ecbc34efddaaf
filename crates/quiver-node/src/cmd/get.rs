//! GET and MGET: one engine `multi_get` vector. Consecutive GETs (and MGETs, and reads of
//! one hash: `hash::read`) of a pipelined run are one engine call (`exec::vector`); an MGET
//! wider than one engine call is read through a transaction in several, checked unchanged at
//! the end (`txn`), so its reply is still one state of the store.

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
