//! A node's settings CONFIG SET changes while serving (`MoreSettings` of
//! `quiver_service::cmd::config`): `max-vector-width` and `max-multikey-width`, read at every
//! run and engine call, and compaction's pacing and trigger (`compaction-cpu-share`,
//! `compaction-garbage-ratio`), the store's own (`Store::set_compaction`), read by every
//! compaction pass, and `coalesce` (whether GET vectors go through the intermediate queue,
//! whose thread waits either way). The rest of `NodeConfig` is fixed at start: the data
//! directory, the durability mode, the backend, the segment size, the partitions of a new
//! store and the cluster's settings.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use quiver_service::cmd::config::{integer, MoreSettings};
use toml_edit::Value;

use super::ServerState;
use crate::node_config::{
    Coalesce, NodeConfig, ENGINE_VECTOR_WIDTH_MAX, MAX_MULTIKEY_WIDTH_DEFAULT,
    MAX_VECTOR_WIDTH_DEFAULT,
};

/// What CONFIG SET changes on a node.
const MUTABLE: &[&str] = &[
    "coalesce",
    "max-vector-width",
    "max-multikey-width",
    "compaction-cpu-share",
    "compaction-garbage-ratio",
];

/// The widths a node's runs read at every use.
pub struct NodeLive {
    max_vector_width: AtomicUsize,
    max_multikey_width: AtomicUsize,
    /// `coalesce = "adaptive"`.
    coalesce: AtomicBool,
}

impl NodeLive {
    pub fn of(config: &NodeConfig) -> NodeLive {
        NodeLive {
            max_vector_width: AtomicUsize::new(config.max_vector_width),
            max_multikey_width: AtomicUsize::new(config.max_multikey_width),
            coalesce: AtomicBool::new(config.coalesce == Coalesce::Adaptive),
        }
    }

    /// Whether database 0's GET vectors go through the intermediate queue.
    pub fn coalescing(&self) -> bool {
        self.coalesce.load(Relaxed)
    }

    fn coalesce(&self) -> Coalesce {
        match self.coalescing() {
            true => Coalesce::Adaptive,
            false => Coalesce::Off,
        }
    }

    /// Widest engine vector built from a pipelined run of single-key commands.
    pub fn max_vector_width(&self) -> usize {
        self.max_vector_width.load(Relaxed)
    }

    /// Widest engine read or delete call for one command.
    pub fn max_multikey_width(&self) -> usize {
        self.max_multikey_width.load(Relaxed)
    }
}

/// A width as CONFIG SET gives it: a whole number in `lo..=hi`, or Redis's words.
fn whole(value: &[u8], lo: usize, hi: usize) -> Result<usize, String> {
    integer(value, lo as i64, hi as i64).map(|n| n as usize)
}

/// `coalesce`'s value: Redis-style words for a bad one.
fn coalesce_of(value: &[u8]) -> Result<Coalesce, String> {
    String::from_utf8_lossy(value)
        .to_ascii_lowercase()
        .parse()
        .map_err(|_| "argument(s) must be one of the following: off, adaptive".to_string())
}

/// A share in `(lo, 1]` (`lo` itself allowed when `lo_allowed`), or why not.
fn share(value: &[u8], lo: f64, lo_allowed: bool) -> Result<f64, String> {
    let x: f64 = std::str::from_utf8(value)
        .ok()
        .and_then(|t| t.parse().ok())
        .filter(|x: &f64| x.is_finite())
        .ok_or("argument couldn't be parsed into a number")?;
    let low_ok = if lo_allowed { x >= lo } else { x > lo };
    if low_ok && x <= 1.0 {
        Ok(x)
    } else {
        let from = if lo_allowed { "[" } else { "(" };
        Err(format!("argument must be in {from}{lo}, 1]"))
    }
}

