//! `quiver-cluster`: what a Quiver cluster agrees on, and where it keeps it.
//!
//! * [`topology`] — the cluster's configuration as one document: nodes, the chain owning each
//!   range of Redis Cluster's 16384 hash slots, migrations in flight, and the epoch that
//!   orders every version;
//! * [`meta`] — that document in etcd: read, changed by one transaction per epoch, watched;
//!   nodes' registrations and leases, the managers' election;
//! * [`manager`] — the process that repairs chains when nodes die, stall or restart;
//! * [`follow`] — sessions with etcd one after another through its outages (the waits between
//!   them, what is logged), for nodes, routers and managers alike.

pub mod follow;
pub mod manager;
pub mod meta;
pub mod topology;

pub use meta::{Meta, MetaError};
pub use topology::{Migration, Node, Shard, Target, Topology, TopologyError};
