//! RENAME, RENAMENX and COPY: a value moved or copied to another key (COPY: maybe in another
//! database) with its expiry, in one transaction (so the old key's removal and the new key's
//! write commit together). A large hash moves as its metadata record and its anchor (its
//! buckets are keyed by its generation, not its key); its COPY gets buckets of its own
//! (`hash::large::copy`).

use bytes::Bytes;

use crate::cmd::common::{check_new_key, Limits, TxnCommand};
use crate::cmd::hash::large;
use crate::txn::Txn;
use quiver_service::cmd::{db_index, int_arg};
use quiver_service::errors::{self, err};
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;
use quiver_store::large_hash::HashValue;

const NO_SUCH_KEY: &str = "ERR no such key";
/// COPY or MOVE of a key onto itself.
pub const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// RENAME / RENAMENX source destination.
pub struct Rename<'a> {
    from: &'a Bytes,
    to: &'a Bytes,
    /// RENAMENX: only when the destination does not exist.
    nx: bool,
}

impl<'a> Rename<'a> {
    pub fn parse(cmd: Cmd, args: &'a [Bytes]) -> Result<Rename<'a>, Reply> {
        check_new_key(&args[2])?;
        Ok(Rename {
            from: &args[1],
            to: &args[2],
            nx: cmd == Cmd::RenameNx,
        })
    }
}

impl TxnCommand for Rename<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let Some(entry) = txn.get_entry(self.from)? else {
            return Ok(err(NO_SUCH_KEY));
        };
        if self.from == self.to {
            // Redis answers as if renamed (RENAMENX: 0, the destination exists).
            return Ok(if self.nx {
                Reply::Integer(0)
            } else {
                Reply::OK
            });
        }
        if self.nx && txn.exists(self.to)? {
            return Ok(Reply::Integer(0));
        }
        txn.delete(self.from.clone());
        // A large hash's anchor follows it to its new key (its buckets stay as they are).
        if let Ok(HashValue::Large(meta)) = entry.hash_value() {
            large::anchor(txn, &meta, self.to);
        }
        // The expiry moves with the value; the destination's own is gone.
        txn.put_entry(self.to.clone(), entry);
        Ok(if self.nx {
            Reply::Integer(1)
        } else {
            Reply::OK
        })
    }
}

/// COPY source destination [DB destination-db] [REPLACE]: 1 if copied, 0 if the source is
/// absent or the destination exists (without REPLACE).
pub struct Copy<'a> {
    from: &'a Bytes,
    to: &'a Bytes,
    /// DB: the destination's database (else the connection's).
    db: Option<u32>,
    replace: bool,
}

impl<'a> Copy<'a> {
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<Copy<'a>, Reply> {
        let mut replace = false;
        let mut db = None;
        let mut j = 3;
        while j < args.len() {
            let opt = &args[j];
            if opt.eq_ignore_ascii_case(b"replace") {
                replace = true;
            } else if opt.eq_ignore_ascii_case(b"db") && j + 1 < args.len() {
                j += 1;
                db = Some(db_index(int_arg(&args[j], None)?, limits.databases)?);
            } else {
                return Err(err(errors::SYNTAX));
            }
            j += 1;
        }
        if args[1] == args[2] && db.is_none() {
            return Err(err(SAME_OBJECT));
        }
        check_new_key(&args[2])?;
        Ok(Copy {
            from: &args[1],
            to: &args[2],
            db,
            replace,
        })
    }
}

impl TxnCommand for Copy<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let db = self.db.unwrap_or(txn.db());
        if db == txn.db() && self.from == self.to {
            return Ok(err(SAME_OBJECT));
        }
        let Some(entry) = txn.get_entry(self.from)? else {
            return Ok(Reply::Integer(0));
        };
        if !self.replace && txn.get_entry_in(db, self.to)?.is_some() {
            return Ok(Reply::Integer(0));
        }
        match entry.hash_value() {
            Ok(HashValue::Large(meta)) => large::copy(txn, meta, db, self.to, entry.expire_at)?,
            _ => txn.put_entry_in(db, self.to.clone(), entry),
        }
        Ok(Reply::Integer(1))
    }
}
