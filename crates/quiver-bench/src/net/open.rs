//! The open loop: requests leave on a schedule, whatever the server does.
//!
//! One pacer task holds the run's [`TokenBucket`] at the full rate and deals its tokens round
//! robin to the connections (token `k` to connection `k mod C`). Each connection has an
//! issuing task and a receiving task (the paper's separate issuing and receiving threads,
//! Sec. 5.1, as tasks on the client's one thread): the issuer writes a request for each token
//! dealt to it, the receiver reads replies and charges each request from its *intended* send
//! time, its token's due time. A client that fell behind (a stalled server, a full socket, a
//! late wake-up) has that lag counted as latency. At most `max_outstanding` requests are
//! outstanding per connection; tokens held back by that limit keep their due times, so the
//! wait is counted too. At the end, requests still unanswered are charged their age
//! ([`finish`]).
//!
//! Waiting for the next due time: a gap longer than [`SPIN_NS`] is slept on a
//! [`PreciseTimer`]; a shorter one is spun, yielding to the runtime (which polls the sockets
//! without blocking) until the token is due. Arming a timer and waking from idle for every
//! request costs several microseconds of kernel time each (more in a virtual machine, where
//! both exit to the hypervisor): at tens of thousands of requests per second that alone would
//! saturate the client core and make it, not the server, the source of the latency measured.
//! Spinning makes the client thread's CPU time meaningless as a load figure in the open loop;
//! the run reports how late requests left instead (`send_lag_*`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::error::Result;
use crate::net::closed::READ_BUF;
use crate::net::resp::ReplyScanner;
use crate::net::tally::Tally;
use crate::net::timer::PreciseTimer;
use crate::net::token_bucket::{monotonic_ns, TokenBucket};
use crate::net::workload::RequestGen;

/// Most tokens the pacer deals at once when catching up: the rest follow after the other
/// tasks have had a turn, with their own due times.
pub const BURST: u64 = 256;
/// Gaps up to this long before the next due time are spun, longer ones slept (see the module
/// documentation): 50 µs, a timer wake-up's cost and jitter in a virtual machine.
pub const SPIN_NS: u64 = 50_000;

/// One connection's requests, shared by its two tasks, the pacer and the run.
#[derive(Debug, Default)]
pub struct OpenConn {
    /// Due times of the tokens dealt to this connection and not yet sent, oldest first.
    pending: VecDeque<u64>,
    /// Due times of the requests sent and not yet answered, oldest first.
    inflight: VecDeque<u64>,
    /// False once the connection broke (its failure is counted once, by whichever task saw
    /// it first).
    broken: bool,
}

/// A running connection.
pub struct ConnHandle {
    state: Rc<RefCell<OpenConn>>,
    /// Wakes the issuer: tokens were dealt, or room for outstanding requests was made.
    wake: Rc<Notify>,
    tasks: [JoinHandle<()>; 2],
}

/// A running open-loop run: the pacer and the connections.
pub struct OpenRun {
    bucket: Rc<RefCell<TokenBucket>>,
    conns: Vec<ConnHandle>,
    pacer: JoinHandle<()>,
}

impl OpenRun {
    /// Starts the pacer at `rate` ops/s from `t0_ns` and every connection's two tasks.
    pub fn start(
        rate: f64,
        t0_ns: u64,
        streams: Vec<(TcpStream, RequestGen)>,
        max_outstanding: usize,
        tally: &Rc<RefCell<Tally>>,
        all_done: &Rc<Notify>,
    ) -> Result<OpenRun> {
        let bucket = Rc::new(RefCell::new(TokenBucket::new(rate, t0_ns, BURST)?));
        let conns: Vec<ConnHandle> = streams
            .into_iter()
            .map(|(stream, gen)| spawn_conn(stream, gen, max_outstanding, tally, all_done))
            .collect();
        let dealt: Vec<(Rc<RefCell<OpenConn>>, Rc<Notify>)> = conns
            .iter()
            .map(|c| (c.state.clone(), c.wake.clone()))
            .collect();
        let pacer = {
            let (bucket, tally) = (bucket.clone(), tally.clone());
            tokio::task::spawn_local(async move {
                if let Err(why) = pace(&bucket, &dealt, &tally).await {
                    // Without its timer the run cannot go on: count it against every
                    // connection so the run ends now rather than idling to its end.
                    let mut t = tally.borrow_mut();
                    for (state, _) in &dealt {
                        state.borrow_mut().broken = true;
                        t.disconnect(why.clone());
                    }
                }
            })
        };
        Ok(OpenRun {
            bucket,
            conns,
            pacer,
        })
    }

