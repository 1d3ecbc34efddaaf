//! Quick in-process probe of the vector get: `cargo run --release --example vector_get -- DIR N WIDTH BACKEND`.
//! (The real benchmark is `quiver bench local`.)

use std::time::Instant;

use quiver_store::{Options, Store};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = &args[1];
    let n: u64 = args[2].parse().unwrap();
    let width: usize = args[3].parse().unwrap();
    let backend = args[4].parse().unwrap();
    let key = |i: u64| format!("{i:016}").into_bytes();
    let opts = Options {
        backend,
        ..Options::default()
    };
    let s = Store::open(dir, opts).unwrap();
    if s.len() < n {
        let t = Instant::now();
        let mut i = 0;
        while i < n {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = (i..(i + 256).min(n))
                .map(|j| (key(j), vec![b'v'; 32]))
                .collect();
            s.multi_put(&pairs).unwrap();
            i += 256;
        }
        eprintln!("load {:.0} keys/s", n as f64 / t.elapsed().as_secs_f64());
    }
    let st = s.stats();
    eprintln!(
        "index bytes/key {:.2}",
        st.index_bytes as f64 / st.keys as f64
    );
    let mut x: u64 = 88172645463325252;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let t = Instant::now();
    let mut done = 0u64;
    while t.elapsed().as_secs_f64() < 3.0 {
        let keys: Vec<Vec<u8>> = (0..width).map(|_| key(next())).collect();
        let got = s.multi_get(&keys).unwrap();
        assert!(got.iter().all(|g| g.is_some()));
        done += width as u64;
    }
    eprintln!(
        "{} width {width}: {:.0} keys/s",
        s.options().backend,
        done as f64 / t.elapsed().as_secs_f64()
    );
}
