//! The benchmark layer's errors.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Store(#[from] quiver_store::Error),
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A parameter is out of range or inconsistent.
    #[error("{0}")]
    Invalid(String),
    /// The benchmark directory holds something the benchmark must not overwrite.
    #[error("{path}: {reason}")]
    UnsafeDir { path: PathBuf, reason: String },
    /// `bench net`: the server cannot be reached (refused, unreachable, bad address).
    #[error("cannot connect to {addr}: {source}{hint}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
        /// A suggestion appended to the message (empty when there is none).
        hint: &'static str,
    },
    /// `bench net`: the connection broke during a setup step (AUTH, DBSIZE, the load).
    #[error("{addr}: {what}: {source}")]
    Net {
        addr: String,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// `bench net`: the server answered a setup step (AUTH, DBSIZE, a load MSET) with an error.
    #[error("{addr}: {what}: the server replied {reply:?}")]
    ServerReply {
        addr: String,
        what: &'static str,
        reply: String,
    },
    /// `bench cluster`: a cluster client call failed (`what` says which, and on which thread).
    #[error("{what}: {source}")]
    Cluster {
        what: String,
        #[source]
        source: quiver_client::Error,
    },
    /// `bench cluster`: a multiget returned no value, or another key's, for a key of the data
    /// set (which was not loaded, or the cluster lost or mixed up keys).
    #[error("{0}")]
    BadRead(String),
    /// `bench net`: the server's reply is not valid RESP.
    #[error("{addr}: malformed reply: {reason}")]
    Protocol { addr: String, reason: String },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
