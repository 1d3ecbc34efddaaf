//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: the longest common subsequence
//! of two values, by Redis 7's `lcsCommand` step for step — the same table, the same walk
//! back through it, so the same subsequence and the same match ranges when several are
//! longest. An absent key is the empty string.

use bytes::Bytes;

use crate::cmd::common::{Limits, TxnCommand};
use crate::txn::Txn;
use quiver_service::errors::{self, err};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;

/// Bytes of one cell of the table (Redis's `uint32_t`).
const CELL_BYTES: u64 = 4;

/// What to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    /// The subsequence itself.
    String,
    /// LEN: its length.
    Len,
    /// IDX: the matching ranges (those of at least `min_len` bytes) and the length.
    Idx { min_len: u64, with_len: bool },
}

pub struct Lcs<'a> {
    a: &'a Bytes,
    b: &'a Bytes,
    output: Output,
    /// The table's largest size in bytes (`proto-max-bulk-len`, as in Redis).
    table_bytes_max: u64,
}

impl<'a> Lcs<'a> {
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<Lcs<'a>, Reply> {
        let (mut len, mut idx, mut with_len, mut min_len) = (false, false, false, 0i64);
        let mut j = 3;
        while j < args.len() {
            let opt = &args[j];
            if opt.eq_ignore_ascii_case(b"idx") {
                idx = true;
            } else if opt.eq_ignore_ascii_case(b"len") {
                len = true;
            } else if opt.eq_ignore_ascii_case(b"withmatchlen") {
                with_len = true;
            } else if opt.eq_ignore_ascii_case(b"minmatchlen") && j + 1 < args.len() {
                j += 1;
                min_len = string2ll(&args[j])
                    .ok_or_else(|| err(errors::NOT_INTEGER))?
                    .max(0);
            } else {
                return Err(err(errors::SYNTAX));
            }
            j += 1;
        }
        let output = match (len, idx) {
            (true, true) => {
                return Err(err(
                    "ERR If you want both the length and indexes, please just use IDX.",
                ))
            }
            (_, true) => Output::Idx {
                min_len: min_len.unsigned_abs(),
                with_len,
            },
            (true, false) => Output::Len,
            (false, false) => Output::String,
        };
        Ok(Lcs {
            a: &args[1],
            b: &args[2],
            output,
            table_bytes_max: limits.value_len_max as u64,
        })
    }
}

impl TxnCommand for Lcs<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let a = txn.get(self.a)?.unwrap_or_default();
        let b = txn.get(self.b)?.unwrap_or_default();
        Ok(lcs(&a, &b, self.output, self.table_bytes_max))
    }
}

/// The reply for values `a` and `b`.
fn lcs(a: &[u8], b: &[u8], output: Output, table_bytes_max: u64) -> Reply {
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells * CELL_BYTES > table_bytes_max {
        return err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let Some(table) = Table::build(a, b) else {
        return err("ERR Insufficient memory, failed allocating transient memory for LCS");
    };
    let total = table.at(a.len(), b.len());
    if output == Output::Len {
        return Reply::Integer(total.into());
    }
    let (result, matches) = table.walk_back(a, b, output);
    match output {
        Output::Idx { .. } => Reply::Map(vec![
            (bulk("matches"), Reply::Array(matches)),
            (bulk("len"), Reply::Integer(total.into())),
        ]),
        _ => Reply::Bulk(Bytes::from(result)),
    }
}

fn bulk(s: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(s.as_bytes()))
}

