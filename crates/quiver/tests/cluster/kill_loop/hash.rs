//! The hash keys of the chain crash loop: a hash's fields as the model keeps them (in HGETALL's
//! order), the load's hash writes (HSET, HDEL, HINCRBY), what each does to a hash and answers,
//! and how a hash no state explains compares with those states (lost or wrong).
//!
//! The fields and rules are those of the single-server loop's hashes
//! (`tests/server_process/kill_loop/hash.rs`, another test binary); here a hash is kept as the
//! field names and value texts HGETALL shows, which is what the members are compared on. The
//! load's values are up to 64 filler bytes long: about one HSET in six writes one past Redis's
//! listpack threshold, and the hash becomes large (metadata, anchor and buckets, which go down
//! the chain and to a rejoining member with it) until its last field goes, so kills land in
//! both encodings and across the transitions.

use quiver_client::Value;
use quiver_testkit::rng::Rng;

use super::model::op_of;

/// Fields of a hash key, named `f0`..: HSET writes the first [`SET_FIELDS`] (each HSET one
/// value of `model::value`, unique: a field's value names the HSET that wrote it), HINCRBY the
/// others (integers); HDEL removes any. No field is written by both: HINCRBY of a field holding
/// an HSET value would fail.
const FIELDS: usize = 6;
const SET_FIELDS: usize = 4;
/// Most fields of one HSET and of one HDEL (at least 1).
const HSET_FIELDS_MAX: usize = 3;
const HDEL_FIELDS_MAX: usize = 2;
const _: () = assert!(HSET_FIELDS_MAX <= SET_FIELDS && HDEL_FIELDS_MAX <= FIELDS);
/// HINCRBY adds from 1 to this much.
const HINCRBY_MAX: u64 = 9;

fn field_name(field: usize) -> String {
    format!("f{field}")
}

/// Longest value a hash keeps packed (Redis's `hash-max-listpack-value`): a longer one makes
/// it large.
const PACKED_VALUE_MAX: usize = 64;

/// A hash's fields and values in HGETALL's order, which is insertion order while it is small:
/// a replaced value keeps its field's place, a new field goes last, a deleted one closes its
/// gap. A large hash's order is its own. A state never holds an empty one: a hash loses its
/// key with its last field.
#[derive(Clone, Debug, Eq)]
pub struct Fields {
    pairs: Vec<(String, String)>,
    /// A value past [`PACKED_VALUE_MAX`] was written since the hash was created (in a state
    /// of the model), or shows (in a reply): the hash is large.
    large: bool,
}

/// Two hashes are equal with the same fields and values, in the same order unless either is
/// large.
impl PartialEq for Fields {
    fn eq(&self, other: &Fields) -> bool {
        if !self.large && !other.large {
            return self.pairs == other.pairs;
        }
        let sorted = |f: &Fields| {
            let mut pairs = f.pairs.clone();
            pairs.sort();
            pairs
        };
        sorted(self) == sorted(other)
    }
}

impl Fields {
    fn of(pairs: Vec<(String, String)>, large: bool) -> Option<Fields> {
        let large = large || pairs.iter().any(|(_, v)| v.len() > PACKED_VALUE_MAX);
        (!pairs.is_empty()).then_some(Fields { pairs, large })
    }

    /// HGETALL's reply (RESP2: field, value, field, value, ...): absent for no fields.
    pub fn from_reply(items: &[Value]) -> Result<Option<Fields>, String> {
        let mut pairs = Vec::with_capacity(items.len() / 2);
        for pair in items.chunks(2) {
            match pair {
                [Value::Bulk(f), Value::Bulk(v)] => pairs.push((
                    String::from_utf8_lossy(f).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )),
                _ => return Err(format!("HGETALL answered {items:?}")),
            }
        }
        Ok(Fields::of(pairs, false))
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    pub fn is_large(&self) -> bool {
        self.large
    }

    fn get(&self, field: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_str())
    }
}

/// A write of the load to one hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashWrite {
    /// HSET of these fields, each to `value`.
    Set { fields: Vec<usize>, value: String },
    /// HDEL of these fields.
    Del { fields: Vec<usize> },
    /// HINCRBY of this field by this much.
    IncrBy { field: usize, by: i64 },
}

/// `n` distinct fields below `of`, in random order (a partial Fisher-Yates shuffle).
fn distinct(rng: &mut Rng, n: usize, of: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..of).collect();
    for i in 0..n {
        let j = i + rng.index(of - i);
        all.swap(i, j);
    }
    all.truncate(n);
    all
}

