//! Error replies, with Redis 7's texts where Redis defines them.

use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};

use crate::ratelog::LogLimiter;
use crate::reply::Reply;

/// At most one log line per this interval for each kind of repeated refusal below.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);
/// Replies refused at `client-output-buffer-total-limit`.
static TOTAL_OUTPUT_LOG: LogLimiter = LogLimiter::new(REFUSAL_LOG_INTERVAL);

pub const SYNTAX: &str = "ERR syntax error";
/// DEBUG while `enable-debug-command` does not allow it (Redis 7's words).
pub const DEBUG_NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command \
     option is set to \"local\", you can run it from a local connection, otherwise you need to \
     set this option in the configuration file, and then restart the server.";
/// A command flagged `no-multi` (SAVE, SHUTDOWN, ...) sent inside MULTI.
pub const NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOAUTH: &str = "NOAUTH Authentication required.";
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const DB_OUT_OF_RANGE: &str = "ERR DB index is out of range";
pub const MULTI_NESTED: &str = "ERR MULTI calls can not be nested";
pub const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
pub const WATCH_INSIDE_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
pub const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
pub const EXEC_ABORTED: &str = "EXECABORT Transaction discarded because of previous errors.";
/// MONITOR queued in MULTI, at EXEC (Redis: a client in EXEC may not block).
pub const MONITOR_IN_EXEC: &str = "ERR MONITOR isn't allowed for DENY BLOCKING client";

pub fn err(text: &'static str) -> Reply {
    Reply::Error(bytes::Bytes::from_static(text.as_bytes()))
}

/// `ERR wrong number of arguments for '<name>' command`.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Redis's unknown-command error: the name and the start of the arguments, each cut to
/// 128 bytes in all, control characters made blanks (an error line cannot hold `\r\n`).
pub fn unknown_command(args: &[bytes::Bytes]) -> Reply {
    let mut m = BytesMut::from(&b"ERR unknown command '"[..]);
    m.put_slice(&args[0][..args[0].len().min(128)]);
    m.put_slice(b"', with args beginning with: ");
    let mut listed = 0usize;
    for a in &args[1..] {
        if listed >= 128 {
            break;
        }
        let take = a.len().min(128 - listed);
        m.put_u8(b'\'');
        m.put_slice(&a[..take]);
        m.put_slice(b"' ");
        listed += take + 3;
    }
    Reply::Error(sanitize(m))
}

/// An error reply from a command's own code that Redis gives before running the command
/// (Redis looks subcommands up and checks their arity itself; Quiver's container commands
/// CLIENT, CONFIG and COMMAND do it in their own code), so it counts as Redis counts it.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `ERR unknown subcommand ...`: Redis finds no command to count it against.
    UnknownSubcommand,
    /// `ERR wrong number of arguments for 'cmd|sub' command`: a rejected call.
    SubcommandArity,
}

/// Whether `reply` is one of the refusals of [`Refusal`] (recognised by the texts that
/// [`unknown_subcommand`] and [`wrong_arity`] with a `cmd|sub` name produce).
pub fn refusal(reply: &Reply) -> Option<Refusal> {
    let Reply::Error(text) = reply else {
        return None;
    };
    if text.starts_with(b"ERR unknown subcommand '") {
        return Some(Refusal::UnknownSubcommand);
    }
    let name = text.strip_prefix(b"ERR wrong number of arguments for '")?;
    let name_end = name.iter().position(|&b| b == b'\'')?;
    name[..name_end]
        .contains(&b'|')
        .then_some(Refusal::SubcommandArity)
}

/// A reply of `len` bytes not sent because the buffered replies of all connections would
/// have passed `client-output-buffer-total-limit` (`limit` bytes).
pub fn reply_over_total_limit(len: usize, limit: usize) -> Reply {
    if let Some(n) = TOTAL_OUTPUT_LOG.event(Instant::now()) {
        tracing::warn!(
            bytes = len,
            limit,
            refused = n,
            "replies refused: client-output-buffer-total-limit reached"
        );
    }
    Reply::error(format!(
        "ERR reply of {len} bytes not sent: the server's buffered replies would exceed \
         client-output-buffer-total-limit ({limit} bytes)"
    ))
}

/// A command refused because MULTI already queued `max` commands.
pub fn multi_queue_full(max: usize) -> Reply {
    Reply::error(format!(
        "ERR too many commands queued in this transaction (at most {max}): it is aborted"
    ))
}

/// `EXECABORT Transaction discarded because of: <error without its ERR prefix>`.
pub fn exec_abort(refusal: &Reply) -> Reply {
    let Reply::Error(text) = refusal else {
        return refusal.clone();
    };
    let text = text.strip_prefix(b"ERR ").unwrap_or(text);
    let mut m = BytesMut::from(&b"EXECABORT Transaction discarded because of: "[..]);
    m.put_slice(text);
    Reply::Error(m.freeze())
}

/// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
pub fn unknown_subcommand(sub: &[u8], cmd: &str) -> Reply {
    let mut m = BytesMut::from(&b"ERR unknown subcommand '"[..]);
    m.put_slice(&sub[..sub.len().min(128)]);
    m.put_slice(format!("'. Try {cmd} HELP.").as_bytes());
    Reply::Error(sanitize(m))
}

/// Redis 7.0's refusal of a known subcommand given the wrong number of arguments where it
/// checks them itself (`addReplySubcommandSyntaxError`), naming it as sent.
pub fn subcommand_syntax(sub: &[u8], cmd: &str) -> Reply {
    let mut m = BytesMut::from(&b"ERR unknown subcommand or wrong number of arguments for '"[..]);
    m.put_slice(&sub[..sub.len().min(128)]);
    m.put_slice(format!("'. Try {cmd} HELP.").as_bytes());
    Reply::Error(sanitize(m))
}

/// Replaces `\r` and `\n` with blanks, as Redis's `addReplyErrorFormat` does.
pub fn sanitize(mut m: BytesMut) -> bytes::Bytes {
    for b in m.iter_mut() {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    m.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_inside_commands_are_recognised() {
        assert_eq!(
            refusal(&unknown_subcommand(b"nosuch", "CONFIG")),
            Some(Refusal::UnknownSubcommand)
        );
        assert_eq!(
            refusal(&wrong_arity("config|get")),
            Some(Refusal::SubcommandArity)
        );
        // A command's own arity error after it ran (MSET with a missing value) is a failure.
        assert_eq!(refusal(&wrong_arity("mset")), None);
        assert_eq!(refusal(&err(NOT_INTEGER)), None);
        assert_eq!(refusal(&Reply::OK), None);
    }

    #[test]
    fn error_texts() {
        assert_eq!(
            reply_over_total_limit(5000, 4096),
            Reply::error(
                "ERR reply of 5000 bytes not sent: the server's buffered replies would exceed \
                 client-output-buffer-total-limit (4096 bytes)"
            )
        );
    }
}
