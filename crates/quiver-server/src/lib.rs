//! `quiver-server`: Quiver's Redis-protocol front end (layer 2 of DESIGN.md).
//!
//! Any Redis client can talk to it (RESP2, and RESP3 after `HELLO 3`). Each pipelined run of
//! requests read from a connection is executed as engine vectors ([`exec`]): consecutive GETs
//! become one `multi_get`, MGET / MSET / DEL / EXISTS arguments one vector, read-modify-write
//! commands and MULTI/EXEC optimistic transactions committed as compound batches ([`txn`]).
//!
//! * [`frame`] parses requests exactly as Redis 7 does; [`reply`] encodes replies;
//!   [`float80`] is C's `long double`, emulated for INCRBYFLOAT;
//! * [`config`] holds the settings (Redis's names and defaults);
//! * [`server`] binds, accepts and shuts down; [`conn`] runs one connection; [`output`] holds
//!   a connection's replies under the per-connection and server-wide limits;
//! * [`coalesce`] is the optional intermediate queue of GETs across connections;
//! * [`table`] is the command table (data only); [`cmd`] the commands, each parsed into an
//!   engine vector operation or a transaction's step; [`exec`] runs them (vectors grouped,
//!   transactions retried, MULTI/EXEC); [`txn`] is the optimistic transaction; [`session`] a
//!   connection's state;
//! * [`stats`], [`clients`], [`watch`] are shared registries; [`metrics`] the Prometheus view;
//!   [`ratelog`] keeps repeated warnings to one line a second;
//! * [`cluster`] is cluster mode: the node's identity, the topology it serves by and the
//!   routing rule (local, MOVED, CROSSSLOT, CLUSTERDOWN, a frozen range's wait); [`agent`]
//!   its link to etcd and the work the topology gives it (moves of ranges away, drops);
//! * [`testing`] starts an in-process server for tests.

pub mod acl;
pub mod admission;
pub mod agent;
pub mod chain;
pub mod clients;
pub mod cluster;
pub mod cmd;
pub mod coalesce;
pub mod config;
pub mod conn;
pub mod errors;
pub mod exec;
pub mod float80;
pub mod frame;
pub mod metrics;
pub mod names;
pub mod node_config;
pub mod output;
pub mod ratelog;
pub mod reply;
pub mod router;
pub mod server;
pub mod service;
pub mod serving;
pub mod session;
pub mod state;
pub mod stats;
pub mod store_errors;
pub mod table;
pub mod testing;
pub mod tls;
pub mod txn;
pub mod watch;

pub use config::Config;
pub use frame::{parse_request, parse_run, Limits, ProtocolError, RequestParser, Run, RunSize};
pub use reply::Reply;
pub use server::{Server, ServerError, ShutdownHandle};
