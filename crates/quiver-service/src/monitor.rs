//! MONITOR: every command the server runs, as Redis 7 streams it to the connections that
//! asked (`+<time> [<db> <addr>] "cmd" "arg" ...`, arguments quoted as Redis's `sdscatrepr`
//! quotes them, secrets redacted as the slow log redacts them; admin commands left out, as
//! Redis leaves them). Each monitor has a bounded queue ([`MONITOR_QUEUE_LINES`]): one that
//! does not read its lines fast enough is cut off, as Redis cuts off a client past its output
//! limit, and never slows the commands it watches.
//!
//! The runs feed it after each step ([`Monitors::feed`]); while nobody monitors that costs one
//! atomic load.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::clients::ClientInfo;
use crate::names::Renames;
use crate::table::{CommandSpec, Flags};

/// Lines a monitor may have waiting before it is cut off.
pub const MONITOR_QUEUE_LINES: usize = 10_000;
/// Monitors at once.
pub const MONITORS_MAX: usize = 64;

#[derive(Default)]
pub struct Monitors {
    senders: Mutex<Vec<mpsc::Sender<Bytes>>>,
    count: AtomicUsize,
}

impl Monitors {
    /// A new monitor's queue, or `None` past [`MONITORS_MAX`].
    pub fn subscribe(&self) -> Option<mpsc::Receiver<Bytes>> {
        let mut senders = self.senders.lock();
        if senders.len() >= MONITORS_MAX {
            return None;
        }
        let (tx, rx) = mpsc::channel(MONITOR_QUEUE_LINES);
        senders.push(tx);
        self.count.store(senders.len(), Relaxed);
        Some(rx)
    }

    /// A command `args` that `client` ran in database `db` (its name looked up through
    /// `renames` only while someone monitors).
    pub fn feed(&self, renames: &Renames, args: &[Bytes], db: u32, client: &ClientInfo) {
        if self.count.load(Relaxed) == 0 {
            return;
        }
        let admin = |spec: &CommandSpec| spec.flags.contains(Flags::ADMIN);
        if args
            .first()
            .and_then(|n| renames.lookup(n))
            .is_none_or(admin)
        {
            return;
        }
        let line = Bytes::from(line(args, db, &client.addr));
        let mut senders = self.senders.lock();
        // A monitor gone, or too slow to keep up, is dropped (its loop then ends).
        senders.retain(|tx| tx.try_send(line.clone()).is_ok());
        self.count.store(senders.len(), Relaxed);
    }
}

/// One MONITOR line: `+1339518083.107412 [0 127.0.0.1:60866] "keys" "*"\r\n`.
fn line(args: &[Bytes], db: u32, addr: &str) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut out = format!(
        "+{}.{:06} [{db} {addr}]",
        now.as_secs(),
        now.subsec_micros()
    )
    .into_bytes();
    for arg in crate::slowlog::redacted(args) {
        out.push(b' ');
        quote(&mut out, &arg);
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `arg` in double quotes as Redis's `sdscatrepr` writes it.
fn quote(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b),
            b => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A monitor that does not read is cut off once its queue is full; the others keep
    /// their lines.
    #[test]
    fn a_slow_monitor_is_cut_off() {
        let monitors = Monitors::default();
        let mut slow = monitors.subscribe().unwrap();
        let renames = Renames::default();
        let clients = crate::clients::Clients::default();
        let info = clients.register("127.0.0.1:1".into(), "127.0.0.1:2".into());
        let args = [Bytes::from_static(b"SET"), Bytes::from_static(b"k")];
        for _ in 0..MONITOR_QUEUE_LINES {
            monitors.feed(&renames, &args, 0, &info);
        }
        let mut fast = monitors.subscribe().unwrap();
        monitors.feed(&renames, &args, 0, &info);
        assert_eq!(monitors.count.load(Relaxed), 1, "the slow one is gone");
        assert!(fast.try_recv().is_ok());
        // Its queued lines are still there to write; then it ends.
        let mut queued = 0;
        while slow.try_recv().is_ok() {
            queued += 1;
        }
        assert_eq!(queued, MONITOR_QUEUE_LINES);
        // Admin commands are not shown.
        monitors.feed(&renames, &[Bytes::from_static(b"CONFIG")], 0, &info);
        assert!(fast.try_recv().is_err());
    }

    #[test]
    fn lines_quote_as_redis_does() {
        let args: Vec<Bytes> = ["set", "k", "a \"b\"\n\x01"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        let l = String::from_utf8(line(&args, 3, "127.0.0.1:5000")).unwrap();
        assert!(l.starts_with('+'), "{l}");
        assert!(
            l.ends_with(" [3 127.0.0.1:5000] \"set\" \"k\" \"a \\\"b\\\"\\n\\x01\"\r\n"),
            "{l}"
        );
    }
}
