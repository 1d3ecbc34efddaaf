//! What the kill loops share. When the process serving a writer is killed, each of the
//! writer's writes was either acknowledged (its reply came) or in flight (sent, no reply yet).
//! After the restart every acknowledged write must show, and each one in flight may or may not
//! have taken effect: a key holds the state its last acknowledged write gave it, or one a
//! write in flight after it gave. Anything else is a finding: **lost** when the key shows
//! nothing or an older state than its last acknowledged write, **wrong** otherwise (a value
//! never written, a write in flight taken in part, ...).

use std::fmt;

/// Lost or wrong (see the module's doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Lost,
    Wrong,
}

impl Verdict {
    /// The verdict on a key that shows none of the states it may hold: lost when it shows
    /// nothing (`absent`) or a state older than its last acknowledged write (`older`), wrong
    /// otherwise.
    pub fn of(absent: bool, older: bool) -> Verdict {
        if absent || older {
            Verdict::Lost
        } else {
            Verdict::Wrong
        }
    }
}

/// What a check found wrong with a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub verdict: Verdict,
    pub key: String,
    /// Where it was read (a node), or the reply that disagreed with the model.
    pub member: String,
    pub expected: String,
    pub found: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?}: key {} on {}: expected {}, found {}",
            self.verdict, self.key, self.member, self.expected, self.found
        )
    }
}

/// One writer's writes when the process died: those acknowledged, then those in flight.
#[derive(Clone, Debug)]
pub struct Writes<W> {
    pub acked: Vec<W>,
    pub in_flight: Vec<W>,
}

impl<W> Default for Writes<W> {
    fn default() -> Self {
        Writes {
            acked: Vec::new(),
            in_flight: Vec::new(),
        }
    }
}

/// The rule for a key whose writes carry increasing versions (each value names its write's):
/// after a kill it holds its last acknowledged version `acked`, or a later one (a write in
/// flight). `found`: the version it shows, `None` when absent.
pub fn check_version(found: Option<u64>, acked: u64) -> Result<(), Verdict> {
    match found {
        Some(v) if v >= acked => Ok(()),
        Some(_) => Err(Verdict::of(false, true)),
        None => Err(Verdict::of(true, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledged_version_or_a_later_one() {
        assert_eq!(check_version(Some(5), 5), Ok(()));
        assert_eq!(check_version(Some(6), 5), Ok(()));
        assert_eq!(check_version(Some(4), 5), Err(Verdict::Lost));
        assert_eq!(check_version(None, 0), Err(Verdict::Lost));
    }

    #[test]
    fn lost_when_absent_or_older() {
        assert_eq!(Verdict::of(true, false), Verdict::Lost);
        assert_eq!(Verdict::of(false, true), Verdict::Lost);
        assert_eq!(Verdict::of(false, false), Verdict::Wrong);
    }
}
