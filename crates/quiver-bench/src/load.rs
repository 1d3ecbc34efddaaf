//! Bulk load: keys `0..count` with their deterministic values, written through
//! `Store::multi_put` in vectors of `width` pairs.

use std::time::Instant;

use quiver_store::Store;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::keys::{check_key_params, write_key, write_value};

/// Widest vector a load may use (the engine's default `vector_width_max`).
pub const LOAD_WIDTH_MAX: usize = 65_536;
/// Largest value a load generates (values are built in RAM, `width` at a time).
pub const LOAD_VALUE_SIZE_MAX: usize = 64 << 20;
/// Largest buffer of one load vector (`width * (key_size + value_size)`).
const LOAD_VECTOR_BYTES_MAX: usize = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSpec {
    pub count: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub width: usize,
    /// Every key expires this far after the load starts (`None`: keys never expire): what
    /// expiry costs the reads that follow.
    pub expire_after_ms: Option<u64>,
}

impl LoadSpec {
    pub fn validate(&self) -> Result<()> {
        check_key_params(self.count, self.key_size)?;
        if self.value_size > LOAD_VALUE_SIZE_MAX {
            return Err(Error::Invalid(format!(
                "value size {} exceeds the load generator's maximum {LOAD_VALUE_SIZE_MAX}",
                self.value_size
            )));
        }
        if !(1..=LOAD_WIDTH_MAX).contains(&self.width) {
            return Err(Error::Invalid(format!(
                "width {} outside 1..={LOAD_WIDTH_MAX}",
                self.width
            )));
        }
        if self.width.saturating_mul(self.key_size + self.value_size) > LOAD_VECTOR_BYTES_MAX {
            return Err(Error::Invalid(format!(
                "a vector of {} pairs of {} + {} bytes exceeds {LOAD_VECTOR_BYTES_MAX} bytes",
                self.width, self.key_size, self.value_size
            )));
        }
        Ok(())
    }

    /// Key and value bytes of the whole load.
    pub fn bytes(&self) -> u64 {
        self.count * (self.key_size + self.value_size) as u64
    }
}

/// What a load did. `seconds` covers the `multi_put` calls; `flush_seconds` the final flush
/// (write-out and fdatasync of every partition), so `keys_per_sec` is the rate of the puts in
/// the store's durability mode.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    pub keys: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub flush_seconds: f64,
}

impl LoadReport {
    pub fn keys_per_sec(&self) -> f64 {
        self.keys as f64 / self.seconds.max(1e-9)
    }

    /// Key and value megabytes (10^6 bytes) per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }
}

/// Loads keys `0..spec.count`; `progress` gets the number of keys written so far after each
/// vector. Flushes the store at the end.
pub fn load(store: &Store, spec: &LoadSpec, progress: &mut dyn FnMut(u64)) -> Result<LoadReport> {
    spec.validate()?;
    let (ks, vs) = (spec.key_size, spec.value_size);
    let pair = ks + vs;
    let mut buf = vec![0u8; spec.width * pair];
    let expire_at = spec.expire_after_ms.map(|ms| store.now_ms() + ms);
    let start = Instant::now();
    let mut done = 0u64;
    while done < spec.count {
        let n = (spec.count - done).min(spec.width as u64) as usize;
        for (j, chunk) in buf.chunks_exact_mut(pair).take(n).enumerate() {
            let (k, v) = chunk.split_at_mut(ks);
            write_key(done + j as u64, k);
            write_value(done + j as u64, v);
        }
        let items: Vec<(&[u8], &[u8], Option<u64>)> = buf
            .chunks_exact(pair)
            .take(n)
            .map(|c| {
                let (k, v) = c.split_at(ks);
                (k, v, expire_at)
            })
            .collect();
        store.multi_put_expiring(&items)?;
        done += n as u64;
        progress(done);
    }
    let seconds = start.elapsed().as_secs_f64();
    let flush_start = Instant::now();
    store.flush()?;
    Ok(LoadReport {
        keys: spec.count,
        bytes: spec.bytes(),
        seconds,
        flush_seconds: flush_start.elapsed().as_secs_f64(),
    })
}
