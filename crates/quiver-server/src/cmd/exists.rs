//! EXISTS (one engine `multi_exists` vector) and TYPE.

use bytes::Bytes;

use crate::cmd::common::TxnCommand;
use crate::cmd::vector::{Shape, VectorOp};
use crate::reply::Reply;
use crate::table::Cmd;
use crate::txn::Txn;

/// EXISTS key [key ...]: how many of the keys exist (a key named twice counts twice).
pub fn exists(args: &[Bytes]) -> VectorOp<'_> {
    VectorOp::new(Cmd::Exists, &args[1..], Shape::Count)
}

/// TYPE key: every value is a string.
pub struct Type<'a> {
    key: &'a Bytes,
}

impl Type<'_> {
    pub fn parse(args: &[Bytes]) -> Type<'_> {
        Type { key: &args[1] }
    }
}

impl TxnCommand for Type<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        Ok(Reply::simple(if txn.exists(self.key)? {
            "string"
        } else {
            "none"
        }))
    }
}
