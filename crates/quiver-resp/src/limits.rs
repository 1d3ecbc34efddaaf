//! The protocol's bounds, named once. Every length a peer declares is checked against them
//! before anything is reserved for it.

/// Largest bulk string: Redis's `proto-max-bulk-len` default (512 MiB).
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Largest element count of one aggregate (a request's multibulk count, a reply's array):
/// Redis 7 rejects counts above `INT_MAX` (Redis before 7 used `1024 * 1024`).
pub const MAX_AGGREGATE_LEN: usize = i32::MAX as usize;
/// Longest line (type byte included, CRLF not), and the bytes a request may buffer without a
/// line end: Redis's `PROTO_INLINE_MAX_SIZE` (64 KiB). A peer that never sends `\r\n` cannot
/// make a buffer grow forever.
pub const MAX_LINE_LEN: usize = 64 * 1024;
/// Deepest aggregate nesting of a reply. Real replies nest a few levels; the bound keeps a
/// hostile reply from building a value whose recursive drop overflows the stack.
pub const MAX_DEPTH: usize = 128;
/// Slots reserved when an aggregate header is read; more are added as the elements arrive
/// (Redis 7 does the same with `argv_len = min(count, 1024)`).
pub const AGGREGATE_PREALLOC: usize = 1024;
/// Digits of a length in a reply header: 19 keep the value within an `i64`.
pub const MAX_LENGTH_DIGITS: usize = 19;
/// [`crate::string2ll`] accepts at most this many characters (Redis: "shorter than 21").
pub const STRING2LL_MAX_LEN: usize = 20;

/// What a [`crate::Scanner`] accepts in replies. [`ReplyLimits::default`] uses the constants
/// of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyLimits {
    /// Largest bulk string, blob error or verbatim string.
    pub max_bulk_len: usize,
    /// Largest declared element count of an aggregate (pairs, for maps and attributes).
    pub max_aggregate_len: usize,
    /// Deepest nesting of aggregates.
    pub max_depth: usize,
    /// Longest line: simple string, error, number, or a length header; type byte included,
    /// CRLF not.
    pub max_line_len: usize,
}

impl Default for ReplyLimits {
    fn default() -> Self {
        ReplyLimits {
            max_bulk_len: MAX_BULK_LEN,
            max_aggregate_len: MAX_AGGREGATE_LEN,
            max_depth: MAX_DEPTH,
            max_line_len: MAX_LINE_LEN,
        }
    }
}
