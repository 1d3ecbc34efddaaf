//! Compound batches (the KVSSD paper's compound command): puts, deletes and checks, each
//! optionally guarded by a precondition, applied all-or-nothing and atomically visible.

use bytes::Bytes;

pub use crate::log::format::ValueKind;

/// A live key's value, its kind and its expiry time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// A string's bytes, or a hash's fields packed (`fields::Fields`).
    pub value: Bytes,
    /// Milliseconds since the Unix epoch; `None`: the key never expires.
    pub expire_at: Option<u64>,
    pub kind: ValueKind,
}

impl Entry {
    /// A string that never expires.
    pub fn lasting(value: impl Into<Bytes>) -> Entry {
        Entry::string(value, None)
    }

    /// A string that expires at `expire_at` (ms since the Unix epoch; `None`: never).
    pub fn string(value: impl Into<Bytes>, expire_at: Option<u64>) -> Entry {
        Entry {
            value: value.into(),
            expire_at,
            kind: ValueKind::String,
        }
    }

    /// The value of a string; `None` for another kind.
    pub fn into_string(self) -> Option<Bytes> {
        (self.kind == ValueKind::String).then_some(self.value)
    }

    /// This entry, when it is of `kind`; [`crate::Error::WrongType`] (Redis's WRONGTYPE)
    /// when it is not. The one check every typed read of a key makes.
    pub fn of_kind(self, kind: ValueKind) -> crate::Result<Entry> {
        if self.kind == kind {
            Ok(self)
        } else {
            Err(crate::Error::WrongType)
        }
    }
}

/// What must hold for a batch to apply. Conditions are evaluated against the state just
/// before the batch (not against earlier operations of the same batch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// The key exists.
    Exists,
    /// The key does not exist.
    Absent,
    /// The key holds a string and its value equals these bytes.
    ValueEquals(Bytes),
    /// The key does not exist (`None`) or has exactly this value, kind and expiry time: a
    /// WATCH-style snapshot (a key that expired since, or whose expiry changed, fails it).
    Unchanged(Option<Entry>),
}

/// What an operation does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchAction {
    Put(Bytes),
    Delete,
    /// Writes nothing; only its precondition matters.
    Check,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchOp {
    /// The key's database (SELECT's number; 0 by default).
    pub db: u32,
    pub key: Bytes,
    pub action: BatchAction,
    pub condition: Option<Precondition>,
    /// A put's expiry time (ms since the Unix epoch); `None`: the key never expires (a put
    /// without one clears the key's old expiry, as a Redis SET does).
    pub expire_at: Option<u64>,
    /// What a put's value is (a put replaces a key of any kind, as a Redis SET does).
    pub kind: ValueKind,
}

/// A compound batch, built with the methods below.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub ops: Vec<BatchOp>,
    /// The database of the ops pushed from now on ([`Batch::in_db`]).
    db: u32,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    pub fn put(&mut self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> &mut Batch {
        self.push(key, BatchAction::Put(value.into()), None)
    }

    pub fn put_if(
        &mut self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        condition: Precondition,
    ) -> &mut Batch {
        self.push(key, BatchAction::Put(value.into()), Some(condition))
    }

    /// A put that expires at `expire_at` (ms since the Unix epoch; `None`: never).
    pub fn put_expiring(
        &mut self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        expire_at: Option<u64>,
        condition: Option<Precondition>,
    ) -> &mut Batch {
        self.push(key, BatchAction::Put(value.into()), condition);
        if let Some(op) = self.ops.last_mut() {
            op.expire_at = expire_at;
        }
        self
    }

    /// A put of `entry` whole: its value, kind and expiry time.
    pub fn put_entry(
        &mut self,
        key: impl Into<Bytes>,
        entry: Entry,
        condition: Option<Precondition>,
    ) -> &mut Batch {
        self.push(key, BatchAction::Put(entry.value), condition);
        if let Some(op) = self.ops.last_mut() {
            op.expire_at = entry.expire_at;
            op.kind = entry.kind;
        }
        self
    }

    pub fn delete(&mut self, key: impl Into<Bytes>) -> &mut Batch {
        self.push(key, BatchAction::Delete, None)
    }

    pub fn delete_if(&mut self, key: impl Into<Bytes>, condition: Precondition) -> &mut Batch {
        self.push(key, BatchAction::Delete, Some(condition))
    }

    /// A precondition on a key the batch does not write.
    pub fn check(&mut self, key: impl Into<Bytes>, condition: Precondition) -> &mut Batch {
        self.push(key, BatchAction::Check, Some(condition))
    }

    pub fn push(
        &mut self,
        key: impl Into<Bytes>,
        action: BatchAction,
        condition: Option<Precondition>,
    ) -> &mut Batch {
        self.ops.push(BatchOp {
            db: self.db,
            key: key.into(),
            action,
            condition,
            expire_at: None,
            kind: ValueKind::String,
        });
        self
    }

    /// The ops pushed from now on are in database `db` (SELECT's number): a batch may span
    /// databases (MOVE deletes in one and puts in another, atomically).
    pub fn in_db(&mut self, db: u32) -> &mut Batch {
        self.db = db;
        self
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// The result of [`crate::Store::apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Every operation was applied.
    Applied,
    /// Nothing was applied: operation `op` (index into `Batch::ops`) had a precondition that
    /// did not hold.
    ConditionFailed { op: usize, condition: Precondition },
}

impl BatchOutcome {
    pub fn is_applied(&self) -> bool {
        matches!(self, BatchOutcome::Applied)
    }
}

/// A key's state as a precondition sees it: value, expiry time, kind.
pub(crate) type Current<'a> = (&'a [u8], Option<u64>, ValueKind);

/// Whether `condition` holds for a key whose current state is `current` (`None`: absent).
pub(crate) fn holds(condition: &Precondition, current: Option<Current<'_>>) -> bool {
    match condition {
        Precondition::Exists => current.is_some(),
        Precondition::Absent => current.is_none(),
        Precondition::ValueEquals(v) => {
            matches!(current, Some((c, _, ValueKind::String)) if c == &v[..])
        }
        Precondition::Unchanged(e) => {
            current == e.as_ref().map(|e| (&e.value[..], e.expire_at, e.kind))
        }
    }
}

/// Whether evaluating `condition` needs the value (not just existence).
pub(crate) fn needs_value(condition: &Precondition) -> bool {
    matches!(
        condition,
        Precondition::ValueEquals(_) | Precondition::Unchanged(_)
    )
}
