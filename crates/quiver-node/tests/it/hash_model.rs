//! Hashes against a model: random commands over a few keys — the hash commands, and SET, GET,
//! DEL, RENAME crossing between strings and hashes — sent in pipelined bursts (so runs of
//! hash reads are vectors, and runs of hash writes one transaction), each reply compared with
//! what a map of keys to strings or to field lists in insertion order (Redis's listpack
//! order) says, and every key's whole state compared after each restart of the server.
//! Fields and values are sometimes longer than Redis's listpack value (64 bytes), so both
//! sides of the encoding thresholds are crossed.
//!
//! Seeded: `QUIVER_HASH_MODEL_SEED` replays a run (the seed is printed).

use std::collections::BTreeMap;

use quiver_client::{Connection, Value};
use quiver_node::testing::TestServer;
use quiver_testkit::rng::{seed_from_env, Rng};

/// Commands per run, and a restart every this many.
const COMMANDS: usize = 3000;
const RESTART_EVERY: usize = 500;
/// Most commands of one pipelined burst.
const BURST_MAX: u64 = 8;
const KEYS: u64 = 6;
const FIELDS: u64 = 12;
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Str(Vec<u8>),
    /// Fields in insertion order: a replaced value keeps its place, a new field goes last.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

#[derive(Default)]
struct Model {
    keys: BTreeMap<Vec<u8>, Val>,
}

impl Model {
    /// The hash at `key` (`None`: a string there, WRONGTYPE); an absent key is empty.
    fn hash(&mut self, key: &[u8]) -> Option<&mut Vec<(Vec<u8>, Vec<u8>)>> {
        let v = self
            .keys
            .entry(key.to_vec())
            .or_insert_with(|| Val::Hash(Vec::new()));
        match v {
            Val::Hash(h) => Some(h),
            Val::Str(_) => None,
        }
    }

    /// Drops an empty hash (Redis removes a hash with its last field).
    fn settle(&mut self, key: &[u8]) {
        if self.keys.get(key) == Some(&Val::Hash(Vec::new())) {
            self.keys.remove(key);
        }
    }

    fn set_field(h: &mut Vec<(Vec<u8>, Vec<u8>)>, f: &[u8], v: &[u8]) -> bool {
        match h.iter_mut().find(|(g, _)| g == f) {
            Some(pair) => {
                pair.1 = v.to_vec();
                false
            }
            None => {
                h.push((f.to_vec(), v.to_vec()));
                true
            }
        }
    }
}

fn bulk(b: &[u8]) -> Value {
    Value::Bulk(b.to_vec().into())
}

fn wrongtype() -> Value {
    Value::Error(WRONGTYPE.into())
}

struct Run {
    rng: Rng,
    model: Model,
}

impl Run {
    fn key(&mut self) -> Vec<u8> {
        format!("k{}", self.rng.below(KEYS)).into_bytes()
    }

    fn field(&mut self) -> Vec<u8> {
        let f = self.rng.below(FIELDS);
        // One field name in 12 is long: past the listpack's 64 bytes.
        if f == 0 {
            return vec![b'L'; 65];
        }
        format!("f{f}").into_bytes()
    }

    fn value(&mut self) -> Vec<u8> {
        match self.rng.below(8) {
            0 => vec![b'v'; 70],
            1 => self.rng.below(100).to_string().into_bytes(),
            _ => format!("v{}", self.rng.below(1000)).into_bytes(),
        }
    }

