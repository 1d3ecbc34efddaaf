//! A connection's buffered replies, and the server-wide bound on all of them.
//!
//! Two limits apply to replies waiting to be written:
//! * `client-output-buffer-limit`, per connection, checked after each command by
//!   `exec::execute_run`: a connection past it is closed (Redis's hard limit);
//! * `client-output-buffer-total-limit`, the sum over every connection, checked here before a
//!   reply is encoded: a reply that would take the sum past it is not encoded at all (no memory
//!   is committed to it), and an error saying so takes its place. The connection stays open,
//!   and the same command succeeds once other connections' replies have been written out.
//!
//! [`OutputBudget`] (in the shared state) holds the sum of what connections reserved;
//! [`Output`] (one per connection) reserves each reply's size before encoding it. A shared sum
//! that every connection writes on every reply and every write-out would be a cache line every
//! core fights for (the many-core issue), so a connection reserves ahead: it takes a credit of
//! up to [`OUTPUT_CREDIT_BYTES`] with what it needs and keeps up to that much reserved after its
//! buffer is written, and replies that fit in its credit touch no shared line. The credit
//! counts against the limit (a connection may be refused up to its peers' credits early); the
//! exact bytes buffered, for INFO, are counted per thread (`Stats::output_buffered`). A closed
//! connection gives everything back.
//!
//! CLIENT REPLY OFF / SKIP ([`ReplyMode`]) drops replies here, where every command's reply
//! passes one call at a time: they are neither buffered nor counted, but an error dropped is
//! still counted in the error statistics, as Redis counts it.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::{Bytes, BytesMut};

use crate::errors;
use crate::reply::{self, Reply};
use crate::stats::Stats;

/// Initial capacity of a connection's reply buffer.
const OUTPUT_CAPACITY_INITIAL_BYTES: usize = 16 * 1024;
/// A reply buffer grown past this (by a large reply) is dropped once written instead of being
/// kept for the next replies: an idle connection must not hold on to a gigabyte.
const OUTPUT_CAPACITY_KEPT_MAX_BYTES: usize = 1 << 20;
/// Most a connection keeps reserved in the budget beyond its buffered replies (and at most a
/// 64th of the limit): a run's replies within it are counted without a shared write.
pub const OUTPUT_CREDIT_BYTES: usize = 16 * 1024;

/// CLIENT REPLY: whether a connection's replies are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    #[default]
    On,
    Off,
    /// The next this many replies are dropped, then replies are on again (CLIENT REPLY SKIP
    /// drops its own and the next command's).
    Skip(u8),
}

/// The bytes of replies reserved by all connections; see the module documentation.
pub struct OutputBudget {
    reserved_bytes: AtomicUsize,
    /// `client-output-buffer-total-limit`; 0: no limit.
    limit_bytes: usize,
    /// What a connection keeps reserved at most between runs.
    credit_max: usize,
}

impl OutputBudget {
    pub fn new(limit_bytes: usize) -> OutputBudget {
        let credit_max = match limit_bytes {
            0 => OUTPUT_CREDIT_BYTES,
            limit => OUTPUT_CREDIT_BYTES.min(limit / 64),
        };
        OutputBudget {
            reserved_bytes: AtomicUsize::new(0),
            limit_bytes,
            credit_max,
        }
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    /// Reserves `n` more bytes if the sum stays within the limit; else reserves nothing.
    fn try_take(&self, n: usize) -> bool {
        if self.limit_bytes == 0 {
            self.take(n);
            return true;
        }
        self.reserved_bytes
            .fetch_update(Relaxed, Relaxed, |b| {
                b.checked_add(n).filter(|&sum| sum <= self.limit_bytes)
            })
            .is_ok()
    }

    /// Reserves `n` more bytes whatever the limit.
    fn take(&self, n: usize) {
        self.reserved_bytes.fetch_add(n, Relaxed);
    }

    fn give_back(&self, n: usize) {
        if n > 0 {
            self.reserved_bytes.fetch_sub(n, Relaxed);
        }
    }
}

/// One connection's reply buffer; every byte in it is reserved in the [`OutputBudget`].
pub struct Output<'s> {
    buf: BytesMut,
    budget: &'s OutputBudget,
    stats: &'s Stats,
    /// Bytes of `buf` (reserved in `budget`).
    held_bytes: usize,
    /// Bytes reserved in `budget` beyond `held_bytes`, for the next replies.
    credit_bytes: usize,
    /// CLIENT REPLY.
    mode: ReplyMode,
}

