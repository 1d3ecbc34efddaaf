//! `loglevel`, Redis's four levels, as the process's log filter. The binary that sets up
//! logging hands in how to replace its filter (`install`); CONFIG SET loglevel applies a new
//! level through it while serving. (A filter given in `RUST_LOG` rules at start instead.)

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// Redis's `loglevel`, from the most to the least said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Verbose,
    #[default]
    Notice,
    Warning,
}

impl LogLevel {
    /// The `tracing` filter that says as much: Quiver's `info` lines are Redis's notices.
    pub fn filter(self) -> &'static str {
        match self {
            LogLevel::Debug => "trace",
            LogLevel::Verbose => "debug",
            LogLevel::Notice => "info",
            LogLevel::Warning => "warn",
        }
    }
}

impl FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "debug" => Ok(LogLevel::Debug),
            "verbose" => Ok(LogLevel::Verbose),
            "notice" => Ok(LogLevel::Notice),
            "warning" => Ok(LogLevel::Warning),
            _ => Err(
                "argument(s) must be one of the following: debug, verbose, notice, warning".into(),
            ),
        }
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogLevel::Debug => "debug",
            LogLevel::Verbose => "verbose",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
        })
    }
}

/// Replaces the process's log filter (set once, by the binary).
type Hook = Box<dyn Fn(&str) + Send + Sync>;

static HOOK: OnceLock<Hook> = OnceLock::new();

/// How to replace the log filter; the first call wins (one logger per process).
pub fn install(hook: Hook) {
    let _ = HOOK.set(hook);
}

/// Logs at `level` from now on (nothing happens where no logger was installed: tests).
pub fn set_level(level: LogLevel) {
    if let Some(hook) = HOOK.get() {
        hook(level.filter());
    }
}
