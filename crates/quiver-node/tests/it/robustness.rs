//! Robustness: random and mutated frames never panic, and every outcome obeys
//! the consumption rules (checked inside `parse_all`). Under default limits,
//! parsing whole, byte by byte and in chunks must agree.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use quiver_service::Limits;

use crate::{parse_all, parse_every_way};

const ALPHABET: &[u8] = b"*$\r\n0123456789-+ \t\"'\\xaZ\0";

fn interesting_byte() -> impl Strategy<Value = u8> {
    prop_oneof![any::<u8>(), prop::sample::select(ALPHABET)]
}

/// A valid multibulk or inline request.
fn valid_frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..5)
            .prop_map(|args| crate::encode_multibulk(&args)),
        prop::collection::vec("[a-zA-Z0-9\"' \\\\]{0,8}", 0..4).prop_map(|words| {
            let mut line = words.join(" ").into_bytes();
            line.extend_from_slice(b"\r\n");
            line
        }),
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Mutation::Flip(i, x)),
        (any::<usize>(), interesting_byte()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
    ]
}

fn mutated_frames() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(valid_frame(), 1..4),
        prop::collection::vec(mutation(), 0..4),
    )
        .prop_map(|(frames, mutations)| {
            let mut bytes = frames.concat();
            for m in mutations {
                let n = bytes.len();
                match m {
                    Mutation::Flip(i, x) if n > 0 => bytes[i % n] ^= x | 1,
                    Mutation::Insert(i, b) => bytes.insert(i % (n + 1), b),
                    Mutation::Delete(i) if n > 0 => {
                        bytes.remove(i % n);
                    }
                    _ => {}
                }
            }
            bytes
        })
}

fn random_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(interesting_byte(), 0..64)
}

fn any_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![random_bytes(), mutated_frames()]
}

/// Tiny limits exercise the "too big" and length checks; chunked parsing may
/// legitimately differ there (as in Redis), so only the invariants apply.
fn small_limits() -> Limits {
    Limits {
        proto_max_bulk_len: 8,
        multibulk_len_max: 3,
        inline_max_bytes: 10,
    }
}

fn check_input(input: &[u8]) {
    parse_every_way(input, &Limits::default());
    parse_all(input, &small_limits());
    crate::parse_chunked(input, &small_limits(), 1, true);
}

fn run(cases: u32) {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    runner
        .run(&any_input(), |input| {
            check_input(&input);
            Ok(())
        })
        .unwrap();
}

#[test]
fn random_and_mutated_frames() {
    run(20_000);
}

/// The long run: 1,000,000 random and mutated frames. Run it with
/// `cargo test --release -p quiver-node -- --ignored million`.
#[test]
#[ignore]
fn million_random_frames() {
    run(1_000_000);
}

proptest! {
    #![proptest_config(Config { cases: 2_000, failure_persistence: None, ..Config::default() })]

    /// Valid multibulk frames round-trip exactly, however they are split.
    #[test]
    fn valid_frames_round_trip(
        requests in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 1..5),
            0..6,
        )
    ) {
        let input: Vec<u8> = requests.iter().flat_map(|r| crate::encode_multibulk(r)).collect();
        let out = parse_every_way(&input, &Limits::default());
        prop_assert_eq!(out.error, None);
        prop_assert_eq!(out.left, 0);
        prop_assert_eq!(out.requests, requests);
    }
}
