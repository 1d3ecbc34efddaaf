//! The vector get (paper Sec. 4.2): hash all keys, prefetch their index buckets, probe all of
//! them, read every candidate record as one batch, verify full keys, and retry only the
//! fragment collisions from where their probe stopped.

pub(crate) mod foresee;

use bytes::Bytes;

use crate::batch::Entry;
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::index::Probe;
use crate::io::ReadRequest;
use crate::log::format::{self, RecordExt, ValueKind};
use crate::partition::{PartState, StoreCtx};

/// What a lookup found for one key.
#[derive(Debug)]
pub(crate) enum Found {
    Absent,
    /// The key's live record: its index slot, the record bytes and where its value lies, its
    /// expiry time and what its value is.
    Live {
        pos: usize,
        record: Bytes,
        value: std::ops::Range<usize>,
        expire_at: Option<u64>,
        kind: ValueKind,
    },
    /// The key's record has expired: absent to every reader, but the index slot still holds
    /// it (a write replaces it there; a delete or the sweep writes its tombstone).
    Expired {
        pos: usize,
    },
    /// The key could not be read: an I/O error, or damage that may hide it.
    Failed(Error),
}

impl Found {
    /// Takes the error out of a `Failed` result (leaving it `Absent`).
    pub fn take_error(&mut self) -> Option<Error> {
        match std::mem::replace(self, Found::Absent) {
            Found::Failed(e) => Some(e),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The index slot of the key's record, live or expired.
    pub fn pos(&self) -> Option<usize> {
        match self {
            Found::Live { pos, .. } | Found::Expired { pos } => Some(*pos),
            _ => None,
        }
    }

    /// Whether the key exists (a live record).
    pub fn is_live(&self) -> bool {
        matches!(self, Found::Live { .. })
    }

    /// Whether the key has a record in the log, live or expired: a delete must write a
    /// tombstone for it, so that no older value of the key can come back.
    pub fn has_record(&self) -> bool {
        matches!(self, Found::Live { .. } | Found::Expired { .. })
    }

    /// A live key's state as a precondition sees it.
    pub fn current(&self) -> Option<crate::batch::Current<'_>> {
        match self {
            Found::Live {
                record,
                value,
                expire_at,
                kind,
                ..
            } => Some((&record[value.clone()], *expire_at, *kind)),
            _ => None,
        }
    }
}

/// One key of a lookup vector.
#[derive(Clone, Copy)]
pub(crate) struct LookupKey<'k> {
    /// Index into the `states` slice given to [`lookup`].
    pub state: usize,
    /// The key's namespace (its database's; see `dbs`).
    pub ns: u32,
    pub key: &'k [u8],
    pub hash: KeyHash,
}