impl<'s> Output<'s> {
    pub fn new(budget: &'s OutputBudget, stats: &'s Stats) -> Output<'s> {
        Output {
            buf: BytesMut::with_capacity(OUTPUT_CAPACITY_INITIAL_BYTES),
            budget,
            stats,
            held_bytes: 0,
            credit_bytes: 0,
            mode: ReplyMode::On,
        }
    }

    /// CLIENT REPLY ON, OFF or SKIP (`Session::reply_change`), as Redis switches: a SKIP
    /// while replies are off changes nothing.
    pub fn switch(&mut self, to: ReplyMode) {
        if !(matches!(to, ReplyMode::Skip(_)) && self.mode == ReplyMode::Off) {
            self.mode = to;
        }
    }

    /// Whether the next reply is dropped (CLIENT REPLY OFF or SKIP); a skip is used up by it.
    fn muted(&mut self) -> bool {
        match self.mode {
            ReplyMode::On => false,
            ReplyMode::Off => true,
            ReplyMode::Skip(n) => {
                self.mode = if n > 1 {
                    ReplyMode::Skip(n - 1)
                } else {
                    ReplyMode::On
                };
                true
            }
        }
    }

    /// Reserves `len` bytes for replies about to be encoded: from the credit when it holds
    /// them, else from the budget (with a fresh credit if the limit allows). False: the limit
    /// does not allow them; nothing was reserved.
    fn reserve(&mut self, len: usize) -> bool {
        if len > self.credit_bytes {
            let missing = len - self.credit_bytes;
            let credit = self.budget.credit_max;
            if credit > 0 && self.budget.try_take(missing + credit) {
                self.credit_bytes += missing + credit;
            } else if self.budget.try_take(missing) {
                self.credit_bytes += missing;
            } else {
                return false;
            }
        }
        self.credit_bytes -= len;
        self.held(len);
        true
    }

    /// `len` more bytes in the buffer, reserved already.
    fn held(&mut self, len: usize) {
        self.held_bytes += len;
        self.stats.output_buffered(len as u64);
    }

    /// Bytes waiting to be written.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Appends `reply`, or, if the server's buffered replies would pass the total limit with
    /// it, the error that replaces it.
    pub fn reply(&mut self, reply: &Reply, resp3: bool) {
        if self.muted() {
            if let Reply::Error(text) = reply {
                self.stats.error_reply(text);
            }
            return;
        }
        let len = reply.encoded_len(resp3);
        if !self.reserve(len) {
            return self.refuse(len, resp3);
        }
        self.encode(reply, resp3);
    }

    /// Appends the replies of a vector's commands, each under the limit as with
    /// [`Output::reply`]. When all of them fit they are counted at once (one atomic operation
    /// on the shared sum per vector, not one per reply).
    pub fn replies(&mut self, replies: &[Reply], resp3: bool) {
        let len = replies.iter().map(|r| r.encoded_len(resp3)).sum();
        if self.mode != ReplyMode::On || !self.reserve(len) {
            // Some do not fit, or some are dropped (CLIENT REPLY): each on its own, so that
            // only those are refused or dropped.
            for r in replies {
                self.reply(r, resp3);
            }
            return;
        }
        for r in replies {
            self.encode(r, resp3);
        }
    }

    /// Appends `n` copies of `reply` (the replies of a vector's commands that all answer
    /// alike), like [`Output::replies`].
    pub fn reply_n(&mut self, reply: &Reply, n: usize, resp3: bool) {
        let len = reply.encoded_len(resp3) * n;
        if self.mode != ReplyMode::On || !self.reserve(len) {
            for _ in 0..n {
                self.reply(reply, resp3);
            }
            return;
        }
        for _ in 0..n {
            self.encode(reply, resp3);
        }
    }

    /// Encodes a reply already counted in the budget. Error replies are counted in the
    /// statistics here, where they are sent.
    fn encode(&mut self, reply: &Reply, resp3: bool) {
        if let Reply::Error(text) = reply {
            self.stats.error_reply(text);
        }
        reply.encode(&mut self.buf, resp3);
    }

    /// Appends a push message (`push`): never dropped by CLIENT REPLY, as Redis sends them,
    /// nor refused at the total limit (an error in its place would read as a command's reply,
    /// and a lost invalidation leaves a client's cache stale); counted like any reply. Their
    /// number is bounded where they are queued (`push::PUSHES_PENDING_MAX`).
    pub fn push(&mut self, push: &Reply, resp3: bool) {
        let len = push.encoded_len(resp3);
        if !self.reserve(len) {
            self.budget.take(len);
            self.held(len);
        }
        self.encode(push, resp3);
    }

    /// Appends an array of bulk strings or nulls (an MGET reply) straight from the values,
    /// under the same limit as [`Output::reply`].
    pub fn bulks(&mut self, values: &[Option<Bytes>], resp3: bool) {
        if self.muted() {
            return;
        }
        let len = reply::bulks_encoded_len(values, resp3);
        if !self.reserve(len) {
            return self.refuse(len, resp3);
        }
        reply::encode_bulks(&mut self.buf, values, resp3);
    }

    /// Appends a reply already encoded (a node's, forwarded by the router), under the same
    /// limit as [`Output::reply`]; an error reply is counted as one.
    pub fn raw(&mut self, bytes: &[u8], resp3: bool) {
        let len = bytes.len();
        if bytes.first() == Some(&b'-') && len >= 3 {
            self.stats.error_reply(&bytes[1..len - 2]);
        }
        if self.muted() {
            return;
        }
        if !self.reserve(len) {
            return self.refuse(len, resp3);
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Appends the error that replaces a reply of `len` bytes refused at the total limit.
    fn refuse(&mut self, len: usize, resp3: bool) {
        self.stats
            .replies_refused_by_total_limit
            .fetch_add(1, Relaxed);
        let error = errors::reply_over_total_limit(len, self.budget.limit_bytes);
        // The error is a few dozen bytes: it is counted but never refused itself, so that every
        // request gets a reply.
        let error_len = error.encoded_len(resp3);
        self.budget.take(error_len);
        self.held(error_len);
        self.encode(&error, resp3);
    }

    /// The buffer has been written to the client: empty it and give its bytes back.
    pub fn written(&mut self) {
        self.buf.clear();
        let held = std::mem::take(&mut self.held_bytes);
        self.stats.output_written(held as u64);
        // Kept as credit, up to the most a connection keeps; the rest goes back.
        self.credit_bytes += held;
        let kept = self.credit_bytes.min(self.budget.credit_max);
        self.budget.give_back(self.credit_bytes - kept);
        self.credit_bytes = kept;
        if self.buf.capacity() > OUTPUT_CAPACITY_KEPT_MAX_BYTES {
            self.buf = BytesMut::with_capacity(OUTPUT_CAPACITY_INITIAL_BYTES);
        }
    }
}

impl Drop for Output<'_> {
    /// A connection that ends with replies unwritten (closed, killed, over a limit, shut down)
    /// gives their bytes back.
    fn drop(&mut self) {
        self.stats.output_written(self.held_bytes as u64);
        self.budget.give_back(self.held_bytes + self.credit_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reply bytes buffered, as INFO shows them.
    fn buffered(stats: &Stats) -> usize {
        stats.output_buffered_bytes() as usize
    }

    #[test]
    fn the_total_is_bounded_and_given_back() {
        let budget = OutputBudget::new(100);
        let stats = Stats::default();
        let value = Reply::Bulk(Bytes::from(vec![b'v'; 40])); // 47 bytes encoded
        let mut a = Output::new(&budget, &stats);
        let mut b = Output::new(&budget, &stats);
        a.reply(&value, false);
        b.reply(&value, false);
        assert_eq!(buffered(&stats), 94);
        // A third would pass 100: replaced by the error, which is counted nonetheless.
        a.reply(&value, false);
        let text = String::from_utf8_lossy(&a.bytes()[47..]).into_owned();
        assert!(
            text.starts_with("-ERR reply of 47 bytes not sent:") && text.contains("(100 bytes)"),
            "{text}"
        );
        assert_eq!(buffered(&stats), 94 + text.len());
        assert_eq!(stats.replies_refused_by_total_limit.load(Relaxed), 1);
        assert_eq!(stats.error_replies.load(Relaxed), 1);
        // Written: a's bytes are given back, and its next reply fits.
        a.written();
        assert_eq!(buffered(&stats), 47);
        a.bulks(&[Some(Bytes::from_static(b"x")), None], false);
        assert_eq!(a.bytes(), b"*2\r\n$1\r\nx\r\n$-1\r\n");
        assert_eq!(buffered(&stats), 47 + a.len());
        // Dropped with replies unwritten (a closed connection): given back too.
        drop(a);
        drop(b);
        assert_eq!(buffered(&stats), 0);
    }

    #[test]
    fn in_a_vector_only_the_replies_that_do_not_fit_are_refused() {
        let budget = OutputBudget::new(300);
        let stats = Stats::default();
        let mut out = Output::new(&budget, &stats);
        let small = Reply::Bulk(Bytes::from_static(b"s")); // 7 bytes
        let large = Reply::Bulk(Bytes::from(vec![b'v'; 400])); // 408 bytes
        out.replies(&[small.clone(), large, small.clone()], false);
        let text = String::from_utf8_lossy(out.bytes()).into_owned();
        assert!(
            text.starts_with("$1\r\ns\r\n-ERR reply of 408 bytes"),
            "{text}"
        );
        assert!(text.ends_with("bytes)\r\n$1\r\ns\r\n"), "{text}");
        assert_eq!(buffered(&stats), out.len());
        // All alike and all fitting: counted at once.
        out.written();
        out.reply_n(&small, 3, true);
        assert_eq!(out.bytes(), b"$1\r\ns\r\n".repeat(3));
        assert_eq!(buffered(&stats), 21);
        assert_eq!(stats.replies_refused_by_total_limit.load(Relaxed), 1);
    }

    #[test]
    fn zero_means_no_limit() {
        let budget = OutputBudget::new(0);
        let stats = Stats::default();
        let mut out = Output::new(&budget, &stats);
        out.reply(&Reply::Bulk(Bytes::from(vec![b'v'; 1 << 20])), true);
        assert_eq!(buffered(&stats), out.len());
        assert_eq!(stats.replies_refused_by_total_limit.load(Relaxed), 0);
        out.written();
        assert_eq!(buffered(&stats), 0);
        assert!(out.is_empty());
    }

    #[test]
    fn replies_within_a_connections_credit_write_no_shared_counter() {
        let budget = OutputBudget::new(4 << 30);
        let stats = Stats::default();
        let mut out = Output::new(&budget, &stats);
        let small = Reply::Bulk(Bytes::from_static(b"s")); // 7 bytes
        out.reply(&small, false);
        let reserved = budget.reserved_bytes.load(Relaxed);
        assert_eq!(reserved, 7 + OUTPUT_CREDIT_BYTES);
        for _ in 0..100 {
            out.reply(&small, false);
        }
        assert_eq!(budget.reserved_bytes.load(Relaxed), reserved);
        assert_eq!(buffered(&stats), 707);
        // Written: the credit is kept, the rest given back; a closed connection keeps nothing.
        out.written();
        assert_eq!(buffered(&stats), 0);
        assert_eq!(budget.reserved_bytes.load(Relaxed), OUTPUT_CREDIT_BYTES);
        out.reply_n(&small, 10, false);
        assert_eq!(budget.reserved_bytes.load(Relaxed), OUTPUT_CREDIT_BYTES);
        drop(out);
        assert_eq!(budget.reserved_bytes.load(Relaxed), 0);
        assert_eq!(buffered(&stats), 0);
    }

    #[test]
    fn client_reply_drops_replies_but_not_pushes() {
        let budget = OutputBudget::new(0);
        let stats = Stats::default();
        let mut out = Output::new(&budget, &stats);
        let one = Reply::Integer(1);
        // SKIP: the CLIENT REPLY SKIP's own reply and the next one go.
        out.switch(ReplyMode::Skip(2));
        out.reply(&Reply::OK, false);
        out.replies(&[one.clone(), one.clone()], false);
        assert_eq!(out.bytes(), b":1\r\n");
        // OFF: everything goes but pushes; a SKIP changes nothing while off.
        out.switch(ReplyMode::Off);
        out.switch(ReplyMode::Skip(2));
        out.reply_n(&one, 3, false);
        out.raw(b"-ERR x\r\n", false);
        out.push(&Reply::Push(vec![Reply::Null]), true);
        assert_eq!(out.bytes(), b":1\r\n>1\r\n_\r\n");
        // A dropped error still counts as an error reply.
        assert_eq!(stats.error_replies.load(Relaxed), 1);
        out.switch(ReplyMode::On);
        out.reply(&one, false);
        assert_eq!(out.bytes(), b":1\r\n>1\r\n_\r\n:1\r\n");
    }
}
