//! The command table: every command Quiver answers, as data only. This module imports
//! nothing of the crate; everything that needs to know what a command is (the executor, the
//! statistics, COMMAND, CLIENT LIST, the Prometheus view) reads it here.
//!
//! A row gives Redis's arity convention, the command's flags and ACL categories (what
//! `COMMAND INFO` reports), its key positions (what MULTI/EXEC prefetches and what the cluster
//! will route by), and the engine vector it joins: consecutive commands whose parsed form is a
//! vector of one kind run as one engine call (see `exec`). Where a command is implemented is
//! decided in one place, `cmd::parse`.

pub mod key_flags;
pub mod redis;

use key_flags::*;
pub use key_flags::{KeyAccess, KeyFlags};

pub use redis::{Subcommand, SUBCOMMANDS};

/// Which command a row describes. Keep the order of [`COMMANDS`] (a test checks it), so that a
/// command's statistics slot is its discriminant.
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
    // server
    Command,
    Config,
    Info,
    Acl,
    SlowLog,
    Time,
    Save,
    BgSave,
    LastSave,
    Shutdown,
    Latency,
    Memory,
    Debug,
    Monitor,
    // pub/sub
    Subscribe,
    Unsubscribe,
    PSubscribe,
    PUnsubscribe,
    Publish,
    PubSub,
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
    IncrByFloat,
    Type,
    GetRange,
    Substr,
    SetRange,
    Lcs,
    Touch,
    Rename,
    RenameNx,
    Copy,
    Move,
    Object,
    SetEx,
    PSetEx,
    GetEx,
    Expire,
    PExpire,
    ExpireAt,
    PExpireAt,
    Ttl,
    PTtl,
    ExpireTime,
    PExpireTime,
    Persist,
    Batch,
    // hashes
    HSet,
    HSetNx,
    HMSet,
    HGet,
    HMGet,
    HGetAll,
    HKeys,
    HVals,
    HLen,
    HExists,
    HDel,
    HStrLen,
    HIncrBy,
    HIncrByFloat,
    HRandField,
    HScan,
    // keyspace
    Scan,
    Keys,
    RandomKey,
    DbSize,
    FlushDb,
    FlushAll,
    SwapDb,
    // transactions
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
    // cluster
    Cluster,
    Asking,
    ReadOnly,
    ReadWrite,
    // replication
    Role,
    Wait,
    RangeImport,
    Chain,
}

impl Cmd {
    /// The command's row in [`COMMANDS`].
    pub fn spec(self) -> &'static CommandSpec {
        &COMMANDS[self.index()]
    }

    /// Index of the command's row in [`COMMANDS`] (and of its statistics).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Command flags (Redis's `CMD_*`, and two of Quiver's own that COMMAND does not report).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags(u32);

impl Flags {
    pub const NONE: Flags = Flags(0);
    pub const WRITE: Flags = Flags(1 << 0);
    pub const READONLY: Flags = Flags(1 << 1);
    pub const DENYOOM: Flags = Flags(1 << 2);
    pub const ADMIN: Flags = Flags(1 << 3);
    pub const NOSCRIPT: Flags = Flags(1 << 4);
    pub const LOADING: Flags = Flags(1 << 5);
    pub const STALE: Flags = Flags(1 << 6);
    pub const SKIP_SLOWLOG: Flags = Flags(1 << 7);
    pub const FAST: Flags = Flags(1 << 8);
    pub const NO_AUTH: Flags = Flags(1 << 9);
    pub const ALLOW_BUSY: Flags = Flags(1 << 10);
    /// Refused inside MULTI ("Command not allowed inside a transaction").
    pub const NO_MULTI: Flags = Flags(1 << 11);
    /// Refused unless `enable-debug-command` allows it (DEBUG).
    pub const PROTECTED: Flags = Flags(1 << 12);
    pub const PUBSUB: Flags = Flags(1 << 13);
    /// Quiver: runs at once inside MULTI instead of being queued (EXEC, DISCARD, ...).
    pub const NOT_QUEUED: Flags = Flags(1 << 16);
    /// Quiver: writes its keys without reading them, so a transaction neither prefetches
    /// them nor makes their old values preconditions (MSET).
    pub const BLIND_WRITE: Flags = Flags(1 << 17);

