//! A reply on its way from the nodes to the router's client, and what a node's error says
//! about where a command must go instead.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use super::backend::Replies;
use crate::reply::Reply;

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

/// What the router learns from a node's error about where a part must go.
pub enum Redirect {
    /// MOVED: the node at this address owns the keys now.
    Moved(Arc<str>),
    /// ASK: this one request goes to the address, after ASKING.
    Ask(Arc<str>),
    /// CROSSSLOT: the keys are no longer on one node: split them again.
    Replan,
}

pub fn redirect(error: &[u8]) -> Option<Redirect> {
    let addr = |e: &[u8]| {
        let text = std::str::from_utf8(e).ok()?;
        text.split(' ').nth(2).map(Arc::from)
    };
    if error.starts_with(b"MOVED ") {
        addr(error).map(Redirect::Moved)
    } else if error.starts_with(b"ASK ") {
        addr(error).map(Redirect::Ask)
    } else if error.starts_with(b"CROSSSLOT") {
        Some(Redirect::Replan)
    } else {
        None
    }
}