/// `LCS(i, j)`: the length of the LCS of `a[..i]` and `b[..j]`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    /// The filled table, or `None` when its memory cannot be had.
    fn build(a: &[u8], b: &[u8]) -> Option<Table> {
        let width = b.len() + 1;
        let len = (a.len() + 1).checked_mul(width)?;
        let mut cells = Vec::new();
        cells.try_reserve_exact(len).ok()?;
        cells.resize(len, 0u32);
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Some(Table { cells, width })
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// Redis's walk from `(len a, len b)` back to an edge: the subsequence, and (for IDX) the
    /// ranges of consecutive matches, last first.
    fn walk_back(&self, a: &[u8], b: &[u8], output: Output) -> (Vec<u8>, Vec<Reply>) {
        let (min_len, with_len) = match output {
            Output::Idx { min_len, with_len } => (min_len, Some(with_len)),
            _ => (0, None),
        };
        let mut idx = self.at(a.len(), b.len()) as usize;
        let mut result = vec![0u8; idx];
        let mut matches = Vec::new();
        // The range being grown: (a start, a end, b start, b end).
        let mut range: Option<(usize, usize, usize, usize)> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                result[idx - 1] = a[i - 1];
                match &mut range {
                    None => range = Some((i - 1, i - 1, j - 1, j - 1)),
                    // Contiguous with the range so far: it grows backward.
                    Some((a_start, _, b_start, _)) if *a_start == i && *b_start == j => {
                        *a_start -= 1;
                        *b_start -= 1;
                    }
                    Some(_) => emit = true,
                }
                // A range that reached the start of either string is complete.
                if range.is_some_and(|(a_start, _, b_start, _)| a_start == 0 || b_start == 0) {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = range.is_some();
            }
            if !emit {
                continue;
            }
            if let (Some((a_start, a_end, b_start, b_end)), Some(with_len)) = (range, with_len) {
                let len = (a_end - a_start + 1) as u64;
                if min_len == 0 || len >= min_len {
                    let pair = |s: usize, e: usize| {
                        Reply::Array(vec![Reply::Integer(s as i64), Reply::Integer(e as i64)])
                    };
                    let mut m = vec![pair(a_start, a_end), pair(b_start, b_end)];
                    if with_len {
                        m.push(Reply::Integer(len as i64));
                    }
                    matches.push(Reply::Array(m));
                }
            }
            range = None;
        }
        (result, matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 512 << 20;

    fn idx(min_len: u64, with_len: bool) -> Output {
        Output::Idx { min_len, with_len }
    }

    fn ranges(r: &Reply) -> Vec<Vec<i64>> {
        let Reply::Map(pairs) = r else {
            panic!("{r:?}")
        };
        let Reply::Array(matches) = &pairs[0].1 else {
            panic!("{r:?}")
        };
        matches
            .iter()
            .map(|m| {
                let Reply::Array(parts) = m else { panic!() };
                parts
                    .iter()
                    .flat_map(|p| match p {
                        Reply::Array(se) => se.clone(),
                        n => vec![n.clone()],
                    })
                    .map(|n| match n {
                        Reply::Integer(n) => n,
                        _ => panic!(),
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn redis_documentation_example() {
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        assert_eq!(
            lcs(a, b, Output::String, MAX),
            Reply::Bulk(Bytes::from("mytext"))
        );
        assert_eq!(lcs(a, b, Output::Len, MAX), Reply::Integer(6));
        let r = lcs(a, b, idx(0, false), MAX);
        assert_eq!(ranges(&r), [vec![4, 7, 5, 8], vec![2, 3, 0, 1]]);
        let Reply::Map(pairs) = &r else { panic!() };
        assert_eq!(pairs[1], (bulk("len"), Reply::Integer(6)));
        assert_eq!(ranges(&lcs(a, b, idx(4, true), MAX)), [vec![4, 7, 5, 8, 4]]);
    }

    #[test]
    fn ties_follow_redis_walk() {
        // redis-server 7.0.15: LCS of "abc" and "acb" is "ac"; of "ab" and "ba", "b".
        assert_eq!(
            lcs(b"abc", b"acb", Output::String, MAX),
            Reply::Bulk("ac".into())
        );
        assert_eq!(
            lcs(b"ab", b"ba", Output::String, MAX),
            Reply::Bulk("b".into())
        );
        assert_eq!(lcs(b"", b"abc", Output::Len, MAX), Reply::Integer(0));
        assert_eq!(
            lcs(b"", b"", Output::String, MAX),
            Reply::Bulk(Bytes::new())
        );
    }

    #[test]
    fn the_table_is_bounded() {
        assert_eq!(
            lcs(&[b'a'; 99], &[b'a'; 99], Output::Len, 100 * 100 * 4),
            Reply::Integer(99)
        );
        assert_eq!(
            lcs(&[b'a'; 100], &[b'a'; 99], Output::Len, 100 * 100 * 4),
            err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
        );
    }
}
