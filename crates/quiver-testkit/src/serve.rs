//! `quiver serve` as a test starts it: `--dir DIR serve --port PORT` (0: any free port, read
//! back from the line it prints once it listens, `quiver listening on ADDR`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use crate::process::{first_line, Guard};

/// What `quiver serve` prints on stdout once it listens, before its address.
const LISTENING: &str = "quiver listening on ";

/// Adds `--dir DIR serve --port PORT` to `cmd` (the quiver binary, or a wrapper that execs it)
/// and what every served test process gets: logs at info, stdin closed, stdout piped (for its
/// listening line). The caller adds the rest (arguments, stderr) and spawns it.
pub fn serve_command<'c>(cmd: &'c mut Command, dir: &Path, port: u16) -> &'c mut Command {
    cmd.arg("--dir")
        .arg(dir)
        .args(["serve", "--port", &port.to_string()])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
}

/// The address of a `quiver listening on ADDR` line.
pub fn listening_addr(line: &str) -> Option<&str> {
    line.strip_prefix(LISTENING).map(str::trim)
}

/// A started `quiver serve`, listening.
pub struct Served {
    pub process: Guard,
    /// `127.0.0.1:PORT`, as it printed it.
    pub addr: String,
    /// Lines printed after the listening line (kept so the reading thread keeps draining
    /// the pipe).
    pub stdout: mpsc::Receiver<String>,
}

/// Spawns `cmd` (see [`serve_command`]) and waits for its listening line. When it prints
/// none, or another line first, it is killed and the error says what it printed.
pub fn start(cmd: &mut Command) -> Result<Served, String> {
    let child = cmd.spawn().expect("the quiver binary starts");
    let (process, line, stdout) = first_line(child)?;
    match listening_addr(&line) {
        Some(addr) => Ok(Served {
            addr: addr.to_string(),
            process,
            stdout,
        }),
        // Dropping `process` kills it.
        None => Err(format!("unexpected first line {line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_of_the_listening_line() {
        assert_eq!(
            listening_addr("quiver listening on 127.0.0.1:6379\n"),
            Some("127.0.0.1:6379")
        );
        assert_eq!(listening_addr("quiver router listening on x"), None);
    }
}
