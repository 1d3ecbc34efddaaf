//! C's `long double` on x86-64 Linux (the x87 80-bit extended format: a 64-bit significand),
//! emulated exactly for what Redis's INCRBYFLOAT does with it: glibc's `strtold` (decimal,
//! hexadecimal, `inf`; correctly rounded to nearest, ties to even), one addition (rounded the
//! same way) and `%.17Lf` (the exact binary value rounded to 17 decimals, ties to even). The
//! exact values in between are carried by a small arbitrary-precision integer ([`Big`]).
//!
//! An `f64` would not do: Redis answers `0.3` to `0.1 + 0.2` (the 64-bit significand rounds
//! the sum onto 0.3 at 17 decimals) and prints `1e308 + 1e308` as a 309-digit integer (no
//! overflow below about 1.19e4932).

use std::cmp::Ordering;

/// The smallest binary exponent: subnormals are `m × 2^E_MIN` with `m < 2^63`.
const E_MIN: i64 = -16445;
/// The largest binary exponent of a normal `m × 2^e`, `2^63 <= m < 2^64`.
const E_MAX: i64 = 16320;
/// Longest text Redis's `string2ld` reads (`MAX_LONG_DOUBLE_CHARS`, less its terminator).
pub const TEXT_LEN_MAX: usize = 5 * 1024 - 1;
/// Decimals `%.17Lf` prints.
const DECIMALS: u32 = 17;

/// A finite long double: `(-1)^neg × m × 2^e`, with `m >= 2^63` unless `e == E_MIN`
/// (subnormal numbers and zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Float80 {
    neg: bool,
    m: u64,
    e: i64,
}

/// What `strtold` reads from a text Redis accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    Finite(Float80),
    /// `inf`, `infinity` (any case, either sign): accepted, and any sum with it is refused.
    Infinite,
}

impl Float80 {
    pub const ZERO: Float80 = Float80 {
        neg: false,
        m: 0,
        e: E_MIN,
    };
}

/// Redis's `string2ld`: the whole text must be a number `strtold` reads (no leading blank, no
/// trailing byte), at most [`TEXT_LEN_MAX`] bytes, not NaN, and neither overflowing nor
/// underflowing to zero. `None`: "value is not a valid float".
pub fn parse(text: &[u8]) -> Option<Parsed> {
    if text.is_empty() || text.len() > TEXT_LEN_MAX {
        return None;
    }
    let (neg, body) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let lower: Vec<u8> = body.iter().take(8).map(u8::to_ascii_lowercase).collect();
    if lower.starts_with(b"inf") {
        return (body.len() == 3 || (body.len() == 8 && lower == b"infinity"))
            .then_some(Parsed::Infinite);
    }
    let value = if lower.starts_with(b"0x") {
        parse_hex(neg, &body[2..])?
    } else {
        parse_decimal(neg, body)?
    };
    Some(Parsed::Finite(value))
}

/// Digits, an optional point and digits (at least one digit in all), then the rest.
fn mantissa(s: &[u8], radix: u32) -> Option<(&[u8], &[u8], &[u8])> {
    let int_len = s
        .iter()
        .take_while(|b| char::from(**b).is_digit(radix))
        .count();
    let (int, rest) = s.split_at(int_len);
    let (frac, rest) = match rest.strip_prefix(b".") {
        Some(r) => {
            let n = r
                .iter()
                .take_while(|b| char::from(**b).is_digit(radix))
                .count();
            r.split_at(n)
        }
        None => (&rest[..0], rest),
    };
    (!int.is_empty() || !frac.is_empty()).then_some((int, frac, rest))
}

/// An exponent (`e` or `p` already matched): an optional sign and at least one decimal digit,
/// and nothing after; saturated far beyond any exponent that matters.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0i64, |n, d| (n * 10 + i64::from(d - b'0')).min(1 << 40));
    Some(if neg { -n } else { n })
}

