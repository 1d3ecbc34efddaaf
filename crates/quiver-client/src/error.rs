//! The client's error type.
//!
//! Two families: the connection failed (`Io`, `Timeout`, `ConnectionClosed`,
//! `NotConnected`, `Protocol`; the connection is dropped and whether the
//! request was applied is unknown) or the server answered with an error reply
//! (`Server`, `NoAuth`, `AuthFailed`, `ConditionFailed`; the connection is
//! fine and the command was not applied). The cluster client adds its own
//! (`Redirects`, `ClusterDown`, `SlotNotCovered`, `KeyIndex`): it gave up
//! routing the command, which was not applied by the node that refused it.

use std::io;

/// Result alias used throughout the client.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a client call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket call failed (connection refused, reset, broken pipe, ...).
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// Connecting, or a read or write, took longer than its configured timeout.
    #[error("timed out waiting for the server")]
    Timeout,
    /// The server closed the connection before a reply was complete.
    #[error("connection closed by the server")]
    ConnectionClosed,
    /// An earlier error dropped the connection and `reconnect` is off.
    #[error("not connected: an earlier error closed the connection and reconnect is off")]
    NotConnected,
    /// The server's bytes are not valid RESP (or exceed the parser's limits).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// An error reply, e.g. `ERR unknown command 'FOO'`: the full text after `-`.
    #[error("server error: {0}")]
    Server(String),
    /// A `-NOAUTH ...` reply: the server wants a password and none was given.
    #[error("authentication required: {0}")]
    NoAuth(String),
    /// A `-WRONGPASS ...` reply (or an error reply to `AUTH`): the password
    /// was refused.
    #[error("authentication failed: {0}")]
    AuthFailed(String),
    /// A `BATCH` precondition failed: op `op` (0-based) did not satisfy
    /// `condition` (`EXISTS`, `ABSENT` or `EQUALS`); nothing was applied.
    /// [`crate::Batch::execute`] returns this as
    /// [`crate::BatchOutcome::ConditionFailed`] instead.
    #[error("batch op {op} failed its condition {condition}; nothing was applied")]
    ConditionFailed { op: usize, condition: String },
    /// A well-formed reply of the wrong shape for the command, e.g. an
    /// integer where a bulk string was expected.
    #[error("unexpected reply: {0}")]
    UnexpectedReply(String),
    /// The server address did not resolve to any socket address.
    #[error("invalid address {addr:?}: {reason}")]
    InvalidAddress { addr: String, reason: String },
    /// Cluster: a command was redirected (`MOVED`, `ASK`) or told to retry (`TRYAGAIN`) on
    /// every one of its `attempts` (`cluster::REDIRECTS_MAX`); `last` is the last such reply,
    /// e.g. `MOVED 3999 127.0.0.1:6381`. The node that sent it did not apply the command.
    #[error("gave up after {attempts} redirected or retried attempts; the last reply: {last}")]
    Redirects { attempts: usize, last: String },
    /// Cluster: the cluster answered `CLUSTERDOWN` on every attempt (the text is its last
    /// reply), or no known node could give the slot table (the text says which and why).
    #[error("cluster unavailable: {0}")]
    ClusterDown(String),
    /// Cluster: the slot table, even freshly read, names no node serving this hash slot.
    #[error("no node of the cluster serves hash slot {slot}")]
    SlotNotCovered { slot: u16 },
    /// Cluster: a command routed by its argument `index` has only `args` arguments.
    #[error("key index {index} is past the command's {args} arguments")]
    KeyIndex { index: usize, args: usize },
}

impl Error {
    /// True when the connection failed (as opposed to an error reply): the
    /// connection has been dropped, and a write that was in flight may or
    /// may not have been applied.
    pub fn is_connection_error(&self) -> bool {
        matches!(
            self,
            Error::Io(_)
                | Error::Timeout
                | Error::ConnectionClosed
                | Error::NotConnected
                | Error::Protocol(_)
        )
    }

    /// The error code of an error reply: its first word (`ERR`,
    /// `WRONGTYPE`, `NOAUTH`, `CONDITION`, ...).
    pub fn server_code(&self) -> Option<&str> {
        match self {
            Error::Server(text) | Error::NoAuth(text) | Error::AuthFailed(text) => {
                text.split(' ').next()
            }
            Error::ConditionFailed { .. } => Some("CONDITION"),
            _ => None,
        }
    }

    /// Classifies the text of an error reply (everything after `-`).
    pub(crate) fn from_reply(text: String) -> Error {
        if text.starts_with("NOAUTH") {
            return Error::NoAuth(text);
        }
        if text.starts_with("WRONGPASS") {
            return Error::AuthFailed(text);
        }
        if let Some((op, condition)) = parse_condition_failed(&text) {
            return Error::ConditionFailed { op, condition };
        }
        Error::Server(text)
    }

    /// Maps a socket error: timeouts become [`Error::Timeout`].
    pub(crate) fn from_io(e: io::Error) -> Error {
        // A socket timeout shows as WouldBlock on Unix and TimedOut on Windows.
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout,
            _ => Error::Io(e),
        }
    }
}

/// Parses `CONDITION op <i> failed: <cond>`, the reply of a `BATCH` whose
/// precondition `<i>` failed. Anything else (or a malformed variant) is
/// `None` and stays an ordinary [`Error::Server`].
fn parse_condition_failed(text: &str) -> Option<(usize, String)> {
    let rest = text.strip_prefix("CONDITION op ")?;
    let (index, rest) = rest.split_once(' ')?;
    let condition = rest.strip_prefix("failed: ")?;
    let op = index.parse().ok()?;
    if condition.is_empty() || condition.contains(' ') {
        return None;
    }
    Some((op, condition.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_replies_are_classified() {
        assert!(matches!(
            Error::from_reply("NOAUTH Authentication required.".into()),
            Error::NoAuth(t) if t == "NOAUTH Authentication required."
        ));
        assert!(matches!(
            Error::from_reply("WRONGPASS invalid username-password pair".into()),
            Error::AuthFailed(_)
        ));
        assert!(matches!(
            Error::from_reply("CONDITION op 3 failed: EQUALS".into()),
            Error::ConditionFailed { op: 3, condition } if condition == "EQUALS"
        ));
        let e = Error::from_reply("ERR unknown command 'x'".into());
        assert!(matches!(&e, Error::Server(t) if t == "ERR unknown command 'x'"));
        assert_eq!(e.server_code(), Some("ERR"));
        assert!(!e.is_connection_error());
    }

    #[test]
    fn malformed_condition_replies_stay_server_errors() {
        for text in [
            "CONDITION op x failed: EXISTS",
            "CONDITION op 1 failed:",
            "CONDITION op 1 failed: ",
            "CONDITION op -1 failed: ABSENT",
            "CONDITION op 1 broke: ABSENT",
            "CONDITION",
        ] {
            assert!(
                matches!(Error::from_reply(text.into()), Error::Server(_)),
                "{text}"
            );
        }
    }

    #[test]
    fn socket_timeouts_map_to_timeout() {
        for kind in [io::ErrorKind::WouldBlock, io::ErrorKind::TimedOut] {
            assert!(matches!(Error::from_io(kind.into()), Error::Timeout));
        }
        assert!(matches!(
            Error::from_io(io::ErrorKind::ConnectionReset.into()),
            Error::Io(_)
        ));
    }
}
