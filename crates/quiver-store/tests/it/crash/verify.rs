//! The check after a kill: the store reopened, every key and batch group the children touched
//! compared with the model, the layout, the counts, and every record and index entry.

use std::path::Path;

use quiver_store::clock::system_now_ms;
use quiver_store::slot::SlotRange;
use quiver_store::{Entry, Store, Ttl};
use quiver_testkit::rng::Rng;

use super::model::{Model, Observed, ReadTime, Tally};
use super::{crash_options, decode_entry, show, single_key, GROUPS, SINGLE_KEYS};

/// Single keys read again one by one (get_entry and ttl), to compare with the vector read.
const SAMPLE_READS: usize = 30;

/// Why recovery may ignore a checkpoint after a process crash (`RecoveryReport`'s
/// `checkpoints_ignored`): it is stale, never damaged.
const CHECKPOINT_STALE_REASONS: [&str; 2] = ["segments changed", "taken for another slot range"];

/// Reopens the store after a kill and checks it against the model (then makes what it saw the
/// model's known state). Mismatches are counted in `tally`; the caller fails on them.
pub fn verify(dir: &Path, model: &mut Model, tally: &mut Tally, rng: &mut Rng, ctx: &str) {
    let store = Store::open(dir, crash_options(false))
        .unwrap_or_else(|e| panic!("{ctx}: reopening after kill -9 failed: {e}"));
    let report = store.recovery_report().clone();
    if !report.damage.is_empty() {
        tally.failure(false, format!("{ctx}: recovery found damage: {report:#?}"));
    }
    for reason in &report.checkpoints_ignored {
        // A crash may leave a checkpoint older than its segments, or a split's source's taken
        // before the split's commit (the new layout) and not yet replaced; nothing worse.
        if !CHECKPOINT_STALE_REASONS.iter().any(|r| reason.contains(r)) {
            tally.failure(
                false,
                format!("{ctx}: a checkpoint was unusable after a process crash: {reason}"),
            );
        }
    }
    tally.verified += 1;
    tally.torn_tails += report.torn_tails.len() as u64;
    tally.batches_repaired += report.batches_repaired;
    tally.batches_aborted += report.batches_aborted;
    tally.checkpoints_ignored += report.checkpoints_ignored.len() as u64;

    model.layout.observe(
        &store.slot_ranges(),
        true,
        &format!("{ctx}: the store"),
        tally,
    );

    // Deadlines of the keys found present: what `len` must count depends on the time.
    let mut present: Vec<Option<u64>> = Vec::new();
    // Single keys: one vector read, and a sample read one by one.
    let keys: Vec<Vec<u8>> = (0..SINGLE_KEYS).map(single_key).collect();
    let at = now_bounds(|| store.multi_get_entries(&keys));
    let got =
        at.1.unwrap_or_else(|e| panic!("{ctx}: multi_get_entries failed: {e}"));
    for (k, g) in keys.iter().zip(&got) {
        let observed = observe_entry(k, g.as_ref(), tally, ctx);
        if let Some((_, e)) = observed {
            present.push(e);
        }
        let what = format!("{ctx}: key {}", show(k));
        model.single(k).observe(observed, at.0, true, &what, tally);
    }
    for _ in 0..SAMPLE_READS {
        let i = rng.below(SINGLE_KEYS) as usize;
        let (k, vector) = (&keys[i], &got[i]);
        let one = store
            .get_entry(k)
            .unwrap_or_else(|e| panic!("{ctx}: get_entry failed: {e}"));
        let ttl = store
            .ttl(k)
            .unwrap_or_else(|e| panic!("{ctx}: ttl failed: {e}"));
        // A deadline passing between the reads may part them.
        let now = system_now_ms();
        if vector
            .as_ref()
            .and_then(|e| e.expire_at)
            .is_some_and(|t| t <= now)
        {
            continue;
        }
        let expected_ttl = match vector {
            None => Ttl::Absent,
            Some(Entry {
                expire_at: Some(t), ..
            }) => Ttl::At(*t),
            Some(_) => Ttl::Never,
        };
        if one != *vector || ttl != expected_ttl {
            tally.failure(
                false,
                format!(
                    "{ctx}: key {}: get_entry {one:?} and ttl {ttl:?} disagree with \
                     multi_get_entries {vector:?}",
                    show(k)
                ),
            );
        }
    }
    // Batch groups: every key of a group carries the same version and deadline, or none
    // exists. (Their deadlines are far: none passes during a read.)
    for g in 0..GROUPS as usize {
        let gkeys = model.group_keys[g].clone();
        let at = now_bounds(|| store.multi_get_entries(&gkeys));
        let got =
            at.1.unwrap_or_else(|e| panic!("{ctx}: multi_get_entries of group {g} failed: {e}"));
        let states: Vec<Observed> = gkeys
            .iter()
            .zip(&got)
            .map(|(k, e)| observe_entry(k, e.as_ref(), tally, ctx))
            .collect();
        present.extend(states.iter().flatten().map(|s| s.1));
        if states.iter().any(|s| *s != states[0]) {
            tally.failure(
                false,
                format!("{ctx}: batch group {g} is torn: {states:?}\n{report:#?}"),
            );
            continue;
        }
        let what = format!("{ctx}: batch group {g}");
        model.groups[g].observe(states[0], at.0, true, &what, tally);
    }
    check_counts(&store, &present, tally, ctx);
    match store.check() {
        Ok(check) if check.is_ok() => {}
        Ok(check) => tally.failure(
            false,
            format!("{ctx}: check found problems: {:?}", check.problems),
        ),
        Err(e) => tally.failure(false, format!("{ctx}: check failed: {e}")),
    }

    // Leave the store closed cleanly or as a crash would (the next child then replays).
    if rng.below(2) == 0 {
        store
            .close()
            .unwrap_or_else(|e| panic!("{ctx}: close failed: {e}"));
    } else {
        store.simulate_crash();
    }
}

