//! EXISTS and TOUCH (one engine `multi_exists` vector; Quiver keeps no access times, so TOUCH
//! only counts) and TYPE.

use bytes::Bytes;

use crate::cmd::common::TxnCommand;
use crate::cmd::vector::{Shape, VectorOp};
use crate::txn::Txn;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;
use quiver_store::ValueKind;

/// EXISTS / TOUCH key [key ...]: how many of the keys exist (a key named twice counts twice).
pub fn exists(cmd: Cmd, args: &[Bytes]) -> VectorOp<'_> {
    VectorOp::new(cmd, &args[1..], Shape::Count)
}

/// TYPE key: `string`, `hash`, or `none` for an absent key.
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
        Ok(Reply::simple(
            match txn.get_entry(self.key)?.map(|e| e.kind) {
                Some(ValueKind::String) => "string",
                Some(ValueKind::Hash) => "hash",
                None => "none",
            },
        ))
    }
}
