//! Redis's glob patterns (KEYS, SCAN MATCH, CONFIG GET, ACL key patterns): `*`, `?`,
//! `[abc]`, `[^a-z]`, `\x`, on bytes, as Redis's `stringmatchlen` matches them.

/// Redis glob matching (`*`, `?`, `[abc]`, `[^a-z]`, `\x`), on bytes.
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    // Backtracking point for the last `*`: (pattern index after it, string index).
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class_match(pattern, p, s[i]) {
                        if matched {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == s[i] {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if c == s[i] {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting at `pattern[p] == '['`; returns (matched, index
/// after the class). An unterminated class runs to the end of the pattern, as in Redis.
fn class_match(pattern: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let negate = j < pattern.len() && pattern[j] == b'^';
    if negate {
        j += 1;
    }
    let mut matched = false;
    while j < pattern.len() && pattern[j] != b']' {
        if pattern[j] == b'\\' && j + 1 < pattern.len() {
            matched |= pattern[j + 1] == c;
            j += 2;
        } else if j + 2 < pattern.len() && pattern[j + 1] == b'-' && pattern[j + 2] != b']' {
            let (a, b) = (
                pattern[j].min(pattern[j + 2]),
                pattern[j].max(pattern[j + 2]),
            );
            matched |= a <= c && c <= b;
            j += 3;
        } else {
            matched |= pattern[j] == c;
            j += 1;
        }
    }
    let next = if j < pattern.len() { j + 1 } else { j };
    Some((matched != negate, next))
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"anything"));
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h*llo", b"heeeello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[ae]llo", b"hillo"));
        assert!(glob_match(b"h[^e]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"key:\\*", b"key:*"));
        assert!(!glob_match(b"key:\\*", b"key:x"));
        assert!(glob_match(b"user:*:name", b"user:42:name"));
        assert!(!glob_match(b"user:*:name", b"user:42:age"));
        assert!(glob_match(b"", b""));
        assert!(!glob_match(b"", b"a"));
        assert!(glob_match(b"a*", b"a"));
    }
}
