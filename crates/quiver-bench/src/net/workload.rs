//! The operation mix: each operation reads `width` keys (GET, or MGET when wider) with
//! probability `get_ratio`, deletes them (DEL) with probability `del_ratio`, writes one key with
//! an expiry (SET .. EX or PX) with probability `expire_ratio`, else writes `width` pairs (SET /
//! MSET); keys drawn from the key sampler. Requests are encoded straight into the connection's
//! reused output buffer: the command headers and the fixed bulk-length prefixes are built once
//! per run; keys and values are written in place (value of key `i` is `value_for(i)` cut to the
//! value's size, as the load wrote it). With a range of value sizes each written value draws
//! its size; the load's sizes come from the key's index ([`RequestGen::load_value_size`]), so
//! the live values' sizes are uniform over the range from the start. With keys as hashes
//! (`spec::HashShape`) a read is HGET / HMGET / HGETALL of one key and a write HSET of
//! `width` fields of one key; each field's value is its key's. An insert (YCSB D) is an HSET
//! of every field of the next key past the loaded ones ([`Inserts`]); with read-modify-write
//! (YCSB F) a write's read of its key goes out first, the write as the connection's next
//! request.

use std::cell::Cell;
use std::io::Write;
use std::rc::Rc;

use quiver_resp::{decimal_len, put_header};

use crate::distribution::{Distribution, KeySampler};
use crate::error::Result;
use crate::keys::{write_key, write_value};
use crate::net::spec::{HashShape, NetConfig, HASH_FIELD_LEN};
use crate::rng::WyRand;

/// Mixed into a key's index to draw its value size in the load (any odd constant would do).
const LOAD_SIZE_SEED: u64 = 0x51ce_5eed_0dd5_1e55;

/// What an operation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write,
    /// A SET with an expiry.
    WriteExpiring,
    Delete,
    /// A new hash past the loaded keys (HSET of all its fields).
    Insert,
}

/// How many keys a process's connections have inserted past the loaded ones (they run on one
/// thread): the next insert's key is `keys` plus this, and "latest" reads count back from
/// the newest.
pub type Inserts = Rc<Cell<u64>>;

/// Generates one connection's requests; see the module documentation.
#[derive(Clone, Debug)]
pub struct RequestGen {
    rng: WyRand,
    sampler: KeySampler,
    get_ratio: f64,
    /// Draws below this (and at or above `get_ratio`) delete.
    del_below: f64,
    /// Draws below this (and at or above `del_below`) write with an expiry.
    expire_below: f64,
    /// Whether a draw picks the operation: only with deletes or expiring writes in the mix
    /// (the plain read/write mix draws as it always did, so a seed gives the same keys).
    mixed: bool,
    ttl_ms: (u64, u64),
    width: usize,
    key_size: usize,
    value_size: usize,
    /// Largest value size (equal to `value_size` without a range).
    value_size_max: usize,
    /// `*2\r\n$3\r\nGET\r\n` or `*<1+w>\r\n$4\r\nMGET\r\n`.
    read_head: Vec<u8>,
    /// `*3\r\n$3\r\nSET\r\n` or `*<1+2w>\r\n$4\r\nMSET\r\n`.
    write_head: Vec<u8>,
    /// `*5\r\n$3\r\nSET\r\n`: key, value, EX or PX, time.
    expiring_head: Vec<u8>,
    /// `*<1+w>\r\n$3\r\nDEL\r\n`.
    del_head: Vec<u8>,
    /// `$<key_size>\r\n`.
    key_head: Vec<u8>,
    /// `$<value_size>\r\n` (a value of another size gets its own header).
    value_head: Vec<u8>,
    /// Keys as hashes (the heads above are then HGET / HMGET / HGETALL and HSET).
    hash: Option<HashShape>,
    /// Keys loaded (an insert's key is this plus `inserts`).
    keys: u64,
    inserts: Inserts,
    /// Whether keys are drawn counting back from the newest insert.
    latest: bool,
    /// The write of a read-modify-write whose read went out last: its key.
    pending_write: Option<u64>,
}

