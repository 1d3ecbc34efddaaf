//! RESP reply encoding, for RESP2 and RESP3 connections.
//!
//! RESP3-only types are downgraded on RESP2 connections the way Redis 7 does:
//! `Null` -> `$-1`, `NullArray` -> `*-1`, `Map` -> flat array of keys and
//! values, `Set` -> array, `Double` -> bulk string, `Boolean` -> integer 1/0,
//! `Verbatim` -> bulk string of the text alone.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};
use quiver_resp::{decimal_len, header_len, Header};

use crate::frame::ProtocolError;

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`: must not contain `\r` or `\n`.
    Simple(Cow<'static, str>),
    /// `-ERR ...` (the text after `-`): must not contain `\r` or `\n`.
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    /// The null bulk string (RESP2 `$-1`, RESP3 `_`).
    Null,
    Array(Vec<Reply>),
    /// The null array (RESP2 `*-1`, RESP3 `_`).
    NullArray,
    Map(Vec<(Reply, Reply)>),
    /// Pairs as Redis 7 sends them where they are no map (HRANDFIELD ... WITHVALUES): one
    /// flat array in RESP2, an array of two-element arrays in RESP3.
    Pairs(Vec<(Reply, Reply)>),
    Double(f64),
    Boolean(bool),
    /// RESP3 verbatim string, e.g. format `txt` or `mkd`.
    Verbatim {
        format: [u8; 3],
        text: Bytes,
    },
    Set(Vec<Reply>),
    /// RESP3 push (`>`): a message the server sends outside the replies (CLIENT TRACKING's
    /// invalidations); an array in RESP2.
    Push(Vec<Reply>),
    /// Several replies to one command, one after another (SUBSCRIBE a b answers one per
    /// channel, as Redis).
    Many(Vec<Reply>),
    /// RESP3 big number (`(`): a bulk string in RESP2 (DEBUG PROTOCOL bignum).
    BigNumber(&'static str),
    /// RESP3 attributes (`|`) before a reply; RESP2 sends the reply alone (DEBUG PROTOCOL
    /// attrib).
    Attributed(Vec<(Reply, Reply)>, Box<Reply>),
}

impl Reply {
    pub const OK: Reply = Reply::Simple(Cow::Borrowed("OK"));

    pub fn simple(s: impl Into<Cow<'static, str>>) -> Self {
        Reply::Simple(s.into())
    }

    pub fn error(s: impl Into<String>) -> Self {
        Reply::Error(Bytes::from(s.into()))
    }

    /// A bulk string of text (a name, a number, a line).
    pub fn text(s: impl Into<String>) -> Self {
        Reply::Bulk(Bytes::from(s.into()))
    }

    /// Appends this reply to `out`, in RESP3 if `resp3` else RESP2.
    pub fn encode(&self, out: &mut BytesMut, resp3: bool) {
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(e) => line(out, b'-', e),
            Reply::Integer(n) => out.put_slice(Header::int(b':', *n).as_bytes()),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Null if resp3 => out.put_slice(b"_\r\n"),
            Reply::Null => out.put_slice(b"$-1\r\n"),
            Reply::NullArray if resp3 => out.put_slice(b"_\r\n"),
            Reply::NullArray => out.put_slice(b"*-1\r\n"),
            Reply::Array(items) => aggregate(out, b'*', items, resp3),
            Reply::Set(items) => aggregate(out, if resp3 { b'~' } else { b'*' }, items, resp3),
            Reply::Push(items) => aggregate(out, if resp3 { b'>' } else { b'*' }, items, resp3),
            Reply::Many(replies) => replies.iter().for_each(|r| r.encode(out, resp3)),
            Reply::Map(pairs) => {
                let (kind, n) = if resp3 {
                    (b'%', pairs.len())
                } else {
                    (b'*', pairs.len() * 2)
                };
                out.put_slice(Header::new(kind, n).as_bytes());
                for (k, v) in pairs {
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Reply::Pairs(pairs) if resp3 => {
                out.put_slice(Header::new(b'*', pairs.len()).as_bytes());
                for (k, v) in pairs {
                    out.put_slice(Header::new(b'*', 2).as_bytes());
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Reply::Pairs(pairs) => {
                out.put_slice(Header::new(b'*', pairs.len() * 2).as_bytes());
                for (k, v) in pairs {
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Reply::Double(d) => {
                let text = format_double(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, text.as_bytes());
                }
            }
            Reply::Boolean(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Boolean(b) => out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            Reply::Verbatim { format, text } if resp3 => {
                out.put_slice(Header::new(b'=', text.len() + 4).as_bytes());
                out.put_slice(format);
                out.put_u8(b':');
                out.put_slice(text);
                out.put_slice(b"\r\n");
            }
            Reply::Verbatim { text, .. } => bulk(out, text),
            Reply::BigNumber(digits) if resp3 => line(out, b'(', digits.as_bytes()),
            Reply::BigNumber(digits) => bulk(out, digits.as_bytes()),
            Reply::Attributed(attrs, reply) => {
                if resp3 {
                    out.put_slice(Header::new(b'|', attrs.len()).as_bytes());
                    for (k, v) in attrs {
                        k.encode(out, resp3);
                        v.encode(out, resp3);
                    }
                }
                reply.encode(out, resp3);
            }
        }
    }

    /// How many bytes [`Reply::encode`] appends for this reply, computed without encoding it
    /// (so a reply can be checked against a buffer limit before memory is committed to it).
    pub fn encoded_len(&self, resp3: bool) -> usize {
        match self {
            Reply::Simple(s) => s.len() + 3,
            Reply::Error(e) => e.len() + 3,
            Reply::Integer(n) => decimal_len(*n) + 3,
            Reply::Bulk(b) => bulk_len(b.len()),
            Reply::Null | Reply::NullArray if resp3 => 3,
            Reply::Null => 5,
            Reply::NullArray => 5,
            Reply::Many(replies) => replies.iter().map(|r| r.encoded_len(resp3)).sum(),
            Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => {
                header_len(items.len()) + items.iter().map(|i| i.encoded_len(resp3)).sum::<usize>()
            }
            Reply::Map(pairs) => {
                let n = if resp3 { pairs.len() } else { pairs.len() * 2 };
                header_len(n)
                    + pairs
                        .iter()
                        .map(|(k, v)| k.encoded_len(resp3) + v.encoded_len(resp3))
                        .sum::<usize>()
            }
            Reply::Pairs(pairs) => {
                let (n, each) = if resp3 {
                    (pairs.len(), header_len(2))
                } else {
                    (pairs.len() * 2, 0)
                };
                header_len(n)
                    + pairs
                        .iter()
                        .map(|(k, v)| each + k.encoded_len(resp3) + v.encoded_len(resp3))
                        .sum::<usize>()
            }
            Reply::Double(d) if resp3 => format_double(*d).len() + 3,
            Reply::Double(d) => bulk_len(format_double(*d).len()),
            Reply::Boolean(_) => 4,
            Reply::Verbatim { text, .. } if resp3 => bulk_len(text.len() + 4),
            Reply::Verbatim { text, .. } => bulk_len(text.len()),
            Reply::BigNumber(digits) if resp3 => digits.len() + 3,
            Reply::BigNumber(digits) => bulk_len(digits.len()),
            Reply::Attributed(attrs, reply) if resp3 => {
                header_len(attrs.len())
                    + attrs
                        .iter()
                        .map(|(k, v)| k.encoded_len(resp3) + v.encoded_len(resp3))
                        .sum::<usize>()
                    + reply.encoded_len(resp3)
            }
            Reply::Attributed(_, reply) => reply.encoded_len(resp3),
        }
    }

    /// This reply's encoding as a new buffer.
    pub fn to_bytes(&self, resp3: bool) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(&mut out, resp3);
        out.freeze()
    }
}

/// Encodes an array of bulk strings or nulls (an MGET reply) straight from the values, without
/// building a [`Reply`] tree: the same bytes as `Reply::Array` of `Reply::Bulk` / `Reply::Null`.
pub fn encode_bulks(out: &mut BytesMut, values: &[Option<Bytes>], resp3: bool) {
    let payload: usize = values
        .iter()
        .map(|v| v.as_ref().map_or(5, |b| b.len() + 16))
        .sum();
    out.reserve(payload + 16);
    out.put_slice(Header::new(b'*', values.len()).as_bytes());
    for v in values {
        match v {
            Some(b) => bulk(out, b),
            None if resp3 => out.put_slice(b"_\r\n"),
            None => out.put_slice(b"$-1\r\n"),
        }
    }
}

/// How many bytes [`encode_bulks`] appends for `values`.
pub fn bulks_encoded_len(values: &[Option<Bytes>], resp3: bool) -> usize {
    let null = if resp3 { 3 } else { 5 };
    header_len(values.len())
        + values
            .iter()
            .map(|v| v.as_ref().map_or(null, |b| bulk_len(b.len())))
            .sum::<usize>()
}

impl From<ProtocolError> for Reply {
    fn from(e: ProtocolError) -> Self {
        Reply::Error(e.message)
    }
}

fn line(out: &mut BytesMut, kind: u8, body: &[u8]) {
    out.reserve(body.len() + 3);
    out.put_u8(kind);
    out.put_slice(body);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, data: &[u8]) {
    out.reserve(data.len() + 24);
    out.put_slice(Header::new(b'$', data.len()).as_bytes());
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

fn aggregate(out: &mut BytesMut, kind: u8, items: &[Reply], resp3: bool) {
    out.put_slice(Header::new(kind, items.len()).as_bytes());
    for item in items {
        item.encode(out, resp3);
    }
}

/// Bytes of a bulk string of `len` bytes: `$<len>\r\n<data>\r\n`.
fn bulk_len(len: usize) -> usize {
    header_len(len) + len + 2
}

/// `inf`, `-inf`, `nan`, else the shortest text that reads back as `d`
/// (like Redis 7.2's `fpconv_dtoa`, but never in exponent form).
fn format_double(d: f64) -> String {
    if d.is_nan() {
        "nan".to_owned()
    } else if d.is_infinite() {
        if d > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        d.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_flat_in_resp2_and_nested_in_resp3() {
        let pairs = Reply::Pairs(vec![
            (Reply::text("f"), Reply::text("v")),
            (Reply::text("g"), Reply::Null),
        ]);
        let resp2 = pairs.to_bytes(false);
        let resp3 = pairs.to_bytes(true);
        assert_eq!(
            &resp2[..],
            b"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n$-1\r\n"
        );
        assert_eq!(
            &resp3[..],
            b"*2\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$1\r\ng\r\n_\r\n"
        );
        assert_eq!(pairs.encoded_len(false), resp2.len());
        assert_eq!(pairs.encoded_len(true), resp3.len());
    }
}
