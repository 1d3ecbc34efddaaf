//! `quiver-service`: the RESP service any Quiver process runs (ARCHITECTURE.md), whatever
//! executes its commands — a data node (`quiver-node`'s `ServerState`) or the router. It
//! knows nothing of stores, chains or routers: what serves implements [`service::Service`].
//!
//! * [`frame`] parses requests exactly as Redis 7 does; [`reply`] encodes replies; [`errors`]
//!   holds Redis's error texts;
//! * [`config`] holds the service's settings (Redis's names and defaults) and reads a settings
//!   file beside what serves reads of it; [`settings`] the ones CONFIG SET changes while
//!   serving;
//! * [`server`] binds the listeners, accepts and shuts down; [`serving`] runs connections on
//!   serving threads; [`conn`] runs one connection; [`output`] holds a connection's replies
//!   under the per-connection and server-wide limits; [`tls`] is the TLS port;
//! * [`admission`] checks a request before it runs or is queued in MULTI (known, arity, AUTH,
//!   ACL); [`session`] is a connection's state; [`acl`] the users and their rules;
//! * [`table`] is the command table (data only), [`subcommands`] CLUSTER's subcommands; [`names`] the commands' names
//!   (`rename-command`); [`cmd`] the commands about the connection and the server (AUTH,
//!   HELLO, CLIENT, ACL, COMMAND, CONFIG, SLOWLOG, TIME, ...);
//! * [`stats`], [`clients`], [`slowlog`] and [`latency`] are shared registries ([`clock`]
//!   their Unix time); [`pause`]
//!   is CLIENT PAUSE; [`monitor`] MONITOR's feed; [`figures`] the figures INFO and the
//!   metrics endpoint both show; [`metrics`] the Prometheus endpoint;
//!   [`ratelog`] keeps repeated warnings to one line a second;
//! * [`allocator`] is the process's allocator (jemalloc) and what it holds.

pub mod acl;
pub mod admission;
pub mod allocator;
pub mod batch;
pub mod clients;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod conn;
pub mod errors;
pub mod figures;
pub mod frame;
pub mod latency;
pub mod logging;
pub mod metrics;
pub mod monitor;
pub mod names;
pub mod output;
pub mod pause;
pub mod pubsub;
pub mod push;
pub mod ratelog;
pub mod reply;
pub mod server;
pub mod service;
pub mod serving;
pub mod session;
pub mod settings;
pub mod slowlog;
pub mod stats;
pub mod subcommands;
pub mod table;
pub mod tls;
pub mod tracking;

pub use config::Config;
pub use frame::{parse_request, parse_run, Limits, ProtocolError, RequestParser, Run, RunSize};
pub use reply::Reply;
pub use server::{ServerError, ShutdownHandle};
