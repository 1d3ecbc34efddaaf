//! `quiver-resp`: the one RESP (Redis serialization protocol) codec of Quiver, shared by the
//! server (`quiver-node`), the client (`quiver-client`) and the load generator
//! (`quiver-bench`).
//!
//! * [`int`] — the integers of the protocol: [`Header`] formats `:<n>\r\n`, `*<n>\r\n`,
//!   `$<n>\r\n` on the stack (no allocation), [`decimal_len`] sizes them, [`string2ll`] is
//!   Redis's exact integer parsing (request lengths, command arguments), [`parse_integer`] the
//!   integer of a `:` reply;
//! * [`request`] — a command as an array of bulk strings ([`encode_command`]) appended to a
//!   `Vec<u8>` or a `BytesMut` ([`Buffer`]);
//! * [`scan`] — [`Scanner`]: RESP2 and RESP3 replies framed byte by byte, resumable at any
//!   byte, allocating nothing while it scans. It reports items ([`Event`]: a line value, a bulk,
//!   a null, an aggregate's start and end) with their byte geometry; the client builds its
//!   values on it, the load generator counts replies without keeping their bytes;
//! * [`glob`] — Redis's glob patterns ([`glob_match`]: KEYS, SCAN MATCH, CONFIG GET, ACL key
//!   patterns);
//! * [`limits`] — the bounds: Redis's bulk and multibulk limits, line length, nesting depth,
//!   preallocation ([`ReplyLimits`] for the scanner);
//! * [`redirect`] — a cluster's steering errors ([`Redirect`]: `MOVED`, `ASK`, `TRYAGAIN`,
//!   `CLUSTERDOWN`, `CROSSSLOT`) and the `host:port` addresses they name;
//! * [`slot`] — Redis Cluster hash slots: [`key_slot`] (CRC16-XMODEM of the key or its
//!   `{hashtag}`, mod [`SLOTS`]) and ranges of them ([`SlotRange`]), which the engine, the
//!   server, the cluster's metadata and the cluster client share.
//!
//! The services' request parser (Redis 7's exact quirks) is `quiver-service`'s `frame`; it takes
//! its limits and [`string2ll`] from here.

pub mod glob;
pub mod int;
pub mod limits;
pub mod redirect;
pub mod request;
pub mod scan;
pub mod slot;

pub use glob::glob_match;
pub use int::{decimal_len, header_len, parse_integer, string2ll, Header};
pub use limits::ReplyLimits;
pub use redirect::Redirect;
pub use request::{command_len, encode_command, put_bulk, put_header, Buffer};
pub use scan::{AggregateType, BlobType, Event, LineType, ScanError, Scanner, Step};
pub use slot::{key_slot, SlotRange, SLOTS};