/// Runs a read and returns the bounds of its instant with its result.
fn now_bounds<T>(read: impl FnOnce() -> T) -> (ReadTime, T) {
    let before = system_now_ms();
    let result = read();
    let after = system_now_ms();
    (ReadTime { before, after }, result)
}

/// The (version, deadline) a read found; a corrupt value is counted wrong and read as its
/// claimed version.
fn observe_entry(key: &[u8], entry: Option<&Entry>, tally: &mut Tally, ctx: &str) -> Observed {
    let entry = entry?;
    let version = decode_entry(key, entry).unwrap_or_else(|(version, msg)| {
        tally.failure(false, format!("{ctx}: {msg}"));
        version
    });
    Some((version, entry.expire_at))
}

/// `len` and the count of keys with a deadline agree with the keys found (`present`: their
/// deadlines), allowing for deadlines that pass while they are counted.
fn check_counts(store: &Store, present: &[Option<u64>], tally: &mut Tally, ctx: &str) {
    let (at, stats) = now_bounds(|| store.db0().stats());
    let live_after = |t: &&Option<u64>| t.is_none_or(|t| t > at.after);
    let passing = |t: &&Option<u64>| t.is_some_and(|t| t > at.before && t <= at.after);
    let keys_min = present.iter().filter(live_after).count() as u64;
    let keys_passing = present.iter().filter(passing).count() as u64;
    let expiring_min = present
        .iter()
        .filter(|t| t.is_some())
        .filter(live_after)
        .count() as u64;
    let keys_ok = (keys_min..=keys_min + keys_passing).contains(&stats.keys);
    // The per-slot counts (CLUSTER COUNTKEYSINSLOT, a chain's DBSIZE) agree, over two halves
    // that cross the partitions' ranges as the layout changes.
    let halves = [SlotRange::new(0, 8191), SlotRange::new(8192, 16383)];
    let (slots_at, in_slots) = now_bounds(|| {
        halves
            .iter()
            .flatten()
            .map(|&r| store.count_keys_in_ranges(&[r]))
            .sum::<u64>()
    });
    let passing_slots = present
        .iter()
        .filter(|t| t.is_some_and(|t| t > slots_at.before && t <= slots_at.after))
        .count() as u64;
    let slots_min = present
        .iter()
        .filter(|t| t.is_none_or(|t| t > slots_at.after))
        .count() as u64;
    if !(slots_min..=slots_min + passing_slots).contains(&in_slots) {
        tally.failure(
            false,
            format!(
                "{ctx}: the per-slot counts sum to {in_slots} keys; the reads found {slots_min} \
                 live (and {passing_slots} whose deadline passed meanwhile)"
            ),
        );
    }
    let expiring_ok = (expiring_min..=expiring_min + keys_passing).contains(&stats.expiring_keys);
    if !keys_ok || !expiring_ok {
        tally.failure(
            false,
            format!(
                "{ctx}: the store counts {} keys, {} with a deadline; the reads found {keys_min} \
                 live and {expiring_min} with a deadline (and {keys_passing} whose deadline \
                 passed meanwhile)",
                stats.keys, stats.expiring_keys
            ),
        );
    }
}
