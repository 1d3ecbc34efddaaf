//! Quiver's storage engine (ARCHITECTURE.md): FAWN-DS partitions — append-only segment
//! logs plus a compact in-RAM hash index — with vector get/put, compound batches and
//! crash-safe recovery. `ARCHITECTURE.md` at the repository root is the map.
//!
//! ```
//! use quiver_store::{Batch, Options, Precondition, Store};
//!
//! # fn main() -> quiver_store::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path(), Options::default())?;
//! store.multi_put(&[(b"a", b"1"), (b"b", b"2")])?;
//! let values = store.multi_get(&[b"a", b"b", b"c"])?;
//! assert_eq!(values[0].as_deref(), Some(&b"1"[..]));
//! assert_eq!(values[2], None);
//! let mut batch = Batch::new();
//! batch.put_if("a", "10", Precondition::ValueEquals("1".into())).delete("b");
//! assert!(store.apply(&batch)?.is_applied()); // all or nothing, atomically visible
//! store.close()?;
//! # Ok(())
//! # }
//! ```

mod background;
pub mod batch;
mod builder;
mod check;
mod checkpoint;
pub mod clock;
mod commit;
mod compact;
mod crc;
mod dbs;
mod durable;
pub mod error;
mod expiry;
pub mod faults;
pub mod fields;
mod group_commit;
pub mod hash;
pub mod index;
mod inner;
pub mod io;
mod key_counts;
mod keyspace;
pub mod large_hash;
pub mod layout;
#[cfg(test)]
mod loader_fuzz;
mod lockfile;
pub mod log;
mod lookup;
mod maintenance;
mod meta;
pub mod migrate;
mod open;
pub mod options;
mod partition;
mod pipeline;
mod recovery;
mod repair;
mod reserve;
mod resize;
mod retry;
mod route;
pub mod scan;
mod seal;
pub mod slot;
mod split;
mod stalls;
mod store;
mod sweep;
mod swept;
mod tuning;
mod upgrade;
mod write;

pub use batch::{Batch, BatchAction, BatchOp, BatchOutcome, Entry, Precondition, ValueKind};
pub use check::CheckReport;
pub use clock::Clock;
pub use dbs::DATABASES_MAX;
pub use durable::SyncWait;
pub use error::{Error, Result};
pub use keyspace::{Access, Db, DbStats};
pub use maintenance::MaintenanceReport;
pub use migrate::{RangeExport, RangeItem};
pub use options::{BackendKind, DamagePolicy, Durability, Options};
pub use partition::LockStats;
pub use pipeline::{Answer, PipelineOutcome};
pub use recovery::{RecoveryProgress, RecoveryReport};
pub use repair::{repair, RepairReport, DAMAGED_SUFFIX};
pub use scan::ScanPage;
pub use split::SplitReport;
pub use stalls::yielding_pass_running;
pub use stalls::StallEvent;
pub use store::{Stats, Store, Ttl};
pub use upgrade::{upgrade, UpgradeReport};
