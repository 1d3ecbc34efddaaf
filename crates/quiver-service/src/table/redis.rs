//! Redis 7.0's command names beside Quiver's rows, as data only (from `COMMAND LIST` and
//! `COMMAND INFO` of redis-server 7.0.15): the subcommands of Quiver's container commands, and
//! the Redis commands Quiver does not implement. ACL rules (`+config|get`, `-eval`) and
//! `rename-command` check names here, so that a file written for Redis (a hardening line such
//! as `-eval -script`) is accepted where Redis accepts it, and a name Redis does not know is
//! refused as Redis refuses it.

/// One subcommand of a container command of Quiver's table.
#[derive(Debug)]
pub struct Subcommand {
    /// The container's name, lower case (`config`).
    pub container: &'static str,
    /// The subcommand's name, lower case (`get`).
    pub name: &'static str,
    /// Redis's arity convention, CONTAINER and the subcommand included.
    pub arity: i32,
    /// Its ACL categories, as Redis 7.0 gives each subcommand its own (`CONFIG GET` is
    /// `@dangerous`, `CONFIG HELP` is not); a container's own are `@slow` only.
    pub acl: &'static [&'static str],
}

const fn sub(
    container: &'static str,
    name: &'static str,
    arity: i32,
    acl: &'static [&'static str],
) -> Subcommand {
    Subcommand {
        container,
        name,
        arity,
        acl,
    }
}

/// Redis 7.0's subcommands of CLIENT, CONFIG, COMMAND, ACL, SLOWLOG, LATENCY, MEMORY, OBJECT, PUBSUB and
/// CLUSTER (and Quiver's own CLUSTER COUNTKEYSINRANGES), sorted by container and name. A
/// subcommand's ACL id is the table's length plus its index here.
#[rustfmt::skip]
pub static SUBCOMMANDS: &[Subcommand] = &[
    sub("acl", "cat", -2, &["@slow"]),
    sub("acl", "deluser", -3, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "dryrun", -4, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "genpass", -2, &["@slow"]),
    sub("acl", "getuser", 3, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "help", 2, &["@slow"]),
    sub("acl", "list", 2, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "load", 2, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "log", -2, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "save", 2, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "setuser", -3, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "users", 2, &["@admin", "@slow", "@dangerous"]),
    sub("acl", "whoami", 2, &["@slow"]),
    sub("client", "caching", 3, &["@slow", "@connection"]),
    sub("client", "getname", 2, &["@slow", "@connection"]),
    sub("client", "getredir", 2, &["@slow", "@connection"]),
    sub("client", "help", 2, &["@slow", "@connection"]),
    sub("client", "id", 2, &["@slow", "@connection"]),
    sub("client", "info", 2, &["@slow", "@connection"]),
    sub("client", "kill", -3, &["@admin", "@slow", "@dangerous", "@connection"]),
    sub("client", "list", -2, &["@admin", "@slow", "@dangerous", "@connection"]),
    sub("client", "no-evict", 3, &["@admin", "@slow", "@dangerous", "@connection"]),
    sub("client", "pause", -3, &["@admin", "@slow", "@dangerous", "@connection"]),
    sub("client", "reply", 3, &["@slow", "@connection"]),
    sub("client", "setname", 3, &["@slow", "@connection"]),
    sub("client", "tracking", -3, &["@slow", "@connection"]),
    sub("client", "trackinginfo", 2, &["@slow", "@connection"]),
    sub("client", "unblock", -3, &["@admin", "@slow", "@dangerous", "@connection"]),
    sub("client", "unpause", 2, &["@admin", "@slow", "@dangerous", "@connection"]),
    sub("cluster", "addslots", -3, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "addslotsrange", -4, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "bumpepoch", 2, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "count-failure-reports", 3, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "countkeysinranges", -4, &["@slow"]),
    sub("cluster", "countkeysinslot", 3, &["@slow"]),
    sub("cluster", "delslots", -3, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "delslotsrange", -4, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "failover", -2, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "flushslots", 2, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "forget", 3, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "getkeysinslot", 4, &["@slow"]),
    sub("cluster", "help", 2, &["@slow"]),
    sub("cluster", "info", 2, &["@slow"]),
    sub("cluster", "keyslot", 3, &["@slow"]),
    sub("cluster", "links", 2, &["@slow"]),
    sub("cluster", "meet", -4, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "myid", 2, &["@slow"]),
    sub("cluster", "nodes", 2, &["@slow"]),
    sub("cluster", "replicas", 3, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "replicate", 3, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "reset", -2, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "saveconfig", 2, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "set-config-epoch", 3, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "setslot", -4, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "shards", 2, &["@slow"]),
    sub("cluster", "slaves", 3, &["@admin", "@slow", "@dangerous"]),
    sub("cluster", "slots", 2, &["@slow"]),
    sub("command", "count", 2, &["@slow", "@connection"]),
    sub("command", "docs", -2, &["@slow", "@connection"]),
    sub("command", "getkeys", -4, &["@slow", "@connection"]),
    sub("command", "getkeysandflags", -4, &["@slow", "@connection"]),
    sub("command", "help", 2, &["@slow", "@connection"]),
    sub("command", "info", -2, &["@slow", "@connection"]),
    sub("command", "list", -2, &["@slow", "@connection"]),
    sub("config", "get", -3, &["@admin", "@slow", "@dangerous"]),
    sub("config", "help", 2, &["@slow"]),
    sub("config", "resetstat", 2, &["@admin", "@slow", "@dangerous"]),
    sub("config", "rewrite", 2, &["@admin", "@slow", "@dangerous"]),
    sub("config", "set", -4, &["@admin", "@slow", "@dangerous"]),
    sub("latency", "doctor", 2, &["@admin", "@slow", "@dangerous"]),
    sub("latency", "graph", 3, &["@admin", "@slow", "@dangerous"]),
    sub("latency", "help", 2, &["@slow"]),
    sub("latency", "histogram", -2, &["@admin", "@slow", "@dangerous"]),
    sub("latency", "history", 3, &["@admin", "@slow", "@dangerous"]),
    sub("latency", "latest", 2, &["@admin", "@slow", "@dangerous"]),
    sub("latency", "reset", -2, &["@admin", "@slow", "@dangerous"]),
    sub("memory", "doctor", 2, &["@slow"]),
    sub("memory", "help", 2, &["@slow"]),
    sub("memory", "malloc-stats", 2, &["@slow"]),
    sub("memory", "purge", 2, &["@slow"]),
    sub("memory", "stats", 2, &["@slow"]),
    sub("memory", "usage", -3, &["@read", "@slow"]),
    sub("object", "encoding", 3, &["@keyspace", "@read", "@slow"]),
    sub("object", "freq", 3, &["@keyspace", "@read", "@slow"]),
    sub("object", "help", 2, &["@keyspace", "@slow"]),
    sub("object", "idletime", 3, &["@keyspace", "@read", "@slow"]),
    sub("object", "refcount", 3, &["@keyspace", "@read", "@slow"]),
    sub("pubsub", "channels", -2, &["@pubsub", "@slow"]),
    sub("pubsub", "help", 2, &["@slow"]),
    sub("pubsub", "numpat", 2, &["@pubsub", "@slow"]),
    sub("pubsub", "numsub", -2, &["@pubsub", "@slow"]),
    sub("pubsub", "shardchannels", -2, &["@pubsub", "@slow"]),
    sub("pubsub", "shardnumsub", -2, &["@pubsub", "@slow"]),
    sub("slowlog", "get", -2, &["@admin", "@slow", "@dangerous"]),
    sub("slowlog", "help", 2, &["@slow"]),
    sub("slowlog", "len", 2, &["@admin", "@slow", "@dangerous"]),
    sub("slowlog", "reset", 2, &["@admin", "@slow", "@dangerous"]),
];

