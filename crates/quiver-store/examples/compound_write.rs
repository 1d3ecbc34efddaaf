//! The compound write against the plain vector write, in process, one thread: a `Batch` of
//! `width` puts through `Store::apply` (what MSET runs) against `multi_put` of the same pairs,
//! on a store preloaded with `keys` keys, the two modes interleaved in rounds.
//!
//!   cargo run --release -p quiver-store --example compound_write -- \
//!       [--keys 1000000] [--width 32] [--value-size 32] [--seconds 2] [--rounds 3] \
//!       [--durability os] [--modes apply,multi_put] [--dir DIR]
//!
//! Prints one line per mode and round: keys written per second and microseconds per call.

// A benchmark: a failed call ends it with the error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use quiver_store::{Batch, Durability, Options, Store};

struct Args {
    keys: u64,
    width: usize,
    value_size: usize,
    seconds: f64,
    rounds: usize,
    durability: Durability,
    modes: Vec<String>,
    dir: Option<std::path::PathBuf>,
}

fn parse() -> Args {
    let mut a = Args {
        keys: 1_000_000,
        width: 32,
        value_size: 32,
        seconds: 2.0,
        rounds: 3,
        durability: Durability::Os,
        modes: vec!["apply".into(), "multi_put".into()],
        dir: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--keys" => a.keys = v.parse().expect("--keys"),
            "--width" => a.width = v.parse().expect("--width"),
            "--value-size" => a.value_size = v.parse().expect("--value-size"),
            "--seconds" => a.seconds = v.parse().expect("--seconds"),
            "--rounds" => a.rounds = v.parse().expect("--rounds"),
            "--durability" => a.durability = v.parse().expect("--durability"),
            "--modes" => a.modes = v.split(',').map(String::from).collect(),
            "--dir" => a.dir = Some(v.into()),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

/// xorshift64*: the key sequence.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

fn main() {
    let args = parse();
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("quiver-compound-{}", std::process::id()));
            tmp
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        durability: args.durability,
        expected_keys: args.keys,
        ..Options::default()
    };
    let store = Store::open(&dir, opts).unwrap();
    let keys: Vec<Bytes> = (0..args.keys)
        .map(|i| Bytes::from(format!("{i:016}")))
        .collect();
    let value = Bytes::from(vec![b'v'; args.value_size]);
    for chunk in keys.chunks(256) {
        let pairs: Vec<(&Bytes, &Bytes)> = chunk.iter().map(|k| (k, &value)).collect();
        store.multi_put(&pairs).unwrap();
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut pick: Vec<Bytes> = Vec::with_capacity(args.width);
    for round in 1..=args.rounds {
        for mode in &args.modes {
            let until = Instant::now() + Duration::from_secs_f64(args.seconds);
            let start = Instant::now();
            let mut calls = 0u64;
            while Instant::now() < until {
                for _ in 0..64 {
                    pick.clear();
                    pick.extend(
                        (0..args.width).map(|_| keys[rng.below(args.keys) as usize].clone()),
                    );
                    match mode.as_str() {
                        "apply" => {
                            let mut b = Batch::new();
                            for k in &pick {
                                b.put(k.clone(), value.clone());
                            }
                            assert!(store.apply(&b).unwrap().is_applied());
                        }
                        "multi_put" => {
                            let pairs: Vec<(&Bytes, &Bytes)> =
                                pick.iter().map(|k| (k, &value)).collect();
                            store.multi_put(&pairs).unwrap();
                        }
                        other => panic!("unknown mode {other}"),
                    }
                    calls += 1;
                }
            }
            let s = start.elapsed().as_secs_f64();
            println!(
                "round {round} {mode:>9} width {}: {:>10.0} keys/s {:>7.2} us/call",
                args.width,
                calls as f64 * args.width as f64 / s,
                s / calls as f64 * 1e6
            );
        }
    }
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
