//! A hash's fields packed into one value: the value of a small hash's record, and of each
//! bucket of a large one (docs/design.md, "Hashes: the layout").
//!
//! ```text
//! packed := count:varint (field_len:varint field value_len:varint value){count}
//! ```
//!
//! Varints are LEB128 (7 bits per byte, low bits first, at most 10 bytes for a u64). The
//! pairs keep insertion order — HGETALL's order for a listpack in Redis: a replaced value
//! keeps its field's place, a deleted field closes its gap, a new one goes last. No field
//! appears twice: a value of a hash is only ever written by [`Fields::encode`]. Reads check
//! the structure (every length within the value), which they need to walk it; the checker
//! also looks for a field twice ([`Packed::check`]), work a read need not repeat since the
//! record's checksum vouches for the bytes.
//!
//! Reads walk the bytes without allocating ([`Packed`]); changes go through [`Fields`], whose
//! pairs borrow the decoded value and the change's own bytes until it is encoded again.

use bytes::{BufMut, Bytes, BytesMut};

/// Most fields a hash keeps packed in one record (Redis's `hash-max-listpack-entries`).
pub const PACKED_ENTRIES_MAX: usize = 512;
/// Longest field or value a hash keeps packed in one record (Redis's
/// `hash-max-listpack-value`).
pub const PACKED_VALUE_MAX: usize = 64;
/// Longest varint of a u64.
const VARINT_LEN_MAX: usize = 10;

/// Why bytes are not a packed hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldsError {
    #[error("packed hash: a length runs past the end of the value")]
    Truncated,
    #[error("packed hash: a varint longer than 10 bytes or above u64")]
    BadVarint,
    #[error("packed hash: {0} bytes after the last field")]
    Trailing(usize),
    #[error("packed hash: a field appears twice")]
    Duplicate,
    #[error("large hash: a metadata value of the wrong length, version or shape")]
    BadMeta,
}

/// The pairs of a packed value, read in place.
#[derive(Clone, Copy, Debug)]
pub struct Packed<'a> {
    count: usize,
    pairs: &'a [u8],
}

impl<'a> Packed<'a> {
    /// The packed value `bytes`, its structure checked: every length within the bytes,
    /// nothing after the last pair.
    pub fn new(bytes: &'a [u8]) -> Result<Packed<'a>, FieldsError> {
        let mut at = 0;
        let count = read_varint(bytes, &mut at)?;
        // Each pair takes at least two bytes: a count above that is damage, not a size.
        if count > (bytes.len() - at) as u64 / 2 {
            return Err(FieldsError::Truncated);
        }
        let packed = Packed {
            count: count as usize,
            pairs: &bytes[at..],
        };
        let mut walk = packed.walk();
        for _ in 0..packed.count {
            walk.pair()?;
        }
        if walk.at != packed.pairs.len() {
            return Err(FieldsError::Trailing(packed.pairs.len() - walk.at));
        }
        Ok(packed)
    }

    /// As [`Packed::new`], and no field twice (the checker's whole verification).
    pub fn check(bytes: &'a [u8]) -> Result<Packed<'a>, FieldsError> {
        let packed = Packed::new(bytes)?;
        let mut fields: Vec<&[u8]> = packed.iter().map(|(f, _)| f).collect();
        fields.sort_unstable();
        if fields.windows(2).any(|w| w[0] == w[1]) {
            return Err(FieldsError::Duplicate);
        }
        Ok(packed)
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether Redis would keep these pairs as a listpack ([`fits_packed`]).
    pub fn fits_packed(&self) -> bool {
        fits_packed(self.len(), self.iter())
    }

    /// The value of `field`, if the hash has it.
    pub fn get(&self, field: &[u8]) -> Option<&'a [u8]> {
        self.iter().find(|(f, _)| *f == field).map(|(_, v)| v)
    }

    /// The pairs in their order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let mut walk = self.walk();
        (0..self.count).map_while(move |_| walk.pair().ok())
    }

    fn walk(&self) -> Walk<'a> {
        Walk {
            bytes: self.pairs,
            at: 0,
        }
    }
}

/// Reads pairs from `bytes` on, each checked against its end.
struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Walk<'a> {
    fn part(&mut self) -> Result<&'a [u8], FieldsError> {
        let len = read_varint(self.bytes, &mut self.at)?;
        let end = (self.at as u64)
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len() as u64)
            .ok_or(FieldsError::Truncated)? as usize;
        let part = &self.bytes[self.at..end];
        self.at = end;
        Ok(part)
    }

    fn pair(&mut self) -> Result<(&'a [u8], &'a [u8]), FieldsError> {
        Ok((self.part()?, self.part()?))
    }
}

