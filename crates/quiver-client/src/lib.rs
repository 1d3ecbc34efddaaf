//! `quiver-client`: a blocking Redis-protocol client for Quiver.
//!
//! Plain `std::net` sockets, no async runtime: meant for the `quiver` CLI,
//! benchmarks and tests. It speaks to any RESP2/RESP3 server, knows
//! Quiver's atomic `BATCH` command, and routes over a cluster by hash slot.
//!
//! * [`resp`] — the wire format: request encoding and an incremental
//!   RESP2/RESP3 reply parser with limits checked before allocating, both on
//!   the shared codec `quiver-resp`;
//! * [`conn`] — [`Connection`]: commands, typed helpers, pipelining, and
//!   the reconnect rule (a request that may have reached the server is
//!   never silently retried);
//! * [`batch`] — [`Batch`]: compound puts, deletes and checks with
//!   preconditions, all or nothing;
//! * [`cluster`] — [`ClusterClient`]: commands routed by hash slot over a
//!   cluster (Redis Cluster, or Quiver's nodes), `MOVED`/`ASK` followed,
//!   multi-key calls as one pipelined request per node;
//! * [`error`] — [`Error`]: connection failures versus error replies.
//!
//! ```no_run
//! use quiver_client::{Batch, BatchOutcome, Condition, Connection};
//!
//! # fn main() -> quiver_client::Result<()> {
//! let mut conn = Connection::connect("127.0.0.1:6379")?;
//! conn.set("greeting", "hello")?;
//! assert_eq!(conn.get("greeting")?.as_deref(), Some(&b"hello"[..]));
//!
//! // Many commands, one write, replies in order.
//! let mut pipeline = conn.pipeline();
//! pipeline.command(&[b"INCR", b"hits"]).command(&[b"GET", b"hits"]);
//! let replies = pipeline.execute()?;
//! assert_eq!(replies.len(), 2);
//!
//! // All or nothing (Quiver only).
//! let outcome = Batch::new()
//!     .put_if("user:1", "alice", Condition::Absent)
//!     .delete("pending:1")
//!     .execute(&mut conn)?;
//! if let BatchOutcome::ConditionFailed { op, condition } = outcome {
//!     eprintln!("op {op} failed {condition}; nothing was applied");
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A cluster: each key goes to the node serving its hash slot; a multiget is
//! written to every node it touches before any reply is read.
//!
//! ```no_run
//! use quiver_client::ClusterClient;
//!
//! # fn main() -> quiver_client::Result<()> {
//! let mut cluster = ClusterClient::connect(&["127.0.0.1:7000", "127.0.0.1:7001"])?;
//! cluster.set("user:1", "alice")?;
//! cluster.multi_set(&[("user:2", "bob"), ("user:3", "carol")])?;
//! let values = cluster.multi_get(&["user:1", "user:2", "nobody"])?;
//! assert_eq!(values[1].as_deref(), Some(&b"bob"[..]));
//! assert_eq!(values[2], None);
//! println!("user:1 is on {:?}", cluster.slot_owner(quiver_client::cluster::key_slot(b"user:1")));
//! # Ok(())
//! # }
//! ```

pub mod batch;
pub mod cluster;
pub mod conn;
pub mod error;
pub mod resp;

pub use batch::{Batch, BatchOutcome, Condition, Op};
pub use cluster::{ClusterClient, ClusterOptions, ClusterStats};
pub use conn::{ClientOptions, Connection, Pipeline};
pub use error::{Error, Result};
pub use resp::{encode_command, Parser, Value};
