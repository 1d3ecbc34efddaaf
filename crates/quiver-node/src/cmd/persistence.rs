//! SAVE, BGSAVE [SCHEDULE], LASTSAVE and SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], with
//! Redis 7's replies; a save is a checkpoint (`state::saves`).
//!
//! SHUTDOWN saves first (unless NOSAVE) and refuses to stop if that fails, unless FORCE; then
//! the server stops as on SIGTERM — connections finish their run, the store closes — and the
//! client gets no reply, as from Redis. NOW is accepted (a node has no replicas to wait for:
//! its chains' writes are acknowledged only once every member has them); ABORT answers that
//! no shutdown is in progress, since one never waits.

use bytes::Bytes;
use quiver_service::errors::{self, err};
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

use crate::state::saves::{self, BgSave};
use crate::state::ServerState;
use crate::store_errors::store_error;

const ALREADY_RUNNING: &str = "ERR Background save already in progress";

/// SAVE, BGSAVE or LASTSAVE.
pub fn run(state: &ServerState, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        Cmd::Save if state.saves.background_running() => err(ALREADY_RUNNING),
        Cmd::Save => match saves::save(state) {
            Ok(()) => Reply::OK,
            Err(e) => store_error(&e),
        },
        Cmd::BgSave => {
            let schedule = match args {
                [_] => false,
                [_, s] if s.eq_ignore_ascii_case(b"schedule") => true,
                _ => return err(errors::SYNTAX),
            };
            match state.saves.request_background(schedule) {
                BgSave::Started => Reply::simple("Background saving started"),
                BgSave::Scheduled => Reply::simple("Background saving scheduled"),
                BgSave::AlreadyRunning => err(ALREADY_RUNNING),
            }
        }
        Cmd::LastSave => Reply::Integer(state.saves.last_save() as i64),
        other => Reply::error(format!(
            "ERR internal error: {other:?} is not a persistence command"
        )),
    }
}

/// SHUTDOWN's options.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    nosave: bool,
    save: bool,
    force: bool,
    abort: bool,
}

fn options(args: &[Bytes]) -> Result<Options, Reply> {
    let mut o = Options::default();
    for a in &args[1..] {
        let a = a.to_ascii_lowercase();
        match &a[..] {
            b"nosave" => o.nosave = true,
            b"save" => o.save = true,
            b"now" => {}
            b"force" => o.force = true,
            b"abort" => o.abort = true,
            _ => return Err(err(errors::SYNTAX)),
        }
    }
    // ABORT goes alone, NOSAVE and SAVE never together (Redis's checks).
    if (o.nosave && o.save) || (o.abort && args.len() > 2) {
        return Err(err(errors::SYNTAX));
    }
    Ok(o)
}

/// SHUTDOWN: `Ok` once the server is stopping (the caller sends no reply and closes the
/// connection), or the reply that says why it is not.
pub fn shutdown(state: &ServerState, args: &[Bytes]) -> Result<(), Reply> {
    let o = options(args)?;
    if o.abort {
        return Err(err("ERR No shutdown in progress."));
    }
    let Some(handle) = &state.shutdown else {
        return Err(err("ERR this server cannot be shut down by a client"));
    };
    if o.nosave {
        state.saves.skip_checkpoint_at_close();
    } else if let Err(e) = saves::save(state) {
        tracing::warn!(error = %e, force = o.force, "SHUTDOWN: the save failed");
        if !o.force {
            return Err(err("ERR Errors trying to SHUTDOWN. Check logs."));
        }
    }
    tracing::info!("SHUTDOWN received: shutting down");
    handle.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn shutdown_options_as_redis_checks_them() {
        assert_eq!(options(&args(&["SHUTDOWN"])), Ok(Options::default()));
        let o = options(&args(&["shutdown", "NOSAVE", "now", "FORCE"])).unwrap();
        assert!(o.nosave && o.force && !o.save);
        for bad in [
            &["SHUTDOWN", "foo"][..],
            &["SHUTDOWN", "NOSAVE", "SAVE"],
            &["SHUTDOWN", "ABORT", "NOW"],
        ] {
            assert_eq!(options(&args(bad)), Err(err(errors::SYNTAX)), "{bad:?}");
        }
        assert!(options(&args(&["SHUTDOWN", "abort"])).unwrap().abort);
    }
}
