//! The check's own tests: it finds what it is there to find.

use super::super::hash::mask;
use super::*;

/// The time of the readings below.
const NOW: u64 = 1_000_000;
const T: usize = 0;
const R0: usize = 0;
const R1: usize = 1;
const N0: usize = REGISTERS;
const H0: usize = FIRST_HASH;

/// What a correct server shows for `states`, read at `NOW`.
fn shown(states: &[State]) -> Reading {
    let pttl = |expiry| match expiry {
        Expiry::Never => PTTL_NO_EXPIRY,
        Expiry::Long => LONG_TTL_MS - 1,
        Expiry::Short { ttl_ms, .. } => ttl_ms as i64,
    };
    let obs = states
        .iter()
        .map(|s| match *s {
            State::Absent | State::Count(0) => Obs {
                shown: Shown::Absent,
                pttl: PTTL_ABSENT,
            },
            State::Count(n) => Obs {
                shown: Shown::Value(n.to_string().into()),
                pttl: PTTL_NO_EXPIRY,
            },
            State::Value { id, expiry } => Obs {
                shown: Shown::Value(render(T, id).into()),
                pttl: pttl(expiry),
            },
            State::Hash { fields, expiry } => Obs {
                shown: Shown::Hash(fields.shown(T)),
                pttl: pttl(expiry),
            },
        })
        .collect();
    Reading {
        obs,
        start_ms: NOW,
        end_ms: NOW,
    }
}

fn op(acked: bool, units: &[&[Step]]) -> Op {
    let mut op = Op {
        what: format!("{units:?}"),
        units: units.iter().map(|s| Unit::new(s.to_vec())).collect(),
        expect: Vec::new(),
        acked,
    };
    op.set_times(Some(NOW - 10), NOW - 5);
    op
}

fn set(key: usize, id: u64) -> Step {
    Step::Set {
        key,
        id,
        ttl: Ttl::None,
    }
}

fn value(id: u64) -> State {
    State::Value {
        id,
        expiry: Expiry::Never,
    }
}

fn hset(key: usize, id: u64, fields: &[usize]) -> Step {
    Step::HSet {
        key,
        id,
        fields: mask(fields),
    }
}

fn hdel(key: usize, fields: &[usize]) -> Step {
    Step::HDel {
        key,
        fields: mask(fields),
    }
}

/// A hash holding `pairs` in this order, with `expiry`.
fn hash(pairs: &[(usize, FieldValue)], expiry: Expiry) -> State {
    let mut fields = Fields::EMPTY;
    for &(field, value) in pairs {
        fields.set(field, value);
    }
    State::Hash { fields, expiry }
}

/// The check's verdict on a server showing `states` (`None`: explained).
fn verdict(ops: &[Op], states: &[(usize, State)]) -> Option<Verdict> {
    let mut all = initial();
    for &(key, state) in states {
        all[key] = state;
    }
    resolve(T, &initial(), ops, &shown(&all))
        .err()
        .map(|f| f.verdict)
}

#[test]
fn the_check_finds_a_lost_acknowledged_write() {
    let ops = [op(true, &[&[set(R0, 1)]]), op(true, &[&[set(R0, 2)]])];
    assert_eq!(verdict(&ops, &[(R0, value(2))]), None);
    assert_eq!(verdict(&ops, &[(R0, value(1))]), Some(Verdict::Lost));
    assert_eq!(verdict(&ops, &[]), Some(Verdict::Lost));
    assert_eq!(verdict(&ops, &[(R0, value(3))]), Some(Verdict::Wrong));
    assert_eq!(
        verdict(&ops, &[(R0, value(2)), (R1, value(9))]),
        Some(Verdict::Wrong)
    );
}

#[test]
fn the_check_finds_a_torn_mset_and_a_key_applied_out_of_order() {
    let mset = [set(R0, 2), set(R1, 3)];
    let ops = [op(true, &[&[set(R0, 1)]]), op(false, &[&mset])];
    assert_eq!(verdict(&ops, &[(R0, value(1))]), None);
    assert_eq!(verdict(&ops, &[(R0, value(2)), (R1, value(3))]), None);
    assert_eq!(verdict(&ops, &[(R0, value(2))]), Some(Verdict::Wrong));
    assert_eq!(
        verdict(&ops, &[(R0, value(1)), (R1, value(3))]),
        Some(Verdict::Wrong)
    );
    // A later write on R1 took effect, the earlier MSET on it did not.
    let ops = [op(false, &[&mset]), op(false, &[&[set(R1, 4)]])];
    assert_eq!(verdict(&ops, &[(R0, value(2)), (R1, value(4))]), None);
    assert_eq!(verdict(&ops, &[(R1, value(4))]), Some(Verdict::Wrong));
    // A multi-key DEL may take effect on some of its keys only.
    let del = [Step::Del { key: R0 }, Step::Del { key: R1 }];
    let ops = [op(true, &[&mset]), op(false, &[&del[..1], &del[1..]])];
    assert_eq!(verdict(&ops, &[(R1, value(3))]), None);
}

