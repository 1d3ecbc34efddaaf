//! Where engine calls run: on the connection's thread, telling the runtime first when they
//! may block on the disk, or with their durability waits left to the connection.

use crate::state::{NodeConn, ServerState};

/// Runs `f` (engine calls for `conn`'s connection) in the way the server's engine calls
/// run (`ServerState`): inside `block_in_place` when they may block on the disk, so that
/// other connections' tasks move to another thread meanwhile (that server's connections run
/// on the shared work-stealing runtime, the only one that can: `serving`); with their writes'
/// fdatasyncs deferred to the session's run when the connection awaits them itself
/// (`NodeConn::durable`); else just so.
pub fn on_thread<R>(
    state: &ServerState,
    conn: &mut NodeConn,
    f: impl FnOnce(&mut NodeConn) -> R,
) -> R {
    if state.blocking() {
        tokio::task::block_in_place(|| f(conn))
    } else if state.defers_sync() {
        let (r, wait) = state.store.deferring_sync(|| f(conn));
        conn.durable.merge(wait);
        r
    } else {
        f(conn)
    }
}
