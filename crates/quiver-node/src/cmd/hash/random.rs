//! HRANDFIELD key [count [WITHVALUES]], as Redis 7.0 answers it: without a count one field
//! (nil for an absent key); a count of 0 or more, that many distinct fields (the whole hash,
//! in its order, when it has no more); a negative count, exactly that many picked one by one,
//! so fields may repeat.

use bytes::Bytes;
use quiver_store::large_hash::{HashValue, Meta};

use crate::cmd::common::{random_u64, TxnCommand};
use crate::cmd::hash::large::Large;
use crate::cmd::hash::read_hash;
use crate::txn::Txn;
use quiver_service::errors::{self, err};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;

/// Most fields a negative count picks. Redis has no bound (it would build a reply of 2^63
/// fields); Quiver refuses a reply it could never send.
pub const HRANDFIELD_REPEATS_MAX: u64 = 1 << 20;

/// `getRangeLongFromObjectOrReply` with the range -LONG_MAX..LONG_MAX.
const COUNT_OUT_OF_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
/// A count past half the range with WITHVALUES (the reply would hold twice as many items).
const OUT_OF_RANGE: &str = "ERR value is out of range";

pub struct HRandField<'a> {
    key: &'a Bytes,
    /// `None`: no count (one field, or nil).
    count: Option<i64>,
    with_values: bool,
}

impl<'a> HRandField<'a> {
    pub fn parse(args: &'a [Bytes]) -> Result<HRandField<'a>, Reply> {
        let mut r = HRandField {
            key: &args[1],
            count: None,
            with_values: false,
        };
        let Some(count) = args.get(2) else {
            return Ok(r);
        };
        let count = match string2ll(count) {
            None => return Err(err(errors::NOT_INTEGER)),
            Some(i64::MIN) => return Err(err(COUNT_OUT_OF_RANGE)),
            Some(n) => n,
        };
        match &args[3..] {
            [] => {}
            [w] if w.eq_ignore_ascii_case(b"withvalues") => {
                if count.unsigned_abs() > (i64::MAX / 2) as u64 {
                    return Err(err(OUT_OF_RANGE));
                }
                r.with_values = true;
            }
            _ => return Err(err(errors::SYNTAX)),
        }
        if count < 0 && count.unsigned_abs() > HRANDFIELD_REPEATS_MAX {
            return Err(Reply::error(format!(
                "ERR count is too large: at most {HRANDFIELD_REPEATS_MAX} fields with repeats"
            )));
        }
        r.count = Some(count);
        Ok(r)
    }

    /// Which pairs (by position) the count picks from `len`.
    fn picks(count: i64, len: usize) -> Vec<usize> {
        let random_below = |n: usize| (random_u64() % n as u64) as usize;
        if count < 0 {
            return (0..count.unsigned_abs())
                .map(|_| random_below(len))
                .collect();
        }
        let count = count as usize;
        if count >= len {
            return (0..len).collect();
        }
        // A partial Fisher-Yates shuffle: `count` distinct positions in random order.
        let mut all: Vec<usize> = (0..len).collect();
        for i in 0..count {
            let j = i + random_below(len - i);
            all.swap(i, j);
        }
        all.truncate(count);
        all
    }
}

impl TxnCommand for HRandField<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let none = || match self.count {
            None => Reply::Null,
            Some(_) => Reply::Array(Vec::new()),
        };
        let Some(entry) = read_hash(txn, self.key)? else {
            return Ok(none());
        };
        // A count of 0 picks nothing.
        if self.count == Some(0) {
            return Ok(none());
        }
        let pool = match entry.hash_value()? {
            HashValue::Packed(fields) => fields
                .iter()
                .map(|(f, v)| (entry.value.slice_ref(f), entry.value.slice_ref(v)))
                .collect(),
            HashValue::Large(meta) => self.large_pool(txn, meta)?,
        };
        // A hash is never written empty.
        if pool.is_empty() {
            return Ok(none());
        }
        let Some(count) = self.count else {
            let pick = Self::picks(-1, pool.len());
            return Ok(Reply::Bulk(pool[pick[0]].0.clone()));
        };
        let pairs = Self::picks(count, pool.len())
            .into_iter()
            .map(|i| pool[i].clone());
        Ok(if self.with_values {
            Reply::Pairs(
                pairs
                    .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                    .collect(),
            )
        } else {
            Reply::Array(pairs.map(|(f, _)| Reply::Bulk(f)).collect())
        })
    }
}

impl HRandField<'_> {
    /// The pairs of a large hash the picks are made from: all of them when the count asks
    /// for the whole hash, else the buckets from a random one on until they hold as many
    /// fields as the count wants (reads in proportion to the reply, as Redis's sampling of
    /// a hashtable's buckets).
    fn large_pool(
        &self,
        txn: &mut Txn<'_>,
        meta: Meta,
    ) -> quiver_store::Result<Vec<(Bytes, Bytes)>> {
        let mut large = Large::new(meta);
        let wanted = match self.count {
            None => 1,
            Some(n) => n.unsigned_abs(),
        };
        let buckets = meta.buckets();
        if self.count.is_some_and(|n| n > 0) && wanted >= meta.count {
            return large.all(txn);
        }
        let start = (random_u64() % u64::from(buckets)) as u32;
        let mut pool = Vec::new();
        large.walk(txn, start, buckets, wanted.min(meta.count), |f, v| {
            pool.push((f.clone(), v.clone()));
        })?;
        Ok(pool)
    }
}
