//! RANGEIMPORT: the receiving side of a range's move between cluster nodes (the sending side
//! is `agent::moves`, which documents the protocol). Quiver's own command, sent by the node
//! handing the range over:
//!
//! ```text
//! RANGEIMPORT BEGIN <lo-hi> <from-id>          drop whatever this node has of the range
//! RANGEIMPORT ITEMS <lo-hi> [<key> <expire> <value>] ...
//!                                              expire: -1 none, -2 a delete, else absolute ms
//! RANGEIMPORT SEQ <lo-hi> <seq>                (a join) the chain's last message in what was sent
//! RANGEIMPORT END <lo-hi> <epoch>              adopt the topology of epoch (read etcd now)
//! ```
//!
//! The same command carries a chain's range to a node joining it as tail (`agent::join`): the
//! chain's tail sends it, then `SEQ`, the number of the last message the copy includes — the
//! joining node's part in the chain starts after it.
//!
//! Each is accepted only while this node's topology has a migration of exactly that range to
//! it, or has it joining the chain of exactly that range (a stale sender cannot write into a
//! range it no longer moves); a node that has not yet seen the migration answers TRYAGAIN and
//! reads the topology. The keys are written to the
//! store directly: this node does not serve the range until the hand-over, so no client
//! writes to it meanwhile.

use bytes::Bytes;
use quiver_store::slot::SlotRange;

use crate::cmd::ctx::Ctx;
use crate::store_errors::store_error;
use quiver_service::errors::{self, err};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;

/// Longest wait of RANGEIMPORT END for this node to adopt the hand-over's epoch, and how
/// often it looks.
const END_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);
const END_POLL: std::time::Duration = std::time::Duration::from_millis(1);

pub fn run(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some(node) = &ctx.state.cluster else {
        return err(crate::cmd::cluster::DISABLED);
    };
    let sub = args[1].to_ascii_lowercase();
    let Some(range) = std::str::from_utf8(&args[2])
        .ok()
        .and_then(SlotRange::parse)
    else {
        return Reply::error(format!(
            "ERR invalid slot range '{}'",
            String::from_utf8_lossy(&args[2])
        ));
    };
    if sub == b"end" && args.len() == 4 {
        // The sender has handed the range over in `epoch`: adopt it (the agent reads etcd
        // now) before answering, boundedly.
        let Some(epoch) = string2ll(&args[3]).and_then(|e| u64::try_from(e).ok()) else {
            return err("ERR invalid epoch in RANGEIMPORT END");
        };
        node.refresh.notify_one();
        // The agent runs on the shared runtime, not on this connection's serving thread, so
        // waiting here does not hold it up (and on the shared runtime the command already
        // runs inside `block_in_place`: `exec::thread::on_thread`).
        let deadline = std::time::Instant::now() + END_WAIT_MAX;
        while node.view().epoch() < epoch && std::time::Instant::now() < deadline {
            std::thread::sleep(END_POLL);
        }
        return Reply::Integer(node.view().epoch() as i64);
    }
    let view = node.view();
    let from = view.topology.as_ref().and_then(|t| {
        let moving = t
            .migrations
            .iter()
            .find(|m| m.slots == range && m.to == node.id)
            .map(|m| m.from.clone());
        let joining = t
            .joins()
            .find(|(slots, id, _)| *slots == range && *id == node.id)
            .map(|(_, _, tail)| tail.to_string());
        moving.or(joining)
    });
    let Some(from) = from else {
        node.refresh.notify_one();
        return Reply::error(format!(
            "TRYAGAIN no migration of slots {range} to this node in its topology (epoch {})",
            view.epoch()
        ));
    };
    match &sub[..] {
        b"begin" if args.len() == 4 => {
            if args[3] != from.as_bytes() {
                return Reply::error(format!(
                    "ERR slots {range} are moving from {from}, not {}",
                    String::from_utf8_lossy(&args[3])
                ));
            }
            let _ops = node.range_ops.lock();
            match ctx.state.store.drop_range(range) {
                Ok(_) => Reply::OK,
                Err(e) => store_error(&e),
            }
        }
        b"items" => {
            let items = match crate::chain::wire::parse_items(range, &args[3..]) {
                Ok(items) => items,
                Err(reply) => return reply,
            };
            let _ops = node.range_ops.lock();
            match ctx.state.store.import(&items) {
                Ok(()) => Reply::Integer(items.len() as i64),
                Err(e) => store_error(&e),
            }
        }
        b"seq" if args.len() == 4 => {
            let Some(seq) = string2ll(&args[3]).and_then(|e| u64::try_from(e).ok()) else {
                return err("ERR invalid sequence number in RANGEIMPORT SEQ");
            };
            node.chains.expect_join(range, seq);
            Reply::OK
        }
        _ => err(errors::SYNTAX),
    }
}
