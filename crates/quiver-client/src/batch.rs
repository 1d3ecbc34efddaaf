//! Compound batches, applied atomically by Quiver's `BATCH` command.
//!
//! Wire syntax (keywords are sent upper-case; the server matches them
//! case-insensitively):
//!
//! ```text
//! BATCH <op> [<op> ...]
//! <op>   = PUT <key> <value> [IF <cond>] | DEL <key> [IF <cond>] | CHECK <key> IF <cond>
//! <cond> = EXISTS | ABSENT | EQUALS <value>
//! ```
//!
//! The grammar is positional, so keys and values may be any bytes, including
//! the keywords themselves: `IF` is only ever looked for right after an op's
//! operands, and an op keyword only after an op (or its condition) ends.
//!
//! Conditions are evaluated against the state just before the batch, not
//! against earlier ops of the same batch (as in `quiver_store::Batch`).
//!
//! Replies: `+OK` when every op was applied. When a precondition fails
//! nothing is applied and the reply is the error
//! `-CONDITION op <i> failed: <cond>`, with `<i>` the 0-based index of the
//! first failing op and `<cond>` one of `EXISTS`, `ABSENT`, `EQUALS`;
//! [`Batch::execute`] returns it as [`BatchOutcome::ConditionFailed`], not
//! as an error.

use bytes::{Bytes, BytesMut};

use crate::conn::Connection;
use crate::error::{Error, Result};
use crate::resp::{encode_command, Value};

/// A precondition on a key's current value, checked before anything is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// The key exists.
    Exists,
    /// The key does not exist.
    Absent,
    /// The key exists and its value is exactly these bytes.
    Equals(Bytes),
}

impl Condition {
    pub fn equals(value: impl AsRef<[u8]>) -> Condition {
        Condition::Equals(Bytes::copy_from_slice(value.as_ref()))
    }

    /// The condition's keyword, as on the wire and in `CONDITION` replies.
    pub fn keyword(&self) -> &'static str {
        match self {
            Condition::Exists => "EXISTS",
            Condition::Absent => "ABSENT",
            Condition::Equals(_) => "EQUALS",
        }
    }

    /// Appends `IF <cond>` to `args`.
    fn push_args<'a>(&'a self, args: &mut Vec<&'a [u8]>) {
        args.push(b"IF");
        args.push(self.keyword().as_bytes());
        if let Condition::Equals(value) = self {
            args.push(value);
        }
    }
}

/// One operation of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Put {
        key: Bytes,
        value: Bytes,
        condition: Option<Condition>,
    },
    Delete {
        key: Bytes,
        condition: Option<Condition>,
    },
    /// Changes nothing: only its condition takes part.
    Check { key: Bytes, condition: Condition },
}

/// What became of a batch the server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Every op was applied, atomically.
    Applied,
    /// Op `op` (0-based) did not satisfy `condition` (`EXISTS`, `ABSENT` or
    /// `EQUALS`); nothing was applied.
    ConditionFailed { op: usize, condition: String },
}

impl BatchOutcome {
    pub fn is_applied(&self) -> bool {
        *self == BatchOutcome::Applied
    }

    /// `Ok(())` if applied, else [`Error::ConditionFailed`], for callers
    /// that treat a failed condition as an error.
    pub fn into_result(self) -> Result<()> {
        match self {
            BatchOutcome::Applied => Ok(()),
            BatchOutcome::ConditionFailed { op, condition } => {
                Err(Error::ConditionFailed { op, condition })
            }
        }
    }
}