impl MoreSettings for ServerState {
    fn values(&self) -> Vec<(&'static str, String)> {
        let (ratio, cpu) = self.store.compaction();
        let mut values = self.config.values();
        for (name, value) in values.iter_mut() {
            match *name {
                "coalesce" => *value = self.live.coalesce().to_string(),
                "max-vector-width" => *value = self.live.max_vector_width().to_string(),
                "max-multikey-width" => *value = self.live.max_multikey_width().to_string(),
                "compaction-cpu-share" => *value = cpu.to_string(),
                "compaction-garbage-ratio" => *value = ratio.to_string(),
                _ => {}
            }
        }
        values
    }

    fn mutable(&self) -> &'static [&'static str] {
        MUTABLE
    }

    fn check(&self, name: &str, value: &[u8]) -> Result<(), String> {
        match name {
            "coalesce" => coalesce_of(value).map(drop),
            "max-vector-width" => whole(value, 1, ENGINE_VECTOR_WIDTH_MAX).map(drop),
            "max-multikey-width" => whole(value, 1, ENGINE_VECTOR_WIDTH_MAX).map(drop),
            "compaction-cpu-share" => share(value, 0.0, false).map(drop),
            // 1 would never compact; 0 turns background compaction off.
            "compaction-garbage-ratio" => share(value, 0.0, true)
                .and_then(|r| {
                    (r < 1.0)
                        .then_some(r)
                        .ok_or("argument must be below 1".into())
                })
                .map(drop),
            other => Err(format!("no way to set {other}")),
        }
    }

    fn apply(&self, name: &str, value: &[u8]) {
        let (ratio, cpu) = self.store.compaction();
        // Checked by `check`: nothing below fails.
        match name {
            "coalesce" => {
                let on = coalesce_of(value).is_ok_and(|c| c == Coalesce::Adaptive);
                self.live.coalesce.store(on, Relaxed);
            }
            "max-vector-width" => {
                let n =
                    whole(value, 1, ENGINE_VECTOR_WIDTH_MAX).unwrap_or(MAX_VECTOR_WIDTH_DEFAULT);
                self.live.max_vector_width.store(n, Relaxed);
            }
            "max-multikey-width" => {
                let n =
                    whole(value, 1, ENGINE_VECTOR_WIDTH_MAX).unwrap_or(MAX_MULTIKEY_WIDTH_DEFAULT);
                self.live.max_multikey_width.store(n, Relaxed);
            }
            "compaction-cpu-share" => {
                let cpu = share(value, 0.0, false).unwrap_or(cpu);
                let _ = self.store.set_compaction(ratio, cpu);
            }
            "compaction-garbage-ratio" => {
                let ratio = share(value, 0.0, true).unwrap_or(ratio);
                let _ = self.store.set_compaction(ratio, cpu);
            }
            _ => {}
        }
    }

    fn rewrite_values(&self) -> Vec<(&'static str, Value, bool)> {
        let d = NodeConfig::default();
        let (ratio, cpu) = self.store.compaction();
        let widths = [
            (
                "max-vector-width",
                self.live.max_vector_width(),
                d.max_vector_width,
            ),
            (
                "max-multikey-width",
                self.live.max_multikey_width(),
                d.max_multikey_width,
            ),
        ];
        let shares = [
            ("compaction-cpu-share", cpu, d.compaction_cpu_share),
            (
                "compaction-garbage-ratio",
                ratio,
                d.compaction_garbage_ratio,
            ),
        ];
        let coalesce = self.live.coalesce();
        let mode = (
            "coalesce",
            Value::from(coalesce.to_string()),
            coalesce != d.coalesce,
        );
        std::iter::once(mode)
            .chain(
                widths
                    .into_iter()
                    .map(|(k, v, default)| (k, Value::from(v as i64), v != default)),
            )
            .chain(
                shares
                    .into_iter()
                    .map(|(k, v, default)| (k, Value::from(v), v != default)),
            )
            .collect()
    }
}
