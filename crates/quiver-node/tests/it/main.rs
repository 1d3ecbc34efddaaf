//! Byte-level tests for `quiver-node`: raw bytes in, exact result out.

// Tests unwrap: a failure there is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acl;
mod bad_input;
mod cluster;
mod compat;
mod databases;
mod dispatch_fuzz;
mod expire;
mod exporter;
mod frame;
mod hash_model;
mod inline;
mod limits;
mod live_config;
mod observability;
mod pubsub;
mod rename_command;
mod reply;
mod robustness;
mod saves;
mod security;
mod semantics;
mod serving;
mod tls;
mod tracking;

use bytes::BytesMut;
use quiver_service::{parse_request, Limits, RequestParser};

/// What a byte stream parses to: the requests, then the error (if any).
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub requests: Vec<Vec<Vec<u8>>>,
    pub error: Option<Vec<u8>>,
    /// Bytes left in the buffer (meaningless after an error).
    pub left: usize,
}

impl Outcome {
    pub fn ok(requests: &[&[&[u8]]], left: usize) -> Self {
        Outcome {
            requests: requests
                .iter()
                .map(|r| r.iter().map(|a| a.to_vec()).collect())
                .collect(),
            error: None,
            left,
        }
    }

    pub fn err(requests: &[&[&[u8]]], message: &str) -> Self {
        Outcome {
            error: Some(message.as_bytes().to_vec()),
            left: 0,
            ..Outcome::ok(requests, 0)
        }
    }
}

/// Parses all of `input` at once with the stateless [`parse_request`],
/// checking the consumption invariants on the way.
pub fn parse_all(input: &[u8], limits: &Limits) -> Outcome {
    let mut buf = BytesMut::from(input);
    let mut requests = Vec::new();
    loop {
        let before = buf.len();
        match parse_request(&mut buf, limits) {
            Ok(Some(args)) => {
                assert!(!args.is_empty(), "empty request returned");
                assert!(buf.len() < before, "request returned without consuming");
                requests.push(args.iter().map(|a| a.to_vec()).collect());
            }
            Ok(None) => {
                assert!(buf.len() <= before);
                return Outcome {
                    requests,
                    error: None,
                    left: buf.len(),
                };
            }
            Err(e) => {
                // Only skipped no-command requests (`*0`, empty lines) may be consumed.
                assert!(buf.len() <= before);
                return Outcome {
                    requests,
                    error: Some(e.message.to_vec()),
                    left: 0,
                };
            }
        }
    }
}

/// Feeds `input` in chunks of `chunk` bytes, draining complete requests after
/// each chunk, with either the incremental parser or the stateless function.
pub fn parse_chunked(input: &[u8], limits: &Limits, chunk: usize, stateful: bool) -> Outcome {
    let mut parser = RequestParser::new(*limits);
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            let res = if stateful {
                parser.parse(&mut buf)
            } else {
                parse_request(&mut buf, limits)
            };
            match res {
                Ok(Some(args)) => requests.push(args.iter().map(|a| a.to_vec()).collect()),
                Ok(None) => break,
                Err(e) => {
                    return Outcome {
                        requests,
                        error: Some(e.message.to_vec()),
                        left: 0,
                    }
                }
            }
        }
    }
    Outcome {
        requests,
        error: None,
        left: buf.len(),
    }
}

/// Parses `input` whole, byte by byte (incremental and stateless), and in
/// 7-byte chunks; all must agree. Returns the outcome.
pub fn parse_every_way(input: &[u8], limits: &Limits) -> Outcome {
    let whole = parse_all(input, limits);
    for (chunk, stateful) in [(1, true), (1, false), (7, true)] {
        let other = parse_chunked(input, limits, chunk, stateful);
        assert_eq!(
            other,
            whole,
            "chunk {chunk} stateful {stateful} differs for {:?}",
            String::from_utf8_lossy(input)
        );
    }
    whole
}

/// A request as a client sends it: a RESP multibulk of bulk strings.
pub fn encode_multibulk<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
