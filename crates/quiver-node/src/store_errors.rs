//! How the engine's errors reach a client: limits in their own words, a full disk, a
//! partition that refuses writes, a write partly applied, a transaction given up after
//! conflicts; storage failures logged with their details (repeated ones at most once per
//! `REFUSAL_LOG_INTERVAL`).

use std::time::Instant;

use bytes::BytesMut;
use quiver_store::Error as StoreError;

use quiver_service::errors::{err, sanitize, REFUSAL_LOG_INTERVAL};
use quiver_service::ratelog::LogLimiter;
use quiver_service::reply::Reply;

/// Writes refused because the disk is full.
static NO_SPACE_LOG: LogLimiter = LogLimiter::new(REFUSAL_LOG_INTERVAL);
/// A partition that refuses writes (a failed fdatasync, bytes a failed write left) refuses
/// every write to it until the restart: logged at most once per interval too.
static REFUSING_PARTITION_LOG: LogLimiter = LogLimiter::new(REFUSAL_LOG_INTERVAL);
/// Commands and EXECs given up after too many conflicting attempts.
static CONFLICTS_LOG: LogLimiter = LogLimiter::new(REFUSAL_LOG_INTERVAL);

/// The reply for an engine error. Limits get their own words; anything else is a storage
/// failure, logged with its details.
pub fn store_error(e: &StoreError) -> Reply {
    match e {
        StoreError::KeyLength { len, max } => Reply::error(format!(
            "ERR key is too long ({len} bytes; the maximum is {max})"
        )),
        StoreError::ValueTooLarge { len, max } => Reply::error(format!(
            "ERR value is too large ({len} bytes; the maximum is {max})"
        )),
        StoreError::BatchTooLarge { bytes, max } => Reply::error(format!(
            "ERR the write is too large ({bytes} bytes; one partition takes at most {max} at once)"
        )),
        StoreError::NoSpace { path } => {
            if let Some(n) = NO_SPACE_LOG.event(Instant::now()) {
                tracing::warn!(
                    path = %path.display(),
                    refused = n,
                    "no space left on device: writes refused (count since the last such line)"
                );
            }
            err("ERR no space left on device: the write was not applied")
        }
        StoreError::IndexFull { partition, keys } => Reply::error(format!(
            "ERR the write was not applied: partition {partition}'s index has no room for {keys} \
             more keys yet (its maintenance is behind; retry)"
        )),
        StoreError::PartlyApplied { source, .. } => partly_applied(source),
        StoreError::WrongType => err(quiver_service::errors::WRONGTYPE),
        StoreError::PartitionFailed { .. } | StoreError::SyncFailed { .. } => {
            if let Some(n) = REFUSING_PARTITION_LOG.event(Instant::now()) {
                tracing::error!(
                    error = %e,
                    refused = n,
                    "a partition refuses writes until the server restarts (count since the \
                     last such line)"
                );
            }
            storage_error(e)
        }
        e => {
            tracing::error!(error = %e, "storage error");
            storage_error(e)
        }
    }
}

/// `ERR storage error: ...`, the engine's message on one line.
fn storage_error(e: &StoreError) -> Reply {
    Reply::Error(sanitize(BytesMut::from(
        format!("ERR storage error: {e}").as_bytes(),
    )))
}

/// A command some of whose writes took effect before `e` stopped the rest.
pub fn partly_applied(e: &StoreError) -> Reply {
    tracing::error!(error = %e, "storage error: a write was partly applied");
    Reply::Error(sanitize(BytesMut::from(
        format!("ERR storage error: {e}; the command was partly applied").as_bytes(),
    )))
}

/// A command or EXEC that was run `attempts` times, each time conflicting with concurrent
/// writes to a key it read, and given up: nothing of it was applied. `what` is "command" or
/// "transaction".
pub fn not_applied_after_conflicts(what: &str, attempts: u32) -> Reply {
    if let Some(n) = CONFLICTS_LOG.event(Instant::now()) {
        tracing::warn!(
            attempts,
            given_up = n,
            "commands given up: concurrent writes kept changing the keys they read"
        );
    }
    Reply::error(format!(
        "ERR the {what} was not applied: concurrent writes changed the keys it read {attempts} \
         times in a row"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts() {
        assert_eq!(
            not_applied_after_conflicts("command", 1000),
            Reply::error(
                "ERR the command was not applied: concurrent writes changed the keys it read \
                 1000 times in a row"
            )
        );
    }
}