    /// The flags COMMAND INFO reports, by name, in Redis's order.
    const NAMES: [(Flags, &'static str); 14] = [
        (Flags::WRITE, "write"),
        (Flags::READONLY, "readonly"),
        (Flags::DENYOOM, "denyoom"),
        (Flags::ADMIN, "admin"),
        (Flags::PUBSUB, "pubsub"),
        (Flags::NOSCRIPT, "noscript"),
        (Flags::LOADING, "loading"),
        (Flags::STALE, "stale"),
        (Flags::SKIP_SLOWLOG, "skip_slowlog"),
        (Flags::FAST, "fast"),
        (Flags::NO_AUTH, "no_auth"),
        (Flags::PROTECTED, "protected"),
        (Flags::NO_MULTI, "no_multi"),
        (Flags::ALLOW_BUSY, "allow_busy"),
    ];

    pub const fn or(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Names of the Redis flags set, in Redis's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Flags::NAMES
            .into_iter()
            .filter(move |(f, _)| self.contains(*f))
            .map(|(_, n)| n)
    }
}

/// ACL categories (Redis 6+). A row lists the command's own; `@read`, `@write`, `@fast`,
/// `@slow`, `@admin` and `@dangerous` follow from its flags, as in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acl(u32);

impl Acl {
    pub const NONE: Acl = Acl(0);
    pub const KEYSPACE: Acl = Acl(1 << 0);
    pub const READ: Acl = Acl(1 << 1);
    pub const WRITE: Acl = Acl(1 << 2);
    pub const STRING: Acl = Acl(1 << 3);
    pub const FAST: Acl = Acl(1 << 4);
    pub const SLOW: Acl = Acl(1 << 5);
    pub const ADMIN: Acl = Acl(1 << 6);
    pub const DANGEROUS: Acl = Acl(1 << 7);
    pub const CONNECTION: Acl = Acl(1 << 8);
    pub const TRANSACTION: Acl = Acl(1 << 9);
    pub const HASH: Acl = Acl(1 << 10);
    pub const PUBSUB: Acl = Acl(1 << 11);

    const NAMES: [(Acl, &'static str); 12] = [
        (Acl::KEYSPACE, "@keyspace"),
        (Acl::READ, "@read"),
        (Acl::WRITE, "@write"),
        (Acl::HASH, "@hash"),
        (Acl::STRING, "@string"),
        (Acl::PUBSUB, "@pubsub"),
        (Acl::FAST, "@fast"),
        (Acl::SLOW, "@slow"),
        (Acl::ADMIN, "@admin"),
        (Acl::DANGEROUS, "@dangerous"),
        (Acl::CONNECTION, "@connection"),
        (Acl::TRANSACTION, "@transaction"),
    ];

    pub const fn or(self, other: Acl) -> Acl {
        Acl(self.0 | other.0)
    }

    pub const fn contains(self, other: Acl) -> bool {
        self.0 & other.0 == other.0
    }
}

/// The engine vector a command joins when its parsed form is a plain vector operation
/// (a SET with options is not): consecutive ones of one kind become one engine call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vector {
    /// Runs on its own (in a transaction, or on the connection and server).
    None,
    /// `multi_get` (GET, MGET; and HGET, HMGET, HGETALL, ...: a read of one hash's key).
    Get,
    /// `multi_put` (a plain SET).
    Put,
    /// One compound batch of puts, all or nothing also across a crash (MSET): consecutive
    /// MSETs become one batch (`Store::apply`), their keys in order.
    AtomicPut,
    /// `multi_delete` (DEL, UNLINK).
    Delete,
    /// `multi_exists` (EXISTS).
    Exists,
    /// A read-modify-write of one key (HSET, HINCRBY, ...), no vector operation of its own:
    /// a pipeline's consecutive ones run as one transaction — their keys read as one engine
    /// vector, their writes committed as one compound batch (`exec::atomic::run_group`).
    Txn,
}

impl Vector {
    /// Whether the operation's arguments are key, value pairs.
    pub fn takes_pairs(self) -> bool {
        matches!(self, Vector::Put | Vector::AtomicPut)
    }
}

/// Key positions in Redis's convention: first, last (negative counts from the end), step;
/// 0 0 0 for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    pub first: i32,
    pub last: i32,
    pub step: i32,
}

/// One command's static description.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name, as Redis reports it.
    pub name: &'static str,
    pub cmd: Cmd,
    /// Redis's convention: `n > 0` exactly n arguments (the name included), `n < 0` at least -n.
    pub arity: i32,
    pub flags: Flags,
    /// The command's own ACL categories (see [`CommandSpec::acl_categories`]).
    pub acl: Acl,
    pub keys: KeySpec,
    /// Redis's key-spec flags of its first key, and of the others (COPY reads its source and
    /// overwrites its destination; SET's depend on GET: `admission::keys_and_flags`).
    pub key_flags: [KeyFlags; 2],
    pub vector: Vector,
    /// Redis's documentation group, its first version and summary (COMMAND DOCS).
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// The keys among `args` (the name at index 0), by the spec's key positions.
    pub fn keys<'a>(&self, args: &'a [bytes::Bytes]) -> impl Iterator<Item = &'a bytes::Bytes> {
        self.key_positions(args.len()).map(move |i| &args[i])
    }

    /// The positions of the keys among `argc` arguments.
    pub fn key_positions(&self, argc: usize) -> std::iter::StepBy<std::ops::Range<usize>> {
        let n = argc as i32;
        let KeySpec { first, last, step } = self.keys;
        let last = if last < 0 { n + last } else { last.min(n - 1) };
        let range = if first == 0 || first > last {
            0..0
        } else {
            first as usize..last as usize + 1
        };
        range.step_by(step.max(1) as usize)
    }

    /// The ACL categories COMMAND INFO reports: the row's own plus those its flags imply
    /// (Redis's `setImplicitACLCategories`).
    pub fn acl_categories(&self) -> impl Iterator<Item = &'static str> {
        let f = self.flags;
        let mut acl = self.acl;
        if f.contains(Flags::WRITE) {
            acl = acl.or(Acl::WRITE);
        }
        if f.contains(Flags::READONLY) {
            acl = acl.or(Acl::READ);
        }
        if f.contains(Flags::ADMIN) {
            acl = acl.or(Acl::ADMIN).or(Acl::DANGEROUS);
        }
        acl = acl.or(if f.contains(Flags::FAST) {
            Acl::FAST
        } else {
            Acl::SLOW
        });
        Acl::NAMES
            .into_iter()
            .filter(move |(a, _)| acl.contains(*a))
            .map(|(_, n)| n)
    }
}

