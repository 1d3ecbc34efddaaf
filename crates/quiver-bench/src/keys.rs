//! Deterministic keys and values: key `i` and its value are functions of `i` alone, so `quiver
//! load`, the benchmarks and `quiver get` agree on them, and a reader can verify what it got.
//!
//! - key `i` of size K: `i` in decimal, zero-padded on the left to exactly K bytes
//!   (`key_for(42, 16)` = `0000000000000042`), so keys are typeable at a shell;
//! - value `i` of size V: `i` in decimal followed by `.`, repeated and cut to exactly V bytes
//!   (`value_for(42, 8)` = `42.42.42`).

use crate::error::{Error, Result};

/// Shortest key size: 10^8 distinct keys at least.
pub const KEY_SIZE_MIN: usize = 8;
/// Largest key size the engine accepts.
pub const KEY_SIZE_MAX: usize = quiver_store::options::KEY_LEN_MAX;
/// Decimal digits of `u64::MAX`.
const U64_DIGITS: usize = 20;

/// Number of distinct keys of `key_size` bytes: 10^key_size, capped at `u64::MAX`.
pub fn key_space(key_size: usize) -> u64 {
    if key_size >= U64_DIGITS {
        u64::MAX
    } else {
        10u64.pow(key_size as u32)
    }
}

/// Checks that `count` keys of `key_size` bytes can be generated.
pub fn check_key_params(count: u64, key_size: usize) -> Result<()> {
    if !(KEY_SIZE_MIN..=KEY_SIZE_MAX).contains(&key_size) {
        return Err(Error::Invalid(format!(
            "key size {key_size} outside {KEY_SIZE_MIN}..={KEY_SIZE_MAX} bytes"
        )));
    }
    if count > key_space(key_size) {
        return Err(Error::Invalid(format!(
            "{count} keys do not fit in {key_size}-byte decimal keys (at most {})",
            key_space(key_size)
        )));
    }
    Ok(())
}

/// Decimal digits of `i`, most significant first, in the tail of the returned array.
#[inline]
fn digits(mut i: u64) -> ([u8; U64_DIGITS], usize) {
    let mut d = [0u8; U64_DIGITS];
    let mut at = U64_DIGITS;
    loop {
        at -= 1;
        d[at] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            return (d, at);
        }
    }
}

/// Writes key `i` into `out` (its length is the key size). `i` must be below
/// `key_space(out.len())` (debug-asserted: the caller validated the count).
#[inline]
pub fn write_key(i: u64, out: &mut [u8]) {
    debug_assert!(i < key_space(out.len()) || out.len() >= U64_DIGITS);
    let (d, at) = digits(i);
    // An index too large for the key size (a caller bug) keeps its low digits.
    let n = (U64_DIGITS - at).min(out.len());
    let pad = out.len() - n;
    out[..pad].fill(b'0');
    out[pad..].copy_from_slice(&d[U64_DIGITS - n..]);
}

pub fn key_for(i: u64, key_size: usize) -> Vec<u8> {
    let mut k = vec![0u8; key_size];
    write_key(i, &mut k);
    k
}

/// Writes value `i` into `out` (its length is the value size).
#[inline]
pub fn write_value(i: u64, out: &mut [u8]) {
    let (d, at) = digits(i);
    let unit_len = U64_DIGITS - at + 1;
    let mut unit = [b'.'; U64_DIGITS + 1];
    unit[..unit_len - 1].copy_from_slice(&d[at..]);
    for (o, u) in out.iter_mut().zip(unit[..unit_len].iter().cycle()) {
        *o = *u;
    }
}

pub fn value_for(i: u64, value_size: usize) -> Vec<u8> {
    let mut v = vec![0u8; value_size];
    write_value(i, &mut v);
    v
}

/// Cheap check that `v` is value `i` of `value_size` bytes: its length and its first unit
/// (the digits of `i` and the dot). Enough to catch a read of another key's record.
#[inline]
pub fn value_matches(i: u64, v: &[u8], value_size: usize) -> bool {
    if v.len() != value_size {
        return false;
    }
    let (d, at) = digits(i);
    let digits = &d[at..];
    let n = digits.len().min(v.len());
    if v[..n] != digits[..n] {
        return false;
    }
    v.len() == n || v[n] == b'.'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_decimal() {
        assert_eq!(key_for(42, 16), b"0000000000000042");
        assert_eq!(key_for(0, 8), b"00000000");
        assert_eq!(key_for(99_999_999, 8), b"99999999");
        assert_eq!(key_for(u64::MAX, 22), b"0018446744073709551615");
        assert_eq!(key_for(7, 20), b"00000000000000000007");
    }

    #[test]
    fn values_repeat_the_index() {
        assert_eq!(value_for(42, 8), b"42.42.42");
        assert_eq!(value_for(7, 0), b"");
        assert_eq!(value_for(123, 2), b"12");
        assert_eq!(value_for(5, 5), b"5.5.5");
        for (i, size) in [
            (42u64, 8usize),
            (0, 1),
            (123, 2),
            (123, 3),
            (123, 4),
            (u64::MAX, 512),
        ] {
            assert!(value_matches(i, &value_for(i, size), size), "{i} {size}");
        }
        assert!(!value_matches(42, &value_for(43, 8), 8));
        assert!(!value_matches(4, &value_for(42, 8), 8));
        assert!(!value_matches(42, &value_for(42, 7), 8));
    }

    #[test]
    fn key_params_are_checked() {
        assert!(check_key_params(1000, 16).is_ok());
        assert!(check_key_params(100_000_000, 8).is_ok());
        assert!(check_key_params(100_000_001, 8).is_err());
        assert!(check_key_params(10, 7).is_err());
        assert!(check_key_params(u64::MAX, 20).is_ok());
    }
}
