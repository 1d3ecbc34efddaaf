//! HSCAN key cursor [MATCH pattern] [COUNT count]: a hash kept in one record answers all its
//! matching fields at once with cursor 0, whatever the cursor and COUNT, as Redis does for a
//! listpack; a large hash a page of buckets at a time ([`scan_large`]). As in Redis 7.0 the cursor is checked first, then the key (absent: an empty
//! page; a string: WRONGTYPE), then the options (NOVALUES is Redis 7.4's: a syntax error here).

use bytes::Bytes;
use quiver_resp::glob_match;

use crate::cmd::common::TxnCommand;
use crate::cmd::hash::large::Large;
use crate::cmd::hash::read_hash;
use crate::cmd::keyspace::{parse_cursor, scan_reply, ScanArgs};
use crate::txn::Txn;
use quiver_service::reply::Reply;
use quiver_store::large_hash::{HashValue, Meta};

pub struct HScan<'a> {
    key: &'a Bytes,
    /// The options, or the error they get once the key is found to be a hash.
    options: Result<ScanArgs<'a>, Reply>,
}

impl<'a> HScan<'a> {
    pub fn parse(args: &'a [Bytes]) -> Result<HScan<'a>, Reply> {
        let cursor = parse_cursor(&args[2])?;
        Ok(HScan {
            key: &args[1],
            options: ScanArgs::options(cursor, &args[3..], false),
        })
    }
}

impl TxnCommand for HScan<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let Some(entry) = read_hash(txn, self.key)? else {
            return Ok(scan_reply(0, Vec::new()));
        };
        let options = match &self.options {
            Ok(options) => options,
            Err(reply) => return Ok(reply.clone()),
        };
        let fields = match entry.hash_value()? {
            HashValue::Packed(fields) => fields,
            HashValue::Large(meta) => return scan_large(txn, meta, options),
        };
        let mut found = Vec::new();
        for (f, v) in fields.iter() {
            if options.pattern.is_none_or(|p| glob_match(p, f)) {
                found.push(entry.value.slice_ref(f));
                found.push(entry.value.slice_ref(v));
            }
        }
        Ok(scan_reply(0, found))
    }
}

/// A page of a large hash: the buckets from the cursor (a bucket number) on until they held
/// COUNT fields, and the number of the next one (0 after the last). A split only moves
/// fields to a higher bucket, so every field present for the whole iteration is returned
/// at least once, as Redis's SCAN promises.
fn scan_large(
    txn: &mut Txn<'_>,
    meta: Meta,
    options: &ScanArgs<'_>,
) -> quiver_store::Result<Reply> {
    let buckets = meta.buckets();
    let Some(start) = u32::try_from(options.cursor).ok().filter(|&c| c < buckets) else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let mut found = Vec::new();
    let count = options.count as u64;
    let read = Large::new(meta).walk(txn, start, buckets - start, count, |f, v| {
        if options.pattern.is_none_or(|p| glob_match(p, f)) {
            found.push(f.clone());
            found.push(v.clone());
        }
    })?;
    let next = start + read;
    Ok(scan_reply(
        if next >= buckets { 0 } else { u64::from(next) },
        found,
    ))
}
