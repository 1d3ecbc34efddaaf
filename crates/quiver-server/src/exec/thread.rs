//! Where engine calls run: on the connection's thread, telling the runtime first when they
//! may block on the disk.

/// Runs `f`, inside `block_in_place` when `blocking` (the engine may wait on the disk), so
/// that other connections' tasks move to another thread meanwhile.
/// Only the shared, work-stealing runtime can do that; on a serving thread (`serving`) `f`
/// just runs, holding up that thread's other connections meanwhile.
pub fn on_thread<R>(blocking: bool, f: impl FnOnce() -> R) -> R {
    let shared = || {
        tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
    };
    if blocking && shared() {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}
