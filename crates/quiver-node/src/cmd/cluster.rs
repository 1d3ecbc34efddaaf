//! CLUSTER KEYSLOT | COUNTKEYSINSLOT | GETKEYSINSLOT | HELP: the subcommands that read Redis
//! Cluster hash slots, answered on a standalone server; and Quiver's COUNTKEYSINRANGES
//! <start> <end> [<start> <end> ...] (the keys of slot ranges, arguments as ADDSLOTSRANGE's),
//! which `quiver router` asks each chain's tail for its DBSIZE.
//!
//! A deliberate difference from Redis, which refuses every CLUSTER subcommand unless cluster
//! mode is on: each of Quiver's partitions owns a range of hash slots even standalone
//! (`quiver_store::slot`), so the slot of a key and the keys of a slot are always defined.
//! The replies and error texts are those of Redis 7.0 in cluster mode. Every other
//! subcommand Redis 7.0 knows (SLOTS, NODES, INFO, SHARDS, MYID, ...) is about the cluster
//! and answered from its topology (`cmd::topology`; on a standalone server what a standalone
//! Redis answers, `ERR This instance has cluster support disabled`). An unknown subcommand,
//! or a wrong number of arguments for a known one, is refused as Redis refuses it, before the
//! command runs or is queued in MULTI (`quiver_service::subcommands`).
//!
//! Inside MULTI/EXEC, COUNTKEYSINSLOT and GETKEYSINSLOT see the store combined with the
//! transaction's own pending writes (as DBSIZE and KEYS do); as with those, the slot's other
//! keys they read are no preconditions of the commit (a concurrent write to the slot does not
//! make the transaction retry). Like Quiver's DBSIZE, they never count a key whose time to live
//! has passed (Redis counts one until it reclaims it). The counts are the engine's per-slot
//! counts (O(1) per slot, no key read). GETKEYSINSLOT lists the store's keys in hash order,
//! Redis in its own.

use std::collections::HashSet;

use bytes::Bytes;
use quiver_store::slot::{key_slot, SlotRange, SLOTS};

use crate::cmd::common::TxnCommand;
use crate::txn::Txn;
use quiver_service::errors::{err, NOT_INTEGER};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// A standalone Redis's answer to any CLUSTER subcommand.
pub const DISABLED: &str = "ERR This instance has cluster support disabled";
const INVALID_SLOT: &str = "ERR Invalid slot";
const INVALID_SLOT_OR_COUNT: &str = "ERR Invalid slot or number of keys";
/// Redis's ADDSLOTSRANGE's, for a slot number out of range.
const INVALID_RANGE_SLOT: &str = "ERR Invalid or out of range slot";

/// What Quiver answers; Redis's texts for these entries.
const HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "COUNTKEYSINRANGES <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Return the number of keys in the slot ranges (Quiver).",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "HELP",
    "    Prints this help.",
    "(Quiver runs standalone: the other subcommands of Redis Cluster answer that cluster",
    "support is disabled.)",
];

/// A parsed CLUSTER request.
#[derive(Debug, PartialEq, Eq)]
pub enum Cluster {
    /// KEYSLOT: the key's slot, computed when parsed.
    KeySlot(u16),
    CountKeysInSlot(u16),
    CountKeysInRanges(Vec<SlotRange>),
    GetKeysInSlot {
        slot: u16,
        count: usize,
    },
    Help,
}

impl Cluster {
    pub fn parse(args: &[Bytes]) -> Result<Cluster, Reply> {
        if let Some(refused) = quiver_service::subcommands::refusal(Cmd::Cluster, args) {
            return Err(refused);
        }
        let sub = args[1].to_ascii_lowercase();
        Ok(match &sub[..] {
            b"keyslot" => Cluster::KeySlot(key_slot(&args[2])),
            b"countkeysinslot" => {
                let slot = integer(&args[2])?;
                Cluster::CountKeysInSlot(slot_in_range(slot).ok_or_else(|| err(INVALID_SLOT))?)
            }
            b"countkeysinranges" => Cluster::CountKeysInRanges(ranges(&args[2..])?),
            b"getkeysinslot" => {
                // Both are parsed before either is checked, as in Redis.
                let slot = integer(&args[2])?;
                let count = integer(&args[3])?;
                match (slot_in_range(slot), usize::try_from(count)) {
                    (Some(slot), Ok(count)) => Cluster::GetKeysInSlot { slot, count },
                    _ => return Err(err(INVALID_SLOT_OR_COUNT)),
                }
            }
            b"help" => Cluster::Help,
            // The other subcommands are answered from the topology (`cmd::topology`).
            _ => return Err(err(DISABLED)),
        })
    }
}

