//! Helpers shared by the engine tests.

use quiver_store::{BackendKind, Durability, Options};

/// Small segments and partitions so tests exercise rotation, growth and compaction.
pub fn small_options(backend: BackendKind) -> Options {
    Options {
        partitions: 4,
        segment_bytes: 128 << 10,
        durability: Durability::Os,
        backend,
        value_len_max: 16 << 10,
        background: false,
        checkpoint_interval_ms: 0,
        compact_garbage_ratio: 0.0,
        ..Options::default()
    }
}

pub fn key(i: u64) -> Vec<u8> {
    format!("key:{i:08}").into_bytes()
}

pub fn value(i: u64, round: u64) -> Vec<u8> {
    let len = (i * 7 + round * 13) % 300;
    let mut v = format!("v{i}.{round}:").into_bytes();
    v.resize(v.len() + len as usize, b'a' + (i % 26) as u8);
    v
}
