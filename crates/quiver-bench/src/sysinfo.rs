//! Process figures from /proc.

/// The process's anonymous resident memory (`RssAnon` in /proc/self/status), in bytes: heap,
/// stacks and anonymous mappings — the engine's index among them — but not the page cache that
/// mmap'ed segment files bring in (that is `RssFile`). `None` where /proc is unavailable.
pub fn rss_anon_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_kb(&status, "RssAnon:").map(|kb| kb * 1024)
}

/// The figure `field` (with its colon: `RssAnon:`) of a `/proc/<pid>/status` text, in kB.
pub(crate) fn parse_status_kb(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let mut it = line[field.len()..].split_whitespace();
    let value = it.next()?.parse().ok()?;
    (it.next() == Some("kB")).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rss_anon() {
        let s = "Name:\tquiver\nRssAnon:\t   12345 kB\nRssFile:\t 1 kB\n";
        assert_eq!(parse_status_kb(s, "RssAnon:"), Some(12345));
        assert_eq!(parse_status_kb(s, "VmSwap:"), None);
        #[cfg(target_os = "linux")]
        assert!(rss_anon_bytes().unwrap() > 0);
    }
}
