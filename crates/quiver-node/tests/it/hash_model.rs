//! Hashes against a model: random commands over a few keys — the hash commands, and SET, GET,
//! DEL, RENAME crossing between strings and hashes — sent in pipelined bursts (so runs of
//! hash reads are vectors, and runs of hash writes one transaction), each reply compared with
//! what a map of keys to strings or to field lists in insertion order (Redis's listpack
//! order) says, and every key's whole state compared after each restart of the server.
//! Fields and values are sometimes longer than Redis's listpack value (64 bytes), so hashes
//! become large (metadata and buckets) and, once deleted, small again: the model knows which
//! are large (OBJECT ENCODING `hashtable`, kept until the key goes, as in Redis) and compares
//! their fields as a set (a hashtable has no order), HSCAN's full iterations included.
//!
//! Seeded: `QUIVER_HASH_MODEL_SEED` replays a run (the seed is printed).

use std::collections::{BTreeMap, BTreeSet};

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
/// Field names a bulk HSET picks from: enough to make a large hash split its buckets.
const BULK_FIELDS: u64 = 300;
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
    /// The hashes that crossed Redis's listpack thresholds (large until the key goes).
    large: BTreeSet<Vec<u8>>,
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

    /// Drops an empty hash (Redis removes a hash with its last field); a hash past the
    /// listpack thresholds is large from now on.
    fn settle(&mut self, key: &[u8]) {
        match self.keys.get(key) {
            Some(Val::Hash(h)) if h.is_empty() => {
                self.remove(key);
            }
            Some(Val::Hash(h)) if !fits_listpack(h) => {
                self.large.insert(key.to_vec());
            }
            _ => {}
        }
    }

    fn remove(&mut self, key: &[u8]) -> Option<Val> {
        self.large.remove(key);
        self.keys.remove(key)
    }

    /// Whether HGETALL of `key` answers in no particular order.
    fn unordered(&self, key: &[u8]) -> bool {
        self.large.contains(key)
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

/// Redis's listpack thresholds: at most 512 fields, none longer than 64 bytes.
fn fits_listpack(h: &[(Vec<u8>, Vec<u8>)]) -> bool {
    h.len() <= 512 && h.iter().all(|(f, v)| f.len() <= 64 && v.len() <= 64)
}

/// A flat array of pairs sorted by field (the order of a large hash's HGETALL is its own).
fn sorted_pairs(v: Value) -> Value {
    let Value::Array(items) = v else {
        return v;
    };
    let mut pairs: Vec<Vec<Value>> = items.chunks(2).map(|c| c.to_vec()).collect();
    pairs.sort_by_key(|p| format!("{p:?}"));
    Value::Array(pairs.into_iter().flatten().collect())
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
        // One in 12 is among the many fields a bulk HSET writes.
        if f == 1 {
            return self.bulk_field();
        }
        format!("f{f}").into_bytes()
    }

    fn bulk_field(&mut self) -> Vec<u8> {
        format!("b{}", self.rng.below(BULK_FIELDS)).into_bytes()
    }

    fn value(&mut self) -> Vec<u8> {
        match self.rng.below(8) {
            0 => vec![b'v'; 70],
            1 => self.rng.below(100).to_string().into_bytes(),
            _ => format!("v{}", self.rng.below(1000)).into_bytes(),
        }
    }

    /// One random command, the reply the model expects (the model updated), and whether the
    /// reply is a large hash's HGETALL, compared sorted.
    fn step(&mut self) -> (Vec<Vec<u8>>, Value, bool) {
        let (args, want) = self.command();
        let sorted =
            matches!(&args[..], [cmd, key] if cmd == b"HGETALL" && self.model.unordered(key));
        (args, want, sorted)
    }

    fn command(&mut self) -> (Vec<Vec<u8>>, Value) {
        let key = self.key();
        match self.rng.below(15) {
            0..=2 | 14 => {
                // One HSET in 4 is a bulk one: tens of fields, sometimes long values.
                let bulk = self.rng.below(4) == 0;
                let n = match bulk {
                    true => 20 + self.rng.below(40) as usize,
                    false => 1 + self.rng.below(3) as usize,
                };
                let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
                    .map(|_| match bulk {
                        true => (self.bulk_field(), self.value()),
                        false => (self.field(), self.value()),
                    })
                    .collect();
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
                self.model.remove(&key);
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
                let gone = self.model.remove(&key).is_some();
                (vec![b"DEL".to_vec(), key], Value::Integer(i64::from(gone)))
            }
            _ => self.rename_or_copy(key),
        }
    }

    /// RENAME key to, or COPY key to REPLACE, and the reply the model expects.
    fn rename_or_copy(&mut self, key: Vec<u8>) -> (Vec<Vec<u8>>, Value) {
        let to = self.key();
        let copy = self.rng.below(2) == 0;
        let large = self.model.unordered(&key);
        let found = match copy {
            true => self.model.keys.get(&key).cloned(),
            false => self.model.remove(&key),
        };
        let want = match (found, copy) {
            (_, true) if key == to => {
                Value::Error("ERR source and destination objects are the same".into())
            }
            (None, false) => Value::Error("ERR no such key".into()),
            (None, true) => Value::Integer(0),
            (Some(v), _) => {
                self.model.remove(&to);
                self.model.keys.insert(to.clone(), v);
                if large {
                    self.model.large.insert(to.clone());
                }
                match copy {
                    true => Value::Integer(1),
                    false => Value::Simple("OK".into()),
                }
            }
        };
        match copy {
            true => (vec![b"COPY".to_vec(), key, to, b"REPLACE".to_vec()], want),
            false => (vec![b"RENAME".to_vec(), key, to], want),
        }
    }

    /// HGETALL's reply (RESP2: a flat array) for `key` as the model has it.
    fn hgetall(&self, key: &[u8]) -> Value {
        match self.model.keys.get(key) {
            Some(Val::Str(_)) => wrongtype(),
            Some(Val::Hash(h)) => {
                let all = Value::Array(h.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect());
                match self.model.unordered(key) {
                    true => sorted_pairs(all),
                    false => all,
                }
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
            let got = match self.model.unordered(&key) {
                true => sorted_pairs(got),
                false => got,
            };
            assert_eq!(got, want, "{when}: HGETALL k{k}");
            if ty == "hash" {
                self.check_hash(c, &key, &want, when);
            }
        }
    }

    /// A hash's OBJECT ENCODING, and a full HSCAN iteration against its fields.
    fn check_hash(&self, c: &mut Connection, key: &[u8], want: &Value, when: &str) {
        let encoding = match self.model.unordered(key) {
            true => "hashtable",
            false => "listpack",
        };
        let got = c.command(&[b"OBJECT", b"ENCODING", key]).unwrap();
        assert_eq!(
            got,
            bulk(encoding.as_bytes()),
            "{when}: OBJECT ENCODING {key:?}"
        );
        let mut cursor = b"0".to_vec();
        let mut seen = Vec::new();
        for _ in 0..10_000 {
            let page = c
                .command(&[b"HSCAN", key, &cursor, b"COUNT", b"2"])
                .unwrap();
            let Value::Array(mut parts) = page else {
                panic!("{when}: HSCAN answered {page:?}");
            };
            let (Some(Value::Array(items)), Some(Value::Bulk(next))) = (parts.pop(), parts.pop())
            else {
                panic!("{when}: HSCAN answered {parts:?}");
            };
            seen.extend(items);
            cursor = next.to_vec();
            if cursor == b"0" {
                break;
            }
        }
        assert_eq!(cursor, b"0", "{when}: HSCAN of {key:?} never ended");
        assert_eq!(
            sorted_pairs(Value::Array(seen)),
            sorted_pairs(want.clone()),
            "{when}: HSCAN"
        );
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
        let steps: Vec<(Vec<Vec<u8>>, Value, bool)> = (0..burst).map(|_| run.step()).collect();
        let mut p = c.pipeline();
        for (args, _, _) in &steps {
            let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            p.command(&refs);
        }
        let replies = p.execute().unwrap();
        for (k, ((args, want, sorted), got)) in steps.iter().zip(replies).enumerate() {
            let got = got.unwrap_or_else(|e| match e {
                quiver_client::Error::Server(text) => Value::Error(text),
                other => panic!("command {} {:?}: {other}", sent + k + 1, show(args)),
            });
            let i = sent + k + 1;
            let got = if *sorted { sorted_pairs(got) } else { got };
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
