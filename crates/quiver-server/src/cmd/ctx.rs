//! [`Ctx`]: what a command about the connection or the server sees; [`ConnCtx`]: what a
//! command about the connection alone sees (those the router answers too).

use crate::service::Core;
use crate::session::Session;
use crate::state::{NodeConn, ServerState};

/// A connection command's view of its RESP server and of its connection.
pub struct ConnCtx<'a> {
    pub core: &'a Core,
    pub session: &'a mut Session,
}

/// A command's view of the server and of its connection.
pub struct Ctx<'a> {
    pub state: &'a ServerState,
    pub session: &'a mut Session,
    /// What the node keeps of the connection.
    pub conn: &'a mut NodeConn,
}

impl Ctx<'_> {
    /// The view of a command about the connection alone.
    pub fn conn_ctx(&mut self) -> ConnCtx<'_> {
        ConnCtx {
            core: &self.state.core,
            session: self.session,
        }
    }
}
