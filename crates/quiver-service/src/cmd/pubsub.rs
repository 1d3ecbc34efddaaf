//! SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH and PUBSUB (CHANNELS, NUMSUB,
//! NUMPAT, SHARDCHANNELS, SHARDNUMSUB, HELP), with Redis 7.0's replies: a (un)subscription
//! answers one reply per channel or pattern (`[subscribe, channel, count]`, a push in RESP3).
//! The registry is `pubsub::PubSub`; ACL channel rules are checked before (`admission`).

use bytes::Bytes;

use crate::cmd::ConnCtx;
use crate::errors::{unknown_subcommand, wrong_arity};
use crate::reply::Reply;
use crate::table::Cmd;

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

pub fn run(ctx: &mut ConnCtx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        Cmd::Subscribe => subscribe(ctx, &args[1..], false),
        Cmd::PSubscribe => subscribe(ctx, &args[1..], true),
        Cmd::Unsubscribe => unsubscribe(ctx, &args[1..], false),
        Cmd::PUnsubscribe => unsubscribe(ctx, &args[1..], true),
        Cmd::Publish => Reply::Integer(ctx.core.pubsub.publish(&args[1], &args[2]) as i64),
        _ => pubsub(ctx, args),
    }
}

/// One (un)subscription's reply: `[kind, channel or nil, subscriptions now]`.
fn confirmation(kind: &'static str, name: Option<&Bytes>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::Bulk(Bytes::from_static(kind.as_bytes())),
        name.map_or(Reply::Null, |n| Reply::Bulk(n.clone())),
        Reply::Integer(count as i64),
    ])
}

/// SUBSCRIBE channel... / PSUBSCRIBE pattern...
fn subscribe(ctx: &mut ConnCtx<'_>, names: &[Bytes], patterns: bool) -> Reply {
    let (core, session) = (ctx.core, &mut *ctx.session);
    let mut replies = Vec::with_capacity(names.len());
    for name in names {
        let new = match patterns {
            false => session.channels.insert(name.clone()),
            true => session.patterns.insert(name.clone()),
        };
        if new && patterns {
            core.pubsub.psubscribe(&session.info, name);
        } else if new {
            core.pubsub.subscribe(&session.info, name);
        }
        let kind = if patterns { "psubscribe" } else { "subscribe" };
        replies.push(confirmation(kind, Some(name), session.subscriptions()));
    }
    Reply::Many(replies)
}

/// UNSUBSCRIBE [channel...] / PUNSUBSCRIBE [pattern...]: none named, all of them (in order);
/// none at all, one reply with a nil name.
fn unsubscribe(ctx: &mut ConnCtx<'_>, names: &[Bytes], patterns: bool) -> Reply {
    let (core, session) = (ctx.core, &mut *ctx.session);
    let kind = if patterns {
        "punsubscribe"
    } else {
        "unsubscribe"
    };
    let names: Vec<Bytes> = match (names.is_empty(), patterns) {
        (false, _) => names.to_vec(),
        (true, false) => session.channels.iter().cloned().collect(),
        (true, true) => session.patterns.iter().cloned().collect(),
    };
    if names.is_empty() {
        return Reply::Many(vec![confirmation(kind, None, session.subscriptions())]);
    }
    let id = session.id();
    let mut replies = Vec::with_capacity(names.len());
    for name in &names {
        if patterns && session.patterns.remove(name) {
            core.pubsub.punsubscribe(id, name);
        } else if !patterns && session.channels.remove(name) {
            core.pubsub.unsubscribe(id, name);
        }
        replies.push(confirmation(kind, Some(name), session.subscriptions()));
    }
    Reply::Many(replies)
}

/// Forgets every subscription of the connection (RESET, its end).
pub fn unsubscribe_all(ctx: &mut ConnCtx<'_>) {
    let id = ctx.session.id();
    for c in std::mem::take(&mut ctx.session.channels) {
        ctx.core.pubsub.unsubscribe(id, &c);
    }
    for p in std::mem::take(&mut ctx.session.patterns) {
        ctx.core.pubsub.punsubscribe(id, &p);
    }
}

/// PUBSUB CHANNELS | NUMSUB | NUMPAT | SHARDCHANNELS | SHARDNUMSUB | HELP.
fn pubsub(ctx: &ConnCtx<'_>, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let pairs = |counts: Vec<(Bytes, usize)>| {
        Reply::Array(
            counts
                .into_iter()
                .flat_map(|(c, n)| [Reply::Bulk(c), Reply::Integer(n as i64)])
                .collect(),
        )
    };
    match (&sub[..], args.len()) {
        (b"channels", 2 | 3) => {
            let found = ctx.core.pubsub.channels(args.get(2).map(|p| &p[..]));
            Reply::Array(found.into_iter().map(Reply::Bulk).collect())
        }
        (b"numsub", _) => {
            let counts = args[2..]
                .iter()
                .map(|c| (c.clone(), ctx.core.pubsub.numsub(c)));
            pairs(counts.collect())
        }
        (b"numpat", 2) => Reply::Integer(ctx.core.pubsub.numpat() as i64),
        // Quiver has no shard channels (SSUBSCRIBE): none is active.
        (b"shardchannels", 2 | 3) => Reply::Array(Vec::new()),
        (b"shardnumsub", _) => pairs(args[2..].iter().map(|c| (c.clone(), 0)).collect()),
        (b"help", 2) => Reply::Array(HELP.iter().map(|l| Reply::simple(*l)).collect()),
        (b"channels" | b"numpat" | b"shardchannels" | b"help", _) => {
            wrong_arity(&format!("pubsub|{}", String::from_utf8_lossy(&sub)))
        }
        _ => unknown_subcommand(&args[1], "PUBSUB"),
    }
}

/// The refusal of a RESP2 connection's command in subscribed mode, as Redis words it.
pub fn subscribed_mode_refusal(name: &str) -> Reply {
    Reply::error(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
         RESET are allowed in this context"
    ))
}