    /// One random command and the reply the model expects; the model updated.
    fn step(&mut self) -> (Vec<Vec<u8>>, Value) {
        let key = self.key();
        match self.rng.below(14) {
            0..=2 => {
                let n = 1 + self.rng.below(3) as usize;
                let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                    (0..n).map(|_| (self.field(), self.value())).collect();
                let mut args = vec![b"HSET".to_vec(), key.clone()];
                for (f, v) in &pairs {
                    args.extend([f.clone(), v.clone()]);
                }
                let want = match self.model.hash(&key) {
                    None => wrongtype(),
                    Some(h) => Value::Integer(
                        pairs
                            .iter()
                            .filter(|(f, v)| Model::set_field(h, f, v))
                            .count() as i64,
                    ),
                };
                self.model.settle(&key);
                (args, want)
            }
            3 => {
                let (f, v) = (self.field(), self.value());
                let want = match self.model.hash(&key) {
                    None => wrongtype(),
                    Some(h) if h.iter().any(|(g, _)| *g == f) => Value::Integer(0),
                    Some(h) => Value::Integer(i64::from(Model::set_field(h, &f, &v))),
                };
                self.model.settle(&key);
                (vec![b"HSETNX".to_vec(), key, f, v], want)
            }
            4 => {
                let fields: Vec<Vec<u8>> =
                    (0..1 + self.rng.below(2)).map(|_| self.field()).collect();
                let want = match self.model.hash(&key) {
                    None => wrongtype(),
                    Some(h) => {
                        let before = h.len();
                        h.retain(|(g, _)| !fields.contains(g));
                        Value::Integer((before - h.len()) as i64)
                    }
                };
                self.model.settle(&key);
                let mut args = vec![b"HDEL".to_vec(), key];
                args.extend(fields);
                (args, want)
            }
            5 => {
                let f = self.field();
                let by = self.rng.below(21) as i64 - 10;
                let want = match self.model.hash(&key) {
                    None => wrongtype(),
                    Some(h) => {
                        let current = h.iter().find(|(g, _)| *g == f).map(|(_, v)| v.clone());
                        let n = match current {
                            None => Some(0),
                            Some(v) => std::str::from_utf8(&v).ok().and_then(|s| {
                                // Redis's string2ll: canonical decimal only.
                                s.parse::<i64>().ok().filter(|n| n.to_string() == s)
                            }),
                        };
                        match n {
                            None => Value::Error("ERR hash value is not an integer".into()),
                            Some(n) => {
                                Model::set_field(h, &f, (n + by).to_string().as_bytes());
                                Value::Integer(n + by)
                            }
                        }
                    }
                };
                self.model.settle(&key);
                (
                    vec![b"HINCRBY".to_vec(), key, f, by.to_string().into_bytes()],
                    want,
                )
            }
            6 | 7 => {
                let fields: Vec<Vec<u8>> =
                    (0..1 + self.rng.below(3)).map(|_| self.field()).collect();
                let want = match self.model.keys.get(&key) {
                    Some(Val::Str(_)) => wrongtype(),
                    h => Value::Array(
                        fields
                            .iter()
                            .map(|f| match h {
                                Some(Val::Hash(h)) => h
                                    .iter()
                                    .find(|(g, _)| g == f)
                                    .map_or(Value::Null, |(_, v)| bulk(v)),
                                _ => Value::Null,
                            })
                            .collect(),
                    ),
                };
                let mut args = vec![b"HMGET".to_vec(), key];
                args.extend(fields);
                (args, want)
            }
            8 => (vec![b"HGETALL".to_vec(), key.clone()], self.hgetall(&key)),
            9 => {
                let want = match self.model.keys.get(&key) {
                    Some(Val::Str(_)) => wrongtype(),
                    Some(Val::Hash(h)) => Value::Integer(h.len() as i64),
                    None => Value::Integer(0),
                };
                (vec![b"HLEN".to_vec(), key], want)
            }
            10 => {
                let v = self.value();
                self.model.keys.insert(key.clone(), Val::Str(v.clone()));
                (vec![b"SET".to_vec(), key, v], Value::Simple("OK".into()))
            }
            11 => {
                let want = match self.model.keys.get(&key) {
                    Some(Val::Str(v)) => bulk(v),
                    Some(Val::Hash(_)) => wrongtype(),
                    None => Value::Null,
                };
                (vec![b"GET".to_vec(), key], want)
            }
            12 => {
                let gone = self.model.keys.remove(&key).is_some();
                (vec![b"DEL".to_vec(), key], Value::Integer(i64::from(gone)))
            }
            _ => {
                let to = self.key();
                let want = match self.model.keys.remove(&key) {
                    None => Value::Error("ERR no such key".into()),
                    Some(v) => {
                        self.model.keys.insert(to.clone(), v);
                        Value::Simple("OK".into())
                    }
                };
                (vec![b"RENAME".to_vec(), key, to], want)
            }
        }
    }

    /// HGETALL's reply (RESP2: a flat array) for `key` as the model has it.
    fn hgetall(&self, key: &[u8]) -> Value {
        match self.model.keys.get(key) {
            Some(Val::Str(_)) => wrongtype(),
            Some(Val::Hash(h)) => {
                Value::Array(h.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect())
            }
            None => Value::Array(Vec::new()),
        }
    }

    /// Every key's type and contents on the server, against the model.
    fn check_all(&self, c: &mut Connection, when: &str) {
        for k in 0..KEYS {
            let key = format!("k{k}").into_bytes();
            let (ty, want) = match self.model.keys.get(&key) {
                None => ("none", Value::Array(Vec::new())),
                Some(Val::Str(_)) => ("string", wrongtype()),
                Some(Val::Hash(_)) => ("hash", self.hgetall(&key)),
            };
            let got_type = c.command(&[b"TYPE", &key]).unwrap();
            assert_eq!(got_type, Value::Simple(ty.into()), "{when}: TYPE k{k}");
            let got = c.command(&[b"HGETALL", &key]).unwrap_or_else(|e| match e {
                quiver_client::Error::Server(text) => Value::Error(text),
                other => panic!("{when}: HGETALL k{k}: {other}"),
            });
            assert_eq!(got, want, "{when}: HGETALL k{k}");
        }
    }
}

#[test]
fn hashes_follow_the_model_across_restarts() {
    let seed = seed_from_env("QUIVER_HASH_MODEL_SEED");
    println!("hash model seed {seed} (QUIVER_HASH_MODEL_SEED={seed} replays it)");
    let mut server = TestServer::start();
    let mut run = Run {
        rng: Rng::new(seed),
        model: Model::default(),
    };
    let mut c = Connection::connect(&server.addr.to_string()).unwrap();
    let mut sent = 0;
    while sent < COMMANDS {
        let burst = (1 + run.rng.below(BURST_MAX) as usize).min(COMMANDS - sent);
        let steps: Vec<(Vec<Vec<u8>>, Value)> = (0..burst).map(|_| run.step()).collect();
        let mut p = c.pipeline();
        for (args, _) in &steps {
            let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            p.command(&refs);
        }
        let replies = p.execute().unwrap();
        for (k, ((args, want), got)) in steps.iter().zip(replies).enumerate() {
            let got = got.unwrap_or_else(|e| match e {
                quiver_client::Error::Server(text) => Value::Error(text),
                other => panic!("command {} {:?}: {other}", sent + k + 1, show(args)),
            });
            let i = sent + k + 1;
            assert_eq!(&got, want, "seed {seed}, command {i}: {:?}", show(args));
        }
        let before = sent;
        sent += burst;
        if before / RESTART_EVERY != sent / RESTART_EVERY {
            server.restart();
            c = Connection::connect(&server.addr.to_string()).unwrap();
            run.check_all(&mut c, &format!("seed {seed}, after the restart at {sent}"));
        }
    }
}

fn show(args: &[Vec<u8>]) -> Vec<String> {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}
