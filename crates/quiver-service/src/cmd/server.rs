//! Commands about the server itself that every RESP service answers alike: TIME, SLOWLOG GET /
//! LEN / RESET / HELP over the service's slow log (`slowlog`), and LATENCY LATEST / HISTORY /
//! RESET / GRAPH / DOCTOR / HELP over its latency monitor (`latency`).

use bytes::Bytes;

use crate::errors::{err, unknown_subcommand, wrong_arity};
use crate::frame::string2ll;
use crate::latency::Sample;
use crate::reply::Reply;
use crate::service::Core;
use crate::slowlog::Entry;
use crate::table::{lookup, CommandSpec, COMMANDS};

/// Entries SLOWLOG GET answers without a count.
const SLOWLOG_GET_DEFAULT: usize = 10;

const SLOWLOG_HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

/// TIME: the Unix time as seconds and microseconds, two bulk strings.
pub fn time() -> Reply {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Reply::Array(vec![
        Reply::text(now.as_secs().to_string()),
        Reply::text(now.subsec_micros().to_string()),
    ])
}

/// SLOWLOG `args[1]` ... (SLOWLOG's own arity was checked).
pub fn slowlog(core: &Core, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let fixed = |n: usize, name: &str, reply: &dyn Fn() -> Reply| {
        if args.len() == n {
            reply()
        } else {
            wrong_arity(&format!("slowlog|{name}"))
        }
    };
    match &sub[..] {
        // Redis 7.0's own words for this one.
        b"get" if args.len() > 3 => {
            err("ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.")
        }
        b"get" => match args.get(2).map(|c| string2ll(c)) {
            None => entries(core, Some(SLOWLOG_GET_DEFAULT)),
            Some(Some(-1)) => entries(core, None),
            Some(Some(n)) if n >= 0 => entries(core, Some(n as usize)),
            Some(_) => err("ERR count should be greater than or equal to -1"),
        },
        b"len" => fixed(2, "len", &|| Reply::Integer(core.slowlog.len() as i64)),
        b"reset" => fixed(2, "reset", &|| {
            core.slowlog.reset();
            Reply::OK
        }),
        b"help" => fixed(2, "help", &|| {
            Reply::Array(SLOWLOG_HELP.iter().map(|l| Reply::simple(*l)).collect())
        }),
        _ => unknown_subcommand(&args[1], "SLOWLOG"),
    }
}

/// The newest `count` entries (all for `None`), each as Redis sends it: id, time, duration,
/// arguments, client address, client name.
fn entries(core: &Core, count: Option<usize>) -> Reply {
    let entry = |e: Entry| {
        Reply::Array(vec![
            Reply::Integer(e.id as i64),
            Reply::Integer(e.time as i64),
            Reply::Integer(e.duration_us as i64),
            Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
            Reply::text(e.addr),
            Reply::Bulk(e.name),
        ])
    };
    Reply::Array(core.slowlog.newest(count).into_iter().map(entry).collect())
}

const LATENCY_HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

/// LATENCY `args[1]` ... (LATENCY's own arity was checked).
pub fn latency(core: &Core, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let m = &core.latency;
    match (&sub[..], args.len()) {
        (b"latest", 2) => Reply::Array(
            m.latest()
                .into_iter()
                .map(|l| {
                    Reply::Array(vec![
                        Reply::text(l.event),
                        Reply::Integer(l.time as i64),
                        Reply::Integer(l.ms as i64),
                        Reply::Integer(l.max_ms as i64),
                    ])
                })
                .collect(),
        ),
        (b"history", 3) => {
            let event = String::from_utf8_lossy(&args[2]);
            Reply::Array(
                m.history(&event)
                    .into_iter()
                    .map(|s| {
                        Reply::Array(vec![
                            Reply::Integer(s.time as i64),
                            Reply::Integer(s.ms as i64),
                        ])
                    })
                    .collect(),
            )
        }
        (b"reset", _) => {
            let events: Vec<String> = args[2..]
                .iter()
                .map(|e| String::from_utf8_lossy(e).into_owned())
                .collect();
            Reply::Integer(m.reset(&events) as i64)
        }
        (b"graph", 3) => {
            let event = String::from_utf8_lossy(&args[2]);
            match graph(&event, &m.history(&event)) {
                Some(text) => Reply::Verbatim {
                    format: *b"txt",
                    text: Bytes::from(text),
                },
                None => Reply::error(format!("ERR No samples available for event '{event}'")),
            }
        }
        (b"doctor", 2) => Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from(doctor(core)),
        },
        (b"help", 2) => Reply::Array(LATENCY_HELP.iter().map(|l| Reply::simple(*l)).collect()),
        (b"histogram", _) => histograms(core, &args[2..]),
        (b"latest" | b"history" | b"graph" | b"doctor" | b"help", _) => {
            wrong_arity(&format!("latency|{}", String::from_utf8_lossy(&sub)))
        }
        _ => unknown_subcommand(&args[1], "LATENCY"),
    }
}