/// Redis's `getLongLongFromObjectOrReply`.
fn integer(arg: &[u8]) -> Result<i64, Reply> {
    string2ll(arg).ok_or_else(|| err(NOT_INTEGER))
}

fn slot_in_range(n: i64) -> Option<u16> {
    u16::try_from(n).ok().filter(|&s| u32::from(s) < SLOTS)
}

/// `<start> <end>` pairs, checked as Redis's ADDSLOTSRANGE checks its own.
fn ranges(args: &[Bytes]) -> Result<Vec<SlotRange>, Reply> {
    if args.len() % 2 != 0 {
        return Err(quiver_service::errors::wrong_arity(
            "cluster|countkeysinranges",
        ));
    }
    args.chunks(2)
        .map(|pair| {
            let slot = |a: &Bytes| {
                slot_in_range(integer(a).map_err(|_| err(INVALID_RANGE_SLOT))?)
                    .ok_or_else(|| err(INVALID_RANGE_SLOT))
            };
            let (lo, hi) = (slot(&pair[0])?, slot(&pair[1])?);
            SlotRange::new(lo, hi).ok_or_else(|| {
                Reply::error(format!(
                    "ERR start slot number {lo} is greater than end slot number {hi}"
                ))
            })
        })
        .collect()
}

impl TxnCommand for Cluster {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        // Hash slots hold database 0's keys (Redis Cluster has no other): the slot commands
        // address it whatever the connection selected.
        let selected = txn.db();
        txn.select(0);
        let reply = self.apply_db0(txn);
        txn.select(selected);
        reply
    }
}

impl Cluster {
    fn apply_db0(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        Ok(match *self {
            Cluster::KeySlot(slot) => Reply::Integer(slot.into()),
            Cluster::CountKeysInSlot(slot) => {
                Reply::Integer(count_keys(txn, &[SlotRange { lo: slot, hi: slot }])?)
            }
            Cluster::CountKeysInRanges(ref ranges) => Reply::Integer(count_keys(txn, ranges)?),
            Cluster::GetKeysInSlot { slot, count } => Reply::Array(
                keys(txn, slot, count)?
                    .into_iter()
                    .map(Reply::Bulk)
                    .collect(),
            ),
            Cluster::Help => Reply::Array(HELP.iter().map(|l| Reply::simple(*l)).collect()),
        })
    }
}

/// The keys of the slots of `ranges` this transaction wrote or deleted, with whether each is
/// live now.
fn pending(txn: &Txn<'_>, ranges: &[SlotRange]) -> Vec<(Bytes, bool)> {
    txn.overlay()
        .filter(|(k, _)| ranges.iter().any(|r| r.contains(key_slot(k))))
        .map(|(k, v)| (k.clone(), v.is_some()))
        .collect()
}

/// COUNTKEYSINSLOT, COUNTKEYSINRANGES: the store's count (none after a FLUSHALL in the
/// transaction), corrected by the transaction's writes to the slots.
pub(crate) fn count_keys(txn: &mut Txn<'_>, ranges: &[SlotRange]) -> quiver_store::Result<i64> {
    let mut n = if txn.is_flushed() {
        0
    } else {
        txn.store().count_keys_in_ranges(ranges) as i64
    };
    for (k, live) in pending(txn, ranges) {
        match (txn.exists_in_store(&k)?, live) {
            (false, true) => n += 1,
            (true, false) => n -= 1,
            _ => {}
        }
    }
    Ok(n)
}