const fn keys(first: i32, last: i32, step: i32) -> KeySpec {
    KeySpec { first, last, step }
}

const NO_KEYS: KeySpec = keys(0, 0, 0);
const ONE_KEY: KeySpec = keys(1, 1, 1);
const ALL_KEYS: KeySpec = keys(1, -1, 1);
const KEY_VALUE_PAIRS: KeySpec = keys(1, -1, 2);

// Flag sets the rows share.
const WRITE: Flags = Flags::WRITE;
const WRITE_DENYOOM: Flags = Flags::WRITE.or(Flags::DENYOOM);
const WRITE_DENYOOM_FAST: Flags = WRITE_DENYOOM.or(Flags::FAST);
const READONLY_FAST: Flags = Flags::READONLY.or(Flags::FAST);
const LOADING_STALE: Flags = Flags::LOADING.or(Flags::STALE);
const HANDSHAKE: Flags = Flags::NOSCRIPT
    .or(LOADING_STALE)
    .or(Flags::FAST)
    .or(Flags::NO_AUTH)
    .or(Flags::ALLOW_BUSY);
const TXN_CONTROL: Flags = Flags::NOSCRIPT
    .or(LOADING_STALE)
    .or(Flags::FAST)
    .or(Flags::ALLOW_BUSY);
const STRING_ACL: Acl = Acl::STRING;
const PUBSUB_SLOW: Flags = Flags::PUBSUB.or(Flags::NOSCRIPT).or(LOADING_STALE);

macro_rules! row {
    ($name:literal, $cmd:ident, $arity:expr, $flags:expr, $acl:expr, $keys:expr, $key_flags:expr,
     $vector:ident,
     $group:literal, $since:literal, $summary:literal) => {
        CommandSpec {
            name: $name,
            cmd: Cmd::$cmd,
            arity: $arity,
            flags: $flags,
            acl: $acl,
            keys: $keys,
            key_flags: $key_flags,
            vector: Vector::$vector,
            group: $group,
            since: $since,
            summary: $summary,
        }
    };
}