/// LATENCY GRAPH: one line per sample, its time, milliseconds and a bar scaled to the
/// largest (Quiver's own layout; Redis draws columns).
fn graph(event: &str, samples: &[Sample]) -> Option<String> {
    const BAR_MAX: u64 = 60;
    let max = samples.iter().map(|s| s.ms).max()?;
    let min = samples.iter().map(|s| s.ms).min().unwrap_or(max);
    let mut text = format!("{event} - high {max} ms, low {min} ms\n");
    for s in samples {
        let bar = (s.ms * BAR_MAX).div_ceil(max.max(1)) as usize;
        text.push_str(&format!("{} {:>6} ms {}\n", s.time, s.ms, "#".repeat(bar)));
    }
    Some(text)
}

/// LATENCY DOCTOR: per event, its samples and what usually causes it; Redis's words when
/// there is none.
fn doctor(core: &Core) -> String {
    let latest = core.latency.latest();
    if latest.is_empty() && core.live.latency_monitor_threshold() == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis \
                instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" \
                in order to enable it. If we weren't in a deep space mission I'd suggest to take \
                a look at https://redis.io/topics/latency-monitor.\n"
            .into();
    }
    if latest.is_empty() {
        return "Dave, no latency spike was observed during the lifetime of this Redis \
                instance, not in the slightest bit. I honestly think you ought to sit down \
                calmly, take a stress pill, and think things over.\n"
            .into();
    }
    let mut text = String::from(
        "Dave, I have observed latency spikes in this Quiver instance. You don't mind talking \
         about it, do you Dave?\n\n",
    );
    for (i, l) in latest.iter().enumerate() {
        let samples = core.latency.history(&l.event);
        let avg = samples.iter().map(|s| s.ms).sum::<u64>() / samples.len().max(1) as u64;
        text.push_str(&format!(
            "{}. {}: {} latency spikes (average {avg}ms, worst {}ms, latest {}ms at {}).\n",
            i + 1,
            l.event,
            samples.len(),
            l.max_ms,
            l.ms,
            l.time
        ));
        text.push_str(&format!("   {}\n", advice(&l.event)));
    }
    text
}

/// What usually makes an event slow, and what to look at.
fn advice(event: &str) -> &'static str {
    match event {
        "command" => {
            "A step of a pipeline took long: see SLOWLOG GET for the commands, INFO \
             stats's serving-thread delays and INFO persistence's maintenance stalls."
        }
        "checkpoint" => {
            "Writing a partition's index checkpoint held its writers: many dirty partitions \
             at once (a SAVE, BGSAVE or the periodic checkpoint); more partitions make each \
             shorter."
        }
        e if e.starts_with("compaction") => {
            "Compaction held a partition's writers: compaction-cpu-share paces the copying, \
             not these holds; a garbage ratio near the trigger compacts often."
        }
        e if e.starts_with("index-resize") => {
            "An index grew: a store created with more partitions, or a larger expected key \
             count, resizes less."
        }
        _ => "Maintenance held a partition's writers (INFO persistence, maintenance_stall_*).",
    }
}

/// LATENCY HISTOGRAM [command ...]: per command that ran (all of them without names; unknown
/// names skipped), its calls and the cumulative count of calls by power-of-two microseconds,
/// as Redis 7 replies (a container's subcommands are counted as the container).
fn histograms(core: &Core, names: &[Bytes]) -> Reply {
    let specs: Vec<&CommandSpec> = if names.is_empty() {
        COMMANDS.iter().collect()
    } else {
        names.iter().filter_map(|n| lookup(n)).collect()
    };
    let mut out = Vec::new();
    for spec in specs {
        let h = core.stats.command_histogram(spec.cmd.index());
        let calls = h.count();
        if calls == 0 {
            continue;
        }
        let mut cumulative = 0;
        let buckets = h
            .buckets()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(upper, n)| {
                cumulative += n;
                (
                    Reply::Integer(upper.min(i64::MAX as u64) as i64),
                    Reply::Integer(cumulative as i64),
                )
            })
            .collect();
        out.push((
            Reply::text(spec.name),
            Reply::Map(vec![
                (Reply::text("calls"), Reply::Integer(calls as i64)),
                (Reply::text("histogram_usec"), Reply::Map(buckets)),
            ]),
        ));
    }
    Reply::Map(out)
}