impl RequestGen {
    /// The generator of one connection of a process whose connections share `inserts`.
    pub fn new(cfg: &NetConfig, seed: u64, inserts: &Inserts) -> Result<RequestGen> {
        let w = cfg.width;
        let head = |n: usize, name: &[u8]| {
            let mut h = Vec::new();
            put_header(&mut h, b'*', n);
            put_header(&mut h, b'$', name.len());
            h.extend_from_slice(name);
            h.extend_from_slice(b"\r\n");
            h
        };
        let (read_head, write_head) = match cfg.hash {
            Some(h) if h.read_all => (head(2, b"HGETALL"), head(2 + 2 * w, b"HSET")),
            Some(_) if w == 1 => (head(3, b"HGET"), head(4, b"HSET")),
            Some(_) => (head(2 + w, b"HMGET"), head(2 + 2 * w, b"HSET")),
            None if w == 1 => (head(2, b"GET"), head(3, b"SET")),
            None => (head(1 + w, b"MGET"), head(1 + 2 * w, b"MSET")),
        };
        let mut key_head = Vec::new();
        put_header(&mut key_head, b'$', cfg.key_size);
        let mut value_head = Vec::new();
        put_header(&mut value_head, b'$', cfg.value_size);
        let del_below = cfg.get_ratio + cfg.del_ratio;
        Ok(RequestGen {
            rng: WyRand::new(seed),
            sampler: KeySampler::new(cfg.distribution, cfg.keys, cfg.zipf_theta)?,
            get_ratio: cfg.get_ratio,
            del_below,
            expire_below: del_below + cfg.expire_ratio,
            mixed: cfg.misses_expected(),
            ttl_ms: cfg.ttl_ms,
            width: w,
            key_size: cfg.key_size,
            value_size: cfg.value_size,
            value_size_max: cfg.largest_value(),
            read_head,
            write_head,
            expiring_head: head(5, b"SET"),
            del_head: head(1 + w, b"DEL"),
            key_head,
            value_head,
            hash: cfg.hash,
            keys: cfg.keys,
            inserts: inserts.clone(),
            latest: cfg.distribution == Distribution::Latest,
            pending_write: None,
        })
    }

    /// The next operation's kind.
    #[inline]
    fn pick(&mut self) -> Op {
        if !self.mixed {
            // A ratio of exactly 1 never draws (and never writes); 0 never reads.
            let read = self.get_ratio >= 1.0
                || (self.get_ratio > 0.0 && self.rng.unit_f64() < self.get_ratio);
            return if read { Op::Read } else { Op::Write };
        }
        let u = self.rng.unit_f64();
        if u < self.get_ratio {
            Op::Read
        } else if u < self.del_below {
            Op::Delete
        } else if u < self.expire_below {
            Op::WriteExpiring
        } else {
            Op::Write
        }
    }

    /// Appends the next operation's request to `out`.
    #[inline]
    pub fn next(&mut self, out: &mut Vec<u8>) -> Op {
        if let Some(h) = self.hash {
            return self.next_hash(out, h);
        }
        let op = self.pick();
        match op {
            Op::Read | Op::Delete => {
                let head = if op == Op::Read {
                    &self.read_head
                } else {
                    &self.del_head
                };
                out.extend_from_slice(head);
                for _ in 0..self.width {
                    let i = self.sampler.next(&mut self.rng);
                    self.put_key(out, i);
                }
            }
            // `pick` never inserts (hashes only: `next_hash`).
            Op::Write | Op::Insert => {
                out.extend_from_slice(&self.write_head);
                for _ in 0..self.width {
                    let i = self.sampler.next(&mut self.rng);
                    self.put_key(out, i);
                    let len = self.draw_value_size();
                    self.put_value(out, i, len);
                }
            }
            Op::WriteExpiring => {
                out.extend_from_slice(&self.expiring_head);
                let i = self.sampler.next(&mut self.rng);
                self.put_key(out, i);
                let len = self.draw_value_size();
                self.put_value(out, i, len);
                let (lo, hi) = self.ttl_ms;
                let ttl_ms = lo + self.rng.below(hi - lo + 1);
                // EX and PX alike, so both of the server's paths are in the mix; EX in whole
                // seconds, at least one.
                let (unit, n): (&[u8], u64) = if self.rng.next_u64() & 1 == 0 {
                    (b"$2\r\nPX\r\n", ttl_ms)
                } else {
                    (b"$2\r\nEX\r\n", ttl_ms.div_ceil(1000))
                };
                out.extend_from_slice(unit);
                put_header(out, b'$', decimal_len(n as i64));
                // Writing into a Vec cannot fail.
                let _ = write!(out, "{n}\r\n");
            }
        }
        op
    }

