//! Where engine calls run: on the connection's thread, telling the runtime first when they
//! may block on the disk, or with their durability waits left to the connection.

use crate::session::Session;
use crate::state::ServerState;

/// Runs `f` (engine calls for `session`'s connection) in the way the server's engine calls
/// run (`ServerState`): inside `block_in_place` when they may block on the disk, so that
/// other connections' tasks move to another thread meanwhile (that server's connections run
/// on the shared work-stealing runtime, the only one that can: `serving`); with their writes'
/// fdatasyncs deferred to the session's run when the connection awaits them itself
/// (`Session::durable`); else just so.
pub fn on_thread<R>(
    state: &ServerState,
    session: &mut Session,
    f: impl FnOnce(&mut Session) -> R,
) -> R {
    if state.blocking() {
        tokio::task::block_in_place(|| f(session))
    } else if state.defers_sync() {
        let (r, wait) = state.store.deferring_sync(|| f(session));
        session.durable.merge(wait);
        r
    } else {
        f(session)
    }
}
