//! [`Ctx`]: what a command about the connection or the node sees (a command about the
//! connection alone sees a `quiver_service::cmd::ConnCtx`).

use crate::state::{NodeConn, ServerState};
use quiver_service::cmd::ConnCtx;
use quiver_service::session::Session;

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
