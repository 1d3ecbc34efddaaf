//! MOVE and SWAPDB: keys between databases (SELECT is a connection command, FLUSHDB a keyspace
//! one). Both run against a transaction like every key command: MOVE deletes in one database
//! and writes in the other in one batch; SWAPDB is one metadata write of the engine, carried
//! out at commit.

use bytes::Bytes;

use crate::cmd::common::{Limits, TxnCommand};
use crate::cmd::rename::SAME_OBJECT;
use crate::txn::Txn;
use quiver_service::cmd::{db_index, int_arg};
use quiver_service::errors::err;
use quiver_service::reply::Reply;

/// MOVE key db: 1 if moved (with its expiry), 0 if the key is absent here or exists there.
pub struct Move<'a> {
    key: &'a Bytes,
    db: u32,
}

impl<'a> Move<'a> {
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<Move<'a>, Reply> {
        Ok(Move {
            key: &args[1],
            db: db_index(int_arg(&args[2], None)?, limits.databases)?,
        })
    }
}

impl TxnCommand for Move<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        if self.db == txn.db() {
            return Ok(err(SAME_OBJECT));
        }
        let Some(entry) = txn.get_entry(self.key)? else {
            return Ok(Reply::Integer(0));
        };
        if txn.get_entry_in(self.db, self.key)?.is_some() {
            return Ok(Reply::Integer(0));
        }
        txn.delete(self.key.clone());
        txn.put_entry_in(self.db, self.key.clone(), entry);
        Ok(Reply::Integer(1))
    }
}

/// SWAPDB index1 index2: every client of one database sees the other's keys from then on.
pub struct SwapDb {
    a: u32,
    b: u32,
}

impl SwapDb {
    pub fn parse(args: &[Bytes], limits: &Limits) -> Result<SwapDb, Reply> {
        // Both numbers are read before either is checked, as in Redis.
        let a = int_arg(&args[1], Some("ERR invalid first DB index"))?;
        let b = int_arg(&args[2], Some("ERR invalid second DB index"))?;
        Ok(SwapDb {
            a: db_index(a, limits.databases)?,
            b: db_index(b, limits.databases)?,
        })
    }
}

impl TxnCommand for SwapDb {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        if self.a != self.b {
            txn.swap(self.a, self.b);
        }
        Ok(Reply::OK)
    }
}