#[test]
fn the_check_bounds_counters_and_short_ttls() {
    // Two INCRs acknowledged, four in flight.
    let incr: &[Step] = &[Step::Incr { key: N0 }];
    let ops: Vec<Op> = (0..6).map(|i| op(i < 2, &[incr])).collect();
    for n in 2..=6 {
        assert_eq!(verdict(&ops, &[(N0, State::Count(n))]), None, "{n}");
    }
    assert_eq!(verdict(&ops, &[(N0, State::Count(1))]), Some(Verdict::Lost));
    assert_eq!(
        verdict(&ops, &[(N0, State::Count(7))]),
        Some(Verdict::Wrong)
    );
    // Acknowledged SET PX 100 over v1, read long after its deadline: absent, never v1.
    let short = Step::Set {
        key: R0,
        id: 2,
        ttl: Ttl::Short(100),
    };
    let mut expiring = op(true, &[&[short]]);
    expiring.set_times(Some(NOW - 1_000), NOW - 999);
    let ops = [op(true, &[&[set(R0, 1)]]), expiring];
    assert_eq!(verdict(&ops, &[]), None);
    assert_eq!(verdict(&ops, &[(R0, value(1))]), Some(Verdict::Lost));
    let unexpired = State::Value {
        id: 2,
        expiry: Expiry::Short {
            ttl_ms: 100,
            sent_ms: 0,
            done_ms: 0,
        },
    };
    assert_eq!(verdict(&ops, &[(R0, unexpired)]), Some(Verdict::Wrong));
}

#[test]
fn the_check_finds_a_lost_or_wrong_hash_write() {
    use FieldValue::{Count, Id};
    let never = Expiry::Never;
    // HSET f0 f1 v1, HINCRBY f4 3, HDEL f0, HSET f1 v2 (in its place): {f1: v2, f4: 3}.
    let incr = Step::HIncrBy {
        key: H0,
        field: 4,
        by: 3,
    };
    let ops = [
        op(true, &[&[hset(H0, 1, &[0, 1])]]),
        op(true, &[&[incr]]),
        op(true, &[&[hdel(H0, &[0])]]),
        op(true, &[&[hset(H0, 2, &[1])]]),
    ];
    let now = hash(&[(1, Id(2)), (4, Count(3))], never);
    assert_eq!(verdict(&ops, &[(H0, now)]), None);
    // The last HSET lost, or the HDEL: a state older than the last acknowledged write.
    let before_hset = hash(&[(1, Id(1)), (4, Count(3))], never);
    assert_eq!(verdict(&ops, &[(H0, before_hset)]), Some(Verdict::Lost));
    let before_hdel = hash(&[(0, Id(1)), (1, Id(1)), (4, Count(3))], never);
    assert_eq!(verdict(&ops, &[(H0, before_hdel)]), Some(Verdict::Lost));
    assert_eq!(verdict(&ops, &[]), Some(Verdict::Lost));
    // The right fields in another order, or a sum off: wrong.
    let reordered = hash(&[(4, Count(3)), (1, Id(2))], never);
    assert_eq!(verdict(&ops, &[(H0, reordered)]), Some(Verdict::Wrong));
    let off = hash(&[(1, Id(2)), (4, Count(4))], never);
    assert_eq!(verdict(&ops, &[(H0, off)]), Some(Verdict::Wrong));
    // An HDEL in flight that empties the hash: gone, or not applied.
    let ops = [
        op(true, &[&[hset(H0, 1, &[2])]]),
        op(false, &[&[hdel(H0, &[2, 5])]]),
    ];
    assert_eq!(verdict(&ops, &[]), None);
    assert_eq!(verdict(&ops, &[(H0, hash(&[(2, Id(1))], never))]), None);
    // An HSET keeps the key's TTL: one found without it is wrong.
    let expire = Step::Expire {
        key: H0,
        ttl: Ttl::Long,
    };
    let ops = [
        op(true, &[&[hset(H0, 1, &[0])]]),
        op(true, &[&[expire]]),
        op(true, &[&[hset(H0, 2, &[0])]]),
    ];
    let kept = hash(&[(0, Id(2))], Expiry::Long);
    assert_eq!(verdict(&ops, &[(H0, kept)]), None);
    let dropped = hash(&[(0, Id(2))], never);
    assert_eq!(verdict(&ops, &[(H0, dropped)]), Some(Verdict::Wrong));
}

#[test]
fn the_check_finds_a_torn_multi_with_a_hash_change() {
    use FieldValue::{Count, Id};
    let never = Expiry::Never;
    // MULTI; SET r0 v1; HSET h0 f0 v2; EXEC, then HINCRBY h0 f4 1: both in flight.
    let multi = [set(R0, 1), hset(H0, 2, &[0])];
    let incr = Step::HIncrBy {
        key: H0,
        field: 4,
        by: 1,
    };
    let ops = [op(false, &[&multi]), op(false, &[&[incr]])];
    let hset_only = hash(&[(0, Id(2))], never);
    let both = hash(&[(0, Id(2)), (4, Count(1))], never);
    assert_eq!(verdict(&ops, &[]), None);
    assert_eq!(verdict(&ops, &[(R0, value(1)), (H0, hset_only)]), None);
    assert_eq!(verdict(&ops, &[(R0, value(1)), (H0, both)]), None);
    // Torn: the SET without the HSET, the HSET without the SET (each key alone explained).
    assert_eq!(verdict(&ops, &[(R0, value(1))]), Some(Verdict::Wrong));
    assert_eq!(verdict(&ops, &[(H0, hset_only)]), Some(Verdict::Wrong));
    assert_eq!(verdict(&ops, &[(H0, both)]), Some(Verdict::Wrong));
    // The HINCRBY without the transaction before it on h0.
    let incr_only = hash(&[(4, Count(1))], never);
    assert_eq!(verdict(&ops, &[(H0, incr_only)]), Some(Verdict::Wrong));
}
