//! Why a command failed, and how it is told: `quiver: <message>` on stderr, exit code 1.

use std::fmt;
use std::io;
use std::time::Duration;

/// Why a command failed; printed as `quiver: <message>`.
#[derive(Debug)]
pub enum CliError {
    Store(quiver_store::Error),
    /// A RESP service (the router) could not start or stopped uncleanly.
    Server(quiver_service::ServerError),
    /// A node could not start (its store, its cluster identity) or stopped uncleanly.
    Node(quiver_node::NodeError),
    Bench(quiver_bench::Error),
    Report(quiver_report::Error),
    /// The cluster's metadata in etcd: unreachable, refused the change, or no cluster.
    Cluster(quiver_cluster::MetaError),
    /// A server command failed: the server is unreachable, refused the password, replied
    /// with an error, or the connection broke.
    Remote(RemoteError),
    /// The answer is "no" (a key is absent, a check found damage); the message says what.
    Negative(String),
    /// Bad input that clap cannot see (a missing store directory, an out-of-range value).
    Usage(String),
    Output(std::io::Error),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Store(e) => write!(f, "error: {e}{}", damage_hint(e)),
            CliError::Server(e) => write!(f, "error: {e}"),
            CliError::Node(e) => {
                let hint = match e {
                    quiver_node::NodeError::OpenStore(e) => damage_hint(e),
                    _ => "",
                };
                write!(f, "error: {e}{hint}")
            }
            CliError::Bench(e) => write!(f, "error: {e}"),
            CliError::Report(e) => write!(f, "error: {e}"),
            CliError::Cluster(e) => write!(f, "error: {e}"),
            CliError::Remote(e) => write!(f, "{e}"),
            CliError::Negative(m) => f.write_str(m),
            CliError::Usage(m) => write!(f, "error: {m}"),
            CliError::Output(e) => write!(f, "error: cannot write the output: {e}"),
        }
    }
}

/// What to do about a store that refuses to open because of damage.
fn damage_hint(e: &quiver_store::Error) -> &'static str {
    match e {
        quiver_store::Error::Damaged { .. } => {
            "\n`quiver check` lists the damage (it changes nothing); `quiver check --repair` \
             keeps what is intact, reports what was lost, and makes the store open again"
        }
        _ => "",
    }
}

impl From<quiver_store::Error> for CliError {
    fn from(e: quiver_store::Error) -> Self {
        CliError::Store(e)
    }
}

impl From<quiver_bench::Error> for CliError {
    fn from(e: quiver_bench::Error) -> Self {
        match e {
            quiver_bench::Error::Store(e) => CliError::Store(e),
            e => CliError::Bench(e),
        }
    }
}

impl From<quiver_cluster::MetaError> for CliError {
    fn from(e: quiver_cluster::MetaError) -> Self {
        CliError::Cluster(e)
    }
}

impl From<quiver_report::Error> for CliError {
    fn from(e: quiver_report::Error) -> Self {
        CliError::Report(e)
    }
}

/// A `quiver sim` parameter out of range: bad input clap cannot see.
impl From<quiver_plan::sim::InvalidConfig> for CliError {
    fn from(e: quiver_plan::sim::InvalidConfig) -> Self {
        CliError::Usage(e.0)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Output(e)
    }
}

/// Where a server command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Opening the connection (TCP connect, then AUTH).
    Connect,
    /// A command on an open connection.
    Command,
}

/// A server command's failure, with what the user needs to act on it.
#[derive(Debug)]
pub struct RemoteError {
    pub addr: String,
    pub timeout: Duration,
    pub stage: Stage,
    pub source: quiver_client::Error,
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use quiver_client::Error as E;
        let addr = &self.addr;
        let secs = self.timeout.as_secs_f64();
        match (&self.source, self.stage) {
            (E::Server(text), _) => write!(f, "server error: {text}"),
            (E::NoAuth(text), _) => write!(
                f,
                "server error: {text} (pass --password or set QUIVER_PASSWORD)"
            ),
            (E::AuthFailed(text), _) => write!(f, "the server refused the password: {text}"),
            (E::Io(e), Stage::Connect) => {
                write!(f, "cannot connect to {addr}: {}", io_message(e))?;
                if e.kind() == io::ErrorKind::ConnectionRefused {
                    f.write_str(" (is 'quiver serve' running?)")?;
                }
                Ok(())
            }
            (E::Timeout, Stage::Connect) => {
                write!(f, "cannot connect to {addr}: no answer within {secs} s")
            }
            (E::Timeout, Stage::Command) => write!(
                f,
                "no reply from {addr} within {secs} s (a longer --timeout-s may help)"
            ),
            (E::InvalidAddress { reason, .. }, _) => {
                write!(f, "cannot connect to {addr}: {reason}")
            }
            (E::Io(e), Stage::Command) => {
                write!(f, "connection to {addr} failed: {}", io_message(e))
            }
            (other, Stage::Connect) => write!(f, "cannot connect to {addr}: {other}"),
            (other, Stage::Command) => write!(f, "{addr}: {other}"),
        }
    }
}

/// An I/O error's text without the `(os error N)` suffix: `Connection refused`.
fn io_message(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
    }
}
