//! Quiver's BATCH command: puts, deletes and checks with preconditions, all or nothing.
//!
//! Its syntax is `quiver_service::batch`'s (the router reads a BATCH's keys there too); here
//! its keys and values are checked against the engine's limits, and it runs as a transaction
//! step: every condition is evaluated against the state before the batch; if all hold, every
//! write is applied (atomically, with the transaction's commit), else nothing is and the reply
//! is `-CONDITION op <i> failed: <cond>`. A hash key takes part as any key does: it exists,
//! equals no string, a PUT replaces it with a string (as SET does) and a DEL deletes it.

use bytes::Bytes;
use quiver_service::batch::{self, Condition, Op};
use quiver_store::{Entry, ValueKind};

use crate::cmd::common::{check_new_key, check_value, Limits, TxnCommand};
use crate::txn::Txn;
use quiver_service::reply::Reply;

pub struct Batch {
    ops: Vec<(Op, Option<Condition>)>,
}

impl Batch {
    pub fn parse(args: &[Bytes], limits: &Limits) -> Result<Batch, Reply> {
        let ops = batch::parse(args)?;
        for (op, _) in &ops {
            if let Op::Put(key, value) = op {
                check_new_key(key)?;
                check_value(limits, value)?;
            }
        }
        Ok(Batch { ops })
    }
}

impl TxnCommand for Batch {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        // Conditions see the state before the batch: evaluate them all before any write.
        for (i, (op, condition)) in self.ops.iter().enumerate() {
            if let Some(c) = condition {
                if !holds(c, txn.get_entry(op.key())?.as_ref()) {
                    return Ok(Reply::error(format!(
                        "CONDITION op {i} failed: {}",
                        c.name()
                    )));
                }
            }
        }
        for (op, _) in &self.ops {
            match op {
                Op::Put(k, v) => txn.put(k.clone(), v.clone()),
                Op::Del(k) => txn.delete(k.clone()),
                Op::Check(_) => {}
            }
        }
        Ok(Reply::OK)
    }
}

/// Whether `c` holds for a key in state `current`, of any kind: a hash exists and equals no
/// string.
fn holds(c: &Condition, current: Option<&Entry>) -> bool {
    match (c, current) {
        (Condition::Equals(_), Some(e)) if e.kind != ValueKind::String => false,
        _ => c.holds(current.map(|e| &e.value)),
    }
}
