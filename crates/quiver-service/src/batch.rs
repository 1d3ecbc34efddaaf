//! The syntax of Quiver's BATCH command, read alike by a node (which runs it, `cmd::batch` of
//! quiver-node) and the router (which routes it by its keys):
//!
//! `BATCH <op> [<op> ...]` with `<op>` = `PUT key value [IF cond]` | `DEL key [IF cond]` |
//! `CHECK key IF cond` and `cond` = `EXISTS` | `ABSENT` | `EQUALS value`.

use bytes::Bytes;

use crate::errors::{self, err};
use crate::reply::Reply;

/// A condition of a BATCH operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    Exists,
    Absent,
    Equals(Bytes),
}

impl Condition {
    pub fn name(&self) -> &'static str {
        match self {
            Condition::Exists => "EXISTS",
            Condition::Absent => "ABSENT",
            Condition::Equals(_) => "EQUALS",
        }
    }

    pub fn holds(&self, current: Option<&Bytes>) -> bool {
        match self {
            Condition::Exists => current.is_some(),
            Condition::Absent => current.is_none(),
            Condition::Equals(v) => current == Some(v),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Put(Bytes, Bytes),
    Del(Bytes),
    Check(Bytes),
}

impl Op {
    pub fn key(&self) -> &Bytes {
        match self {
            Op::Put(k, _) | Op::Del(k) | Op::Check(k) => k,
        }
    }
}

/// A BATCH request's operations, each with its condition; a syntax error is Redis's.
pub fn parse(args: &[Bytes]) -> Result<Vec<(Op, Option<Condition>)>, Reply> {
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
    Ok(ops)
}

/// The keys a BATCH request names (none when it does not parse: its syntax error is reported
/// when it runs).
pub fn keys(args: &[Bytes]) -> Vec<Bytes> {
    parse(args).map_or_else(
        |_| Vec::new(),
        |ops| ops.into_iter().map(|(op, _)| op.key().clone()).collect(),
    )
}
