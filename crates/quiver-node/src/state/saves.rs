//! Saves (SAVE, BGSAVE, SHUTDOWN; `cmd::persistence`): Quiver's save is a checkpoint — every
//! partition's buffered records written out and fdatasynced, then the index checkpoint of
//! each partition changed since its last one — after which the store reopens with nothing
//! to replay. Its data never waits for a save: every acknowledged write is in the log under
//! the durability mode; a save only spares the next open the replay, as Redis's RDB spares
//! the AOF's.
//!
//! A background save runs on the node's saver task ([`run`]), one at a time; one asked for
//! while another runs is scheduled after it (BGSAVE SCHEDULE). INFO's `# Persistence` reads
//! [`Saves::figures`].

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use parking_lot::Mutex;
use quiver_service::clock::unix_seconds;
use tokio::sync::{watch, Notify};

use crate::state::{ServerState, SharedState};

/// A background save asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BgSave {
    Started,
    /// After the one running now.
    Scheduled,
    AlreadyRunning,
}

#[derive(Default)]
struct Background {
    /// When the one running began.
    running: Option<Instant>,
    /// Another is to run after it.
    scheduled: bool,
}

pub struct Saves {
    /// Unix seconds of the last successful save (the store's open, at first).
    last_save: AtomicU64,
    /// Write commands counted at the last save (see [`Saves::figures`]).
    writes_at_save: AtomicU64,
    background: Mutex<Background>,
    wake: Notify,
    last_background_ok: AtomicBool,
    /// Seconds the last background save took (-1: none yet).
    last_background_secs: Mutex<i64>,
    /// SHUTDOWN NOSAVE: the store closes without a checkpoint.
    skip_checkpoint_at_close: AtomicBool,
}

/// What INFO's `# Persistence` shows of the saves.
#[derive(Clone, Copy, Debug)]
pub struct SaveFigures {
    pub changes_since_last_save: u64,
    pub bgsave_in_progress: bool,
    pub last_save_time: u64,
    pub last_bgsave_ok: bool,
    pub last_bgsave_time_sec: i64,
    pub current_bgsave_time_sec: i64,
}

impl Default for Saves {
    fn default() -> Self {
        Saves {
            last_save: AtomicU64::new(unix_seconds()),
            writes_at_save: AtomicU64::new(0),
            background: Mutex::new(Background::default()),
            wake: Notify::new(),
            last_background_ok: AtomicBool::new(true),
            last_background_secs: Mutex::new(-1),
            skip_checkpoint_at_close: AtomicBool::new(false),
        }
    }
}

impl Saves {
    pub fn last_save(&self) -> u64 {
        self.last_save.load(Relaxed)
    }

    pub fn background_running(&self) -> bool {
        self.background.lock().running.is_some()
    }

    /// Asks the saver task for a background save.
    pub fn request_background(&self, schedule: bool) -> BgSave {
        let mut bg = self.background.lock();
        if bg.running.is_some() {
            if !schedule {
                return BgSave::AlreadyRunning;
            }
            bg.scheduled = true;
            return BgSave::Scheduled;
        }
        bg.running = Some(Instant::now());
        drop(bg);
        self.wake.notify_one();
        BgSave::Started
    }

    /// SHUTDOWN NOSAVE: the store will close without a checkpoint.
    pub fn skip_checkpoint_at_close(&self) {
        self.skip_checkpoint_at_close.store(true, Relaxed);
    }

    pub fn checkpoint_at_close(&self) -> bool {
        !self.skip_checkpoint_at_close.load(Relaxed)
    }

    pub fn figures(&self, state: &ServerState) -> SaveFigures {
        let running = self.background.lock().running;
        SaveFigures {
            changes_since_last_save: state
                .core
                .stats
                .writes()
                .saturating_sub(self.writes_at_save.load(Relaxed)),
            bgsave_in_progress: running.is_some(),
            last_save_time: self.last_save(),
            last_bgsave_ok: self.last_background_ok.load(Relaxed),
            last_bgsave_time_sec: *self.last_background_secs.lock(),
            current_bgsave_time_sec: running.map_or(-1, |t| t.elapsed().as_secs() as i64),
        }
    }
}

/// Saves now, on the calling thread: the store's records written out and synced, then its
/// checkpoints (SAVE, SHUTDOWN, and the saver task's background saves).
pub fn save(state: &ServerState) -> quiver_store::Result<()> {
    let writes = state.core.stats.writes();
    state.store.flush()?;
    state.store.checkpoint()?;
    state.saves.last_save.store(unix_seconds(), Relaxed);
    state.saves.writes_at_save.store(writes, Relaxed);
    Ok(())
}

/// The saver task: runs each background save asked for, off the serving threads, until
/// `shutdown` changes.
pub async fn run(state: SharedState, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = state.saves.wake.notified() => {}
            _ = shutdown.changed() => return,
        }
        // Bounded: each round runs the save asked for and at most one scheduled meanwhile.
        loop {
            let started = Instant::now();
            let s = state.clone();
            let result = tokio::task::spawn_blocking(move || save(&s)).await;
            let ok = matches!(result, Ok(Ok(())));
            if let Ok(Err(e)) = &result {
                tracing::warn!(error = %e, "background save failed");
            }
            let saves = &state.saves;
            saves.last_background_ok.store(ok, Relaxed);
            *saves.last_background_secs.lock() = started.elapsed().as_secs() as i64;
            let mut bg = saves.background.lock();
            if !std::mem::take(&mut bg.scheduled) {
                bg.running = None;
                break;
            }
            bg.running = Some(Instant::now());
        }
    }
}
