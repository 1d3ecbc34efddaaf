//! Running programs from tests, shared by the test binaries that start real processes
//! (`server_process`, `cluster`): each includes this file as its `process` module.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often a waiting test looks at the process again.
const POLL: Duration = Duration::from_millis(10);

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

/// `name` on the PATH, if installed.
pub fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The lines `out` (a child's stdout) prints, as they come, read by a thread of their own (so
/// the pipe is always drained).
pub fn lines_of(out: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
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

/// redis-benchmark's output as lines: progress lines end in `\r`, results in `\n`.
pub fn benchmark_lines(output: &str) -> Vec<&str> {
    output
        .split(['\r', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}
