//! The commands every RESP service answers alike, about the connection or the service itself:
//! AUTH, HELLO, SELECT, PING, ECHO, QUIT, RESET ([`connection`]), CLIENT ([`client`]), ACL
//! ([`acl`]), COMMAND ([`command`]), CONFIG ([`config`]), INFO ([`info`]), ROLE and WAIT
//! ([`replication`]), TIME and SLOWLOG ([`server`]), Pub/Sub ([`pubsub`]); each sees the connection
//! through a [`ConnCtx`]. [`int_arg`] and [`db_index`] check arguments as Redis does.

pub mod acl;
pub mod client;
pub mod command;
pub mod config;
pub mod connection;
pub mod info;
pub mod pubsub;
pub mod replication;
pub mod server;

use crate::errors::{self, err};
use crate::frame::string2ll;
use crate::reply::Reply;
use crate::service::Core;
use crate::session::Session;

/// A connection command's view of its RESP service and of its connection.
pub struct ConnCtx<'a> {
    pub core: &'a Core,
    pub session: &'a mut Session,
}

/// An argument that must be a 32-bit integer (Redis's `getIntFromObjectOrReply`): `msg` is
/// the error for anything else, or, without one, Redis's own texts.
pub fn int_arg(arg: &[u8], msg: Option<&'static str>) -> Result<i64, Reply> {
    match (string2ll(arg), msg) {
        (Some(n), _) if i32::try_from(n).is_ok() => Ok(n),
        (_, Some(msg)) => Err(err(msg)),
        (None, None) => Err(err(errors::NOT_INTEGER)),
        (Some(_), None) => Err(err(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        )),
    }
}

/// A database number (SELECT, MOVE, SWAPDB, COPY ... DB) as Redis's `selectDb` checks it:
/// `0..databases`.
pub fn db_index(n: i64, databases: u32) -> Result<u32, Reply> {
    u32::try_from(n)
        .ok()
        .filter(|&db| db < databases)
        .ok_or_else(|| err(errors::DB_OUT_OF_RANGE))
}
