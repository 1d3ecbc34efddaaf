//! Where engine calls run: on the connection's thread, telling the runtime first when they
//! may block on the disk.

/// Runs `f`, inside `block_in_place` when `blocking` (the engine may wait on the disk), so
/// that other connections' tasks move to another thread meanwhile. `blocking` holds exactly
/// when connections run on the shared work-stealing runtime (`ServerState::blocking`, see
/// `serving`), the only one that can do that.
pub fn on_thread<R>(blocking: bool, f: impl FnOnce() -> R) -> R {
    if blocking {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}
