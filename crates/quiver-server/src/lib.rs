//! `quiver-server`: Quiver's Redis-protocol front end.
//!
//! This crate will become a RESP2/RESP3 server that speaks to ordinary Redis
//! clients and executes each *pipelined run* of commands read from a
//! connection as engine vectors (batched `get`/`put` calls into
//! `quiver-store`), so that one socket read turns into one vector operation
//! rather than one engine call per command.
//!
//! For now it holds only the protocol layer:
//!
//! * [`frame`] parses client requests (RESP multibulk and inline commands)
//!   exactly as Redis 7 does, including its error replies and limits;
//! * [`reply`] encodes replies in RESP2 or RESP3.

pub mod frame;
pub mod reply;

pub use frame::{parse_request, parse_run, Limits, ProtocolError, RequestParser};
pub use reply::Reply;
