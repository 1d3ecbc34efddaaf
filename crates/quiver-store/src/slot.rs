//! Redis Cluster hash slots: a key's slot is CRC16 (XMODEM) of the key — or of its `{hashtag}`
//! when it has a non-empty one — modulo 16384, exactly as Redis Cluster clients compute it.
//! Slots and slot ranges live in `quiver_resp::slot` (one home, below the engine, shared with
//! the cluster's metadata and the cluster client) and are re-exported here, so
//! `quiver_store::slot::SlotRange` names them as before. Each partition of a store owns a
//! contiguous range of slots (recorded in `QUIVER`), so the ranges the cluster moves between
//! nodes are whole partitions, or splits of them.

pub use quiver_resp::slot::{
    covers_all, crc16, even_layout_partition, hash_tag, key_slot, SlotRange, SLOTS,
};
