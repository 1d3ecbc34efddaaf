//! `quiver-node`: Quiver's data node, on the RESP service (`quiver-service`); the router is
//! `quiver-router`.
//!
//! Any Redis client can talk to a node (RESP2, and RESP3 after `HELLO 3`). Each pipelined run
//! of requests read from a connection is executed as engine vectors ([`exec`]): consecutive
//! GETs become one `multi_get`, MGET / MSET / DEL / EXISTS arguments one vector,
//! read-modify-write commands and MULTI/EXEC optimistic transactions committed as compound
//! batches ([`txn`]).
//!
//! * [`node`] opens the store, serves and closes it; [`node_config`] holds the node's settings
//!   (store, vectors, cluster); [`state`] is what its connections share (and what each keeps:
//!   `NodeConn`; `state::saves`: the checkpoints SAVE, BGSAVE and SHUTDOWN take);
//! * [`cmd`] the commands, each parsed into an engine vector operation or a transaction's step;
//!   [`exec`] runs them (vectors grouped, transactions retried, MULTI/EXEC); [`txn`] is the
//!   optimistic transaction; [`watch`] the watched keys; [`store_errors`] the engine's errors
//!   as replies; [`float80`] is C's `long double`, emulated for INCRBYFLOAT;
//! * [`coalesce`] is the optional intermediate queue of GETs across connections;
//! * [`cluster`] is cluster mode: the node's identity, the topology it serves by and the
//!   routing rule (local, MOVED, CROSSSLOT, CLUSTERDOWN, a frozen range's wait); [`chain`] is
//!   chain replication; [`agent`] its link to etcd and the work the topology gives it (moves
//!   of ranges away, drops);
//! * [`testing`] starts an in-process node for tests.

pub mod agent;
pub mod chain;
pub mod cluster;
pub mod cmd;
pub mod coalesce;
pub mod exec;
pub mod float80;
pub mod node;
pub mod node_config;
pub mod state;
pub mod store_errors;
pub mod testing;
pub mod txn;
pub mod watch;

pub use node::{NodeError, Server};