    /// [`RequestGen::next`] with keys as hashes: reads, writes and inserts only (`spec`
    /// refuses the rest), of `width` consecutive fields from a random one.
    fn next_hash(&mut self, out: &mut Vec<u8>, h: HashShape) -> Op {
        if let Some(i) = self.pending_write.take() {
            self.put_hash_write(out, i, h);
            return Op::Write;
        }
        let op = self.pick_hash(h);
        if op == Op::Insert {
            let i = self.keys + self.inserts.get();
            self.inserts.set(self.inserts.get() + 1);
            self.put_whole_hash(out, i, h);
            return Op::Insert;
        }
        // Counting back from the newest insert, or among the loaded keys.
        let shift = if self.latest { self.inserts.get() } else { 0 };
        let i = self.sampler.next(&mut self.rng) + shift;
        if op == Op::Write && !h.read_modify_write {
            self.put_hash_write(out, i, h);
            return Op::Write;
        }
        if op == Op::Write {
            self.pending_write = Some(i);
        }
        out.extend_from_slice(&self.read_head);
        self.put_key(out, i);
        if !h.read_all {
            let first = self.rng.index(h.fields);
            (0..self.width).for_each(|j| put_field(out, (first + j) % h.fields));
        }
        Op::Read
    }

    /// The next hash operation's kind: with inserts in the mix, one draw picks among reads,
    /// inserts and writes; without, [`RequestGen::pick`] (the same draws as before inserts).
    fn pick_hash(&mut self, h: HashShape) -> Op {
        if h.insert_ratio <= 0.0 {
            return self.pick();
        }
        let u = self.rng.unit_f64();
        if u < self.get_ratio {
            Op::Read
        } else if u < self.get_ratio + h.insert_ratio {
            Op::Insert
        } else {
            Op::Write
        }
    }

    /// HSET of `width` consecutive fields of hash `i` from a random one, each to its value.
    fn put_hash_write(&mut self, out: &mut Vec<u8>, i: u64, h: HashShape) {
        out.extend_from_slice(&self.write_head);
        self.put_key(out, i);
        let first = self.rng.index(h.fields);
        for j in 0..self.width {
            put_field(out, (first + j) % h.fields);
            let len = self.draw_value_size();
            self.put_value(out, i, len);
        }
    }

    /// HSET of every field of hash `i` (the load's, and an insert's).
    fn put_whole_hash(&self, out: &mut Vec<u8>, i: u64, h: HashShape) {
        put_header(out, b'*', 2 + 2 * h.fields);
        out.extend_from_slice(b"$4\r\nHSET\r\n");
        self.put_key(out, i);
        for f in 0..h.fields {
            put_field(out, f);
            self.put_value(out, i, self.load_value_size(i));
        }
    }

    /// A written value's size: uniform over the range, or the one size.
    #[inline]
    fn draw_value_size(&mut self) -> usize {
        if self.value_size_max > self.value_size {
            self.value_size + self.rng.index(self.value_size_max - self.value_size + 1)
        } else {
            self.value_size
        }
    }

