//! The error replies of a cluster that steer a request instead of failing it — `MOVED`, `ASK`,
//! `TRYAGAIN`, `CLUSTERDOWN`, `CROSSSLOT` — parsed from the text after `-` (anything else is an
//! ordinary error reply), and the `host:port` addresses they name. One home for the cluster
//! client, the router and the cluster's metadata.

/// What a node's error reply asks of the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `MOVED <slot> <host>:<port>`: that node serves the slot from now on. An empty host
    /// (Redis 7's unknown endpoint) means the host of the node that replied.
    Moved { slot: u16, host: String, port: u16 },
    /// `ASK <slot> <host>:<port>`: the slot is being migrated; this one request goes to that
    /// node, preceded by `ASKING`. The slot table does not change.
    Ask { slot: u16, host: String, port: u16 },
    /// `TRYAGAIN ...`: a multi-key request whose keys are split by a migration in progress;
    /// the same request may succeed after a pause.
    TryAgain,
    /// `CLUSTERDOWN ...`: the cluster cannot serve the slot right now (a failover, slots
    /// without a node); retry after a pause, on a freshly read slot table.
    ClusterDown,
    /// `CROSSSLOT ...`: the node (Redis Cluster) wants the keys of one request in one slot.
    CrossSlot,
}

impl Redirect {
    /// The redirect in `text` (an error reply without its `-`), or `None` for an ordinary
    /// error or a malformed `MOVED`/`ASK`.
    pub fn parse(text: &str) -> Option<Redirect> {
        let mut words = text.split(' ');
        match words.next()? {
            "MOVED" | "ASK" => {
                let slot = words.next()?.parse().ok()?;
                let (host, port) = split_addr(words.next()?)?;
                if words.next().is_some() || u32::from(slot) >= crate::SLOTS {
                    return None;
                }
                let host = host.to_owned();
                Some(if text.starts_with('M') {
                    Redirect::Moved { slot, host, port }
                } else {
                    Redirect::Ask { slot, host, port }
                })
            }
            "TRYAGAIN" => Some(Redirect::TryAgain),
            "CLUSTERDOWN" => Some(Redirect::ClusterDown),
            "CROSSSLOT" => Some(Redirect::CrossSlot),
            _ => None,
        }
    }
}

/// `host:port` split at its last colon (Redis writes IPv6 hosts without brackets:
/// `::1:6379`); brackets, if a server sends them, are removed.
pub fn split_addr(addr: &str) -> Option<(&str, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some((host, port.parse().ok()?))
}

/// `host:port`, with an IPv6 host in brackets so that it resolves.
pub fn join_addr(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(slot: u16, host: &str, port: u16) -> Option<Redirect> {
        let host = host.to_owned();
        Some(Redirect::Moved { slot, host, port })
    }

    #[test]
    fn redirects_are_parsed() {
        assert_eq!(
            Redirect::parse("MOVED 3999 127.0.0.1:6381"),
            moved(3999, "127.0.0.1", 6381)
        );
        assert_eq!(
            Redirect::parse("ASK 0 10.0.0.2:7000"),
            Some(Redirect::Ask {
                slot: 0,
                host: "10.0.0.2".into(),
                port: 7000
            })
        );
        assert_eq!(
            Redirect::parse("MOVED 16383 ::1:7000"),
            moved(16383, "::1", 7000)
        );
        assert_eq!(Redirect::parse("MOVED 5 [::1]:7000"), moved(5, "::1", 7000));
        // Redis 7 with an unknown endpoint: the host of the node that replied.
        assert_eq!(Redirect::parse("MOVED 5 :7000"), moved(5, "", 7000));
        assert_eq!(
            Redirect::parse("TRYAGAIN Multiple keys request during rehashing of slot"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(
            Redirect::parse("CLUSTERDOWN The cluster is down"),
            Some(Redirect::ClusterDown)
        );
        assert_eq!(
            Redirect::parse("CROSSSLOT Keys in request don't hash to the same slot"),
            Some(Redirect::CrossSlot)
        );
    }

    #[test]
    fn other_errors_and_malformed_redirects_are_not_redirects() {
        for text in [
            "ERR unknown command",
            "MOVED",
            "MOVED 3999",
            "MOVED x 127.0.0.1:1",
            "MOVED 16384 127.0.0.1:1",
            "MOVED 1 127.0.0.1",
            "MOVED 1 127.0.0.1:99999",
            "MOVED 1 127.0.0.1:1 extra",
            "MOVEDX 1 127.0.0.1:1",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ] {
            assert_eq!(Redirect::parse(text), None, "{text}");
        }
    }

    #[test]
    fn addresses_split_and_join() {
        assert_eq!(split_addr("127.0.0.1:6379"), Some(("127.0.0.1", 6379)));
        assert_eq!(split_addr("::1:7000"), Some(("::1", 7000)));
        assert_eq!(split_addr("[::1]:7000"), Some(("::1", 7000)));
        assert_eq!(split_addr("host"), None);
        assert_eq!(split_addr("host:99999"), None);
        assert_eq!(join_addr("::1", 7), "[::1]:7");
        assert_eq!(join_addr("h", 7), "h:7");
    }
}
