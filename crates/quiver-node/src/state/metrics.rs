//! A node's Prometheus figures (`GET /metrics` on `metrics-addr`): its store's, then those
//! every RESP server has (`quiver_service::metrics::render_core`).

use crate::state::figures::{self, Snapshot};
use crate::state::ServerState;
use quiver_service::metrics::render_core;

/// A node's metrics in Prometheus's text exposition format: its store's, then [`render_core`]'s.
pub fn render(state: &ServerState) -> String {
    let mut o = String::new();
    quiver_service::figures::render(&mut o, &Snapshot::of(state), figures::all());
    render_core(&state.core, &mut o);
    o
}
