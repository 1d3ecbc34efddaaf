//! CRC-32C, the checksum of every record, segment header and checkpoint. Most of what the
//! engine checksums is short — a record's header and key, a value of a few dozen bytes — and
//! there the `crc32c` crate's routine (bytes one at a time up to an 8-byte boundary, then
//! three interleaved streams) cost three times what a plain run of the SSE 4.2 instruction
//! over unaligned 8-byte words does (13 against 4.5 ns for 20-60 bytes; 7% of the serving
//! thread under MSET-32, BENCHMARKS §56). Long inputs, where the interleaving pays, go to the
//! crate; so does any CPU without SSE 4.2.

/// Inputs at least this long go to the crate's interleaved routine.
const SHORT_MAX: usize = 512;

/// The CRC-32C (Castagnoli) of `bytes`, as `crc32c::crc32c` computes it.
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() < SHORT_MAX && std::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2, checked just above.
        return unsafe { short_sse42(bytes) };
    }
    crc32c::crc32c(bytes)
}

/// `crc` continued over `bytes`: a checksum computed in steps (a checkpoint's, over steps of
/// a megabyte: the crate's routine).
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, bytes)
}

/// A word at a time from the start (unaligned loads cost nothing extra on x86-64), then the
/// 4-, 2- and 1-byte forms for the tail.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn short_sse42(mut b: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut wide = u64::from(u32::MAX);
    while let Some((word, rest)) = b.split_first_chunk::<8>() {
        wide = _mm_crc32_u64(wide, u64::from_le_bytes(*word));
        b = rest;
    }
    let mut c = wide as u32;
    if let Some((word, rest)) = b.split_first_chunk::<4>() {
        c = _mm_crc32_u32(c, u32::from_le_bytes(*word));
        b = rest;
    }
    if let Some((word, rest)) = b.split_first_chunk::<2>() {
        c = _mm_crc32_u16(c, u16::from_le_bytes(*word));
        b = rest;
    }
    if let Some(&last) = b.first() {
        c = _mm_crc32_u8(c, last);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_and_alignment_matches_the_crate() {
        let data: Vec<u8> = (0..2048u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in (0..SHORT_MAX + 80).chain([1000, 1500]) {
            for start in 0..9 {
                let b = &data[start..start + len];
                assert_eq!(crc32c(b), crc32c::crc32c(b), "{len} bytes from {start}");
            }
        }
        // The standard check value.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }
}
