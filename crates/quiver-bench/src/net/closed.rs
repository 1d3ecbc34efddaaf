//! The closed loop: each connection keeps `depth` requests outstanding; every reply releases
//! the next request. One task per connection, all on the client's one thread.
//!
//! A round is: encode as many requests as replies just arrived, write them in one system
//! call, read until at least one reply completes. The send time of a request is taken just
//! before its write, its reply time just after the read that completed it: one clock read per
//! system call, not per request. The latency of a request is reply time - send time.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;

use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::net::resp::ReplyScanner;
use crate::net::tally::Tally;
use crate::net::token_bucket::monotonic_ns;
use crate::net::workload::RequestGen;

/// Bytes read per system call: many pipelined replies at once (an MGET-32 reply of 32-byte
/// values is about 1.3 KB).
pub const READ_BUF: usize = 64 << 10;

/// Starts one connection's task. It stops by itself at the window's end, when the connection
/// breaks (counted in the tally), or when the run aborts it.
pub fn spawn(
    stream: TcpStream,
    gen: RequestGen,
    depth: usize,
    tally: Rc<RefCell<Tally>>,
    all_done: Rc<Notify>,
) -> JoinHandle<()> {
    tokio::task::spawn_local(async move {
        let failure = drive(&stream, gen, depth, &tally).await;
        let mut t = tally.borrow_mut();
        let last = match failure {
            Some(why) => t.disconnect(why),
            None => t.finished(),
        };
        if last {
            all_done.notify_one();
        }
    })
}

/// Runs the loop; returns why the connection failed, or `None` at the window's end.
async fn drive(
    stream: &TcpStream,
    mut gen: RequestGen,
    depth: usize,
    tally: &RefCell<Tally>,
) -> Option<String> {
    let end_ns = tally.borrow().window.end_ns;
    let mut out: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; READ_BUF];
    let mut sent: VecDeque<u64> = VecDeque::with_capacity(depth);
    let mut scanner = ReplyScanner::new();
    let mut to_send = depth;
    loop {
        out.clear();
        for _ in 0..to_send {
            gen.next(&mut out);
        }
        let now = monotonic_ns();
        if now >= end_ns {
            return None;
        }
        sent.extend(std::iter::repeat_n(now, to_send));
        to_send = 0;
        // Write the round; if the socket is full, keep reading replies meanwhile: a server
        // blocked writing to a client that does not read may stop reading from it.
        let mut pos = 0;
        while pos < out.len() {
            match stream.try_write(&out[pos..]) {
                Ok(n) => pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    tokio::select! {
                        biased;
                        w = stream.writable() => {
                            if let Err(e) = w {
                                return Some(format!("write: {e}"));
                            }
                        }
                        r = stream.readable() => {
                            if let Err(e) = r {
                                return Some(format!("read: {e}"));
                            }
                            match read_replies(stream, &mut buf, &mut scanner, &mut sent, tally) {
                                Ok(n) => to_send += n.unwrap_or(0),
                                Err(why) => return Some(why),
                            }
                        }
                    }
                }
                Err(e) => return Some(format!("write: {e}")),
            }
        }
        while to_send == 0 {
            if let Err(e) = stream.readable().await {
                return Some(format!("read: {e}"));
            }
            match read_replies(stream, &mut buf, &mut scanner, &mut sent, tally) {
                Ok(n) => to_send += n.unwrap_or(0),
                Err(why) => return Some(why),
            }
        }
    }
}

/// One read: counts the replies it completes against their send times. Returns how many
/// completed, `None` if there was nothing to read after all (stale readiness), or why the
/// connection failed.
fn read_replies(
    stream: &TcpStream,
    buf: &mut [u8],
    scanner: &mut ReplyScanner,
    sent: &mut VecDeque<u64>,
    tally: &RefCell<Tally>,
) -> Result<Option<usize>, String> {
    let n = match stream.try_read(buf) {
        Ok(0) => return Err("the server closed the connection".into()),
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
        Err(e) => return Err(format!("read: {e}")),
    };
    let now = monotonic_ns();
    let mut t = tally.borrow_mut();
    let mut completed = 0;
    let mut unsolicited = false;
    scanner
        .feed(&buf[..n], |r, text| match sent.pop_front() {
            Some(at) => {
                t.reply(now, at, r, text);
                completed += 1;
            }
            None => unsolicited = true,
        })
        .map_err(|e| format!("malformed reply: {e}"))?;
    if unsolicited {
        return Err("a reply to no request".into());
    }
    Ok(Some(completed))
}
