//! The slow log (SLOWLOG, `cmd::slowlog`): the last `slowlog-max-len` commands that took at
//! least `slowlog-log-slower-than` microseconds, newest first, as Redis 7 keeps it — each
//! with its id, the Unix time it ended, its duration, its arguments (at most
//! [`ENTRY_ARGS_MAX`], each cut to [`ENTRY_ARG_BYTES_MAX`] bytes, secrets redacted) and its
//! client's address and name.
//!
//! A command's duration is its share of the engine call it ran in: a vector of 32 GETs that
//! took 320 µs logs each GET at 10 µs, as INFO commandstats counts them.

use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::clients::ClientInfo;
use crate::settings::Live;

/// Arguments an entry keeps: the last one then says how many more there were.
pub const ENTRY_ARGS_MAX: usize = 32;
/// Bytes an argument keeps; the rest is counted ("... (N more bytes)").
pub const ENTRY_ARG_BYTES_MAX: usize = 128;
/// What stands for a secret argument (a password).
const REDACTED: &str = "(redacted)";

#[derive(Clone, Debug)]
pub struct Entry {
    pub id: u64,
    /// Unix time, seconds.
    pub time: u64,
    pub duration_us: u64,
    pub args: Vec<Bytes>,
    /// `ip:port` of the client.
    pub addr: String,
    pub name: Bytes,
}

#[derive(Default)]
pub struct SlowLog {
    entries: Mutex<VecDeque<Entry>>,
    /// Entries held, read without the lock on every command.
    held: AtomicUsize,
    next_id: AtomicU64,
}

impl SlowLog {
    /// Logs the command `args` of `client` that took `duration_us` if `live`'s threshold
    /// says so, and trims the log to `slowlog-max-len` (as Redis does on every command).
    pub fn command(&self, live: &Live, args: &[Bytes], duration_us: u64, client: &ClientInfo) {
        let threshold = live.slowlog_log_slower_than();
        let max_len = live.slowlog_max_len();
        let slow = threshold >= 0 && duration_us >= threshold as u64;
        if !slow && self.held.load(Relaxed) <= max_len {
            return;
        }
        let mut entries = self.entries.lock();
        if slow {
            entries.push_front(Entry {
                id: self.next_id.fetch_add(1, Relaxed),
                time: crate::clock::unix_seconds(),
                duration_us,
                args: kept_args(args),
                addr: client.addr.clone(),
                name: client.name.lock().clone().unwrap_or_default(),
            });
        }
        entries.truncate(max_len);
        self.held.store(entries.len(), Relaxed);
    }

    /// The newest `count` entries (all of them for `None`).
    pub fn newest(&self, count: Option<usize>) -> Vec<Entry> {
        let entries = self.entries.lock();
        let n = count.map_or(entries.len(), |c| c.min(entries.len()));
        entries.iter().take(n).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.held.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        let mut entries = self.entries.lock();
        entries.clear();
        self.held.store(0, Relaxed);
    }
}

/// The arguments an entry keeps: secrets redacted, at most [`ENTRY_ARGS_MAX`] (the last
/// counting the rest), each at most [`ENTRY_ARG_BYTES_MAX`] bytes (counting the rest).
fn kept_args(args: &[Bytes]) -> Vec<Bytes> {
    let args = redacted(args);
    let kept = args.len().min(ENTRY_ARGS_MAX);
    (0..kept)
        .map(|i| {
            if kept < args.len() && i == kept - 1 {
                return Bytes::from(format!("... ({} more arguments)", args.len() - kept + 1));
            }
            let arg = &args[i];
            if arg.len() <= ENTRY_ARG_BYTES_MAX {
                return arg.clone();
            }
            let mut cut = arg[..ENTRY_ARG_BYTES_MAX].to_vec();
            cut.extend_from_slice(
                format!("... ({} more bytes)", arg.len() - ENTRY_ARG_BYTES_MAX).as_bytes(),
            );
            Bytes::from(cut)
        })
        .collect()
}

/// `args` with their secrets redacted, nothing cut (what MONITOR shows).
pub fn redacted(args: &[Bytes]) -> Vec<Bytes> {
    let secret = secret_from(args);
    args.iter()
        .enumerate()
        .map(|(i, a)| match secret(i) {
            true => Bytes::from_static(REDACTED.as_bytes()),
            false => a.clone(),
        })
        .collect()
}

/// Which arguments of a command are secrets, as Redis 7 redacts them: AUTH's, HELLO's AUTH
/// user and password, ACL SETUSER's rules (and user), CONFIG SET's value of `requirepass`.
fn secret_from(args: &[Bytes]) -> impl Fn(usize) -> bool + '_ {
    let is = |i: usize, word: &str| {
        args.get(i)
            .is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
    };
    let hello_auth = is(0, "hello")
        .then(|| (2..args.len()).find(|&i| is(i, "auth")))
        .flatten();
    let first_secret = if is(0, "auth") {
        Some(1)
    } else if is(0, "acl") && is(1, "setuser") {
        Some(2)
    } else {
        None
    };
    move |i| {
        first_secret.is_some_and(|f| i >= f)
            || hello_auth.is_some_and(|a| i == a + 1 || i == a + 2)
            || (is(0, "config")
                && is(1, "set")
                && i >= 3
                && (i - 3) % 2 == 0
                && is(i - 1, "requirepass"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    fn kept(words: &[&str]) -> Vec<String> {
        kept_args(&args(words))
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    #[test]
    fn secrets_are_redacted_as_redis_does() {
        assert_eq!(kept(&["AUTH", "u", "p"]), ["AUTH", REDACTED, REDACTED]);
        assert_eq!(
            kept(&["hello", "3", "AUTH", "u", "p", "SETNAME", "n"]),
            ["hello", "3", "AUTH", REDACTED, REDACTED, "SETNAME", "n"]
        );
        assert_eq!(
            kept(&["acl", "setuser", "bob", "on", ">pw"]),
            ["acl", "setuser", REDACTED, REDACTED, REDACTED]
        );
        assert_eq!(
            kept(&["config", "set", "maxclients", "5", "requirepass", "pw"]),
            ["config", "set", "maxclients", "5", "requirepass", REDACTED]
        );
        assert_eq!(kept(&["set", "auth", "v"]), ["set", "auth", "v"]);
    }

    #[test]
    fn long_commands_are_cut_as_redis_cuts_them() {
        let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let k = kept(&many);
        assert_eq!(k.len(), ENTRY_ARGS_MAX);
        assert_eq!(k[30], "30");
        assert_eq!(k[31], "... (9 more arguments)");
        let long = "x".repeat(200);
        let k = kept(&["set", "k", &long]);
        assert_eq!(k[2], format!("{}... (72 more bytes)", "x".repeat(128)));
    }
}