/// Every command, in the order `COMMAND` lists them, which is `Cmd`'s order.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    row!("ping", Ping, -1, Flags::FAST, Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "connection", "1.0.0", "Returns the server's liveliness response."),
    row!("echo", Echo, 2, Flags::FAST, Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "connection", "1.0.0", "Returns the given string."),
    row!("hello", Hello, -1, HANDSHAKE, Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "connection", "6.0.0", "Handshakes with the Redis server."),
    row!("auth", Auth, -2, HANDSHAKE, Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "connection", "1.0.0", "Authenticates the connection."),
    row!("select", Select, 2, LOADING_STALE.or(Flags::FAST), Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "connection", "1.0.0", "Changes the selected database."),
    row!("quit", Quit, -1, HANDSHAKE.or(Flags::NOT_QUEUED), Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "connection", "1.0.0", "Closes the connection."),
    row!("reset", Reset, 1, HANDSHAKE.or(Flags::NOT_QUEUED), Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "connection", "6.2.0", "Resets the connection."),
    row!("client", Client, -2, Flags::NONE, Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "connection", "2.4.0", "A container for client connection commands."),
    row!("command", Command, -1, LOADING_STALE, Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "server", "2.8.13", "Returns detailed information about all commands."),
    row!("config", Config, -2, Flags::ADMIN, Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "2.0.0", "A container for server configuration commands."),
    row!("info", Info, -1, LOADING_STALE, Acl::DANGEROUS, NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Returns information and statistics about the server."),
    row!("acl", Acl, -2, Flags::ADMIN.or(Flags::NOSCRIPT), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "6.0.0", "A container for Access List Control commands."),
    row!("slowlog", SlowLog, -2, Flags::ADMIN.or(LOADING_STALE), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "2.2.12", "A container for slow log commands."),
    row!("time", Time, 1, LOADING_STALE.or(Flags::FAST), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "2.6.0", "Returns the server time."),
    row!("save", Save, 1, Flags::ADMIN.or(Flags::NOSCRIPT).or(Flags::NO_MULTI), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Synchronously saves the database(s) to disk."),
    row!("bgsave", BgSave, -1, Flags::ADMIN.or(Flags::NOSCRIPT), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Asynchronously saves the database(s) to disk."),
    row!("lastsave", LastSave, 1, LOADING_STALE.or(Flags::FAST), Acl::ADMIN.or(Acl::DANGEROUS), NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Returns the Unix timestamp of the last successful save to disk."),
    row!("shutdown", Shutdown, -1, Flags::ADMIN.or(Flags::NOSCRIPT).or(LOADING_STALE).or(Flags::NO_MULTI).or(Flags::ALLOW_BUSY), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server."),
    row!("latency", Latency, -2, Flags::ADMIN.or(LOADING_STALE), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "2.8.13", "A container for latency diagnostics commands."),
    row!("memory", Memory, -2, Flags::READONLY, Acl::NONE, keys(2, 2, 1), RO, None, "server", "4.0.0", "A container for memory diagnostics commands."),
    row!("debug", Debug, -2, Flags::ADMIN.or(Flags::NOSCRIPT).or(LOADING_STALE).or(Flags::PROTECTED), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "A container for debugging commands."),
    row!("monitor", Monitor, 1, Flags::ADMIN.or(Flags::NOSCRIPT).or(LOADING_STALE), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Listens for all requests received by the server in real-time."),
    row!("subscribe", Subscribe, -2, PUBSUB_SLOW, Acl::PUBSUB, NO_KEYS, NO_KEY_FLAGS, None, "pubsub", "2.0.0", "Listens for messages published to channels."),
    row!("unsubscribe", Unsubscribe, -1, PUBSUB_SLOW, Acl::PUBSUB, NO_KEYS, NO_KEY_FLAGS, None, "pubsub", "2.0.0", "Stops listening to messages posted to channels."),
    row!("psubscribe", PSubscribe, -2, PUBSUB_SLOW, Acl::PUBSUB, NO_KEYS, NO_KEY_FLAGS, None, "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns."),
    row!("punsubscribe", PUnsubscribe, -1, PUBSUB_SLOW, Acl::PUBSUB, NO_KEYS, NO_KEY_FLAGS, None, "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns."),
    row!("publish", Publish, 3, Flags::PUBSUB.or(LOADING_STALE).or(Flags::FAST), Acl::PUBSUB, NO_KEYS, NO_KEY_FLAGS, None, "pubsub", "2.0.0", "Posts a message to a channel."),
    row!("pubsub", PubSub, -2, Flags::NONE, Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "pubsub", "2.8.0", "A container for Pub/Sub commands."),
    row!("get", Get, 2, READONLY_FAST, STRING_ACL, ONE_KEY, RO_ACCESS, Get, "string", "1.0.0", "Returns the string value of a key."),
    row!("set", Set, -3, WRITE_DENYOOM, STRING_ACL, ONE_KEY, SET_FLAGS, Put, "string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
    row!("setnx", SetNx, 3, WRITE_DENYOOM_FAST, STRING_ACL, ONE_KEY, OW_INSERT, None, "string", "1.0.0", "Set the string value of a key only when the key doesn't exist."),
    row!("getset", GetSet, 3, WRITE_DENYOOM_FAST, STRING_ACL, ONE_KEY, RW_ACCESS_UPDATE, None, "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value."),
    row!("getdel", GetDel, 2, WRITE.or(Flags::FAST), STRING_ACL, ONE_KEY, RW_ACCESS_DELETE, None, "string", "6.2.0", "Returns the string value of a key after deleting the key."),
    row!("mget", MGet, -2, READONLY_FAST, STRING_ACL, ALL_KEYS, RO_ACCESS, Get, "string", "1.0.0", "Atomically returns the string values of one or more keys."),
    row!("mset", MSet, -3, WRITE_DENYOOM.or(Flags::BLIND_WRITE), STRING_ACL, KEY_VALUE_PAIRS, OW_UPDATE, AtomicPut, "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys."),
    row!("msetnx", MSetNx, -3, WRITE_DENYOOM, STRING_ACL, KEY_VALUE_PAIRS, OW_INSERT, None, "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
    row!("del", Del, -2, WRITE, Acl::KEYSPACE, ALL_KEYS, RM_DELETE, Delete, "generic", "1.0.0", "Deletes one or more keys."),
    row!("unlink", Unlink, -2, WRITE.or(Flags::FAST), Acl::KEYSPACE, ALL_KEYS, RM_DELETE, Delete, "generic", "4.0.0", "Asynchronously deletes one or more keys."),
    row!("exists", Exists, -2, READONLY_FAST, Acl::KEYSPACE, ALL_KEYS, RO, Exists, "generic", "1.0.0", "Determines whether one or more keys exist."),
    row!("strlen", StrLen, 2, READONLY_FAST, STRING_ACL, ONE_KEY, RO, None, "string", "2.2.0", "Returns the length of a string value."),
    row!("append", Append, 3, WRITE_DENYOOM_FAST, STRING_ACL, ONE_KEY, RW_INSERT, None, "string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist."),
    row!("incr", Incr, 2, WRITE_DENYOOM_FAST, STRING_ACL, ONE_KEY, RW_ACCESS_UPDATE, None, "string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    row!("incrby", IncrBy, 3, WRITE_DENYOOM_FAST, STRING_ACL, ONE_KEY, RW_ACCESS_UPDATE, None, "string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    row!("decr", Decr, 2, WRITE_DENYOOM_FAST, STRING_ACL, ONE_KEY, RW_ACCESS_UPDATE, None, "string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    row!("decrby", DecrBy, 3, WRITE_DENYOOM_FAST, STRING_ACL, ONE_KEY, RW_ACCESS_UPDATE, None, "string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."),
    row!("incrbyfloat", IncrByFloat, 3, WRITE_DENYOOM_FAST, STRING_ACL, ONE_KEY, RW_ACCESS_UPDATE, None, "string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    row!("type", Type, 2, READONLY_FAST, Acl::KEYSPACE, ONE_KEY, RO, None, "generic", "1.0.0", "Determines the type of value stored at a key."),
    row!("getrange", GetRange, 4, Flags::READONLY, STRING_ACL, ONE_KEY, RO_ACCESS, None, "string", "2.4.0", "Returns a substring of the string stored at a key."),
    row!("substr", Substr, 4, Flags::READONLY, STRING_ACL, ONE_KEY, RO_ACCESS, None, "string", "1.0.0", "Returns a substring from a string value."),
    row!("setrange", SetRange, 4, WRITE_DENYOOM, STRING_ACL, ONE_KEY, RW_UPDATE, None, "string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist."),
    row!("lcs", Lcs, -3, Flags::READONLY, STRING_ACL, keys(1, 2, 1), RO_ACCESS, None, "string", "7.0.0", "Finds the longest common substring."),
    row!("touch", Touch, -2, READONLY_FAST, Acl::KEYSPACE, ALL_KEYS, RO, Exists, "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed."),
    row!("rename", Rename, 3, WRITE, Acl::KEYSPACE, keys(1, 2, 1), RENAME_FLAGS, None, "generic", "1.0.0", "Renames a key and overwrites the destination."),
    row!("renamenx", RenameNx, 3, WRITE.or(Flags::FAST), Acl::KEYSPACE, keys(1, 2, 1), RENAMENX_FLAGS, None, "generic", "1.0.0", "Renames a key only when the target key name doesn't exist."),
    row!("copy", Copy, -3, WRITE_DENYOOM, Acl::KEYSPACE, keys(1, 2, 1), COPY_FLAGS, None, "generic", "6.2.0", "Copies the value of a key to a new key."),
    row!("move", Move, 3, WRITE.or(Flags::FAST), Acl::KEYSPACE, ONE_KEY, RW_ACCESS_UPDATE, None, "generic", "1.0.0", "Moves a key to another database."),
    row!("object", Object, -2, Flags::NONE, Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "generic", "2.2.3", "A container for object introspection commands."),
    row!("setex", SetEx, 4, WRITE_DENYOOM.or(Flags::BLIND_WRITE), STRING_ACL, ONE_KEY, OW_UPDATE, None, "string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist."),
    row!("psetex", PSetEx, 4, WRITE_DENYOOM.or(Flags::BLIND_WRITE), STRING_ACL, ONE_KEY, OW_UPDATE, None, "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist."),
    row!("getex", GetEx, -2, WRITE.or(Flags::FAST), STRING_ACL, ONE_KEY, RW_ACCESS_UPDATE, None, "string", "6.2.0", "Returns the string value of a key after setting its expiration time."),
    row!("expire", Expire, -3, WRITE.or(Flags::FAST), Acl::KEYSPACE, ONE_KEY, RW_UPDATE, None, "generic", "1.0.0", "Sets the expiration time of a key in seconds."),
    row!("pexpire", PExpire, -3, WRITE.or(Flags::FAST), Acl::KEYSPACE, ONE_KEY, RW_UPDATE, None, "generic", "2.6.0", "Sets the expiration time of a key in milliseconds."),
    row!("expireat", ExpireAt, -3, WRITE.or(Flags::FAST), Acl::KEYSPACE, ONE_KEY, RW_UPDATE, None, "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp."),
    row!("pexpireat", PExpireAt, -3, WRITE.or(Flags::FAST), Acl::KEYSPACE, ONE_KEY, RW_UPDATE, None, "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp."),
    row!("ttl", Ttl, 2, READONLY_FAST, Acl::KEYSPACE, ONE_KEY, RO_ACCESS, None, "generic", "1.0.0", "Returns the expiration time in seconds of a key."),
    row!("pttl", PTtl, 2, READONLY_FAST, Acl::KEYSPACE, ONE_KEY, RO_ACCESS, None, "generic", "2.6.0", "Returns the expiration time in milliseconds of a key."),
    row!("expiretime", ExpireTime, 2, READONLY_FAST, Acl::KEYSPACE, ONE_KEY, RO_ACCESS, None, "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp."),
    row!("pexpiretime", PExpireTime, 2, READONLY_FAST, Acl::KEYSPACE, ONE_KEY, RO_ACCESS, None, "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp."),
    row!("persist", Persist, 2, WRITE.or(Flags::FAST), Acl::KEYSPACE, ONE_KEY, RW_UPDATE, None, "generic", "2.2.0", "Removes the expiration time of a key."),
    row!("batch", Batch, -3, WRITE_DENYOOM, STRING_ACL, NO_KEYS, BATCH_FLAGS, None, "quiver", "0.1.0", "Quiver: applies puts, deletes and checks with preconditions all or nothing."),
    row!("hset", HSet, -4, WRITE_DENYOOM_FAST, Acl::HASH, ONE_KEY, RW_UPDATE, Txn, "hash", "2.0.0", "Creates or modifies the value of a field in a hash."),
    row!("hsetnx", HSetNx, 4, WRITE_DENYOOM_FAST, Acl::HASH, ONE_KEY, RW_INSERT, Txn, "hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist."),
    row!("hmset", HMSet, -4, WRITE_DENYOOM_FAST, Acl::HASH, ONE_KEY, RW_UPDATE, Txn, "hash", "2.0.0", "Sets the values of multiple fields."),
    row!("hget", HGet, 3, READONLY_FAST, Acl::HASH, ONE_KEY, RO_ACCESS, Get, "hash", "2.0.0", "Returns the value of a field in a hash."),
    row!("hmget", HMGet, -3, READONLY_FAST, Acl::HASH, ONE_KEY, RO_ACCESS, Get, "hash", "2.0.0", "Returns the values of all fields in a hash."),
    row!("hgetall", HGetAll, 2, Flags::READONLY, Acl::HASH, ONE_KEY, RO_ACCESS, Get, "hash", "2.0.0", "Returns all fields and values in a hash."),
    row!("hkeys", HKeys, 2, Flags::READONLY, Acl::HASH, ONE_KEY, RO_ACCESS, Get, "hash", "2.0.0", "Returns all fields in a hash."),
    row!("hvals", HVals, 2, Flags::READONLY, Acl::HASH, ONE_KEY, RO_ACCESS, Get, "hash", "2.0.0", "Returns all values in a hash."),
    row!("hlen", HLen, 2, READONLY_FAST, Acl::HASH, ONE_KEY, RO, Get, "hash", "2.0.0", "Returns the number of fields in a hash."),
    row!("hexists", HExists, 3, READONLY_FAST, Acl::HASH, ONE_KEY, RO, Get, "hash", "2.0.0", "Determines whether a field exists in a hash."),
    row!("hdel", HDel, -3, WRITE.or(Flags::FAST), Acl::HASH, ONE_KEY, RW_DELETE, Txn, "hash", "2.0.0", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain."),
    row!("hstrlen", HStrLen, 3, READONLY_FAST, Acl::HASH, ONE_KEY, RO, Get, "hash", "3.2.0", "Returns the length of the value of a field."),
    row!("hincrby", HIncrBy, 4, WRITE_DENYOOM_FAST, Acl::HASH, ONE_KEY, RW_ACCESS_UPDATE, Txn, "hash", "2.0.0", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist."),
    row!("hincrbyfloat", HIncrByFloat, 4, WRITE_DENYOOM_FAST, Acl::HASH, ONE_KEY, RW_ACCESS_UPDATE, Txn, "hash", "2.6.0", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist."),
    row!("hrandfield", HRandField, -2, Flags::READONLY, Acl::HASH, ONE_KEY, RO_ACCESS, None, "hash", "6.2.0", "Returns one or more random fields from a hash."),
    row!("hscan", HScan, -3, Flags::READONLY, Acl::HASH, ONE_KEY, RO_ACCESS, None, "hash", "2.8.0", "Iterates over fields and values of a hash."),
    row!("scan", Scan, -2, Flags::READONLY, Acl::KEYSPACE, NO_KEYS, NO_KEY_FLAGS, None, "generic", "2.8.0", "Iterates over the key names in the database."),
    row!("keys", Keys, 2, Flags::READONLY, Acl::KEYSPACE.or(Acl::DANGEROUS), NO_KEYS, NO_KEY_FLAGS, None, "generic", "1.0.0", "Returns all key names that match a pattern."),
    row!("randomkey", RandomKey, 1, Flags::READONLY, Acl::KEYSPACE, NO_KEYS, NO_KEY_FLAGS, None, "generic", "1.0.0", "Returns a random key name from the database."),
    row!("dbsize", DbSize, 1, READONLY_FAST, Acl::KEYSPACE, NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Returns the number of keys in the database."),
    row!("flushdb", FlushDb, -1, WRITE, Acl::KEYSPACE.or(Acl::DANGEROUS), NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Remove all keys from the current database."),
    row!("flushall", FlushAll, -1, WRITE, Acl::KEYSPACE.or(Acl::DANGEROUS), NO_KEYS, NO_KEY_FLAGS, None, "server", "1.0.0", "Removes all keys from all databases."),
    row!("swapdb", SwapDb, 3, WRITE.or(Flags::FAST), Acl::KEYSPACE.or(Acl::DANGEROUS), NO_KEYS, NO_KEY_FLAGS, None, "server", "4.0.0", "Swaps two Redis databases."),
    row!("multi", Multi, 1, TXN_CONTROL.or(Flags::NOT_QUEUED), Acl::TRANSACTION, NO_KEYS, NO_KEY_FLAGS, None, "transactions", "1.2.0", "Starts a transaction."),
    row!("exec", Exec, 1, Flags::NOSCRIPT.or(LOADING_STALE).or(Flags::SKIP_SLOWLOG).or(Flags::NOT_QUEUED), Acl::TRANSACTION, NO_KEYS, NO_KEY_FLAGS, None, "transactions", "1.2.0", "Executes all commands in a transaction."),
    row!("discard", Discard, 1, TXN_CONTROL.or(Flags::NOT_QUEUED), Acl::TRANSACTION, NO_KEYS, NO_KEY_FLAGS, None, "transactions", "2.0.0", "Discards a transaction."),
    row!("watch", Watch, -2, TXN_CONTROL.or(Flags::NOT_QUEUED), Acl::TRANSACTION, ALL_KEYS, RO, None, "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction."),
    row!("unwatch", Unwatch, 1, TXN_CONTROL, Acl::TRANSACTION, NO_KEYS, NO_KEY_FLAGS, None, "transactions", "2.2.0", "Forgets about watched keys of a transaction."),
    row!("cluster", Cluster, -2, Flags::NONE, Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "cluster", "3.0.0", "A container for Redis Cluster commands."),
    row!("asking", Asking, 1, Flags::FAST, Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "cluster", "3.0.0", "Sent by cluster clients after an -ASK redirect"),
    row!("readonly", ReadOnly, 1, LOADING_STALE.or(Flags::FAST), Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "cluster", "3.0.0", "Enables read queries for a connection to a cluster replica node"),
    row!("readwrite", ReadWrite, 1, LOADING_STALE.or(Flags::FAST), Acl::CONNECTION, NO_KEYS, NO_KEY_FLAGS, None, "cluster", "3.0.0", "Disables read queries for a connection to a cluster replica node"),
    row!("role", Role, 1, Flags::NOSCRIPT.or(LOADING_STALE).or(Flags::FAST), Acl::ADMIN.or(Acl::FAST).or(Acl::DANGEROUS), NO_KEYS, NO_KEY_FLAGS, None, "server", "2.8.12", "Returns the replication role."),
    row!("wait", Wait, 3, Flags::NOSCRIPT, Acl::SLOW.or(Acl::CONNECTION), NO_KEYS, NO_KEY_FLAGS, None, "generic", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed."),
    row!("rangeimport", RangeImport, -3, WRITE.or(Flags::ADMIN), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "quiver", "0.1.0", "Quiver: receives a range of slots moving to this cluster node (sent by the node handing it over)."),
    row!("chain", Chain, -2, WRITE.or(Flags::ADMIN), Acl::NONE, NO_KEYS, NO_KEY_FLAGS, None, "quiver", "0.1.0", "Quiver: chain replication between cluster nodes (a message from the predecessor, or this node's chains' status)."),
];

/// Longest command name in the table (lookups of longer names fail at once).
const NAME_MAX: usize = 16;
/// Lookup buckets: one per (name length, first letter folded to lower case).
const BUCKETS: usize = (NAME_MAX + 1) * 32;

fn bucket(name: &[u8]) -> usize {
    name.len() * 32 + usize::from(name.first().map_or(0, |b| b.to_ascii_lowercase() & 31))
}

/// Finds a command by name, case-insensitively, without allocating or lower-casing a copy:
/// the name's length and first letter pick a bucket of one to a few rows.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    static BY_BUCKET: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    if name.len() > NAME_MAX {
        return None;
    }
    let buckets = BY_BUCKET.get_or_init(|| {
        let mut b = vec![Vec::new(); BUCKETS];
        for (i, c) in COMMANDS.iter().enumerate() {
            let i = u8::try_from(i).unwrap_or(u8::MAX);
            b[bucket(c.name.as_bytes())].push(i);
        }
        b
    });
    buckets[bucket(name)]
        .iter()
        .map(|&i| &COMMANDS[usize::from(i)])
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
}

/// How many ACL ids there are: a row's is its index, a subcommand's the table's length plus
/// its index in [`SUBCOMMANDS`] (Redis gives subcommands ids of their own too).
pub fn acl_ids() -> usize {
    COMMANDS.len() + SUBCOMMANDS.len()
}

/// The subcommands of a container command (none for another), each with its ACL id.
pub fn subcommands_of(cmd: Cmd) -> impl Iterator<Item = (usize, &'static Subcommand)> {
    let container = cmd.spec().name;
    SUBCOMMANDS
        .iter()
        .enumerate()
        .filter(move |(_, s)| s.container == container)
        .map(|(i, s)| (COMMANDS.len() + i, s))
}

/// Whether `cmd` is a container of subcommands (CONFIG, CLIENT, ...).
pub fn is_container(cmd: Cmd) -> bool {
    subcommands_of(cmd).next().is_some()
}

/// The subcommand `name` of `cmd` (any case), with its ACL id.
pub fn subcommand(cmd: Cmd, name: &[u8]) -> Option<(usize, &'static Subcommand)> {
    subcommands_of(cmd).find(|(_, s)| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether `name` (lower case: `eval`, `script|flush`) is one of Redis 7.0's commands that
/// Quiver does not implement.
pub fn is_absent(name: &str) -> bool {
    redis::ABSENT.binary_search(&name).is_ok()
}

/// Commands about the connection or the server: they touch no key (a node runs them with `cmd::run_server`; the router answers them itself).
pub fn is_server_command(cmd: Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Ping
            | Cmd::Echo
            | Cmd::Hello
            | Cmd::Auth
            | Cmd::Select
            | Cmd::Quit
            | Cmd::Reset
            | Cmd::Client
            | Cmd::Command
            | Cmd::Config
            | Cmd::Info
            | Cmd::Acl
            | Cmd::SlowLog
            | Cmd::Time
            | Cmd::Save
            | Cmd::BgSave
            | Cmd::LastSave
            | Cmd::Shutdown
            | Cmd::Latency
            | Cmd::Memory
            | Cmd::Debug
            | Cmd::Monitor
            | Cmd::Subscribe
            | Cmd::Unsubscribe
            | Cmd::PSubscribe
            | Cmd::PUnsubscribe
            | Cmd::Publish
            | Cmd::PubSub
            | Cmd::Multi
            | Cmd::Discard
            | Cmd::Watch
            | Cmd::Unwatch
            | Cmd::Asking
            | Cmd::ReadOnly
            | Cmd::ReadWrite
            | Cmd::Role
            | Cmd::Wait
            | Cmd::RangeImport
            | Cmd::Chain
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_is_case_insensitive_and_complete() {
        assert_eq!(lookup(b"GeT").unwrap().cmd, Cmd::Get);
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(b"averyveryverylongname").is_none());
        assert!(COMMANDS.len() < usize::from(u8::MAX));
        for (i, c) in COMMANDS.iter().enumerate() {
            assert_eq!(c.cmd.index(), i, "{} is out of Cmd's order", c.name);
            assert!(c.name.len() <= NAME_MAX);
            assert_eq!(lookup(c.name.as_bytes()).unwrap().cmd, c.cmd);
            assert_eq!(lookup(c.name.to_uppercase().as_bytes()).unwrap().cmd, c.cmd);
        }
    }

    #[test]
    fn subcommands_and_absent_names() {
        assert!(SUBCOMMANDS
            .windows(2)
            .all(|w| (w[0].container, w[0].name) < (w[1].container, w[1].name)));
        assert!(redis::ABSENT.windows(2).all(|w| w[0] < w[1]));
        for s in SUBCOMMANDS {
            let row = lookup(s.container.as_bytes()).unwrap();
            assert!(is_container(row.cmd), "{} is a container", s.container);
        }
        let (id, get) = subcommand(Cmd::Config, b"GET").unwrap();
        assert_eq!((get.name, get.arity), ("get", -3));
        assert!(id >= COMMANDS.len() && id < acl_ids());
        assert!(subcommand(Cmd::Config, b"bogus").is_none());
        assert!(!is_container(Cmd::Get) && !is_container(Cmd::Debug));
        assert!(is_absent("eval") && is_absent("script|flush") && !is_absent("get"));
        for name in redis::ABSENT {
            let base = name.split('|').next().unwrap_or(name);
            assert!(lookup(base.as_bytes()).is_none(), "{name} is Quiver's");
        }
    }

    #[test]
    fn key_positions() {
        let args: Vec<bytes::Bytes> = ["MSET", "a", "1", "b", "2"]
            .iter()
            .map(|s| bytes::Bytes::from(*s))
            .collect();
        let mset = Cmd::MSet.spec();
        let keys: Vec<_> = mset.keys(&args).collect();
        assert_eq!(keys, [&args[1], &args[3]]);
        let get = Cmd::Get.spec();
        assert_eq!(get.keys(&args[..2]).count(), 1);
        assert_eq!(Cmd::Ping.spec().keys(&args).count(), 0);
        assert!(get.arity_ok(2) && !get.arity_ok(3));
        assert!(mset.arity_ok(5) && !mset.arity_ok(2));
    }

    #[test]
    fn flags_and_categories_as_redis_reports_them() {
        let get = Cmd::Get.spec();
        assert_eq!(get.flags.names().collect::<Vec<_>>(), ["readonly", "fast"]);
        assert_eq!(
            get.acl_categories().collect::<Vec<_>>(),
            ["@read", "@string", "@fast"]
        );
        let exec = Cmd::Exec.spec();
        assert!(exec.flags.contains(Flags::NOT_QUEUED));
        assert!(!exec.flags.names().any(|n| n.contains("queued")));
        assert_eq!(
            Cmd::FlushAll.spec().acl_categories().collect::<Vec<_>>(),
            ["@keyspace", "@write", "@slow", "@dangerous"]
        );
    }
}
