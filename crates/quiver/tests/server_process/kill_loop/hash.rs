//! The hash keys of the kill loop: the fields of a hash as the model keeps them, in HGETALL's
//! order, and how they compare with what HGETALL shows. One HSET in [`LONG_EVERY`] writes a
//! value past Redis's listpack threshold (64 bytes): the hash becomes large (metadata and
//! buckets) and stays so until its last field goes, so kills land in both encodings and
//! across the transitions.

use bytes::Bytes;

/// Fields of a hash key, named `f0`..: HSET writes the first [`SET_FIELDS`] (each HSET one value
/// of [`hset_value`], unique), HINCRBY the others (integers); HDEL removes any. No field is written
/// by both: HINCRBY of a field holding such a value would fail.
pub(super) const FIELDS: usize = 6;
pub(super) const SET_FIELDS: usize = 4;
const _: () = assert!(FIELDS <= 8, "a set of fields is a u8 bit mask");
const _: () = assert!(SET_FIELDS < FIELDS, "some fields are HINCRBY's");

pub(super) fn field_name(field: usize) -> String {
    format!("f{field}")
}

/// `fields` as a bit mask (a step keeps its fields so, to stay `Copy`).
pub(super) fn mask(fields: &[usize]) -> u8 {
    fields.iter().fold(0, |m, &f| m | 1 << f)
}

/// The fields of `mask`, ascending: the order a command names them in.
pub(super) fn fields_of(mask: u8) -> impl Iterator<Item = usize> {
    (0..FIELDS).filter(move |f| mask & 1 << f != 0)
}

/// A field's value.
#[derive(Clone, Copy, Debug)]
pub(super) enum FieldValue {
    /// Written by the HSET of this id: [`hset_value`]'s value.
    Id(u64),
    /// A HINCRBY field's sum.
    Count(i64),
}

/// One HSET id in this many writes a long value.
const LONG_EVERY: u64 = 4;
/// Bytes added to a long value: past the listpack's 64.
const LONG_PAD: usize = 70;

fn is_long(id: u64) -> bool {
    id.is_multiple_of(LONG_EVERY)
}

/// The value the HSET of `id` writes: short (a string key's `model::render` is padded to
/// hundreds of bytes, which would make every hash large), or past 64 bytes.
pub(super) fn hset_value(thread: usize, id: u64) -> String {
    let pad = if is_long(id) { LONG_PAD } else { 0 };
    format!("t{thread}:v{id}:{}", "-".repeat(pad))
}

impl FieldValue {
    fn text(self, thread: usize) -> String {
        match self {
            FieldValue::Id(id) => hset_value(thread, id),
            FieldValue::Count(n) => n.to_string(),
        }
    }
}

/// A hash's fields in HGETALL's order, which is insertion order (a replaced value keeps its
/// field's place, a new field goes last, a deleted one closes its gap) while it is small; a
/// large hash's order is its own. A fixed array, so that a key's state stays `Copy`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fields {
    pairs: [(usize, FieldValue); FIELDS],
    len: usize,
    /// A long value was written since the hash was created: it is large.
    large: bool,
}

impl Fields {
    pub(super) const EMPTY: Fields = Fields {
        pairs: [(0, FieldValue::Count(0)); FIELDS],
        len: 0,
        large: false,
    };

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn pairs(&self) -> &[(usize, FieldValue)] {
        &self.pairs[..self.len]
    }

    pub(super) fn get(&self, field: usize) -> Option<FieldValue> {
        self.pairs().iter().find(|(f, _)| *f == field).map(|p| p.1)
    }

    /// Sets `field` to `value`: in its place if the hash has it, else last.
    pub(super) fn set(&mut self, field: usize, value: FieldValue) {
        self.large |= matches!(value, FieldValue::Id(id) if is_long(id));
        match self.pairs[..self.len].iter_mut().find(|(f, _)| *f == field) {
            Some(pair) => pair.1 = value,
            None => {
                self.pairs[self.len] = (field, value);
                self.len += 1;
            }
        }
    }

    /// Removes `field` if the hash has it; the fields after it move up.
    pub(super) fn remove(&mut self, field: usize) {
        if let Some(at) = self.pairs().iter().position(|(f, _)| *f == field) {
            self.pairs.copy_within(at + 1..self.len, at);
            self.len -= 1;
        }
        // Gone with its last field: a hash made here again starts small.
        if self.len == 0 {
            self.large = false;
        }
    }

    /// What HGETALL shows for these fields of a hash of `thread`: names and values, in order.
    pub(super) fn shown(&self, thread: usize) -> Vec<(Bytes, Bytes)> {
        self.pairs()
            .iter()
            .map(|&(f, v)| (field_name(f).into(), v.text(thread).into()))
            .collect()
    }

    /// Whether HGETALL's `pairs` show exactly these fields, in this order (a large hash:
    /// in any order).
    pub(super) fn shown_in(&self, thread: usize, pairs: &[(Bytes, Bytes)]) -> bool {
        let mut want = self.shown(thread);
        if !self.large {
            return want == pairs;
        }
        let mut got = pairs.to_vec();
        want.sort();
        got.sort();
        want == got
    }

    /// For messages: `{f2: v17, f4: 9}`.
    pub(super) fn describe(&self) -> String {
        let pairs: Vec<String> = self
            .pairs()
            .iter()
            .map(|&(f, v)| match v {
                FieldValue::Id(id) => format!("{}: v{id}", field_name(f)),
                FieldValue::Count(n) => format!("{}: {n}", field_name(f)),
            })
            .collect();
        format!("{{{}}}", pairs.join(", "))
    }
}
