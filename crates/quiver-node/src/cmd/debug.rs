//! DEBUG, for the test harnesses that call it, where `enable-debug-command` allows it (off by
//! default, as in Redis 7; `admission` refuses it otherwise): SLEEP (holds the connection's
//! serving thread, as Redis's holds the server: a stall to measure), OBJECT (what Redis shows
//! of a key, from Quiver's OBJECT answers: it has no object header or address) and HELP.

use bytes::Bytes;
use quiver_service::errors::{err, subcommand_syntax, wrong_arity};
use quiver_service::reply::Reply;

use crate::cmd::ctx::Ctx;
use crate::cmd::object::{entry_encoding, entry_refcount};
use crate::store_errors::store_error;

/// Longest DEBUG SLEEP: a test's stall, not a way to hang a thread for good.
pub const SLEEP_MAX_SECS: f64 = 60.0;

const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "OBJECT <key>",
    "    Show low level info about the key and associated value.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "HELP",
    "    Prints this help.",
];

pub fn run(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    match (&sub[..], args.len()) {
        (b"sleep", 3) => {
            let secs = leading_float(&args[2]).clamp(0.0, SLEEP_MAX_SECS);
            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
            Reply::OK
        }
        (b"object", 3) => object(ctx, &args[2]),
        (b"help", 2) => Reply::Array(HELP.iter().map(|l| Reply::simple(*l)).collect()),
        (b"help", _) => wrong_arity("debug|help"),
        _ => subcommand_syntax(&args[1], "DEBUG"),
    }
}

/// C's `strtod` on the text: its leading number, 0 for none (Redis's DEBUG SLEEP).
fn leading_float(text: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(text);
    let t = text.trim_start();
    (1..=t.len())
        .rev()
        .find_map(|n| t.get(..n).and_then(|p| p.parse::<f64>().ok()))
        .filter(|f| f.is_finite())
        .unwrap_or(0.0)
}

/// DEBUG OBJECT: Redis's line, with Quiver's encoding and reference count, the value's length
/// as its serialized length, and no address or access time (it keeps none).
fn object(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    let db = ctx.session.db;
    let found = ctx.state.store.db(db).and_then(|d| d.get_entry(key));
    let entry = match found {
        Ok(Some(e)) => e,
        Ok(None) => return err("ERR no such key"),
        Err(e) => return store_error(&e),
    };
    let encoding = match entry_encoding(&entry) {
        Ok(e) => e,
        Err(e) => return store_error(&e),
    };
    Reply::simple(format!(
        "Value at:0x0 refcount:{} encoding:{encoding} serializedlength:{} lru:0 \
         lru_seconds_idle:0",
        entry_refcount(&entry),
        entry.value.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_reads_its_number_as_strtod() {
        assert_eq!(leading_float(b"0.25"), 0.25);
        assert_eq!(leading_float(b"2"), 2.0);
        assert_eq!(leading_float(b"1.5abc"), 1.5);
        assert_eq!(leading_float(b"abc"), 0.0);
        assert_eq!(leading_float(b""), 0.0);
    }
}
