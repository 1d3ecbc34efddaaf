//! CHAIN: chain replication between cluster nodes (`chain` documents the protocol). Quiver's
//! own command, sent by a chain's member to its successor, and asked by `quiver cluster
//! status`:
//!
//! ```text
//! CHAIN APPLY <lo-hi> <version> <seq> ATOMIC|PLAIN [<key> <expire> <value>] ...
//!     apply message <seq> of the chain of slots lo-hi at <version>; answered +OK once the
//!     message is committed (the tail's answer), or the refusal (FENCED, a gap, ...)
//! CHAIN STATUS
//!     per chain this node is in: slots, version, position, length, applied, committed,
//!     messages and bytes waiting for their commit
//! ```

use bytes::Bytes;

use crate::chain::{wire, ReceiveError, Refusal};
use crate::cmd::ctx::Ctx;
use quiver_service::errors::{self, err};
use quiver_service::reply::Reply;

pub fn run(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some(node) = &ctx.state.cluster else {
        return err(crate::cmd::cluster::DISABLED);
    };
    match &args[1].to_ascii_lowercase()[..] {
        b"apply" => {
            let apply = match wire::parse_apply(&args[2..]) {
                Ok(a) => a,
                Err(reply) => return reply,
            };
            if node.is_frozen(apply.slots.lo, true) {
                // The tail is handing its range to a joining node: the sender tries again.
                return Reply::error(format!(
                    "TRYAGAIN the chain of slots {} is frozen while a node joins it",
                    apply.slots
                ));
            }
            let received = node.chains.receive(
                &ctx.state.store,
                apply.slots,
                apply.version,
                apply.msg,
                &mut ctx.conn.barrier,
            );
            match received {
                Ok(()) => Reply::OK,
                Err(e) => {
                    if let ReceiveError::Refused(Refusal::Version { mine, theirs, .. }) = &e {
                        if theirs > mine {
                            // The sender serves by a newer topology: read it now.
                            node.refresh.notify_one();
                        }
                    }
                    Reply::error(e.to_string())
                }
            }
        }
        b"status" if args.len() == 2 => Reply::Array(
            node.chains
                .streams()
                .iter()
                .map(|s| {
                    let role = s.role();
                    let (applied, committed, waiting, bytes) = s.figures();
                    Reply::Array(vec![
                        Reply::Bulk(Bytes::from(s.slots.to_string())),
                        Reply::Integer(role.version as i64),
                        Reply::Integer(role.position as i64),
                        Reply::Integer(role.len as i64),
                        Reply::Integer(applied as i64),
                        Reply::Integer(committed as i64),
                        Reply::Integer(waiting as i64),
                        Reply::Integer(bytes as i64),
                    ])
                })
                .collect(),
        ),
        _ => err(errors::SYNTAX),
    }
}
