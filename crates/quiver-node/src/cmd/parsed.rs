//! [`Command`]: a request parsed into what runs it.

use crate::cmd::common::TxnCommand;
use crate::cmd::vector::VectorOp;

/// What the executor does with a parsed request.
pub enum Command<'a> {
    /// Joins the engine vector of its kind with the commands around it.
    Vector(VectorOp<'a>),
    /// Runs against a transaction: atomic on its own, composable inside MULTI/EXEC.
    Keys(Box<dyn TxnCommand + 'a>),
    /// About the connection or the server, not keys: runs once, on the connection
    /// (`cmd::run_server`), and never again when a transaction around it is retried.
    Server,
    /// EXEC: the executor runs the queued commands as one transaction.
    Exec,
}
