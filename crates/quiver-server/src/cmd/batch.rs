//! Quiver's BATCH command: puts, deletes and checks with preconditions, all or nothing.
//!
//! `BATCH <op> [<op> ...]` with `<op>` = `PUT key value [IF cond]` | `DEL key [IF cond]` |
//! `CHECK key IF cond` and `cond` = `EXISTS` | `ABSENT` | `EQUALS value`.
//!
//! Every condition is evaluated against the state before the batch; if all hold, every write
//! is applied (atomically, with the transaction's commit), else nothing is and the reply is
//! `-CONDITION op <i> failed: <cond>`.

use bytes::Bytes;

use crate::cmd::common::{check_new_key, check_value, Limits, TxnCommand};
use crate::txn::Txn;
use quiver_service::errors::{self, err};
use quiver_service::reply::Reply;

/// A condition of a BATCH operation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Condition {
    Exists,
    Absent,
    Equals(Bytes),
}

impl Condition {
    fn name(&self) -> &'static str {
        match self {
            Condition::Exists => "EXISTS",
            Condition::Absent => "ABSENT",
            Condition::Equals(_) => "EQUALS",
        }
    }

    fn holds(&self, current: Option<&Bytes>) -> bool {
        match self {
            Condition::Exists => current.is_some(),
            Condition::Absent => current.is_none(),
            Condition::Equals(v) => current == Some(v),
        }
    }
}

enum Op {
    Put(Bytes, Bytes),
    Del(Bytes),
    Check(Bytes),
}

impl Op {
    fn key(&self) -> &Bytes {
        match self {
            Op::Put(k, _) | Op::Del(k) | Op::Check(k) => k,
        }
    }
}

pub struct Batch {
    ops: Vec<(Op, Option<Condition>)>,
}

impl Batch {
    pub fn parse(args: &[Bytes], limits: &Limits) -> Result<Batch, Reply> {
        let mut ops: Vec<(Op, Option<Condition>)> = Vec::new();
        let mut j = 1;
        let arg = |j: usize| args.get(j);
        while j < args.len() {
            let word = args[j].to_ascii_uppercase();
            let (op, used) = match (&word[..], arg(j + 1), arg(j + 2)) {
                (b"PUT", Some(k), Some(v)) => (Op::Put(k.clone(), v.clone()), 3),
                (b"DEL", Some(k), _) => (Op::Del(k.clone()), 2),
                (b"CHECK", Some(k), _) => (Op::Check(k.clone()), 2),
                _ => return Err(err(errors::SYNTAX)),
            };
            j += used;
            let mut condition = None;
            if arg(j).is_some_and(|w| w.eq_ignore_ascii_case(b"IF")) {
                let c = match arg(j + 1).map(|w| w.to_ascii_uppercase()) {
                    Some(w) if w == b"EXISTS" => Condition::Exists,
                    Some(w) if w == b"ABSENT" => Condition::Absent,
                    Some(w) if w == b"EQUALS" => match arg(j + 2) {
                        Some(v) => {
                            j += 1;
                            Condition::Equals(v.clone())
                        }
                        None => return Err(err(errors::SYNTAX)),
                    },
                    _ => return Err(err(errors::SYNTAX)),
                };
                j += 2;
                condition = Some(c);
            }
            if matches!(op, Op::Check(_)) && condition.is_none() {
                return Err(err(errors::SYNTAX));
            }
            ops.push((op, condition));
        }
        for (op, _) in &ops {
            if let Op::Put(key, value) = op {
                check_new_key(key)?;
                check_value(limits, value)?;
            }
        }
        Ok(Batch { ops })
    }
}

/// The keys a BATCH request names, for cluster routing (none when it does not parse: its
/// syntax error is reported when it runs).
pub fn keys(args: &[Bytes], limits: &Limits) -> Vec<Bytes> {
    Batch::parse(args, limits).map_or_else(
        |_| Vec::new(),
        |b| b.ops.into_iter().map(|(op, _)| op.key().clone()).collect(),
    )
}

impl TxnCommand for Batch {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        // Conditions see the state before the batch: evaluate them all before any write.
        for (i, (op, condition)) in self.ops.iter().enumerate() {
            if let Some(c) = condition {
                if !c.holds(txn.get(op.key())?.as_ref()) {
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