/// Looks up every key. `verify_values` also checks value checksums (gets do; puts, which only
/// need to know where the key lives, do not).
pub(crate) fn lookup(
    ctx: &StoreCtx,
    states: &[&PartState],
    keys: &[LookupKey<'_>],
    verify_values: bool,
) -> Vec<Found> {
    let n = keys.len();
    // Prefetch every key's first index cache lines before probing any of them.
    for k in keys {
        states[k.state].index.prefetch(k.hash);
    }
    let mut probes: Vec<Probe> = keys
        .iter()
        .map(|k| states[k.state].index.probe(k.hash))
        .collect();
    let mut out: Vec<Found> = (0..n).map(|_| Found::Absent).collect();
    // Damage seen on a candidate that might have been the key: reported if the key is not
    // found further along its chain.
    let mut damage: Vec<Option<Error>> = (0..n).map(|_| None).collect();
    let mut active: Vec<usize> = (0..n).collect();
    let mut cand_pos: Vec<usize> = vec![0; n];
    let value_len_guess = ctx.value_len_guess(verify_values);
    // Read from the clock only when a record has an expiry time (most have none).
    let mut now: Option<u64> = None;
    // Longest value read: keeps the first-round read size right after a reopen.
    let mut value_len_max = 0;

    while !active.is_empty() {
        let mut reqs: Vec<ReadRequest<'_>> = Vec::with_capacity(active.len());
        let mut who: Vec<usize> = Vec::with_capacity(active.len());
        let mut buffered: Vec<(usize, u64, Bytes)> = Vec::new();
        let mut next: Vec<usize> = Vec::new();
        for &i in &active {
            let k = &keys[i];
            let st = states[k.state];
            let Some((pos, loc)) = st.index.next_candidate(k.hash.fragment(), &mut probes[i])
            else {
                out[i] = match damage[i].take() {
                    Some(e) => Found::Failed(e),
                    None => Found::Absent,
                };
                continue;
            };
            cand_pos[i] = pos;
            let (seg, offset) = match st.segs.resolve(loc) {
                Ok(x) => x,
                Err(e) => {
                    // Keep probing: the key may still be further along its chain.
                    damage[i] = Some(e);
                    next.push(i);
                    continue;
                }
            };
            if std::sync::Arc::ptr_eq(seg, &st.appender.segment) {
                if let Some(b) = st.appender.buffered_record(offset) {
                    buffered.push((i, offset, b));
                    continue;
                }
            }
            let hint = crate::partition::first_read_len(k.key.len(), value_len_guess);
            reqs.push(ReadRequest::new(seg, offset, hint));
            who.push(i);
        }
        ctx.backend.read_records(&mut reqs);

        let results = reqs
            .into_iter()
            .zip(who)
            .map(|(r, i)| (i, r.segment, r.offset, r.result))
            .chain(buffered.into_iter().map(|(i, off, b)| {
                let seg: &crate::log::segment::Segment = &states[keys[i].state].appender.segment;
                (i, seg, off, Ok(b))
            }));
        for (i, seg, offset, res) in results {
            let bytes = match res {
                Ok(b) => b,
                Err(e) => {
                    if e.is_corruption() {
                        damage[i] = Some(e);
                        next.push(i);
                    } else {
                        out[i] = Found::Failed(e);
                    }
                    continue;
                }
            };
            match check_candidate(&bytes, keys[i].ns, keys[i].key, verify_values) {
                Candidate::Match(_, ext)
                    if ext.expire_at.is_some()
                        && ext.expired_at(*now.get_or_insert_with(|| ctx.now_ms())) =>
                {
                    out[i] = Found::Expired { pos: cand_pos[i] };
                }
                Candidate::Match(value, ext) => {
                    value_len_max = value_len_max.max(value.len());
                    out[i] = Found::Live {
                        pos: cand_pos[i],
                        record: bytes,
                        value,
                        expire_at: ext.expire_at,
                        kind: ext.kind,
                    };
                }
                Candidate::OtherKey => next.push(i),
                Candidate::Damaged(reason, definite) => {
                    let e = Error::corruption(&seg.path, offset, reason);
                    if definite {
                        out[i] = Found::Failed(e);
                    } else {
                        damage[i] = Some(e);
                        next.push(i);
                    }
                }
            }
        }
        active = next;
    }
    if value_len_max > 0 {
        ctx.observe_value_len(value_len_max);
    }
    out
}

enum Candidate {
    /// The record is the key's: the value's byte range and the record's `ext`.
    Match(std::ops::Range<usize>, RecordExt),
    /// A fragment collision: another key's record.
    OtherKey,
    /// Damage; `true` when it is certainly the key's record (its key verified, value did not).
    Damaged(&'static str, bool),
}

fn check_candidate(bytes: &[u8], ns: u32, key: &[u8], verify_value: bool) -> Candidate {
    let header = match format::check_header(bytes) {
        Ok(h) => h,
        Err(reason) => return Candidate::Damaged(reason, false),
    };
    let ext = header.ext(bytes);
    if &bytes[header.key_range()] != key || ext.namespace != ns {
        return Candidate::OtherKey;
    }
    if !header.ty.is_put() {
        return Candidate::Damaged("index points at a record that is not a put", true);
    }
    let value = header.value_range();
    if bytes.len() < value.end {
        return Candidate::Damaged("record truncated inside its value", true);
    }
    if verify_value && crate::crc::crc32c(&bytes[value.clone()]) != header.value_crc {
        return Candidate::Damaged("record value checksum mismatch", true);
    }
    Candidate::Match(value, ext)
}

/// Looks up keys (namespace, key, hash) that all live in one partition.
pub(crate) fn lookup_one_partition(
    ctx: &StoreCtx,
    st: &PartState,
    keys: &[(u32, &[u8], KeyHash)],
    verify_values: bool,
) -> Vec<Found> {
    let items: Vec<LookupKey<'_>> = keys
        .iter()
        .map(|&(ns, key, hash)| LookupKey {
            state: 0,
            ns,
            key,
            hash,
        })
        .collect();
    lookup(ctx, &[st], &items, verify_values)
}

/// Turns a lookup into the key's value with its kind and expiry time.
pub(crate) fn into_entry(found: Found) -> Result<Option<Entry>> {
    match found {
        Found::Absent | Found::Expired { .. } => Ok(None),
        Found::Live {
            mut record,
            value,
            expire_at,
            kind,
            ..
        } => {
            // Narrow the record to its value in place: no reference-count traffic.
            record.truncate(value.end);
            bytes::Buf::advance(&mut record, value.start);
            Ok(Some(Entry {
                value: record,
                expire_at,
                kind,
            }))
        }
        Found::Failed(e) => Err(e),
    }
}

/// Turns a lookup into a string's value: a key of another kind reads as absent, as MGET
/// answers it.
pub(crate) fn into_value(found: Found) -> Result<Option<Bytes>> {
    Ok(into_entry(found)?.and_then(Entry::into_string))
}