/// Redis 7.0's commands that Quiver does not implement (and their subcommands, `script|flush`),
/// sorted: ACL rules may allow or deny them and `rename-command` may disable them, to no
/// effect here.
#[rustfmt::skip]
pub static ABSENT: &[&str] = &[
    "bgrewriteaof", "bitcount", "bitfield", "bitfield_ro", "bitop", "bitpos", "blmove", "blmpop",
    "blpop", "brpop", "brpoplpush", "bzmpop", "bzpopmax", "bzpopmin", "dump", "eval", "eval_ro",
    "evalsha", "evalsha_ro", "failover", "fcall", "fcall_ro", "function", "function|delete",
    "function|dump", "function|flush", "function|help", "function|kill", "function|list",
    "function|load", "function|restore", "function|stats", "geoadd", "geodist", "geohash", "geopos",
    "georadius", "georadius_ro", "georadiusbymember", "georadiusbymember_ro", "geosearch",
    "geosearchstore", "getbit", "lindex", "linsert", "llen", "lmove", "lmpop", "lolwut", "lpop",
    "lpos", "lpush", "lpushx", "lrange", "lrem", "lset", "ltrim", "migrate", "module",
    "module|help", "module|list", "module|load", "module|loadex", "module|unload", "pfadd",
    "pfcount", "pfdebug", "pfmerge", "pfselftest", "psync", "replconf", "replicaof", "restore", "restore-asking",
    "rpop", "rpoplpush", "rpush", "rpushx", "sadd", "scard", "script", "script|debug",
    "script|exists", "script|flush", "script|help", "script|kill", "script|load", "sdiff",
    "sdiffstore", "setbit", "sinter", "sintercard", "sinterstore", "sismember", "slaveof",
    "smembers", "smismember", "smove", "sort", "sort_ro", "spop", "spublish", "srandmember", "srem",
    "sscan", "ssubscribe", "sunion", "sunionstore", "sunsubscribe", "sync",
    "xack", "xadd", "xautoclaim", "xclaim", "xdel", "xgroup", "xgroup|create",
    "xgroup|createconsumer", "xgroup|delconsumer", "xgroup|destroy", "xgroup|help", "xgroup|setid",
    "xinfo", "xinfo|consumers", "xinfo|groups", "xinfo|help", "xinfo|stream", "xlen", "xpending",
    "xrange", "xread", "xreadgroup", "xrevrange", "xsetid", "xtrim", "zadd", "zcard", "zcount",
    "zdiff", "zdiffstore", "zincrby", "zinter", "zintercard", "zinterstore", "zlexcount", "zmpop",
    "zmscore", "zpopmax", "zpopmin", "zrandmember", "zrange", "zrangebylex", "zrangebyscore",
    "zrangestore", "zrank", "zrem", "zremrangebylex", "zremrangebyrank", "zremrangebyscore",
    "zrevrange", "zrevrangebylex", "zrevrangebyscore", "zrevrank", "zscan", "zscore", "zunion",
    "zunionstore",
];