fn parse_decimal(neg: bool, s: &[u8]) -> Option<Float80> {
    let (int, frac, rest) = mantissa(s, 10)?;
    let exp = match rest {
        [] => 0,
        [b'e' | b'E', e @ ..] => exponent(e)?,
        _ => return None,
    };
    let digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Some(Float80::ZERO);
    };
    let digits = &digits[first..];
    let last = digits.iter().rposition(|&d| d != b'0').unwrap_or(0);
    // value = D × 10^exp10, D the significant digits.
    let exp10 = exp - frac.len() as i64 + (digits.len() - 1 - last) as i64;
    let digits = &digits[..=last];
    let nd = digits.len() as i64;
    // 10^4934 is past the largest long double (1.19e4932); 10^-4952 below half the smallest.
    if nd + exp10 > 4934 {
        return None;
    }
    if nd + exp10 < -4952 {
        return None;
    }
    let mut d = Big::default();
    for chunk in digits.chunks(19) {
        let v = chunk.iter().fold(0u64, |v, c| v * 10 + u64::from(c - b'0'));
        d.mul_add(10u64.pow(chunk.len() as u32), v);
    }
    if exp10 >= 0 {
        d.mul_pow10(exp10 as u64);
        return round_big(neg, &d, 0, false).finite();
    }
    // D / 10^k: a quotient of 65 to 67 bits, and whether anything remained.
    let mut p = Big::from_u64(1);
    p.mul_pow10(exp10.unsigned_abs());
    let s = p.bit_len() as i64 - d.bit_len() as i64 + 66;
    let (num, den) = if s >= 0 {
        (d.shl(s as u64), p)
    } else {
        (d, p.shl(s.unsigned_abs()))
    };
    let (q, exact) = div_small_quotient(num, &den);
    round(neg, q, -s, !exact).finite()
}

fn parse_hex(neg: bool, s: &[u8]) -> Option<Float80> {
    let (int, frac, rest) = mantissa(s, 16)?;
    let exp = match rest {
        [] => 0,
        [b'p' | b'P', e @ ..] => exponent(e)?,
        _ => return None,
    };
    let mut h = Big::default();
    for &c in int.iter().chain(frac) {
        h.mul_add(16, u64::from(char::from(c).to_digit(16)?));
    }
    if h.is_zero() {
        return Some(Float80::ZERO);
    }
    let exp2 = exp - 4 * frac.len() as i64;
    let bits = h.bit_len() as i64;
    if bits - 1 + exp2 >= 16384 || bits + exp2 < E_MIN - 1 {
        return None;
    }
    round_big(neg, &h, exp2, false).finite()
}

/// `a + b` rounded to a long double; `None` when it overflows to infinity.
pub fn add(a: Float80, b: Float80) -> Option<Float80> {
    if a.m == 0 {
        return Some(b);
    }
    if b.m == 0 {
        return Some(a);
    }
    // `a` has the larger exponent.
    let (a, b) = if a.e >= b.e { (a, b) } else { (b, a) };
    // Both as multiples of 2^t: `a` shifted left by at most 62 bits, `b` right by whatever
    // more it takes (what falls off only tells whether the sum lies strictly above).
    let diff = (a.e - b.e) as u64;
    let (t, a_m, b_m, sticky) = if diff <= 62 {
        (b.e, u128::from(a.m) << diff, u128::from(b.m), false)
    } else {
        let right = diff - 62;
        let b_m = if right >= 64 { 0 } else { b.m >> right };
        let lost = right >= 64 || b.m & ((1u64 << right) - 1) != 0;
        (a.e - 62, u128::from(a.m) << 62, u128::from(b_m), lost)
    };
    let (neg, m, sticky) = if a.neg == b.neg {
        (a.neg, a_m + b_m, sticky)
    } else {
        // a - (b_m + frac) = (a_m - b_m - 1) + (1 - frac): strictly above that when frac > 0.
        match a_m.cmp(&b_m) {
            Ordering::Equal => return Some(Float80::ZERO),
            Ordering::Greater => (a.neg, a_m - b_m - u128::from(sticky), sticky),
            Ordering::Less => (b.neg, b_m - a_m, false),
        }
    };
    match round(neg, m, t, sticky) {
        Rounded::Finite(x) => Some(x),
        Rounded::Zero => Some(Float80::ZERO),
        Rounded::Overflow => None,
    }
}