    /// Stops every task (without waiting for them).
    pub fn abort(&self) {
        self.pacer.abort();
        for c in &self.conns {
            for t in &c.tasks {
                t.abort();
            }
        }
    }

    /// Waits until the aborted tasks have dropped their sockets.
    pub async fn join(self) {
        let _ = self.pacer.await;
        for c in self.conns {
            for t in c.tasks {
                let _ = t.await;
            }
        }
    }
}

/// Deals tokens as they fall due, until the next is due after the window's end.
async fn pace(
    bucket: &RefCell<TokenBucket>,
    conns: &[(Rc<RefCell<OpenConn>>, Rc<Notify>)],
    tally: &RefCell<Tally>,
) -> std::result::Result<(), String> {
    let end_ns = tally.borrow().window.end_ns;
    let timer = PreciseTimer::new().map_err(|e| format!("timerfd: {e}"))?;
    let n = conns.len() as u64;
    loop {
        let due = bucket.borrow().next_due_ns();
        if due >= end_ns {
            return Ok(());
        }
        let now = monotonic_ns();
        if now < due {
            if due - now > SPIN_NS {
                timer
                    .sleep_until(due)
                    .await
                    .map_err(|e| format!("timerfd: {e}"))?;
            } else {
                tokio::task::yield_now().await;
            }
            continue;
        }
        {
            let mut b = bucket.borrow_mut();
            for k in b.take(now, u64::MAX).indexes() {
                let (state, wake) = &conns[(k % n) as usize];
                let mut s = state.borrow_mut();
                // A broken connection's share of the schedule is dropped: its failure is
                // already counted as an error.
                if !s.broken {
                    s.pending.push_back(b.due_ns(k));
                    wake.notify_one();
                }
            }
        }
        // Let the issuers send what was just dealt before dealing more.
        tokio::task::yield_now().await;
    }
}

fn spawn_conn(
    stream: TcpStream,
    gen: RequestGen,
    max_outstanding: usize,
    tally: &Rc<RefCell<Tally>>,
    all_done: &Rc<Notify>,
) -> ConnHandle {
    let state = Rc::new(RefCell::new(OpenConn::default()));
    let wake = Rc::new(Notify::new());
    let (rd, mut wr) = stream.into_split();
    let issuer = {
        let (state, tally, all_done, wake) =
            (state.clone(), tally.clone(), all_done.clone(), wake.clone());
        tokio::task::spawn_local(async move {
            if let Err(why) = issue(&mut wr, gen, &state, &tally, &wake, max_outstanding).await {
                failed(&state, &tally, &all_done, why);
            }
            // Dropping the write half would shut the socket down for writing, and the server
            // would close the connection before the last replies arrive: hold it until the
            // run ends the task.
            std::future::pending::<()>().await;
            drop(wr);
        })
    };
    let receiver = {
        let (state, tally, all_done, wake) =
            (state.clone(), tally.clone(), all_done.clone(), wake.clone());
        tokio::task::spawn_local(async move {
            let why = receive(rd, &state, &tally, &wake, max_outstanding).await;
            failed(&state, &tally, &all_done, why);
        })
    };
    ConnHandle {
        state,
        wake,
        tasks: [issuer, receiver],
    }
}

