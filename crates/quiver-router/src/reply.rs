//! A reply on its way from the nodes to the router's client, and what a node's error says
//! about where a command must go instead.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use quiver_resp::redirect::{join_addr, Redirect};

use quiver_peer::Replies;
use quiver_service::reply::Reply;

/// A reply on its way to the client: its bytes (a node's, or the router's own) and, for an
/// array of scalars, each element's bytes.
pub struct Assembled {
    pub bytes: Bytes,
    pub elements: Vec<Range<usize>>,
}

impl Assembled {
    pub fn of(replies: &Replies, i: usize) -> Assembled {
        let range = replies.replies[i].range.clone();
        let elements = replies.element_ranges(i).map_or_else(Vec::new, |e| {
            e.iter()
                .map(|r| r.start - range.start..r.end - range.start)
                .collect()
        });
        Assembled {
            bytes: replies.buf.slice(range),
            elements,
        }
    }

    pub fn reply(reply: &Reply, resp3: bool) -> Assembled {
        Assembled {
            bytes: reply.to_bytes(resp3),
            elements: Vec::new(),
        }
    }

    pub fn error(&self) -> Option<&[u8]> {
        let b = &self.bytes;
        (b.first() == Some(&b'-')).then(|| &b[1..b.len() - 2])
    }

    pub fn integer(&self) -> Option<i64> {
        let b = &self.bytes;
        (b.first() == Some(&b':')).then(|| quiver_resp::parse_integer(&b[1..b.len() - 2]))?
    }
}

/// What the router does about a node's error that steers a part elsewhere.
pub enum Reroute {
    /// MOVED: the node at this address owns the keys now.
    Moved(Arc<str>),
    /// ASK: this one request goes to the address, after ASKING.
    Ask(Arc<str>),
    /// CROSSSLOT: the keys are no longer on one node: split them again.
    Replan,
}

/// The reroute a node's error (without its `-`) asks for (`quiver_resp::redirect`); `None`
/// for any other error (TRYAGAIN and CLUSTERDOWN among them: they reach the client).
pub fn reroute(error: &[u8]) -> Option<Reroute> {
    let text = std::str::from_utf8(error).ok()?;
    match Redirect::parse(text)? {
        Redirect::Moved { host, port, .. } => Some(Reroute::Moved(join_addr(&host, port).into())),
        Redirect::Ask { host, port, .. } => Some(Reroute::Ask(join_addr(&host, port).into())),
        Redirect::CrossSlot => Some(Reroute::Replan),
        Redirect::TryAgain | Redirect::ClusterDown => None,
    }
}
