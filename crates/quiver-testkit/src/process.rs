//! Child processes of a test: a [`Guard`] that stops its process by PID (SIGKILL, or SIGTERM
//! with a bounded wait) and kills it on drop, so a failing test leaves nothing running; bounded
//! waits for an exit; programs run to their end; a child's stdout read line by line; the log
//! files the harnesses give their processes.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::WAIT;

/// How often a waiting test looks at the process again.
const POLL: Duration = Duration::from_millis(10);
/// How often [`wait_stopped`] asks whether a SIGSTOP took effect (it does in milliseconds).
const STOP_POLL: Duration = Duration::from_millis(1);
/// Lines of a log printed with a failure.
const LOG_TAIL_LINES: usize = 40;

/// A running child, killed (SIGKILL, by PID) and reaped when dropped.
pub struct Guard {
    child: Child,
}

impl Guard {
    pub fn new(child: Child) -> Guard {
        Guard { child }
    }

    pub fn pid(&self) -> libc::pid_t {
        libc::pid_t::try_from(self.child.id()).expect("a pid")
    }

    /// The child itself (its pipes, `try_wait`).
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal` to the process, which must not have been reaped yet (a reaped child's pid
    /// may be another process's by now).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = self.pid();
        // SAFETY: kill(2) touches no memory of ours; the pid is our child's.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal})");
    }

    /// kill -9, then reap; how it ended (it may have exited before).
    pub fn kill9(&mut self) -> ExitStatus {
        self.child.kill().expect("kill -9 a child");
        self.child.wait().unwrap()
    }

    /// SIGTERM, and its exit within `limit` (past it: SIGKILL, and the test fails).
    pub fn terminate(&mut self, what: &str, limit: Duration) -> ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait_exit(what, limit)
    }

    /// Waits for the process to exit; past `limit` it is killed and the test fails.
    pub fn wait_exit(&mut self, what: &str, limit: Duration) -> ExitStatus {
        wait_exit(&mut self.child, what, limit)
    }

    /// SIGSTOP, and a wait until every thread of the process has stopped.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
        wait_stopped(self.pid());
    }

    /// SIGCONT: the frozen process runs again.
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until child `pid` is stopped (waitpid's WUNTRACED report). kill(2) only starts a
/// SIGSTOP: the thread the kernel picks to take it stops the others once it runs, and on busy
/// cores the rest of the process may serve for some milliseconds before that (a test that
/// wrote to a "stopped" node saw its write committed).
fn wait_stopped(pid: libc::pid_t) {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) on our own child, writing only the local `status`; WNOHANG: it
        // does not block, WUNTRACED: a stop is reported (and the child is not reaped).
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED | libc::WNOHANG) };
        assert!(
            rc >= 0,
            "waitpid({pid}): {}",
            std::io::Error::last_os_error()
        );
        if rc == pid {
            assert!(
                libc::WIFSTOPPED(status),
                "pid {pid} ended while stopping: {status:#x}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} not stopped within {WAIT:?}"
        );
        std::thread::sleep(STOP_POLL);
    }
}

/// Waits for `child` to exit; past `limit` it is killed and the test fails.
pub fn wait_exit(child: &mut Child, what: &str, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: the process did not exit within {limit:?}");
        }
        std::thread::sleep(POLL);
    }
}

/// Runs a program to its end (a hang past `limit` kills it and fails the test); returns its
/// exit status, stdout and stderr.
pub fn run(cmd: &mut Command, what: &str, limit: Duration) -> (ExitStatus, String, String) {
    run_with_input(cmd, Vec::new(), what, limit)
}

/// [`run`] with `input` written to the program's stdin (then closed).
pub fn run_with_input(
    cmd: &mut Command,
    input: Vec<u8>,
    what: &str,
    limit: Duration,
) -> (ExitStatus, String, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, &input);
    });
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status = wait_exit(&mut child, what, limit);
    feeder.join().unwrap();
    (status, out.join().unwrap(), err.join().unwrap())
}

/// The lines `out` (a child's stdout) prints, as they come, read by a thread of their own (so
/// the pipe is always drained).
pub fn lines_of(out: ChildStdout) -> mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A started child (stdout piped) once it printed its first line, within [`WAIT`]: the guarded
/// process, that line, and the lines after it (the receiver keeps the pipe drained). When no
/// line comes, the child is killed and the error says how it ended.
pub fn first_line(mut child: Child) -> Result<(Guard, String, mpsc::Receiver<String>), String> {
    let rx = lines_of(child.stdout.take().expect("the child's stdout is piped"));
    let mut guard = Guard::new(child);
    match rx.recv_timeout(WAIT) {
        Ok(line) => Ok((guard, line, rx)),
        Err(e) => {
            let _ = guard.child.kill();
            let status = guard.child.wait().unwrap();
            Err(format!("no line on stdout ({e}; {status})"))
        }
    }
}

/// A log file opened for appending: a restarted process adds to its predecessor's log.
pub fn append(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

/// The length of a log file now: what a start writes comes after it.
pub fn log_len(path: &Path) -> usize {
    std::fs::metadata(path).map_or(0, |m| m.len() as usize)
}

/// The last lines of a log file, for a failure's message.
pub fn tail(path: &Path) -> String {
    tail_text(&std::fs::read_to_string(path).unwrap_or_default())
}

/// The last lines of a log's text.
pub fn tail_text(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// Why a server did not start.
#[derive(Debug)]
pub enum StartFailure {
    /// A port was taken (by another process, or a connection still holding it): try again.
    PortInUse,
    Other(String),
}

impl StartFailure {
    /// A start that failed with `what`: [`StartFailure::PortInUse`] when its own part of the
    /// log (after `from`, see [`log_len`]) says a port was taken, else `what` with the log's
    /// tail.
    pub fn from_log(log: &Path, from: usize, what: String) -> StartFailure {
        let written = std::fs::read(log).unwrap_or_default();
        let this_start = String::from_utf8_lossy(written.get(from..).unwrap_or(&[]));
        if this_start
            .to_ascii_lowercase()
            .contains("address already in use")
        {
            StartFailure::PortInUse
        } else {
            StartFailure::Other(format!("{what}; log:\n{}", tail(log)))
        }
    }
}

/// Fresh ports tried for a server whose chosen ones were taken meanwhile by another process.
pub const START_ATTEMPTS_MAX: usize = 3;
/// Starts tried when a server restarts on its ports, which a connection may briefly hold...
pub const REBIND_ATTEMPTS_MAX: usize = 50;
/// ... with this pause between two of them.
pub const REBIND_PAUSE: Duration = Duration::from_millis(50);

/// Calls `start` (one start of server `what`, on ports it chooses or keeps, logging to `log`)
/// until it is not refused a port, at most `attempts` times, `pause` between two. Any other
/// failure, or a port refused every time, fails the test.
pub fn start_retrying(
    what: &str,
    attempts: usize,
    pause: Duration,
    log: &Path,
    mut start: impl FnMut() -> Result<(), StartFailure>,
) {
    for _ in 0..attempts {
        match start() {
            Ok(()) => return,
            Err(StartFailure::PortInUse) => std::thread::sleep(pause),
            Err(StartFailure::Other(e)) => panic!("{what}: {e}"),
        }
    }
    panic!(
        "{what}: the ports tried were taken, {attempts} times:\n{}",
        tail(log)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_kills_its_process_when_dropped() {
        let child = Command::new("sleep").arg("600").spawn().unwrap();
        let pid = child.id();
        drop(Guard::new(child));
        // Reaped: the pid is no child of ours any more.
        // SAFETY: kill(2) with signal 0 only checks the pid.
        let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
        assert!(!alive, "pid {pid} still runs");
    }

    #[test]
    fn terminate_waits_for_the_exit() {
        let child = Command::new("sleep").arg("600").spawn().unwrap();
        let status = Guard::new(child).terminate("sleep", WAIT);
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGTERM)
        );
    }

    #[test]
    fn first_line_reads_the_first_line() {
        let child = Command::new("sh")
            .args(["-c", "echo one; echo two"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (_guard, line, rest) = first_line(child).unwrap();
        assert_eq!(line, "one");
        assert_eq!(rest.recv_timeout(WAIT).unwrap(), "two");
    }

    #[test]
    fn run_feeds_and_collects() {
        let (status, out, _) =
            run_with_input(&mut Command::new("cat"), b"hello".to_vec(), "cat", WAIT);
        assert!(status.success());
        assert_eq!(out, "hello");
    }
}