/// Counts a connection's failure once.
fn failed(state: &RefCell<OpenConn>, tally: &RefCell<Tally>, all_done: &Notify, why: String) {
    let mut s = state.borrow_mut();
    if !s.broken {
        s.broken = true;
        if tally.borrow_mut().disconnect(why) {
            all_done.notify_one();
        }
    }
}

/// Writes a request for every token dealt to this connection, as room allows.
async fn issue(
    wr: &mut OwnedWriteHalf,
    mut gen: RequestGen,
    state: &RefCell<OpenConn>,
    tally: &RefCell<Tally>,
    wake: &Notify,
    max_outstanding: usize,
) -> std::result::Result<(), String> {
    let mut out: Vec<u8> = Vec::new();
    loop {
        wake.notified().await;
        loop {
            out.clear();
            {
                let mut s = state.borrow_mut();
                if s.broken {
                    return Ok(());
                }
                let free = max_outstanding.saturating_sub(s.inflight.len());
                let n = free.min(s.pending.len());
                if n == 0 {
                    break;
                }
                let now = monotonic_ns();
                let mut t = tally.borrow_mut();
                for _ in 0..n {
                    // n <= pending: never empty here.
                    let Some(due) = s.pending.pop_front() else {
                        break;
                    };
                    gen.next(&mut out);
                    s.inflight.push_back(due);
                    t.sent_late(now, due);
                }
            }
            wr.write_all(&out)
                .await
                .map_err(|e| format!("write: {e}"))?;
        }
    }
}

/// Reads replies and charges each to its request's due time; returns why it stopped.
async fn receive(
    mut rd: OwnedReadHalf,
    state: &RefCell<OpenConn>,
    tally: &RefCell<Tally>,
    wake: &Notify,
    max_outstanding: usize,
) -> String {
    let mut buf = vec![0u8; READ_BUF];
    let mut scanner = ReplyScanner::new();
    loop {
        let n = match rd.read(&mut buf).await {
            Ok(0) => return "the server closed the connection".into(),
            Ok(n) => n,
            Err(e) => return format!("read: {e}"),
        };
        let now = monotonic_ns();
        let mut s = state.borrow_mut();
        let was_full = s.inflight.len() >= max_outstanding;
        let mut t = tally.borrow_mut();
        let mut unsolicited = false;
        let scanned = scanner.feed(&buf[..n], |r, text| match s.inflight.pop_front() {
            Some(due) => t.reply(now, due, r, text),
            None => unsolicited = true,
        });
        if let Err(e) = scanned {
            return format!("malformed reply: {e}");
        }
        if unsolicited {
            return "a reply to no request".into();
        }
        if was_full && s.inflight.len() < max_outstanding && !s.pending.is_empty() {
            wake.notify_one();
        }
    }
}

/// At the run's end `at_ns` (tasks stopped): every request of a live connection that was due
/// by then and not answered — sent and waiting, dealt and held back, or not yet dealt because
/// the client fell behind — is charged its age at the end. That is a lower bound of its
/// latency, and it keeps a server that stalls at the end of a run from leaving its slowest
/// requests out of the distribution. Broken connections are left out: their failure is
/// already counted as an error.
pub fn finish(run: &OpenRun, tally: &mut Tally, at_ns: u64) {
    let mut live = vec![false; run.conns.len()];
    for (i, c) in run.conns.iter().enumerate() {
        let s = c.state.borrow();
        if s.broken {
            continue;
        }
        live[i] = true;
        for &due in s.inflight.iter().chain(&s.pending).filter(|&&d| d < at_ns) {
            tally.unanswered(at_ns, due);
        }
    }
    let b = run.bucket.borrow();
    let behind = b.due_count(at_ns.saturating_sub(1));
    let n = run.conns.len() as u64;
    for k in b.taken()..b.taken() + behind {
        if live[(k % n) as usize] {
            tally.unanswered(at_ns, b.due_ns(k));
        }
    }
}