/// A batch of puts, deletes and checks, applied all or nothing.
///
/// ```
/// use quiver_client::{Batch, Condition};
///
/// let batch = Batch::new()
///     .put_if("user:1", "alice", Condition::Absent)
///     .delete("pending:1")
///     .check("config", Condition::equals("v2"));
/// assert_eq!(batch.len(), 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    ops: Vec<Op>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    /// `PUT key value`.
    pub fn put(self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Batch {
        self.push(Op::Put {
            key: copy(key),
            value: copy(value),
            condition: None,
        })
    }

    /// `PUT key value IF <condition>`.
    pub fn put_if(
        self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        condition: Condition,
    ) -> Batch {
        self.push(Op::Put {
            key: copy(key),
            value: copy(value),
            condition: Some(condition),
        })
    }

    /// `DEL key` (deleting a missing key is not a failure).
    pub fn delete(self, key: impl AsRef<[u8]>) -> Batch {
        self.push(Op::Delete {
            key: copy(key),
            condition: None,
        })
    }

    /// `DEL key IF <condition>`.
    pub fn delete_if(self, key: impl AsRef<[u8]>, condition: Condition) -> Batch {
        self.push(Op::Delete {
            key: copy(key),
            condition: Some(condition),
        })
    }

    /// `CHECK key IF <condition>`: a precondition on a key the batch does
    /// not otherwise touch.
    pub fn check(self, key: impl AsRef<[u8]>, condition: Condition) -> Batch {
        self.push(Op::Check {
            key: copy(key),
            condition,
        })
    }

    /// Appends an op (for batches built from data rather than by chaining).
    pub fn push(mut self, op: Op) -> Batch {
        self.ops.push(op);
        self
    }

    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The command's arguments, `BATCH` first.
    pub fn args(&self) -> Vec<&[u8]> {
        let mut args: Vec<&[u8]> = vec![b"BATCH"];
        for op in &self.ops {
            match op {
                Op::Put {
                    key,
                    value,
                    condition,
                } => {
                    args.extend([b"PUT".as_slice(), key, value]);
                    if let Some(condition) = condition {
                        condition.push_args(&mut args);
                    }
                }
                Op::Delete { key, condition } => {
                    args.extend([b"DEL".as_slice(), key]);
                    if let Some(condition) = condition {
                        condition.push_args(&mut args);
                    }
                }
                Op::Check { key, condition } => {
                    args.extend([b"CHECK".as_slice(), key]);
                    condition.push_args(&mut args);
                }
            }
        }
        args
    }

    /// Appends the command to `out` as the RESP bytes sent on the wire.
    pub fn encode(&self, out: &mut BytesMut) {
        encode_command(out, &self.args());
    }

    /// Sends the batch and reports whether it was applied. A failed
    /// precondition is `Ok(BatchOutcome::ConditionFailed)`; `Err` is kept for
    /// connection failures and other error replies. An empty batch is
    /// trivially applied without a round trip.
    pub fn execute(&self, conn: &mut Connection) -> Result<BatchOutcome> {
        if self.ops.is_empty() {
            return Ok(BatchOutcome::Applied);
        }
        match conn.command(&self.args()) {
            Ok(Value::Simple(s)) if s == "OK" => Ok(BatchOutcome::Applied),
            Ok(other) => Err(Error::UnexpectedReply(format!(
                "BATCH: expected +OK, got {} {other:?}",
                other.kind()
            ))),
            Err(Error::ConditionFailed { op, condition }) if op < self.ops.len() => {
                Ok(BatchOutcome::ConditionFailed { op, condition })
            }
            Err(Error::ConditionFailed { op, condition }) => Err(Error::UnexpectedReply(format!(
                "BATCH: condition {condition} failed at op {op}, but the batch has {} ops",
                self.ops.len()
            ))),
            Err(e) => Err(e),
        }
    }
}

fn copy(bytes: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(bytes.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(batch: &Batch) -> Vec<u8> {
        let mut out = BytesMut::new();
        batch.encode(&mut out);
        out.to_vec()
    }

    #[test]
    fn every_op_and_condition_encodes_byte_for_byte() {
        let batch = Batch::new()
            .put("k1", "v1")
            .put_if("k2", "v2", Condition::Absent)
            .delete("k3")
            .delete_if("k4", Condition::Exists)
            .check("k5", Condition::equals("old"));
        let expected: &[u8] = b"*20\r\n$5\r\nBATCH\r\n\
            $3\r\nPUT\r\n$2\r\nk1\r\n$2\r\nv1\r\n\
            $3\r\nPUT\r\n$2\r\nk2\r\n$2\r\nv2\r\n$2\r\nIF\r\n$6\r\nABSENT\r\n\
            $3\r\nDEL\r\n$2\r\nk3\r\n\
            $3\r\nDEL\r\n$2\r\nk4\r\n$2\r\nIF\r\n$6\r\nEXISTS\r\n\
            $5\r\nCHECK\r\n$2\r\nk5\r\n$2\r\nIF\r\n$6\r\nEQUALS\r\n$3\r\nold\r\n";
        assert_eq!(
            String::from_utf8_lossy(&wire(&batch)),
            String::from_utf8_lossy(expected)
        );
    }

    #[test]
    fn binary_keys_values_and_keywords_are_plain_bulks() {
        let batch = Batch::new()
            .put_if(b"IF\r\n\0", b"", Condition::equals(b"PUT"))
            .delete(b"CHECK");
        let expected: &[u8] = b"*9\r\n$5\r\nBATCH\r\n\
            $3\r\nPUT\r\n$5\r\nIF\r\n\0\r\n$0\r\n\r\n$2\r\nIF\r\n$6\r\nEQUALS\r\n$3\r\nPUT\r\n\
            $3\r\nDEL\r\n$5\r\nCHECK\r\n";
        assert_eq!(wire(&batch), expected);
    }

    #[test]
    fn args_name_each_operand_once() {
        let batch = Batch::new().check("k", Condition::Exists);
        assert_eq!(
            batch.args(),
            vec![&b"BATCH"[..], b"CHECK", b"k", b"IF", b"EXISTS"]
        );
    }

    #[test]
    fn outcome_into_result() {
        assert!(BatchOutcome::Applied.into_result().is_ok());
        let failed = BatchOutcome::ConditionFailed {
            op: 2,
            condition: "ABSENT".into(),
        };
        assert!(!failed.is_applied());
        assert!(matches!(
            failed.into_result(),
            Err(Error::ConditionFailed { op: 2, condition }) if condition == "ABSENT"
        ));
    }
}
