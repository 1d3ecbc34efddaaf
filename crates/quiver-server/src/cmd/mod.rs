//! The command table: every command Quiver answers, with Redis's arity convention, flags and
//! key positions (what `COMMAND INFO` reports and what MULTI/EXEC uses to prefetch keys), and
//! the modules that implement them:
//!
//! * [`strings`] — commands on keys and values, written against a [`crate::txn::Txn`] so each
//!   is atomic on its own and composes inside MULTI/EXEC;
//! * [`keyspace`] — commands over the whole key space (SCAN, KEYS, DBSIZE, FLUSHDB);
//! * [`connection`] — PING, ECHO, HELLO, AUTH, SELECT, CLIENT, RESET;
//! * [`transactions`] — MULTI, EXEC, DISCARD, WATCH, UNWATCH;
//! * [`introspection`] — COMMAND, CONFIG GET, INFO.

pub mod connection;
pub mod introspection;
pub mod keyspace;
pub mod strings;
pub mod transactions;

use std::collections::HashMap;
use std::sync::OnceLock;

/// Which implementation runs a command. Keep the order of [`COMMANDS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmd {
    // connection
    Ping,
    Echo,
    Hello,
    Auth,
    Select,
    Quit,
    Reset,
    Client,
    // introspection
    Command,
    Config,
    Info,
    // strings and keys
    Get,
    Set,
    SetNx,
    GetSet,
    GetDel,
    MGet,
    MSet,
    MSetNx,
    Del,
    Unlink,
    Exists,
    StrLen,
    Append,
    Incr,
    IncrBy,
    Decr,
    DecrBy,
    Type,
    Batch,
    // keyspace
    Scan,
    Keys,
    DbSize,
    FlushDb,
    FlushAll,
    // transactions
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
}

impl Cmd {
    /// Commands on keys and values: they run against a transaction's view of the store
    /// (`strings::run`), alone or inside MULTI/EXEC.
    pub fn on_keys(self) -> bool {
        matches!(
            self,
            Cmd::Get
                | Cmd::Set
                | Cmd::SetNx
                | Cmd::GetSet
                | Cmd::GetDel
                | Cmd::MGet
                | Cmd::MSet
                | Cmd::MSetNx
                | Cmd::Del
                | Cmd::Unlink
                | Cmd::Exists
                | Cmd::StrLen
                | Cmd::Append
                | Cmd::Incr
                | Cmd::IncrBy
                | Cmd::Decr
                | Cmd::DecrBy
                | Cmd::Type
                | Cmd::Batch
        )
    }
}

/// One command's static description.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name, as Redis reports it.
    pub name: &'static str,
    pub cmd: Cmd,
    /// Redis's convention: `n > 0` exactly n arguments (the name included), `n < 0` at least -n.
    pub arity: i32,
    pub flags: &'static [&'static str],
    /// Key positions: first, last (negative counts from the end), step; 0 0 0 for none.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = self.arity as i64;
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// The keys among `args` (the name at index 0), by the spec's key positions.
    pub fn keys<'a>(&self, args: &'a [bytes::Bytes]) -> impl Iterator<Item = &'a bytes::Bytes> {
        let n = args.len() as i32;
        let (first, step) = (self.first_key, self.step.max(1));
        let last = if self.last_key < 0 {
            n + self.last_key
        } else {
            self.last_key.min(n - 1)
        };
        let range = if first == 0 || first > last {
            0..0
        } else {
            first as usize..last as usize + 1
        };
        args[range].iter().step_by(step as usize)
    }
}

macro_rules! spec {
    ($name:literal, $cmd:ident, $arity:expr, [$($flag:literal),*], $first:expr, $last:expr, $step:expr,
     $group:literal, $since:literal, $summary:literal) => {
        CommandSpec {
            name: $name,
            cmd: Cmd::$cmd,
            arity: $arity,
            flags: &[$($flag),*],
            first_key: $first,
            last_key: $last,
            step: $step,
            group: $group,
            since: $since,
            summary: $summary,
        }
    };
}