/// Redis's `ld2string(.., LD_STR_HUMAN)`: `%.17Lf` with the trailing zeros (and a bare point)
/// removed, and `-0` written `0`.
pub fn format_human(x: Float80) -> String {
    let mut s = String::new();
    if x.neg {
        s.push('-');
    }
    if x.e >= 0 {
        s.push_str(&Big::from_u64(x.m).shl(x.e as u64).to_decimal());
    } else {
        let scale = 10u128.pow(DECIMALS);
        let q = shift_right_even(u128::from(x.m) * scale, x.e.unsigned_abs());
        s.push_str(&(q / scale).to_string());
        let frac = format!("{:017}", q % scale);
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
    }
    if s == "-0" {
        s.remove(0);
    }
    s
}

/// `v / 2^k` rounded to the nearest integer, ties to even.
fn shift_right_even(v: u128, k: u64) -> u128 {
    if k == 0 {
        return v;
    }
    if k >= 128 {
        return 0; // v < 2^121 here: below half of 2^k
    }
    let q = v >> k;
    let rem = v & ((1u128 << k) - 1);
    let half = 1u128 << (k - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// A value rounded to a long double.
#[derive(Debug, PartialEq, Eq)]
enum Rounded {
    Finite(Float80),
    /// Not zero, but nearer zero than the smallest subnormal (`strtold`: ERANGE).
    Zero,
    /// Beyond the largest finite value (`strtold`: ERANGE, infinity).
    Overflow,
}

impl Rounded {
    /// What `string2ld` accepts: neither range error.
    fn finite(self) -> Option<Float80> {
        match self {
            Rounded::Finite(x) => Some(x),
            Rounded::Zero | Rounded::Overflow => None,
        }
    }
}

/// `n × 2^exp` (plus a little more when `sticky`) rounded to a long double; `n` is not zero.
fn round_big(neg: bool, n: &Big, exp: i64, sticky: bool) -> Rounded {
    let bits = n.bit_len();
    if bits <= 126 {
        return round(neg, n.low_u128(), exp, sticky);
    }
    let drop = bits - 126;
    let top = n.shr(drop).low_u128();
    round(neg, top, exp + drop as i64, sticky || n.any_bit_below(drop))
}

/// `m × 2^exp` rounded to nearest, ties to even; `sticky`: the value lies strictly between
/// `m` and `m + 1` (then `m` has at least 66 bits, so the rounding position is above it).
fn round(neg: bool, m: u128, exp: i64, sticky: bool) -> Rounded {
    if m == 0 {
        return Rounded::Zero;
    }
    let bits = 128 - i64::from(m.leading_zeros());
    let e = (exp + bits - 64).max(E_MIN);
    let shift = e - exp;
    let mut kept = if shift <= 0 {
        m << shift.unsigned_abs()
    } else if shift >= 128 {
        0 // m < 2^127 <= half a unit of the last place
    } else {
        let q = m >> shift;
        let rem = m & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        if rem > half || (rem == half && (sticky || q & 1 == 1)) {
            q + 1
        } else {
            q
        }
    };
    let mut e = e;
    if kept == 1u128 << 64 {
        kept >>= 1;
        e += 1;
    }
    if kept == 0 {
        return Rounded::Zero;
    }
    if e > E_MAX {
        return Rounded::Overflow;
    }
    Rounded::Finite(Float80 {
        neg,
        m: kept as u64,
        e,
    })
}

/// `num / den` when the quotient is below 2^68 (the caller scaled them so), and whether the
/// division was exact.
fn div_small_quotient(mut num: Big, den: &Big) -> (u128, bool) {
    let mut q = 0u128;
    for bit in (0..68).rev() {
        let d = den.shl(bit);
        if num.cmp_big(&d) != Ordering::Less {
            num.sub_assign(&d);
            q |= 1 << bit;
        }
    }
    (q, num.is_zero())
}

/// A non-negative integer of any size: 64-bit limbs, least significant first, no zero limb
/// at the top (zero is no limb).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u64>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bit_len(&self) -> u64 {
        self.0.last().map_or(0, |top| {
            64 * (self.0.len() as u64 - 1) + 64 - u64::from(top.leading_zeros())
        })
    }

    /// `self = self × mul + add`.
    fn mul_add(&mut self, mul: u64, add: u64) {
        let mut carry = u128::from(add);
        for limb in &mut self.0 {
            let v = u128::from(*limb) * u128::from(mul) + carry;
            *limb = v as u64;
            carry = v >> 64;
        }
        if carry != 0 {
            self.0.push(carry as u64);
        }
        self.trim();
    }

    /// `self × 10^n`.
    fn mul_pow10(&mut self, mut n: u64) {
        while n > 0 {
            let step = n.min(19);
            self.mul_add(10u64.pow(step as u32), 0);
            n -= step;
        }
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let (limbs, bits) = ((n / 64) as usize, (n % 64) as u32);
        let mut out = vec![0u64; limbs];
        let mut carry = 0u64;
        for &limb in &self.0 {
            out.push(if bits == 0 {
                limb
            } else {
                (limb << bits) | carry
            });
            carry = if bits == 0 { 0 } else { limb >> (64 - bits) };
        }
        out.push(carry);
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let (limbs, bits) = ((n / 64) as usize, (n % 64) as u32);
        let src = self.0.get(limbs..).unwrap_or_default();
        let mut out = Vec::with_capacity(src.len());
        for (i, &limb) in src.iter().enumerate() {
            let high = src.get(i + 1).copied().unwrap_or(0);
            out.push(if bits == 0 {
                limb
            } else {
                (limb >> bits) | (high << (64 - bits))
            });
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// Whether any of the `n` lowest bits is set.
    fn any_bit_below(&self, n: u64) -> bool {
        let (limbs, bits) = ((n / 64) as usize, n % 64);
        self.0.iter().take(limbs).any(|&l| l != 0)
            || (bits > 0
                && self
                    .0
                    .get(limbs)
                    .is_some_and(|&l| l & ((1 << bits) - 1) != 0))
    }

    /// The low 128 bits.
    fn low_u128(&self) -> u128 {
        let lo = self.0.first().copied().unwrap_or(0);
        let hi = self.0.get(1).copied().unwrap_or(0);
        (u128::from(hi) << 64) | u128::from(lo)
    }

    fn cmp_big(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// `self -= other`, for `other <= self`.
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = false;
        for (i, limb) in self.0.iter_mut().enumerate() {
            let o = other.0.get(i).copied().unwrap_or(0);
            let (v, b1) = limb.overflowing_sub(o);
            let (v, b2) = v.overflowing_sub(u64::from(borrow));
            *limb = v;
            borrow = b1 || b2;
        }
        self.trim();
    }

    /// Decimal digits (of a number that is not zero).
    fn to_decimal(&self) -> String {
        const CHUNK: u64 = 10_000_000_000_000_000_000; // 10^19
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            let mut rem = 0u128;
            for limb in n.0.iter_mut().rev() {
                let v = (rem << 64) | u128::from(*limb);
                *limb = (v / u128::from(CHUNK)) as u64;
                rem = v % u128::from(CHUNK);
            }
            n.trim();
            chunks.push(rem as u64);
        }
        let mut s = chunks
            .pop()
            .map_or_else(|| "0".to_owned(), |c| c.to_string());
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:019}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's INCRBYFLOAT on a stored text and an increment.
    fn incr(value: &str, by: &str) -> String {
        let Some(Parsed::Finite(a)) = parse(value.as_bytes()) else {
            return "invalid".into();
        };
        let Some(Parsed::Finite(b)) = parse(by.as_bytes()) else {
            return "invalid".into();
        };
        add(a, b).map_or_else(|| "overflow".into(), format_human)
    }

    fn show(text: &str) -> String {
        incr("0", text)
    }

    #[test]
    fn redis_7_answers() {
        // Each answer is redis-server 7.0.15's.
        assert_eq!(show("1e3"), "1000");
        assert_eq!(show("5.0e3"), "5000");
        assert_eq!(show("-0"), "0");
        assert_eq!(show("1.5"), "1.5");
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("1.1", "2.2"), "3.3");
        assert_eq!(incr("10.50", "0.1"), "10.6");
        assert_eq!(incr("10", "1"), "11");
        assert_eq!(incr("5", "0.5"), "5.5");
        assert_eq!(show("0x10"), "16");
        assert_eq!(show("0x1p-3"), "0.125");
        assert_eq!(show("1e-20"), "0");
        assert_eq!(show("-1e-20"), "0");
        assert_eq!(show("1e-17"), "0.00000000000000001");
        assert_eq!(show("5e-18"), "0");
        assert_eq!(show("1.5e-17"), "0.00000000000000002");
        assert_eq!(show("2.5e-17"), "0.00000000000000002");
        // 2^-18: a tie at the 18th decimal, to even.
        assert_eq!(show("0.000003814697265625"), "0.00000381469726562");
        assert_eq!(show("3.0000000000000000001"), "3");
        assert_eq!(
            show("123456789012345678901234567890"),
            "123456789012345678899921813504"
        );
        assert_eq!(show("1e17"), "100000000000000000");
        assert_eq!(show("1.23456789012345678"), "1.23456789012345678");
        assert_eq!(show("+5"), "5");
        assert_eq!(show(".5"), "0.5");
        assert_eq!(show("5."), "5");
        assert_eq!(show("0e99999"), "0");
        assert_eq!(show("2e-4951"), "0");
        assert_eq!(
            incr("1e308", "1e308"),
            "199999999999999999993371759311691291321120199694831134415594095989843469737676123\
             744200253843777078640893494450108026446304269499187921167194841628860392837535918\
             200039206381557326219209014213335878306791577877829121087126122536729803237260434\
             173178506889763247582601711514636284849020905456510092687857156096"
        );
        assert_eq!(
            show("1.7976931348623157e308"),
            "179769313486231569995921046774104434048386446944329178485314420765176628523124396\
             354701868608387085564428793419425520689308708363451136055357897278026477617073498\
             977686288394835618163294045594434929537447290627480669417384648879122776218333598\
             953852832103282504751611691208117720159985926376802466863339536384"
        );
        let big = show("1e4000");
        assert_eq!(big.len(), 4000);
        assert!(big.starts_with("99999999999999999999654638730996237849324925835069576313"));
    }

    #[test]
    fn refused_texts() {
        for bad in [
            "",
            "abc",
            " 1",
            "1 ",
            "nan",
            "-nan",
            "nan(1)",
            "1e",
            "1e+",
            "0x",
            "0xg",
            ".",
            "-",
            "1e5000",
            "1e-5000",
            "0x1p99999",
            "0x1p-99999",
            "infin",
            "1.2.3",
            "1\u{0}",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse(&vec![b'1'; TEXT_LEN_MAX + 1]), None);
        assert!(parse(&vec![b'1'; TEXT_LEN_MAX]).is_none()); // 10^5119: overflows
        for inf in ["inf", "-inf", "+INF", "Infinity", "-infinity"] {
            assert_eq!(parse(inf.as_bytes()), Some(Parsed::Infinite), "{inf}");
        }
        assert_eq!(incr("1.18e4932", "1.18e4932"), "overflow");
    }

    #[test]
    fn integers_are_exact() {
        for n in [0, 1, -1, 42, i64::MAX, i64::MIN, 1 << 62] {
            assert_eq!(show(&n.to_string()), n.to_string());
        }
        assert_eq!(incr("-5", "5"), "0");
        assert_eq!(incr("-5.5", "2"), "-3.5");
        assert_eq!(incr("9223372036854775807", "1"), "9223372036854775808");
    }

    #[test]
    fn big_integers() {
        let b = Big::from_u64(u64::MAX).shl(130);
        assert_eq!(b.bit_len(), 194);
        assert_eq!(b.shr(130), Big::from_u64(u64::MAX));
        assert!(b.any_bit_below(131) && !b.any_bit_below(130));
        let mut t = Big::from_u64(1);
        t.mul_pow10(40);
        assert_eq!(t.to_decimal(), format!("1{}", "0".repeat(40)));
        let mut u = t.clone();
        u.sub_assign(&Big::from_u64(1));
        assert_eq!(u.to_decimal(), "9".repeat(40));
        assert_eq!(u.cmp_big(&t), Ordering::Less);
    }
}
