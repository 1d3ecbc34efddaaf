//! What the key commands share: the [`TxnCommand`] trait that runs one against a
//! transaction, the limits their arguments are checked against, and those checks.

use bytes::Bytes;

use crate::state::ServerState;
use crate::store_errors::store_error;
use crate::txn::{valid_key, Txn};
use quiver_service::reply::Reply;

/// A parsed command on keys: it reads through the transaction and buffers its writes there,
/// so the executor decides whether it commits alone (an atomic read-modify-write) or with the
/// other commands of a MULTI/EXEC. It may run several times (after a conflict), so it has no
/// effect outside the transaction.
pub trait TxnCommand: Send + Sync {
    /// The command's reply; engine failures come back as `Err` (they fail the transaction).
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply>;
}

/// What parsing checks arguments against.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest value the engine stores (a longer one is refused before anything runs).
    pub value_len_max: usize,
    /// Databases a command may name (`databases`).
    pub databases: u32,
}

impl Limits {
    pub fn of(state: &ServerState) -> Limits {
        Limits {
            // CONFIG SET proto-max-bulk-len; never above what the store was opened with.
            value_len_max: state.core.live.proto_max_bulk_len(),
            databases: state.core.config.databases,
        }
    }
}

/// The error for a key the engine can never store (empty, over 64 KiB): a command that
/// would create it is refused when parsed. (Reading or deleting it simply finds nothing.)
pub fn check_new_key(key: &[u8]) -> Result<(), Reply> {
    if valid_key(key) {
        return Ok(());
    }
    Err(store_error(&quiver_store::Error::KeyLength {
        len: key.len(),
        max: quiver_store::options::KEY_LEN_MAX,
    }))
}

/// The error for a value longer than the engine stores.
/// Redis's refusal of a string that would grow past `proto-max-bulk-len` (APPEND, SETRANGE).
pub const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

pub fn check_value(limits: &Limits, value: &[u8]) -> Result<(), Reply> {
    if value.len() <= limits.value_len_max {
        return Ok(());
    }
    Err(store_error(&quiver_store::Error::ValueTooLarge {
        len: value.len(),
        max: limits.value_len_max,
    }))
}

/// `key value` at `args[1..3]` for a command that stores `value` at `key` (SETNX, GETSET):
/// both checked.
pub fn key_value<'a>(args: &'a [Bytes], limits: &Limits) -> Result<(&'a Bytes, &'a Bytes), Reply> {
    check_new_key(&args[1])?;
    check_value(limits, &args[2])?;
    Ok((&args[1], &args[2]))
}

/// A random number: a fresh SipHash key each call (std's `RandomState`).
pub fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0u8)
}

pub fn bulk_or_null(v: Option<Bytes>) -> Reply {
    v.map_or(Reply::Null, Reply::Bulk)
}