    /// The size of key `i`'s value in the load: uniform over the range, a function of `i`.
    pub fn load_value_size(&self, i: u64) -> usize {
        if self.value_size_max > self.value_size {
            let span = (self.value_size_max - self.value_size + 1) as u64;
            self.value_size + WyRand::new(i ^ LOAD_SIZE_SEED).below(span) as usize
        } else {
            self.value_size
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
    fn put_value(&self, out: &mut Vec<u8>, i: u64, len: usize) {
        if len == self.value_size {
            out.extend_from_slice(&self.value_head);
        } else {
            put_header(out, b'$', len);
        }
        let at = out.len();
        out.resize(at + len, 0);
        write_value(i, &mut out[at..]);
        out.extend_from_slice(b"\r\n");
    }

    /// Appends the load of keys `first..first + n` with their values: one `MSET`, or with
    /// keys as hashes one `HSET` of every field per key. Returns how many replies it asks.
    pub fn put_load(&self, out: &mut Vec<u8>, first: u64, n: usize) -> usize {
        let keys = first..first + n as u64;
        let Some(h) = self.hash else {
            put_header(out, b'*', 1 + 2 * n);
            out.extend_from_slice(b"$4\r\nMSET\r\n");
            for i in keys {
                self.put_key(out, i);
                self.put_value(out, i, self.load_value_size(i));
            }
            return 1;
        };
        for i in keys {
            self.put_whole_hash(out, i, h);
        }
        n
    }
}

/// Field `f` of a hash: `f` and four digits.
#[inline]
fn put_field(out: &mut Vec<u8>, f: usize) {
    put_header(out, b'$', HASH_FIELD_LEN);
    // Writing into a Vec cannot fail.
    let _ = write!(out, "f{f:04}\r\n");
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
        let mut g = RequestGen::new(&cfg(1, 1.0), 1, &Inserts::default()).unwrap();
        let mut out = Vec::new();
        assert_eq!(g.next(&mut out), Op::Read);
        let a = args(&out);
        let mut want = Vec::new();
        encode_command(&mut want, &[b"GET", &a[1]]);
        assert_eq!(out, want);
        assert_eq!(a[1].len(), 8);

        let mut g = RequestGen::new(&cfg(1, 0.0), 1, &Inserts::default()).unwrap();
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
        let mut g = RequestGen::new(&cfg(4, 1.0), 9, &Inserts::default()).unwrap();
        let mut out = Vec::new();
        g.next(&mut out);
        let a = args(&out);
        assert_eq!(a.len(), 5);
        assert_eq!(a[0], b"MGET");
        assert!(a[1..].iter().all(|k| k.len() == 8));

        let mut g = RequestGen::new(&cfg(4, 0.0), 9, &Inserts::default()).unwrap();
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
        let g = RequestGen::new(&cfg(1, 1.0), 1, &Inserts::default()).unwrap();
        let mut out = Vec::new();
        assert_eq!(g.put_load(&mut out, 40, 3), 1);
        let mut want = Vec::new();
        let (k, v): (Vec<_>, Vec<_>) = (40..43).map(|i| (key_for(i, 8), value_for(i, 5))).unzip();
        encode_command(
            &mut want,
            &[b"MSET", &k[0], &v[0], &k[1], &v[1], &k[2], &v[2]],
        );
        assert_eq!(out, want);
    }

    #[test]
    fn hashes_are_read_and_written_by_field() {
        let hash = |width, get_ratio, read_all| {
            let mut c = cfg(width, get_ratio);
            c.hash = Some(HashShape::new(4, read_all));
            c.validate().unwrap();
            RequestGen::new(&c, 3, &Inserts::default()).unwrap()
        };
        let mut out = Vec::new();
        // The load: one HSET of every field per key, one reply each.
        assert_eq!(hash(1, 1.0, false).put_load(&mut out, 7, 2), 2);
        let mut want = Vec::new();
        for i in 7..9 {
            let (k, v) = (key_for(i, 8), value_for(i, 5));
            let fields = [b"f0000", b"f0001", b"f0002", b"f0003"];
            let mut a: Vec<&[u8]> = vec![b"HSET", &k];
            for f in &fields {
                a.extend([&f[..], &v]);
            }
            encode_command(&mut want, &a);
        }
        assert_eq!(out, want);
        // HGET of one field, HMGET of three consecutive ones (wrapping), HGETALL.
        for (width, read_all, name, args_len) in [
            (1, false, &b"HGET"[..], 3),
            (3, false, b"HMGET", 5),
            (3, true, b"HGETALL", 2),
        ] {
            out.clear();
            assert_eq!(hash(width, 1.0, read_all).next(&mut out), Op::Read);
            let a = args(&out);
            assert_eq!((&a[0][..], a.len()), (name, args_len));
            if !read_all {
                let first: usize = std::str::from_utf8(&a[2][1..]).unwrap().parse().unwrap();
                for (j, f) in a[2..].iter().enumerate() {
                    assert_eq!(f, format!("f{:04}", (first + j) % 4).as_bytes());
                }
            }
        }
        // HSET of `width` fields, each with its key's value.
        out.clear();
        assert_eq!(hash(2, 0.0, false).next(&mut out), Op::Write);
        let a = args(&out);
        assert_eq!((&a[0][..], a.len()), (&b"HSET"[..], 6));
        let i: u64 = std::str::from_utf8(&a[1]).unwrap().parse().unwrap();
        assert_eq!((&a[3], &a[5]), (&value_for(i, 5), &value_for(i, 5)));
        // No deletes or expiry with hashes, no wider reads than a hash has.
        let mut c = cfg(5, 1.0);
        c.hash = Some(HashShape::new(4, false));
        assert!(c.validate().is_err());
    }

    /// The key a request names (keys are decimal in the tests' 8 bytes).
    fn key_of(a: &[Vec<u8>]) -> u64 {
        std::str::from_utf8(&a[1]).unwrap().parse().unwrap()
    }

    /// YCSB D: inserts take the keys past the loaded ones in turn, shared by the process's
    /// connections, and "latest" reads favour the newest.
    #[test]
    fn inserts_take_new_keys_and_latest_reads_follow_them() {
        let mut c = cfg(1, 0.95);
        c.hash = Some(HashShape {
            insert_ratio: 0.05,
            ..HashShape::new(4, true)
        });
        c.distribution = Distribution::Latest;
        c.validate().unwrap();
        let inserts = Inserts::default();
        let mut gens = [
            RequestGen::new(&c, 1, &inserts).unwrap(),
            RequestGen::new(&c, 2, &inserts).unwrap(),
        ];
        let (mut out, mut newest, mut newest_reads) = (Vec::new(), 999, 0);
        for n in 0..40_000 {
            out.clear();
            let op = gens[n % 2].next(&mut out);
            let a = args(&out);
            match op {
                Op::Insert => {
                    // HSET of every field of the next new key.
                    assert_eq!((&a[0][..], a.len()), (&b"HSET"[..], 10));
                    newest += 1;
                    assert_eq!(key_of(&a), newest);
                }
                Op::Read => {
                    assert_eq!(a[0], b"HGETALL");
                    let k = key_of(&a);
                    assert!(k <= newest && k + 1000 > newest, "{k} of newest {newest}");
                    newest_reads += u64::from(k == newest);
                }
                other => panic!("{other:?}"),
            }
        }
        // 2,000 inserts expected (sd ~44); the newest key read with Zipf rank 0's
        // probability, 1 / zeta(1000) ~= 0.13 (38,000 reads: ~5,000).
        assert!((1_800..2_200).contains(&inserts.get()), "{}", inserts.get());
        assert!((4_000..6_000).contains(&newest_reads), "{newest_reads}");
    }

    /// YCSB F: a read-modify-write reads its key, then writes it as the next request.
    #[test]
    fn a_read_modify_write_reads_then_writes_its_key() {
        let mut c = cfg(1, 0.5);
        c.hash = Some(HashShape {
            read_modify_write: true,
            ..HashShape::new(4, true)
        });
        c.validate().unwrap();
        let mut g = RequestGen::new(&c, 7, &Inserts::default()).unwrap();
        let mut out = Vec::new();
        let mut last_read = None;
        let (mut reads, mut writes) = (0, 0);
        for _ in 0..30_000 {
            out.clear();
            let op = g.next(&mut out);
            let a = args(&out);
            match op {
                Op::Read => {
                    assert_eq!(a[0], b"HGETALL");
                    last_read = Some(key_of(&a));
                    reads += 1;
                }
                Op::Write => {
                    assert_eq!((&a[0][..], a.len()), (&b"HSET"[..], 4));
                    assert_eq!(last_read.take(), Some(key_of(&a)), "written after its read");
                    writes += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        // Half the operations are read-modify-writes: a third of the requests are writes.
        assert!(
            (9_500..10_500).contains(&writes),
            "{writes} of {}",
            reads + writes
        );
    }

    #[test]
    fn the_mix_follows_the_ratio() {
        let mut g = RequestGen::new(&cfg(1, 0.9), 3, &Inserts::default()).unwrap();
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
    fn deletes_expiring_writes_and_value_sizes_follow_the_mix() {
        let mut c = cfg(1, 0.5);
        c.del_ratio = 0.2;
        c.expire_ratio = 0.2;
        c.value_size_max = Some(40);
        c.ttl_ms = (1500, 2500);
        let mut g = RequestGen::new(&c, 11, &Inserts::default()).unwrap();
        let mut out = Vec::new();
        let mut counts = std::collections::HashMap::<Op, u64>::new();
        let (mut px, mut ex) = (0, 0);
        let mut sizes = std::collections::BTreeSet::new();
        for _ in 0..20_000 {
            out.clear();
            let op = g.next(&mut out);
            *counts.entry(op).or_default() += 1;
            let a = args(&out);
            match op {
                Op::Read => assert_eq!(a[0], b"GET"),
                Op::Insert => panic!("an insert among strings"),
                Op::Delete => assert_eq!((a.len(), &a[0][..]), (2, &b"DEL"[..])),
                Op::Write | Op::WriteExpiring => {
                    assert_eq!(a[0], b"SET");
                    let i: u64 = std::str::from_utf8(&a[1]).unwrap().parse().unwrap();
                    // The value is key i's, cut to the size drawn.
                    assert!((5..=40).contains(&a[2].len()), "{}", a[2].len());
                    assert_eq!(a[2], value_for(i, a[2].len()));
                    sizes.insert(a[2].len());
                    if op == Op::Write {
                        assert_eq!(a.len(), 3);
                        continue;
                    }
                    assert_eq!(a.len(), 5);
                    let n: u64 = std::str::from_utf8(&a[4]).unwrap().parse().unwrap();
                    match &a[3][..] {
                        b"PX" => {
                            assert!((1500..=2500).contains(&n), "{n}");
                            px += 1;
                        }
                        b"EX" => {
                            assert!((2..=3).contains(&n), "{n}");
                            ex += 1;
                        }
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
        // Expect 10,000 reads and 4,000 of each other kind (sd < 70).
        let near = |op: Op, want: u64| {
            let n = counts[&op];
            assert!(n.abs_diff(want) < 400, "{op:?}: {n}");
        };
        near(Op::Read, 10_000);
        near(Op::Delete, 4_000);
        near(Op::WriteExpiring, 4_000);
        near(Op::Write, 2_000);
        assert!(px > 1_500 && ex > 1_500, "px {px} ex {ex}");
        // Every size of the range is drawn (36 sizes, ~170 draws each).
        assert_eq!(sizes.len(), 36);
        // The load's sizes cover the range too, and are the same for the same key.
        let load: std::collections::BTreeSet<usize> =
            (0..2000).map(|i| g.load_value_size(i)).collect();
        assert_eq!((load.first(), load.last()), (Some(&5), Some(&40)));
        assert_eq!(g.load_value_size(7), g.load_value_size(7));
    }

    #[test]
    fn zipf_keys_favour_the_hottest_ranks() {
        let mut c = cfg(1, 1.0);
        c.keys = 100_000;
        c.distribution = Distribution::Zipf;
        let mut g = RequestGen::new(&c, 5, &Inserts::default()).unwrap();
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
