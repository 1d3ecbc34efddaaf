//! DEBUG, for the test harnesses that call it, where `enable-debug-command` allows it (off by
//! default, as in Redis 7; `admission` refuses it otherwise): SLEEP (holds the connection's
//! serving thread, as Redis's holds the server: a stall to measure), OBJECT (what Redis shows
//! of a key, from Quiver's OBJECT answers: it has no object header or address), ERROR (the
//! error reply client test suites ask for), PROTOCOL (a test value of each RESP type), LOG (a
//! line in the server's log), SET-ACTIVE-EXPIRE (the store's expiry sweep off or on) and HELP.

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
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key>",
    "    Show low level info about the key and associated value.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
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
        (b"error", 3) => {
            // Redis's: the text as the error line, newlines made blanks.
            let text: Vec<u8> = args[2]
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                .collect();
            Reply::Error(Bytes::from(text))
        }
        (b"log", 3) => {
            tracing::warn!(message = %String::from_utf8_lossy(&args[2]), "DEBUG LOG");
            Reply::OK
        }
        (b"protocol", 3) => protocol(ctx.session.resp3, &args[2]),
        (b"set-active-expire", 3) => {
            // C's atoi: a leading number, 0 for none.
            let on = leading_float(&args[2]) as i64 != 0;
            ctx.state.store.set_active_expire(on);
            Reply::OK
        }
        (b"help", 2) => Reply::Array(HELP.iter().map(|l| Reply::simple(*l)).collect()),
        (b"help", _) => wrong_arity("debug|help"),
        _ => subcommand_syntax(&args[1], "DEBUG"),
    }
}

/// DEBUG PROTOCOL type: Redis's test value of that RESP type.
fn protocol(resp3: bool, kind: &[u8]) -> Reply {
    let ints = || (0..3).map(Reply::Integer).collect::<Vec<_>>();
    let bulk = |s: &'static str| Reply::Bulk(Bytes::from_static(s.as_bytes()));
    match &kind.to_ascii_lowercase()[..] {
        b"string" => bulk("Hello World"),
        b"integer" => Reply::Integer(12345),
        // Redis's test value, which is no approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => Reply::Double(3.141),
        b"bignum" => Reply::BigNumber("1234567999999999999999999999999999999"),
        b"null" => Reply::Null,
        b"array" => Reply::Array(ints()),
        b"set" => Reply::Set(ints()),
        b"map" => Reply::Map(
            (0..3)
                .map(|j| (Reply::Integer(j), Reply::Boolean(j == 1)))
                .collect(),
        ),
        b"attrib" => Reply::Attributed(
            vec![(
                bulk("key-popularity"),
                Reply::Array(vec![bulk("key:123"), Reply::Integer(90)]),
            )],
            Box::new(bulk("Some real reply following the attribute")),
        ),
        b"push" if !resp3 => err("ERR RESP2 is not supported by this command"),
        b"push" => Reply::Many(vec![
            Reply::Push(vec![bulk("server-cpu-usage"), Reply::Integer(42)]),
            bulk("Some real reply following the push reply"),
        ]),
        b"true" => Reply::Boolean(true),
        b"false" => Reply::Boolean(false),
        b"verbatim" => Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from_static(b"This is a verbatim\nstring"),
        },
        _ => err(
            "ERR Wrong protocol type name. Please use one of the following: \
             string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
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