impl HashWrite {
    /// HSET of 1 to [`HSET_FIELDS_MAX`] of the HSET fields, each to `value` (unique: the op's).
    pub fn set(rng: &mut Rng, value: String) -> HashWrite {
        let n = 1 + rng.index(HSET_FIELDS_MAX);
        let fields = distinct(rng, n, SET_FIELDS);
        HashWrite::Set { fields, value }
    }

    /// HDEL of 1 to [`HDEL_FIELDS_MAX`] fields of either kind.
    pub fn del(rng: &mut Rng) -> HashWrite {
        let n = 1 + rng.index(HDEL_FIELDS_MAX);
        let fields = distinct(rng, n, FIELDS);
        HashWrite::Del { fields }
    }

    /// HINCRBY of a counting field by 1 to [`HINCRBY_MAX`].
    pub fn incr_by(rng: &mut Rng) -> HashWrite {
        let field = SET_FIELDS + rng.index(FIELDS - SET_FIELDS);
        let by = 1 + rng.below(HINCRBY_MAX) as i64;
        HashWrite::IncrBy { field, by }
    }

    pub fn command(&self) -> &'static str {
        match self {
            HashWrite::Set { .. } => "HSET",
            HashWrite::Del { .. } => "HDEL",
            HashWrite::IncrBy { .. } => "HINCRBY",
        }
    }

    /// Its arguments after the key.
    pub fn args(&self) -> Vec<String> {
        match self {
            HashWrite::Set { fields, value } => fields
                .iter()
                .flat_map(|&f| [field_name(f), value.clone()])
                .collect(),
            HashWrite::Del { fields } => fields.iter().map(|&f| field_name(f)).collect(),
            HashWrite::IncrBy { field, by } => vec![field_name(*field), by.to_string()],
        }
    }

    /// What it does to the hash `from` (`None`: absent): the hash it leaves (absent when no
    /// field is left), and its reply — HSET the number of fields it added, HDEL of those it
    /// removed, HINCRBY the field's new value.
    pub fn apply(&self, from: Option<&Fields>) -> (Option<Fields>, i64) {
        let mut pairs = from.map_or_else(Vec::new, |f| f.pairs.clone());
        let reply = match self {
            HashWrite::Set { fields, value } => {
                let mut added = 0;
                for name in fields.iter().map(|&f| field_name(f)) {
                    match pairs.iter_mut().find(|(f, _)| *f == name) {
                        Some(pair) => pair.1 = value.clone(),
                        None => {
                            pairs.push((name, value.clone()));
                            added += 1;
                        }
                    }
                }
                added
            }
            HashWrite::Del { fields } => {
                let names: Vec<String> = fields.iter().map(|&f| field_name(f)).collect();
                let before = pairs.len();
                pairs.retain(|(f, _)| !names.contains(f));
                (before - pairs.len()) as i64
            }
            HashWrite::IncrBy { field, by } => {
                let name = field_name(*field);
                match pairs.iter_mut().find(|(f, _)| *f == name) {
                    Some(pair) => {
                        // A state holds only what the model gave it or a check explained.
                        let sum = pair.1.parse::<i64>().expect("a HINCRBY field's integer") + by;
                        pair.1 = sum.to_string();
                        sum
                    }
                    None => {
                        pairs.push((name, by.to_string()));
                        *by
                    }
                }
            }
        };
        // A hash that lost its last field is gone: one made again starts small.
        (Fields::of(pairs, from.is_some_and(|f| f.large)), reply)
    }
}

/// Whether `found`, a hash no state of its key explains, shows less than `state` (one the key
/// may hold, `acked_op` its last acknowledged write): it lacks a field of `state`, or holds one
/// at an older value (an HSET value naming an earlier write, a smaller count); where `state` is
/// absent, it shows no value written after the write that emptied the key.
pub fn behind(found: &Fields, state: Option<&Fields>, acked_op: u64) -> bool {
    let Some(state) = state else {
        return found
            .pairs
            .iter()
            .all(|(_, v)| op_of(v).is_none_or(|op| op < acked_op));
    };
    state
        .pairs
        .iter()
        .any(|(field, value)| match found.get(field) {
            None => true,
            Some(shown) => match (op_of(shown), op_of(value)) {
                (Some(shown), Some(value)) => shown < value,
                _ => matches!(
                    (shown.parse::<i64>(), value.parse::<i64>()),
                    (Ok(shown), Ok(value)) if shown < value
                ),
            },
        })
}