/// GETKEYSINSLOT: up to `count` keys of the slot, the store's (without those the transaction
/// wrote or deleted) then the transaction's live ones.
fn keys(txn: &Txn<'_>, slot: u16, count: usize) -> quiver_store::Result<Vec<Bytes>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let pending = pending(txn, &[SlotRange { lo: slot, hi: slot }]);
    let mut found = if txn.is_flushed() {
        Vec::new()
    } else {
        // Enough that `count` remain after dropping the pending keys.
        let base = txn
            .store()
            .keys_in_slot(slot, count.saturating_add(pending.len()))?;
        let written: HashSet<&Bytes> = pending.iter().map(|(k, _)| k).collect();
        base.into_iter().filter(|k| !written.contains(k)).collect()
    };
    found.extend(
        pending
            .into_iter()
            .filter(|(_, live)| *live)
            .map(|(k, _)| k),
    );
    found.truncate(count);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    fn parse(words: &[&str]) -> Result<Cluster, Reply> {
        Cluster::parse(&args(words))
    }

    fn error(r: Result<Cluster, Reply>) -> String {
        match r {
            Err(Reply::Error(t)) => String::from_utf8(t.to_vec()).unwrap_or_default(),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn parses_as_redis_7_in_cluster_mode() {
        assert_eq!(
            parse(&["CLUSTER", "KEYSLOT", "foo"]),
            Ok(Cluster::KeySlot(12182))
        );
        assert_eq!(
            parse(&["cluster", "keyslot", "{user1000}.following"]),
            Ok(Cluster::KeySlot(key_slot(b"user1000")))
        );
        assert_eq!(parse(&["CLUSTER", "KEYSLOT", ""]), Ok(Cluster::KeySlot(0)));
        assert_eq!(
            parse(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]),
            Ok(Cluster::CountKeysInSlot(16383))
        );
        assert_eq!(
            parse(&["CLUSTER", "GETKEYSINSLOT", "0", "9223372036854775807"]),
            Ok(Cluster::GetKeysInSlot {
                slot: 0,
                count: i64::MAX as usize
            })
        );
        assert_eq!(
            parse(&["CLUSTER", "COUNTKEYSINRANGES", "0", "99", "200", "200"]),
            Ok(Cluster::CountKeysInRanges(vec![
                SlotRange { lo: 0, hi: 99 },
                SlotRange { lo: 200, hi: 200 }
            ]))
        );
        for (bad, says) in [
            (
                &["7", "6"][..],
                "ERR start slot number 7 is greater than end slot number 6",
            ),
            (&["0", "16384"], INVALID_RANGE_SLOT),
            (&["x", "1"], INVALID_RANGE_SLOT),
            (
                &["0", "1", "2"],
                "ERR wrong number of arguments for 'cluster|countkeysinranges' command",
            ),
        ] {
            let mut words = vec!["CLUSTER", "COUNTKEYSINRANGES"];
            words.extend(bad);
            assert_eq!(error(parse(&words)), says, "{bad:?}");
        }
        assert_eq!(parse(&["CLUSTER", "help"]), Ok(Cluster::Help));
        assert_eq!(error(parse(&["CLUSTER", "SLOTS"])), DISABLED);
        assert_eq!(
            error(parse(&["CLUSTER", "COUNTKEYSINSLOT", "16384"])),
            "ERR Invalid slot"
        );
        assert_eq!(
            error(parse(&["CLUSTER", "COUNTKEYSINSLOT", "-1"])),
            "ERR Invalid slot"
        );
        for bad in ["abc", "01", " 1", "1.0", "+1", "99999999999999999999"] {
            assert_eq!(
                error(parse(&["CLUSTER", "COUNTKEYSINSLOT", bad])),
                NOT_INTEGER,
                "{bad}"
            );
        }
        assert_eq!(
            error(parse(&["CLUSTER", "GETKEYSINSLOT", "-1", "x"])),
            NOT_INTEGER
        );
        assert_eq!(
            error(parse(&["CLUSTER", "GETKEYSINSLOT", "16384", "1"])),
            "ERR Invalid slot or number of keys"
        );
        assert_eq!(
            error(parse(&["CLUSTER", "GETKEYSINSLOT", "1", "-1"])),
            "ERR Invalid slot or number of keys"
        );
    }
}
