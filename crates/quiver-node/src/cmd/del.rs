//! DEL and UNLINK (one engine `multi_delete` vector; UNLINK frees nothing later, so it is
//! DEL under its own name) and GETDEL.

use bytes::Bytes;

use crate::cmd::common::{bulk_or_null, TxnCommand};
use crate::cmd::vector::{Shape, VectorOp};
use crate::txn::Txn;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// DEL / UNLINK key [key ...]: how many of the keys existed.
pub fn del(cmd: Cmd, args: &[Bytes]) -> VectorOp<'_> {
    VectorOp::new(cmd, &args[1..], Shape::Count)
}

/// GETDEL key: the value, and the key deleted.
pub struct GetDel<'a> {
    key: &'a Bytes,
}

impl GetDel<'_> {
    pub fn parse(args: &[Bytes]) -> GetDel<'_> {
        GetDel { key: &args[1] }
    }
}

impl TxnCommand for GetDel<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let old = txn.get(self.key)?;
        if old.is_some() {
            txn.delete(self.key.clone());
        }
        Ok(bulk_or_null(old))
    }
}