/// A hash's pairs to change and encode again, borrowed: from the decoded value and from
/// what changes them (a command's arguments), so that a change copies each byte once, into
/// the new value, and takes no reference count per field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields<'a> {
    pairs: Vec<(&'a [u8], &'a [u8])>,
}

impl<'a> Fields<'a> {
    /// The pairs of the packed `value` (its structure checked: [`Packed::new`]).
    pub fn decode(value: &'a [u8]) -> Result<Fields<'a>, FieldsError> {
        Ok(Fields {
            pairs: Packed::new(value)?.iter().collect(),
        })
    }

    /// The packed value of these pairs.
    pub fn encode(&self) -> Bytes {
        encode_pairs(&self.pairs)
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    pub fn get(&self, field: &[u8]) -> Option<&'a [u8]> {
        self.pairs
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| *v)
    }

    /// Sets `field` to `value`: in its place when the hash has it (false), else last (true).
    pub fn set(&mut self, field: &'a [u8], value: &'a [u8]) -> bool {
        match self.pairs.iter_mut().find(|(f, _)| *f == field) {
            Some(pair) => {
                pair.1 = value;
                false
            }
            None => {
                self.pairs.push((field, value));
                true
            }
        }
    }

    /// Removes `field`; whether the hash had it.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let before = self.pairs.len();
        self.pairs.retain(|(f, _)| *f != field);
        self.pairs.len() != before
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.pairs.iter().copied()
    }

    /// Whether Redis would keep these pairs as a listpack ([`fits_packed`]).
    pub fn fits_packed(&self) -> bool {
        fits_packed(self.len(), self.iter())
    }
}

/// The packed value of `pairs` (no field twice: the caller's to keep).
pub fn encode_pairs<F: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(F, V)]) -> Bytes {
    let body: usize = pairs
        .iter()
        .map(|(f, v)| f.as_ref().len() + v.as_ref().len() + 2 * VARINT_LEN_MAX)
        .sum();
    let mut out = BytesMut::with_capacity(VARINT_LEN_MAX + body);
    put_varint(&mut out, pairs.len() as u64);
    for (f, v) in pairs {
        put_varint(&mut out, f.as_ref().len() as u64);
        out.put_slice(f.as_ref());
        put_varint(&mut out, v.as_ref().len() as u64);
        out.put_slice(v.as_ref());
    }
    out.freeze()
}

/// Whether Redis would keep `count` pairs as a listpack: at most [`PACKED_ENTRIES_MAX`],
/// none of whose field or value is longer than [`PACKED_VALUE_MAX`].
fn fits_packed<F: AsRef<[u8]>, V: AsRef<[u8]>>(
    count: usize,
    mut pairs: impl Iterator<Item = (F, V)>,
) -> bool {
    count <= PACKED_ENTRIES_MAX
        && pairs.all(|(f, v)| {
            f.as_ref().len() <= PACKED_VALUE_MAX && v.as_ref().len() <= PACKED_VALUE_MAX
        })
}

