//! `rename-command`: commands the configuration renames or disables — Redis's setting for
//! taking dangerous commands (FLUSHALL, CONFIG, KEYS, ...) away from clients, or hiding them
//! behind a name only the operator knows:
//!
//! ```toml
//! [rename-command]
//! FLUSHALL = ""               # disabled
//! CONFIG = "config-4d2f9a17"  # only under this name
//! ```
//!
//! As in Redis, the command's own name is then unknown (`ERR unknown command`) and the new one
//! runs it, in MULTI too; COMMAND still reports a renamed command under its own name and leaves
//! out a disabled one. Every connection is looked up here, the router's included: client
//! requests never reach the command table directly.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use crate::table::{self, Cmd, CommandSpec, COMMANDS};

/// Longest new name a command may get (Redis sets none; a bound keeps the table small and the
/// error readable).
pub const RENAMED_NAME_MAX: usize = 64;

/// Commands the cluster's members send each other by name (a node's CHAIN and RANGEIMPORT,
/// a router's ASKING): a cluster node may not rename them.
pub const PEER_COMMANDS: [Cmd; 3] = [Cmd::Chain, Cmd::RangeImport, Cmd::Asking];

/// The commands' names as this server answers them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Renames {
    /// Each renamed command's new name, in lower case.
    renamed: Vec<(Vec<u8>, Cmd)>,
    /// By command index: whether the table name no longer runs the command. Empty when nothing
    /// is renamed or disabled (the common case: one length test, then the table).
    hidden: Vec<bool>,
}

impl Renames {
    /// Builds the names from `rename-command`'s pairs (a command's name, its new name or "" to
    /// disable it), refusing what Redis refuses — a command that does not exist, a new name
    /// that another command still answers to — and what would make the setting ambiguous.
    pub fn new<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Renames, String> {
        let mut renames = Renames::default();
        let mut seen: Vec<Cmd> = Vec::new();
        for (old, new) in pairs {
            let Some(spec) = table::lookup(old.as_bytes()) else {
                // A Redis 7.0 command Quiver does not have (`EVAL = ""` in a hardening
                // file written for Redis): there is nothing to rename, as Redis accepts it.
                let lower = old.to_ascii_lowercase();
                if !lower.contains('|') && table::is_absent(&lower) {
                    continue;
                }
                return Err(format!("rename-command {old:?}: no such command"));
            };
            if seen.contains(&spec.cmd) {
                return Err(format!(
                    "rename-command {old:?}: the command is renamed twice"
                ));
            }
            seen.push(spec.cmd);
            if renames.hidden.is_empty() {
                renames.hidden = vec![false; COMMANDS.len()];
            }
            renames.hidden[spec.cmd.index()] = true;
            if new.is_empty() {
                continue;
            }
            if new.len() > RENAMED_NAME_MAX
                || !new.bytes().all(|b| b.is_ascii_graphic())
                || new.contains(['"', '\''])
            {
                return Err(format!(
                    "rename-command {old:?}: the new name {new:?} must be 1 to \
                     {RENAMED_NAME_MAX} printable characters without spaces or quotes"
                ));
            }
            let lower = new.to_ascii_lowercase().into_bytes();
            if let Some((_, other)) = renames.renamed.iter().find(|(n, _)| *n == lower) {
                return Err(format!(
                    "rename-command {old:?}: {new:?} is already the new name of {:?}",
                    other.spec().name
                ));
            }
            renames.renamed.push((lower, spec.cmd));
        }
        // A new name may be a table name only if that command gave its name up too.
        for (name, cmd) in &renames.renamed {
            if let Some(other) = table::lookup(name) {
                if !renames.hidden[other.cmd.index()] {
                    return Err(format!(
                        "rename-command {:?}: target command name {:?} already exists",
                        cmd.spec().name,
                        other.name
                    ));
                }
            }
        }
        Ok(renames)
    }

    /// The command a request's first argument names, case-insensitively.
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        if self.hidden.is_empty() {
            return table::lookup(name);
        }
        if let Some((_, cmd)) = self
            .renamed
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            return Some(cmd.spec());
        }
        table::lookup(name).filter(|spec| !self.hidden[spec.cmd.index()])
    }

    /// Whether `cmd` is disabled (renamed to nothing): COMMAND leaves it out.
    pub fn is_disabled(&self, cmd: Cmd) -> bool {
        !self.hidden.is_empty()
            && self.hidden[cmd.index()]
            && !self.renamed.iter().any(|(_, c)| *c == cmd)
    }
}

impl<'de> Deserialize<'de> for Renames {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Renames, D::Error> {
        let pairs = BTreeMap::<String, String>::deserialize(d)?;
        Renames::new(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renames(pairs: &[(&str, &str)]) -> Result<Renames, String> {
        Renames::new(pairs.iter().copied())
    }

    #[test]
    fn nothing_renamed_is_the_table() {
        let r = Renames::default();
        assert_eq!(r.lookup(b"FLUSHALL").unwrap().cmd, Cmd::FlushAll);
        assert!(r.lookup(b"nosuch").is_none());
        assert!(!r.is_disabled(Cmd::FlushAll));
    }

    #[test]
    fn a_renamed_command_answers_to_its_new_name_only() {
        let r = renames(&[("CONFIG", "Cfg-Secret"), ("flushall", "")]).unwrap();
        assert!(r.lookup(b"config").is_none());
        assert!(r.lookup(b"CONFIG").is_none());
        assert_eq!(r.lookup(b"cfg-secret").unwrap().cmd, Cmd::Config);
        assert_eq!(r.lookup(b"CFG-SECRET").unwrap().cmd, Cmd::Config);
        assert!(r.lookup(b"flushall").is_none());
        assert!(r.is_disabled(Cmd::FlushAll));
        assert!(!r.is_disabled(Cmd::Config));
        assert_eq!(
            r.lookup(b"get").unwrap().cmd,
            Cmd::Get,
            "the others unchanged"
        );
    }

    #[test]
    fn two_commands_may_swap_names() {
        let r = renames(&[("get", "set"), ("set", "get")]).unwrap();
        assert_eq!(r.lookup(b"SET").unwrap().cmd, Cmd::Get);
        assert_eq!(r.lookup(b"get").unwrap().cmd, Cmd::Set);
    }

    #[test]
    fn redis_commands_quiver_lacks_may_be_disabled_to_no_effect() {
        let r = renames(&[("EVAL", ""), ("script", "x"), ("KEYS", "")]).unwrap();
        assert!(r.lookup(b"keys").is_none() && r.lookup(b"x").is_none());
        assert_eq!(r.lookup(b"get").unwrap().cmd, Cmd::Get);
        assert!(renames(&[("script|flush", "")]).is_err());
    }

    #[test]
    fn what_redis_refuses_is_refused() {
        let e = renames(&[("nosuch", "x")]).unwrap_err();
        assert!(e.contains("no such command"), "{e}");
        let e = renames(&[("get", "set")]).unwrap_err();
        assert!(e.contains("already exists"), "{e}");
        let e = renames(&[("get", "a"), ("set", "A")]).unwrap_err();
        assert!(e.contains("already the new name"), "{e}");
        let e = renames(&[("get", "x"), ("GET", "y")]).unwrap_err();
        assert!(e.contains("renamed twice"), "{e}");
        for bad in [
            "two words",
            "tab\tname",
            "quo\"te",
            &"x".repeat(RENAMED_NAME_MAX + 1),
        ] {
            let e = renames(&[("get", bad)]).unwrap_err();
            assert!(e.contains("printable"), "{bad:?}: {e}");
        }
    }
}