/// Every command, in the order `COMMAND` lists them, which is `Cmd`'s order.
pub static COMMANDS: &[CommandSpec] = &[
    spec!("ping", Ping, -1, ["fast"], 0, 0, 0, "connection", "1.0.0", "Returns the server's liveliness response."),
    spec!("echo", Echo, 2, ["fast"], 0, 0, 0, "connection", "1.0.0", "Returns the given string."),
    spec!("hello", Hello, -1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "6.0.0", "Handshakes with the Redis server."),
    spec!("auth", Auth, -2, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "1.0.0", "Authenticates the connection."),
    spec!("select", Select, 2, ["loading", "stale", "fast"], 0, 0, 0, "connection", "1.0.0", "Changes the selected database."),
    spec!("quit", Quit, -1, ["allow_busy", "noscript", "loading", "stale", "fast", "no_auth"], 0, 0, 0, "connection", "1.0.0", "Closes the connection."),
    spec!("reset", Reset, 1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "6.2.0", "Resets the connection."),
    spec!("client", Client, -2, [], 0, 0, 0, "connection", "2.4.0", "A container for client connection commands."),
    spec!("command", Command, -1, ["loading", "stale"], 0, 0, 0, "server", "2.8.13", "Returns detailed information about all commands."),
    spec!("config", Config, -2, [], 0, 0, 0, "server", "2.0.0", "A container for server configuration commands."),
    spec!("info", Info, -1, ["loading", "stale"], 0, 0, 0, "server", "1.0.0", "Returns information and statistics about the server."),
    spec!("get", Get, 2, ["readonly", "fast"], 1, 1, 1, "string", "1.0.0", "Returns the string value of a key."),
    spec!("set", Set, -3, ["write", "denyoom"], 1, 1, 1, "string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
    spec!("setnx", SetNx, 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "Set the string value of a key only when the key doesn't exist."),
    spec!("getset", GetSet, 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value."),
    spec!("getdel", GetDel, 2, ["write", "fast"], 1, 1, 1, "string", "6.2.0", "Returns the string value of a key after deleting the key."),
    spec!("mget", MGet, -2, ["readonly", "fast"], 1, -1, 1, "string", "1.0.0", "Atomically returns the string values of one or more keys."),
    spec!("mset", MSet, -3, ["write", "denyoom"], 1, -1, 2, "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys."),
    spec!("msetnx", MSetNx, -3, ["write", "denyoom"], 1, -1, 2, "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
    spec!("del", Del, -2, ["write"], 1, -1, 1, "generic", "1.0.0", "Deletes one or more keys."),
    spec!("unlink", Unlink, -2, ["write", "fast"], 1, -1, 1, "generic", "4.0.0", "Asynchronously deletes one or more keys."),
    spec!("exists", Exists, -2, ["readonly", "fast"], 1, -1, 1, "generic", "1.0.0", "Determines whether one or more keys exist."),
    spec!("strlen", StrLen, 2, ["readonly", "fast"], 1, 1, 1, "string", "2.2.0", "Returns the length of a string value."),
    spec!("append", Append, 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist."),
    spec!("incr", Incr, 2, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    spec!("incrby", IncrBy, 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    spec!("decr", Decr, 2, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    spec!("decrby", DecrBy, 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."),
    spec!("type", Type, 2, ["readonly", "fast"], 1, 1, 1, "generic", "1.0.0", "Determines the type of value stored at a key."),
    spec!("batch", Batch, -3, ["write", "denyoom"], 0, 0, 0, "quiver", "0.1.0", "Quiver: applies puts, deletes and checks with preconditions all or nothing."),
    spec!("scan", Scan, -2, ["readonly"], 0, 0, 0, "generic", "2.8.0", "Iterates over the key names in the database."),
    spec!("keys", Keys, 2, ["readonly"], 0, 0, 0, "generic", "1.0.0", "Returns all key names that match a pattern."),
    spec!("dbsize", DbSize, 1, ["readonly", "fast"], 0, 0, 0, "server", "1.0.0", "Returns the number of keys in the database."),
    spec!("flushdb", FlushDb, -1, ["write"], 0, 0, 0, "server", "1.0.0", "Remove all keys from the current database."),
    spec!("flushall", FlushAll, -1, ["write"], 0, 0, 0, "server", "1.0.0", "Removes all keys from all databases."),
    spec!("multi", Multi, 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "1.2.0", "Starts a transaction."),
    spec!("exec", Exec, 1, ["noscript", "loading", "stale", "skip_slowlog"], 0, 0, 0, "transactions", "1.2.0", "Executes all commands in a transaction."),
    spec!("discard", Discard, 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "2.0.0", "Discards a transaction."),
    spec!("watch", Watch, -2, ["noscript", "loading", "stale", "fast", "allow_busy"], 1, -1, 1, "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction."),
    spec!("unwatch", Unwatch, 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "2.2.0", "Forgets about watched keys of a transaction."),
];

/// Longest command name in the table (lookups of longer names fail without lower-casing).
const NAME_MAX: usize = 16;

/// Finds a command by name, case-insensitively, with its index in [`COMMANDS`].
pub fn lookup(name: &[u8]) -> Option<(usize, &'static CommandSpec)> {
    static BY_NAME: OnceLock<HashMap<&'static [u8], usize>> = OnceLock::new();
    if name.len() > NAME_MAX {
        return None;
    }
    let mut lower = [0u8; NAME_MAX];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let map = BY_NAME.get_or_init(|| {
        COMMANDS
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_bytes(), i))
            .collect()
    });
    map.get(&lower[..]).map(|&i| (i, &COMMANDS[i]))
}

/// The index of `cmd` in [`COMMANDS`], which lists the commands in `Cmd`'s order (a test
/// checks it), so the fast paths find their statistics slot without a search.
pub fn index_of(cmd: Cmd) -> usize {
    cmd as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_is_case_insensitive_and_complete() {
        assert_eq!(lookup(b"GeT").unwrap().1.cmd, Cmd::Get);
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"averyveryverylongname").is_none());
        for (i, c) in COMMANDS.iter().enumerate() {
            assert_eq!(index_of(c.cmd), i, "{} is out of Cmd's order", c.name);
            assert!(c.name.len() <= NAME_MAX);
            assert_eq!(lookup(c.name.as_bytes()).unwrap().1.cmd, c.cmd);
        }
    }

    #[test]
    fn key_positions() {
        let args: Vec<bytes::Bytes> = ["MSET", "a", "1", "b", "2"]
            .iter()
            .map(|s| bytes::Bytes::from(*s))
            .collect();
        let (_, mset) = lookup(b"mset").unwrap();
        let keys: Vec<_> = mset.keys(&args).collect();
        assert_eq!(keys, [&args[1], &args[3]]);
        let (_, get) = lookup(b"get").unwrap();
        assert_eq!(get.keys(&args[..2]).count(), 1);
        let (_, ping) = lookup(b"ping").unwrap();
        assert_eq!(ping.keys(&args).count(), 0);
        assert!(get.arity_ok(2) && !get.arity_ok(3));
        assert!(mset.arity_ok(5) && !mset.arity_ok(2));
    }
}
