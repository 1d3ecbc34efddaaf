//! The operation mix: each operation reads `width` keys (GET, or MGET when wider) with
//! probability `get_ratio`, else writes `width` pairs (SET / MSET), keys drawn from the key
//! sampler. Requests are encoded straight into the connection's reused output buffer: the
//! command headers and bulk-length prefixes are fixed per run and built once; keys and values
//! are written in place (value of key `i` is `value_for(i)`, as the load wrote it).

use quiver_resp::put_header;

use crate::distribution::KeySampler;
use crate::error::Result;
use crate::keys::{write_key, write_value};
use crate::net::spec::NetConfig;
use crate::rng::WyRand;

/// Whether an operation read or wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

/// Generates one connection's requests; see the module documentation.
#[derive(Clone, Debug)]
pub struct RequestGen {
    rng: WyRand,
    sampler: KeySampler,
    get_ratio: f64,
    width: usize,
    key_size: usize,
    value_size: usize,
    /// `*2\r\n$3\r\nGET\r\n` or `*<1+w>\r\n$4\r\nMGET\r\n`.
    read_head: Vec<u8>,
    /// `*3\r\n$3\r\nSET\r\n` or `*<1+2w>\r\n$4\r\nMSET\r\n`.
    write_head: Vec<u8>,
    /// `$<key_size>\r\n`.
    key_head: Vec<u8>,
    /// `$<value_size>\r\n`.
    value_head: Vec<u8>,
}

impl RequestGen {
    pub fn new(cfg: &NetConfig, seed: u64) -> Result<RequestGen> {
        let w = cfg.width;
        let head = |n: usize, name: &[u8]| {
            let mut h = Vec::new();
            put_header(&mut h, b'*', n);
            put_header(&mut h, b'$', name.len());
            h.extend_from_slice(name);
            h.extend_from_slice(b"\r\n");
            h
        };
        let (read_head, write_head) = if w == 1 {
            (head(2, b"GET"), head(3, b"SET"))
        } else {
            (head(1 + w, b"MGET"), head(1 + 2 * w, b"MSET"))
        };
        let mut key_head = Vec::new();
        put_header(&mut key_head, b'$', cfg.key_size);
        let mut value_head = Vec::new();
        put_header(&mut value_head, b'$', cfg.value_size);
        Ok(RequestGen {
            rng: WyRand::new(seed),
            sampler: KeySampler::new(cfg.distribution, cfg.keys, cfg.zipf_theta)?,
            get_ratio: cfg.get_ratio,
            width: w,
            key_size: cfg.key_size,
            value_size: cfg.value_size,
            read_head,
            write_head,
            key_head,
            value_head,
        })
    }

    /// Appends the next operation's request to `out`.
    #[inline]
    pub fn next(&mut self, out: &mut Vec<u8>) -> Op {
        // A ratio of exactly 1 never draws (and never writes); 0 never reads.
        let read =
            self.get_ratio >= 1.0 || (self.get_ratio > 0.0 && self.rng.unit_f64() < self.get_ratio);
        if read {
            out.extend_from_slice(&self.read_head);
            for _ in 0..self.width {
                let i = self.sampler.next(&mut self.rng);
                self.put_key(out, i);
            }
            Op::Read
        } else {
            out.extend_from_slice(&self.write_head);
            for _ in 0..self.width {
                let i = self.sampler.next(&mut self.rng);
                self.put_key(out, i);
                self.put_value(out, i);
            }
            Op::Write
        }
    }

    #[inline]
    fn put_key(&self, out: &mut Vec<u8>, i: u64) {
        out.extend_from_slice(&self.key_head);
        let at = out.len();
        out.resize(at + self.key_size, 0);
        write_key(i, &mut out[at..]);
        out.extend_from_slice(b"\r\n");
    }

    #[inline]
    fn put_value(&self, out: &mut Vec<u8>, i: u64) {
        out.extend_from_slice(&self.value_head);
        let at = out.len();
        out.resize(at + self.value_size, 0);
        write_value(i, &mut out[at..]);
        out.extend_from_slice(b"\r\n");
    }

