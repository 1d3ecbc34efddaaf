//! MSET and MSETNX: all the pairs in one compound batch, all or nothing (also across a crash),
//! never in a plain put vector (whose records a crash may keep in part). MSET is a vector
//! operation of its own kind (`Vector::AtomicPut`: consecutive MSETs are one batch); MSETNX,
//! which reads first, runs in a transaction.

use bytes::Bytes;

use crate::cmd::common::{check_new_key, check_value, Limits, TxnCommand};
use crate::cmd::vector::{Shape, VectorOp};
use crate::txn::Txn;
use quiver_service::errors;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// MSET / MSETNX key value [key value ...].
pub struct MSet<'a> {
    pairs: &'a [Bytes],
    /// MSETNX: only if none of the keys exists.
    nx: bool,
}

impl<'a> MSet<'a> {
    pub fn parse(args: &'a [Bytes], nx: bool, limits: &Limits) -> Result<MSet<'a>, Reply> {
        if args.len() % 2 == 0 {
            return Err(errors::wrong_arity(if nx { "msetnx" } else { "mset" }));
        }
        let pairs = &args[1..];
        for pair in pairs.chunks_exact(2) {
            check_new_key(&pair[0])?;
        }
        for pair in pairs.chunks_exact(2) {
            check_value(limits, &pair[1])?;
        }
        Ok(MSet { pairs, nx })
    }
}

/// MSET: its pairs as a vector operation (`Vector::AtomicPut`), after the same checks.
pub fn mset<'a>(args: &'a [Bytes], limits: &Limits) -> Result<VectorOp<'a>, Reply> {
    let checked = MSet::parse(args, false, limits)?;
    Ok(VectorOp::new(Cmd::MSet, checked.pairs, Shape::Ok))
}

impl TxnCommand for MSet<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        if self.nx {
            for pair in self.pairs.chunks_exact(2) {
                if txn.exists(&pair[0])? {
                    return Ok(Reply::Integer(0));
                }
            }
        }
        for pair in self.pairs.chunks_exact(2) {
            txn.put(pair[0].clone(), pair[1].clone());
        }
        Ok(if self.nx {
            Reply::Integer(1)
        } else {
            Reply::OK
        })
    }
}