fn put_varint(out: &mut BytesMut, mut n: u64) {
    while n >= 0x80 {
        out.put_u8(n as u8 | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

fn read_varint(bytes: &[u8], at: &mut usize) -> Result<u64, FieldsError> {
    let mut n = 0u64;
    for i in 0..VARINT_LEN_MAX {
        let b = *bytes.get(*at + i).ok_or(FieldsError::Truncated)?;
        let bits = u64::from(b & 0x7f);
        // The tenth byte holds the top bit of a u64 only.
        if i == VARINT_LEN_MAX - 1 && bits > 1 {
            return Err(FieldsError::BadVarint);
        }
        n |= bits << (7 * i);
        if b & 0x80 == 0 {
            *at += i + 1;
            return Ok(n);
        }
    }
    Err(FieldsError::BadVarint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(pairs: &[(&'a str, &'a str)]) -> Fields<'a> {
        let mut f = Fields::default();
        for (k, v) in pairs {
            f.set(k.as_bytes(), v.as_bytes());
        }
        f
    }

    #[test]
    fn pairs_keep_insertion_order_through_set_remove_and_encoding() {
        let mut f = fields(&[("a", "1"), ("b", "2"), ("c", "3")]);
        assert!(!f.set(b"a", b"10"), "a replaced, not added");
        assert!(f.set(b"d", b"4"));
        assert!(f.remove(b"b"));
        assert!(!f.remove(b"b"));
        let packed = f.encode();
        let back = Fields::decode(&packed).unwrap();
        assert_eq!(back, f);
        let order: Vec<_> = back.iter().collect();
        assert_eq!(
            order,
            [("a", "10"), ("c", "3"), ("d", "4")].map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        );
        let view = Packed::new(&packed).unwrap();
        assert_eq!(view.len(), 3);
        assert_eq!(view.get(b"c"), Some(&b"3"[..]));
        assert_eq!(view.get(b"b"), None);
    }

    #[test]
    fn the_empty_hash_and_empty_parts_round_trip() {
        let empty = Fields::default().encode();
        assert_eq!(&empty[..], [0]);
        assert!(Packed::new(&empty).unwrap().is_empty());
        let f = fields(&[("", ""), ("x", "")]);
        assert_eq!(Fields::decode(&f.encode()).unwrap(), f);
    }

    #[test]
    fn long_parts_take_long_varints() {
        let big = vec![b'v'; 70_000];
        let mut f = Fields::default();
        f.set(b"k", &big);
        let packed = f.encode();
        let back = Fields::decode(&packed).unwrap();
        assert_eq!(back.get(b"k"), Some(&big[..]));
        assert!(!back.fits_packed());
    }

    #[test]
    fn the_thresholds_are_redis_listpack_ones() {
        let names: Vec<String> = (0..PACKED_ENTRIES_MAX).map(|i| format!("f{i}")).collect();
        let mut f = Fields::default();
        for name in &names {
            f.set(name.as_bytes(), b"v");
        }
        assert!(f.fits_packed());
        f.set(b"one more", b"v");
        assert!(!f.fits_packed());
        let value = "x".repeat(PACKED_VALUE_MAX + 1);
        assert!(!fields(&[("k", &value)]).fits_packed());
        let field = "x".repeat(PACKED_VALUE_MAX);
        assert!(fields(&[(&field, "v")]).fits_packed());
    }

    #[test]
    fn damage_is_refused() {
        let good = fields(&[("ab", "cd"), ("e", "f")]).encode();
        // Every strict prefix is cut short somewhere.
        for cut in 0..good.len() {
            assert!(Packed::new(&good[..cut]).is_err(), "prefix of {cut} bytes");
        }
        let mut trailing = good.to_vec();
        trailing.push(0);
        assert_eq!(
            Packed::new(&trailing).unwrap_err(),
            FieldsError::Trailing(1)
        );
        let twice = fields(&[("a", "1")]);
        let mut dup = BytesMut::new();
        put_varint(&mut dup, 2);
        for _ in 0..2 {
            for (f, v) in twice.iter() {
                put_varint(&mut dup, f.len() as u64);
                dup.put_slice(f);
                put_varint(&mut dup, v.len() as u64);
                dup.put_slice(v);
            }
        }
        assert!(
            Packed::new(&dup).is_ok(),
            "a read does not look for a field twice"
        );
        assert_eq!(Packed::check(&dup).unwrap_err(), FieldsError::Duplicate);
        // A count no bytes could hold, a length past the end, an endless varint.
        assert_eq!(
            Packed::new(&[0x7f, 0, 0]).unwrap_err(),
            FieldsError::Truncated
        );
        assert_eq!(
            Packed::new(&[1, 9, b'a', 0]).unwrap_err(),
            FieldsError::Truncated
        );
        assert_eq!(
            Packed::new(&[0xff; 11]).unwrap_err(),
            FieldsError::BadVarint
        );
    }

    /// Random changes against a model (a Vec of pairs in insertion order), encoded and
    /// decoded after each.
    #[test]
    fn random_changes_match_a_model() {
        let seed = 0x5EED_F1E1_D500_u64;
        eprintln!("seed {seed}");
        let mut x = seed;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut packed = Fields::default().encode();
        for step in 0..5_000 {
            let field = format!("f{}", next() % 40).into_bytes();
            let value = vec![b'v'; (next() % 100) as usize];
            let mut f = Fields::decode(&packed).unwrap();
            if next() % 3 == 0 {
                model.retain(|(k, _)| *k != field);
                f.remove(&field);
            } else {
                match model.iter_mut().find(|(k, _)| *k == field) {
                    Some(pair) => pair.1 = value.clone(),
                    None => model.push((field.clone(), value.clone())),
                }
                f.set(&field, &value);
            }
            packed = f.encode();
            let back = Fields::decode(&packed).unwrap();
            let got: Vec<_> = back.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            assert_eq!(got, model, "step {step}");
        }
    }
}