    /// Appends `MSET` of keys `first..first + n` with their values (the load).
    pub fn put_load_mset(&self, out: &mut Vec<u8>, first: u64, n: usize) {
        put_header(out, b'*', 1 + 2 * n);
        out.extend_from_slice(b"$4\r\nMSET\r\n");
        for i in first..first + n as u64 {
            self.put_key(out, i);
            self.put_value(out, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::Distribution;
    use crate::keys::{key_for, value_for};
    use quiver_resp::encode_command;

    fn cfg(width: usize, get_ratio: f64) -> NetConfig {
        let mut c = NetConfig::new("127.0.0.1", 1);
        c.keys = 1000;
        c.key_size = 8;
        c.value_size = 5;
        c.width = width;
        c.get_ratio = get_ratio;
        c
    }

    /// Splits a request into its arguments (requests are multibulks of bulks).
    fn args(mut req: &[u8]) -> Vec<Vec<u8>> {
        fn line<'a>(b: &mut &'a [u8]) -> &'a [u8] {
            let p = b.windows(2).position(|w| w == b"\r\n").unwrap();
            let l = &b[..p];
            *b = &b[p + 2..];
            l
        }
        let head = line(&mut req);
        assert_eq!(head[0], b'*');
        let n: usize = std::str::from_utf8(&head[1..]).unwrap().parse().unwrap();
        let mut out = Vec::new();
        for _ in 0..n {
            let h = line(&mut req);
            assert_eq!(h[0], b'$');
            let len: usize = std::str::from_utf8(&h[1..]).unwrap().parse().unwrap();
            out.push(req[..len].to_vec());
            assert_eq!(&req[len..len + 2], b"\r\n");
            req = &req[len + 2..];
        }
        assert!(req.is_empty(), "trailing bytes");
        out
    }

    #[test]
    fn get_and_set_encode_byte_for_byte() {
        let mut g = RequestGen::new(&cfg(1, 1.0), 1).unwrap();
        let mut out = Vec::new();
        assert_eq!(g.next(&mut out), Op::Read);
        let a = args(&out);
        let mut want = Vec::new();
        encode_command(&mut want, &[b"GET", &a[1]]);
        assert_eq!(out, want);
        assert_eq!(a[1].len(), 8);

        let mut g = RequestGen::new(&cfg(1, 0.0), 1).unwrap();
        out.clear();
        assert_eq!(g.next(&mut out), Op::Write);
        let a = args(&out);
        let i: u64 = std::str::from_utf8(&a[1]).unwrap().parse().unwrap();
        let mut want = Vec::new();
        encode_command(&mut want, &[b"SET", &key_for(i, 8), &value_for(i, 5)]);
        assert_eq!(out, want);
    }

    #[test]
    fn mget_and_mset_carry_width_keys() {
        let mut g = RequestGen::new(&cfg(4, 1.0), 9).unwrap();
        let mut out = Vec::new();
        g.next(&mut out);
        let a = args(&out);
        assert_eq!(a.len(), 5);
        assert_eq!(a[0], b"MGET");
        assert!(a[1..].iter().all(|k| k.len() == 8));

        let mut g = RequestGen::new(&cfg(4, 0.0), 9).unwrap();
        out.clear();
        g.next(&mut out);
        let a = args(&out);
        assert_eq!(a.len(), 9);
        assert_eq!(a[0], b"MSET");
        for pair in a[1..].chunks(2) {
            let i: u64 = std::str::from_utf8(&pair[0]).unwrap().parse().unwrap();
            assert!(i < 1000);
            assert_eq!(pair[1], value_for(i, 5));
        }
        // Requests append: two in a row parse as two.
        let before = out.len();
        g.next(&mut out);
        assert_eq!(args(&out[before..]).len(), 9);
    }

    #[test]
    fn load_mset_encodes_consecutive_keys() {
        let g = RequestGen::new(&cfg(1, 1.0), 1).unwrap();
        let mut out = Vec::new();
        g.put_load_mset(&mut out, 40, 3);
        let mut want = Vec::new();
        let (k, v): (Vec<_>, Vec<_>) = (40..43).map(|i| (key_for(i, 8), value_for(i, 5))).unzip();
        encode_command(
            &mut want,
            &[b"MSET", &k[0], &v[0], &k[1], &v[1], &k[2], &v[2]],
        );
        assert_eq!(out, want);
    }

    #[test]
    fn the_mix_follows_the_ratio() {
        let mut g = RequestGen::new(&cfg(1, 0.9), 3).unwrap();
        let mut out = Vec::new();
        let reads = (0..100_000)
            .filter(|_| {
                out.clear();
                g.next(&mut out) == Op::Read
            })
            .count();
        // Expect 90,000 (sd ~95).
        assert!((89_000..91_000).contains(&reads), "{reads}");
    }

    #[test]
    fn zipf_keys_favour_the_hottest_ranks() {
        let mut c = cfg(1, 1.0);
        c.keys = 100_000;
        c.distribution = Distribution::Zipf;
        let mut g = RequestGen::new(&c, 5).unwrap();
        let mut counts = std::collections::HashMap::<Vec<u8>, u64>::new();
        let mut out = Vec::new();
        let draws = 200_000;
        for _ in 0..draws {
            out.clear();
            g.next(&mut out);
            *counts.entry(args(&out)[1].clone()).or_default() += 1;
        }
        let mut freq: Vec<u64> = counts.into_values().collect();
        freq.sort_unstable_by(|a, b| b.cmp(a));
        // Zipf(0.99) over 10^5 keys: rank 0 has probability 1/zeta ~= 0.0817, rank 1 about
        // half of it (2^-0.99); the median key is drawn at most a few times.
        let z = crate::distribution::zeta(100_000, 0.99);
        let p0 = freq[0] as f64 / draws as f64;
        assert!((p0 - 1.0 / z).abs() < 0.005, "p0 {p0}");
        let ratio = freq[0] as f64 / freq[1] as f64;
        assert!((1.8..2.2).contains(&ratio), "rank0/rank1 {ratio}");
        assert!(freq[freq.len() / 2] < 10);
    }
}
