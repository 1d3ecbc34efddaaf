//! The subcommands a request is checked against before it runs or is queued in MULTI, as Redis
//! checks them from its command table: CLUSTER's (their names and arities are the table's,
//! `table::SUBCOMMANDS`: Redis 7.0's, and Quiver's COUNTKEYSINRANGES, a chain's share of
//! DBSIZE, which the router asks). OBJECT, CLIENT, CONFIG and
//! COMMAND check theirs when they run (as Redis's do).

use bytes::Bytes;

use crate::errors::{unknown_subcommand, wrong_arity};
use crate::reply::Reply;
use crate::table::Cmd;

/// The refusal Redis gives a request for an unknown subcommand of a container command, or a
/// known one with a wrong number of arguments (CLUSTER's), before anything runs.
pub fn refusal(cmd: Cmd, args: &[Bytes]) -> Option<Reply> {
    match cmd {
        Cmd::Cluster => cluster_refusal(args),
        _ => None,
    }
}

/// The refusal Redis gives a CLUSTER request before running or queueing it: an unknown
/// subcommand, or a wrong number of arguments for a known one (`args[1]` exists: CLUSTER's
/// own arity was checked).
fn cluster_refusal(args: &[Bytes]) -> Option<Reply> {
    let Some((_, sub)) = crate::table::subcommand(Cmd::Cluster, &args[1]) else {
        return Some(unknown_subcommand(&args[1], "CLUSTER"));
    };
    let (name, arity) = (sub.name, sub.arity);
    let argc = args.len() as i64;
    let arity = i64::from(arity);
    let ok = if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    };
    (!ok).then(|| wrong_arity(&format!("cluster|{name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn refusals_name_the_subcommand() {
        let refused = |w: &[&str]| match cluster_refusal(&args(w)) {
            Some(Reply::Error(t)) => String::from_utf8(t.to_vec()).unwrap_or_default(),
            other => panic!("{w:?}: {other:?}"),
        };
        assert_eq!(
            refused(&["CLUSTER", "KEYSLOT"]),
            "ERR wrong number of arguments for 'cluster|keyslot' command"
        );
        assert_eq!(
            refused(&["CLUSTER", "GetKeysInSlot", "1"]),
            "ERR wrong number of arguments for 'cluster|getkeysinslot' command"
        );
        assert_eq!(
            refused(&["CLUSTER", "SLOTS", "x"]),
            "ERR wrong number of arguments for 'cluster|slots' command"
        );
        assert_eq!(
            refused(&["CLUSTER", "foo", "bar"]),
            "ERR unknown subcommand 'foo'. Try CLUSTER HELP."
        );
        assert_eq!(
            refused(&["CLUSTER", "myshardid"]),
            "ERR unknown subcommand 'myshardid'. Try CLUSTER HELP."
        );
        assert!(cluster_refusal(&args(&["CLUSTER", "ADDSLOTS", "1", "2", "3"])).is_none());
        assert!(cluster_refusal(&args(&["CLUSTER", "FAILOVER"])).is_none());
        assert!(cluster_refusal(&args(&["CLUSTER", "COUNTKEYSINRANGES", "0", "1"])).is_none());
    }
}
