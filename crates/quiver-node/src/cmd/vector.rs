//! [`VectorOp`]: a command that is one engine vector operation (GET, MGET, a plain SET, DEL,
//! UNLINK, EXISTS, and the reads of one hash: HGET, HMGET, HGETALL, ...). A hash read reads
//! its hash's key as GET does — one probe and one read among the vector's, whatever the
//! fields — and answers from its fields (`hash::read::reply`). The executor runs consecutive
//! ones of a kind as one engine call (`exec::vector`); inside MULTI/EXEC, or when one is wider
//! than an engine call may be, it runs against a transaction instead ([`TxnCommand`]). Either
//! way its reply is built here, from the per-key results, so both paths answer alike.

use bytes::Bytes;
use quiver_store::{Entry, ValueKind};

use crate::cmd::common::{bulk_or_null, TxnCommand};
use crate::cmd::hash;
use crate::cmd::hash::read::{Found, HashRead};
use crate::store_errors::store_error;
use crate::txn::{valid_key, Txn};
use quiver_service::reply::Reply;
use quiver_service::table::{Cmd, Vector};

/// How a vector command's per-key results become its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The value or nil (GET).
    Value,
    /// An array of values or nils (MGET).
    Values,
    /// A read of one hash (HGET, HMGET, HGETALL, ...).
    Hash(HashRead),
    /// `+OK` (SET).
    Ok,
    /// How many keys were found (EXISTS) or deleted (DEL, UNLINK).
    Count,
}

/// One command as a vector operation on its keys.
#[derive(Clone, Copy, Debug)]
pub struct VectorOp<'a> {
    pub cmd: Cmd,
    pub kind: Vector,
    /// The keys, or for [`Vector::Put`] the key, value pairs.
    args: &'a [Bytes],
    /// The hash fields a [`Shape::Hash`] operation names (of its one key); none for the
    /// others.
    fields: &'a [Bytes],
    pub shape: Shape,
}

/// The per-key results a vector produced, in key order.
pub enum Results<'r> {
    /// Keys found, of any kind (get).
    Values(&'r [Option<Entry>]),
    /// Whether each key existed (exists; delete: before the delete).
    Found(&'r [bool]),
    /// Puts.
    Written,
}

impl<'a> VectorOp<'a> {
    /// `args`: the keys, or key, value pairs for a put (the command's arguments after its name).
    pub fn new(cmd: Cmd, args: &'a [Bytes], shape: Shape) -> VectorOp<'a> {
        VectorOp {
            cmd,
            kind: cmd.spec().vector,
            args,
            fields: &[],
            shape,
        }
    }

    /// A read (`shape` [`Shape::Hash`]) naming `fields` of the hash at `key`.
    pub fn hash_read(cmd: Cmd, key: &'a [Bytes], fields: &'a [Bytes], shape: Shape) -> Self {
        VectorOp {
            fields,
            ..VectorOp::new(cmd, key, shape)
        }
    }

    /// How many keys the operation touches.
    pub fn width(&self) -> usize {
        if self.kind.takes_pairs() {
            self.args.len() / 2
        } else {
            self.args.len()
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &'a Bytes> {
        let step = if self.kind.takes_pairs() { 2 } else { 1 };
        self.args.iter().step_by(step)
    }

    /// (key, value) of a put's pairs.
    pub fn pairs(&self) -> impl Iterator<Item = (&'a Bytes, &'a Bytes)> {
        self.args.chunks_exact(2).map(|p| (&p[0], &p[1]))
    }

    /// Whether the engine accepts every key (it refuses empty and over-long ones; such a key
    /// is read as absent through a transaction instead).
    pub fn keys_valid(&self) -> bool {
        self.keys().all(|k| valid_key(k))
    }

    /// The reply of a [`Shape::Value`] operation (GET) from what it found, taken by value so
    /// that a group of GETs moves its values into their replies: WRONGTYPE for a key of
    /// another kind than a string.
    pub fn value_reply(found: Option<Entry>) -> Reply {
        match found.map(|e| e.of_kind(ValueKind::String)).transpose() {
            Ok(e) => bulk_or_null(e.map(|e| e.value)),
            Err(e) => store_error(&e),
        }
    }

    /// An element of a [`Shape::Values`] reply (MGET): a key of another kind than a string
    /// is nil, as in Redis.
    pub fn values_item(found: Option<Entry>) -> Option<Bytes> {
        found.and_then(Entry::into_string)
    }

    /// The reply of an operation of one key (GET, a hash read) from what it found; for a
    /// read of a large hash, its metadata (the reply needs its buckets: a transaction reads
    /// them: `exec::vector`'s `reply_of` and `get_replies`, or [`TxnCommand::apply`]).
    pub fn one_key_reply(&self, found: Option<Entry>) -> Found {
        match self.shape {
            Shape::Hash(read) => hash::read::reply(read, self.fields, found),
            _ => Found::Reply(Self::value_reply(found)),
        }
    }

    /// The reply from this operation's results (see [`VectorOp::one_key_reply`]).
    pub fn reply(&self, results: Results<'_>) -> Found {
        Found::Reply(match (self.shape, results) {
            (Shape::Value | Shape::Hash(_), Results::Values(v)) => {
                return self.one_key_reply(v.first().cloned().flatten())
            }
            (Shape::Values, Results::Values(v)) => Reply::Array(
                v.iter()
                    .cloned()
                    .map(|e| bulk_or_null(Self::values_item(e)))
                    .collect(),
            ),
            (Shape::Count, Results::Found(f)) => {
                Reply::Integer(f.iter().filter(|&&x| x).count() as i64)
            }
            (Shape::Ok, _) => Reply::OK,
            (shape, _) => Reply::error(format!(
                "ERR internal error: {shape:?} reply from other results"
            )),
        })
    }

    /// The reply from results found inside `txn`: a large hash's buckets read there too.
    fn reply_in(&self, txn: &mut Txn<'_>, results: Results<'_>) -> quiver_store::Result<Reply> {
        match (self.reply(results), self.shape) {
            (Found::Large(meta), Shape::Hash(read)) => {
                hash::read::large_reply(txn, meta, read, self.fields)
            }
            (Found::Reply(reply), _) => Ok(reply),
            (Found::Large(_), _) => Ok(Reply::error(
                "ERR internal error: a large hash found by a read of no hash",
            )),
        }
    }
}

impl TxnCommand for VectorOp<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        match self.kind {
            Vector::Get => {
                let mut values = Vec::with_capacity(self.width());
                for k in self.keys() {
                    let v = txn.get_entry(k)?;
                    txn.stats().hit(v.is_some());
                    values.push(v);
                }
                self.reply_in(txn, Results::Values(&values))
            }
            Vector::Put | Vector::AtomicPut => {
                for (k, v) in self.pairs() {
                    txn.put(k.clone(), v.clone());
                }
                self.reply_in(txn, Results::Written)
            }
            Vector::Delete => {
                let mut found = Vec::with_capacity(self.width());
                for k in self.keys() {
                    let exists = txn.exists(k)?;
                    if exists {
                        txn.delete(k.clone());
                    }
                    found.push(exists);
                }
                self.reply_in(txn, Results::Found(&found))
            }
            Vector::Exists => {
                let mut found = Vec::with_capacity(self.width());
                for k in self.keys() {
                    found.push(txn.exists(k)?);
                }
                self.reply_in(txn, Results::Found(&found))
            }
            Vector::None | Vector::Txn => Ok(Reply::error(format!(
                "ERR internal error: {:?} is no vector operation",
                self.cmd
            ))),
        }
    }
}
