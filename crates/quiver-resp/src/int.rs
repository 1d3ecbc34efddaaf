//! The integers of the protocol: the `<type><n>\r\n` lines every encoder writes, formatted on
//! the stack, and the two parsers — Redis's exact `string2ll` (what a Redis server accepts in
//! requests) and the integer of a `:` reply.

use crate::limits::STRING2LL_MAX_LEN;

/// Longest header: type byte, sign, 20 digits (`u64::MAX`, `i64::MIN`), CRLF.
const HEADER_MAX: usize = 24;

/// `<type><n>\r\n` — `:42\r\n`, `*3\r\n`, `$5\r\n` — formatted on the stack: no allocation,
/// and one copy into the output buffer.
///
/// ```
/// use quiver_resp::Header;
/// assert_eq!(Header::new(b'$', 5).as_bytes(), b"$5\r\n");
/// assert_eq!(Header::int(b':', -7).as_bytes(), b":-7\r\n");
/// ```
#[derive(Clone, Copy)]
pub struct Header {
    buf: [u8; HEADER_MAX],
    /// Where the type byte is: the text is right-aligned in `buf`.
    start: usize,
}

impl Header {
    /// A length or a count: `$5\r\n`, `*3\r\n`.
    #[inline]
    pub fn new(ty: u8, n: usize) -> Header {
        Header::format(ty, false, n as u64)
    }

    /// A signed integer: `:-7\r\n`.
    #[inline]
    pub fn int(ty: u8, n: i64) -> Header {
        Header::format(ty, n < 0, n.unsigned_abs())
    }

    #[inline]
    fn format(ty: u8, negative: bool, mut m: u64) -> Header {
        let mut buf = [0u8; HEADER_MAX];
        buf[HEADER_MAX - 2] = b'\r';
        buf[HEADER_MAX - 1] = b'\n';
        let mut at = HEADER_MAX - 2;
        loop {
            at -= 1;
            buf[at] = b'0' + (m % 10) as u8;
            m /= 10;
            if m == 0 {
                break;
            }
        }
        if negative {
            at -= 1;
            buf[at] = b'-';
        }
        at -= 1;
        buf[at] = ty;
        Header { buf, start: at }
    }

    /// The header's bytes, CRLF included.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Header({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// Characters of `n` in decimal (sign included), as [`Header`] writes it.
#[inline]
pub fn decimal_len(n: i64) -> usize {
    digits(n.unsigned_abs()) + usize::from(n < 0)
}

/// Bytes of [`Header::new`]`(_, n)`: type byte, digits, CRLF.
#[inline]
pub fn header_len(n: usize) -> usize {
    1 + digits(n as u64) + 2
}

#[inline]
fn digits(m: u64) -> usize {
    m.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Redis `string2ll`: an optionally negative decimal without leading zeros, `+`, blanks or
/// overflow, shorter than 21 characters. What Redis accepts as a request's multibulk count or
/// bulk length, and as an integer argument.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > STRING2LL_MAX_LEN {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// The integer of a `:` reply: an optional `-` and decimal digits that fit an `i64`. Looser
/// than [`string2ll`] where RESP is (leading zeros and `-0` are accepted); `+`, blanks and
/// anything else are not.
pub fn parse_integer(line: &[u8]) -> Option<i64> {
    let digits = line.strip_prefix(b"-").unwrap_or(line);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // Only ASCII digits and a sign remain; parse() rejects overflow.
    std::str::from_utf8(line).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_matches_redis() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"-1"), Some(-1));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"000000000000000000001",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn string2ll_edge_cases() {
        // Leading zeros, in any position and with a sign.
        for bad in [&b"00"[..], b"007", b"-01", b"-00", b"0-1", b"--1", b"-+1"] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        // Blanks anywhere, and control characters.
        for bad in [&b"1 2"[..], b"\t1", b"1\r", b"1\n", b"1\0", b"- 1"] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        // 20 characters: the longest accepted (i64::MIN is exactly 20).
        assert_eq!(string2ll(b"-9223372036854775808").map(|_| 20), Some(20));
        assert_eq!(
            string2ll(b"-1000000000000000000"),
            Some(-1_000_000_000_000_000_000)
        );
        // 20 digits never fit an i64; 21 characters are refused before parsing.
        assert_eq!(string2ll(b"10000000000000000000"), None);
        assert_eq!(string2ll(b"99999999999999999999"), None);
        assert_eq!(string2ll(b"-10000000000000000000"), None);
        // Overflow by one either way.
        assert_eq!(string2ll(b"9223372036854775806"), Some(i64::MAX - 1));
        assert_eq!(string2ll(b"-9223372036854775807"), Some(i64::MIN + 1));
        // Every value round-trips through its decimal text.
        for n in [
            1,
            -1,
            9,
            10,
            -10,
            99,
            100,
            12345,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ] {
            assert_eq!(string2ll(n.to_string().as_bytes()), Some(n), "{n}");
        }
    }

    #[test]
    fn reply_integers_are_looser_than_string2ll() {
        assert_eq!(parse_integer(b"0"), Some(0));
        assert_eq!(parse_integer(b"-0"), Some(0));
        assert_eq!(parse_integer(b"007"), Some(7));
        assert_eq!(parse_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_integer(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"--1",
            b"1.5",
            b"12a",
            b"9223372036854775808",
            b"-9223372036854775809",
        ] {
            assert_eq!(
                parse_integer(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn headers_format_every_magnitude() {
        let mut samples = vec![0i64, 1, -1, 9, -9, i64::MAX, i64::MIN, i64::MIN + 1];
        let mut p = 1i64;
        while let Some(next) = p.checked_mul(10) {
            samples.extend([p - 1, p, p + 1, -p, -(p - 1), -(p + 1)]);
            p = next;
        }
        samples.extend([p - 1, p, -p]);
        for n in samples {
            let want = format!(":{n}\r\n");
            assert_eq!(Header::int(b':', n).as_bytes(), want.as_bytes());
            assert_eq!(decimal_len(n), n.to_string().len(), "{n}");
            if let Ok(u) = usize::try_from(n) {
                assert_eq!(header_len(u), Header::new(b'$', u).as_bytes().len(), "{n}");
            }
        }
        assert_eq!(Header::new(b'*', 0).as_bytes(), b"*0\r\n");
        assert_eq!(Header::new(b'$', 1_234_567).as_bytes(), b"$1234567\r\n");
        assert_eq!(
            Header::new(b'$', usize::MAX).as_bytes(),
            format!("${}\r\n", usize::MAX).as_bytes()
        );
        assert_eq!(header_len(usize::MAX), 23);
        assert_eq!(format!("{:?}", Header::new(b'%', 2)), r#"Header("%2\r\n")"#);
    }

    #[test]
    fn headers_round_trip_through_both_parsers() {
        for n in [0i64, 5, -5, 42, 1 << 40, i64::MAX, i64::MIN] {
            let h = Header::int(b':', n);
            let text = &h.as_bytes()[1..h.as_bytes().len() - 2];
            assert_eq!(parse_integer(text), Some(n));
            assert_eq!(string2ll(text), Some(n));
        }
    }
}
