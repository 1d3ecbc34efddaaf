//! [`Ctx`]: what a command about the connection or the server sees.

use crate::session::Session;
use crate::state::ServerState;

/// A command's view of the server and of its connection.
pub struct Ctx<'a> {
    pub state: &'a ServerState,
    pub session: &'a mut Session,
}
