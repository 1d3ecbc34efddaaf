//! One ACL user and the rules of `ACL SETUSER` (Redis 7.0's, less selectors): `on` / `off`,
//! passwords (`>pw`, `<pw`, `#sha256`, `!sha256`, `nopass`, `resetpass`), commands (`+cmd`,
//! `-cmd`, `+cmd|sub`, `+cmd|firstarg`, `+@category`, `-@category`, `allcommands`,
//! `nocommands`: `commands`), keys (`~pattern`, `%R~pattern`, `%W~pattern`, `%RW~pattern`,
//! `allkeys`, `resetkeys`), channels (`&pattern`, `allchannels`, `resetchannels`: what Pub/Sub
//! may use), and `reset`.

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::commands::Commands;
use crate::table::{CommandSpec, KeyAccess};

/// Passwords one user may have at most; key patterns likewise (a bound on what SETUSER grows).
pub const PASSWORDS_MAX: usize = 64;
pub const PATTERNS_MAX: usize = 1024;

/// Redis's reason when `<password` or `!hash` names a password the user does not have.
const NO_SUCH_PASSWORD: &str = "The password you are trying to remove from the user does not exist";

/// Redis's reasons for a bad key pattern rule.
const SYNTAX: &str = "Syntax error";
const AFTER_ALLKEYS: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";

/// A key pattern and what it permits (`~p` both, `%R~p` reads, `%W~p` writes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

/// A password as stored: its SHA-256, as Redis keeps it (`ACL GETUSER` shows it in hex).
pub type PasswordHash = [u8; 32];

pub fn hash_password(password: &[u8]) -> PasswordHash {
    Sha256::digest(password).into()
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    pub passwords: Vec<PasswordHash>,
    commands: Commands,
    pub allkeys: bool,
    /// In the order given; a pattern given again adds its permissions to the first's.
    pub key_patterns: Vec<KeyPattern>,
    pub allchannels: bool,
    pub channel_patterns: Vec<Vec<u8>>,
    /// Every command on every key: kept by `apply`, read on every request.
    unrestricted: bool,
}

impl User {
    /// A user as `ACL SETUSER name` makes it: off, no password, no commands, no keys.
    pub fn new(name: &str) -> User {
        User {
            name: name.to_owned(),
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            commands: Commands::none(),
            allkeys: false,
            key_patterns: Vec::new(),
            allchannels: false,
            channel_patterns: Vec::new(),
            unrestricted: false,
        }
    }

    /// Redis's `default` user: on, no password, every command, every key.
    pub fn default_user() -> User {
        let mut u = User::new("default");
        for rule in ["on", "nopass", "allkeys", "allchannels", "allcommands"] {
            // Fixed rules that cannot fail.
            let _ = u.apply(rule.as_bytes());
        }
        u
    }

    /// Whether the user may run every command on every key (the check is then skipped).
    pub fn unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Whether the user may run the request `args` (`spec`): by its subcommand for a
    /// container (`config|set`).
    pub fn may_run(&self, spec: &CommandSpec, args: &[Bytes]) -> bool {
        self.commands.may_run(spec, args)
    }

    /// Whether the user may use `key` as `access` says (Redis's `ACLSelectorCheckKey`: a
    /// pattern matching the key that permits all of it).
    pub fn may_access(&self, key: &[u8], access: KeyAccess) -> bool {
        self.allkeys
            || self.key_patterns.iter().any(|p| {
                (p.read || !access.read)
                    && (p.write || !access.write)
                    && quiver_resp::glob_match(&p.pattern, key)
            })
    }

    /// Whether the user may use `channel` (Redis's `ACLCheckChannelAgainstList`): one of its
    /// `&` patterns matches it, or, for a PSUBSCRIBE pattern (`literal`), equals it.
    pub fn may_use_channel(&self, channel: &[u8], literal: bool) -> bool {
        self.allchannels
            || self.channel_patterns.iter().any(|p| match literal {
                true => p[..] == *channel,
                false => quiver_resp::glob_match(p, channel),
            })
    }

    /// Whether `password` is one of the user's (any password when `nopass`).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let h = hash_password(password);
        // Compared in full, whatever matches first: timing tells nothing of the hashes.
        self.passwords.iter().fold(false, |ok, p| {
            ok | (p.iter().zip(&h).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0)
        })
    }

    /// Applies one rule; the error is the reason Redis gives after the rule's name.
    pub fn apply(&mut self, rule: &[u8]) -> Result<(), String> {
        let applied = self.apply_rule(rule);
        self.unrestricted = self.allkeys && self.commands.all_allowed();
        applied
    }

    fn apply_rule(&mut self, rule: &[u8]) -> Result<(), String> {
        // Passwords and patterns may be any bytes: only keywords need to be text.
        let lower = String::from_utf8_lossy(rule).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "allkeys" | "~*" => {
                self.allkeys = true;
                self.key_patterns.clear();
            }
            "resetkeys" => {
                self.allkeys = false;
                self.key_patterns.clear();
            }
            "allchannels" | "&*" => {
                self.allchannels = true;
                self.channel_patterns.clear();
            }
            "resetchannels" => {
                self.allchannels = false;
                self.channel_patterns.clear();
            }
            "allcommands" => self.commands.set_all(true),
            "nocommands" => self.commands.set_all(false),
            "reset" => {
                *self = User {
                    name: std::mem::take(&mut self.name),
                    ..User::new("")
                };
            }
            _ => return self.apply_prefixed(rule),
        }
        Ok(())
    }

    fn apply_prefixed(&mut self, rule: &[u8]) -> Result<(), String> {
        let Some((&first, rest)) = rule.split_first() else {
            return Err(SYNTAX.into());
        };
        match first {
            b'>' => {
                self.add_password(hash_password(rest))?;
            }
            b'<' => self.remove_password(hash_password(rest))?,
            b'#' => self.add_password(parse_hash(rest)?)?,
            b'!' => self.remove_password(parse_hash(rest)?)?,
            b'~' | b'%' => self.add_key_pattern(rule)?,
            b'&' => {
                if !self.allchannels && !self.channel_patterns.iter().any(|p| p == rest) {
                    self.channel_patterns.push(rest.to_vec());
                }
            }
            b'+' | b'-' => self.commands.apply(first == b'+', rest)?,
            _ => return Err(SYNTAX.into()),
        }
        Ok(())
    }

    fn add_password(&mut self, h: PasswordHash) -> Result<(), String> {
        self.nopass = false;
        if !self.passwords.contains(&h) {
            if self.passwords.len() >= PASSWORDS_MAX {
                return Err(format!("at most {PASSWORDS_MAX} passwords"));
            }
            self.passwords.push(h);
        }
        Ok(())
    }

    fn remove_password(&mut self, h: PasswordHash) -> Result<(), String> {
        if !self.passwords.contains(&h) {
            return Err(NO_SUCH_PASSWORD.into());
        }
        self.passwords.retain(|p| *p != h);
        Ok(())
    }

    /// `~p`, `%R~p`, `%W~p`, `%RW~p` as Redis 7.0 reads them (`%R` alone is the empty
    /// pattern; `~*` and `%RW~*` are `allkeys`).
    fn add_key_pattern(&mut self, rule: &[u8]) -> Result<(), String> {
        if self.allkeys {
            return Err(AFTER_ALLKEYS.into());
        }
        let (read, write, pattern) = parse_key_rule(rule)?;
        // Redis refuses a pattern with spaces: an ACL file line could not hold it.
        if pattern.iter().any(u8::is_ascii_whitespace) {
            return Err(SYNTAX.into());
        }
        if read && write && pattern == b"*" {
            self.allkeys = true;
            self.key_patterns.clear();
            return Ok(());
        }
        if let Some(p) = self.key_patterns.iter_mut().find(|p| p.pattern == pattern) {
            p.read |= read;
            p.write |= write;
            return Ok(());
        }
        if self.key_patterns.len() >= PATTERNS_MAX {
            return Err(format!("at most {PATTERNS_MAX} key patterns"));
        }
        self.key_patterns.push(KeyPattern {
            pattern: pattern.to_vec(),
            read,
            write,
        });
        Ok(())
    }

    /// The flags `ACL GETUSER` lists.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f
    }

    pub fn command_rules(&self) -> String {
        self.commands.describe()
    }

    /// `~p1 %R~p2 %W~p3` (or `~*`), as `ACL LIST` and `GETUSER` show the keys.
    pub fn keys_text(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let shown: Vec<String> = self
            .key_patterns
            .iter()
            .map(|p| {
                let sigil: &[u8] = match (p.read, p.write) {
                    (true, false) => b"%R~",
                    (false, true) => b"%W~",
                    _ => b"~",
                };
                String::from_utf8_lossy(&[sigil, &p.pattern[..]].concat()).into_owned()
            })
            .collect();
        shown.join(" ")
    }

    pub fn channels_text(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        patterns_text(b'&', &self.channel_patterns)
    }

    /// The rules that rebuild the user, as `ACL LIST` and an ACL file line give them:
    /// `on nopass ~* &* +@all`, `off #<sha256> resetchannels -@all`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = vec![if self.enabled { "on" } else { "off" }.into()];
        if self.nopass {
            parts.push("nopass".into());
        }
        parts.extend(self.passwords.iter().map(|h| format!("#{}", hex(h))));
        let keys = self.keys_text();
        if !keys.is_empty() {
            parts.push(keys);
        }
        if self.allchannels {
            parts.push("&*".into());
        } else {
            parts.push("resetchannels".into());
            let channels = self.channels_text();
            if !channels.is_empty() {
                parts.push(channels);
            }
        }
        parts.push(self.command_rules());
        parts.join(" ")
    }
}

fn patterns_text(sigil: u8, patterns: &[Vec<u8>]) -> String {
    patterns
        .iter()
        .map(|p| {
            let mut s = vec![sigil];
            s.extend_from_slice(p);
            String::from_utf8_lossy(&s).into_owned()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn hex(h: &PasswordHash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// A `~` or `%` key rule: read, write, the pattern. `%` takes `R` and `W` once each, in any
/// case and order, then `~` (Redis 7.0's parser; `%R` without `~` is the empty pattern).
fn parse_key_rule(rule: &[u8]) -> Result<(bool, bool, &[u8]), String> {
    if rule.first() == Some(&b'~') {
        return Ok((true, true, &rule[1..]));
    }
    let (mut read, mut write) = (false, false);
    let mut i = 1;
    while i < rule.len() {
        match rule[i].to_ascii_uppercase() {
            b'R' if !read => read = true,
            b'W' if !write => write = true,
            b'~' => {
                i += 1;
                break;
            }
            _ => return Err(SYNTAX.into()),
        }
        i += 1;
    }
    if !read && !write {
        return Err(SYNTAX.into());
    }
    Ok((read, write, &rule[i..]))
}

fn parse_hash(text: &[u8]) -> Result<PasswordHash, String> {
    const BAD: &str = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";
    if text.len() != 64 {
        return Err(BAD.into());
    }
    let mut h = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        match (digit(pair[0]), digit(pair[1])) {
            (Some(a), Some(b)) => h[i] = a << 4 | b,
            _ => return Err(BAD.into()),
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Cmd;

    /// Whether `u` may run `cmd` with no arguments past its name.
    fn runs(u: &User, cmd: Cmd) -> bool {
        u.may_run(cmd.spec(), &[Bytes::from_static(b"x")])
    }

    const RW: KeyAccess = KeyAccess::READ_WRITE;

    fn user(rules: &[&str]) -> Result<User, String> {
        let mut u = User::new("alice");
        for r in rules {
            u.apply(r.as_bytes()).map_err(|e| format!("{r}: {e}"))?;
        }
        Ok(u)
    }

    #[test]
    fn the_default_user_may_do_everything() {
        let d = User::default_user();
        assert!(d.unrestricted() && d.enabled && d.nopass);
        assert_eq!(d.describe(), "on nopass ~* &* +@all");
    }

    #[test]
    fn a_new_user_may_do_nothing() {
        let u = User::new("alice");
        assert!(!u.enabled && !runs(&u, Cmd::Get) && !u.may_access(b"k", RW));
        assert!(!u.password_ok(b""), "no password and not nopass: no login");
        assert_eq!(u.describe(), "off resetchannels -@all");
    }

    #[test]
    fn categories_commands_and_keys() {
        let u = user(&[
            "on",
            ">pw",
            "~app:*",
            "+@read",
            "-@dangerous",
            "+set",
            "-strlen",
        ])
        .unwrap();
        assert!(runs(&u, Cmd::Get) && runs(&u, Cmd::MGet));
        assert!(runs(&u, Cmd::Set) && !runs(&u, Cmd::Del));
        assert!(!runs(&u, Cmd::StrLen) && !runs(&u, Cmd::Keys));
        assert!(u.may_access(b"app:1", RW) && !u.may_access(b"other", KeyAccess::NONE));
        assert!(u.password_ok(b"pw") && !u.password_ok(b"PW"));
        assert_eq!(
            u.describe(),
            format!(
                "on #{} ~app:* resetchannels -@all +@read -@dangerous +set -strlen",
                hex(&hash_password(b"pw"))
            )
        );
        assert!(!u.unrestricted());
    }

    #[test]
    fn a_password_may_be_any_bytes() {
        let u = user(&[]).and_then(|mut u| u.apply(b">\xff\x00pw").map(|()| u));
        let u = u.unwrap();
        assert!(u.password_ok(b"\xff\x00pw") && !u.password_ok(b"pw"));
        assert_eq!(User::new("x").apply(b"").unwrap_err(), "Syntax error");
    }

    #[test]
    fn passwords_come_and_go() {
        let mut u = user(&[">a", ">b"]).unwrap();
        assert!(u.password_ok(b"a") && u.password_ok(b"b"));
        u.apply(b"<a").unwrap();
        assert!(!u.password_ok(b"a"));
        let h = hex(&hash_password(b"c"));
        u.apply(format!("#{h}").as_bytes()).unwrap();
        assert!(u.password_ok(b"c"));
        u.apply(b"nopass").unwrap();
        assert!(u.password_ok(b"anything") && u.passwords.is_empty());
        u.apply(b"resetpass").unwrap();
        assert!(!u.password_ok(b"anything"));
        assert_eq!(u.apply(b"<zzz").unwrap_err(), NO_SUCH_PASSWORD);
        assert!(u.apply(b"#abc").unwrap_err().contains("64 characters"));
    }

    #[test]
    fn bad_rules_are_refused_with_redis_reasons() {
        assert_eq!(
            user(&["+nosuch"]).unwrap_err(),
            "+nosuch: Unknown command or category name in ACL"
        );
        assert_eq!(
            user(&["+@nosuch"]).unwrap_err(),
            "+@nosuch: Unknown command or category name in ACL"
        );
        assert_eq!(user(&["bogus"]).unwrap_err(), "bogus: Syntax error");
        assert!(user(&["allkeys", "~x"]).unwrap_err().contains("resetkeys"));
    }

    #[test]
    fn read_and_write_key_patterns() {
        let u = user(&["%R~r*", "%W~w*", "~b*", "%rw~k*"]).unwrap();
        let (read, write) = (KeyAccess::READ, KeyAccess::WRITE);
        assert!(u.may_access(b"r1", read) && !u.may_access(b"r1", write));
        assert!(u.may_access(b"w1", write) && !u.may_access(b"w1", read));
        assert!(!u.may_access(b"w1", RW) && u.may_access(b"b1", RW) && u.may_access(b"k", RW));
        assert!(u.may_access(b"w1", KeyAccess::NONE) && !u.may_access(b"x", KeyAccess::NONE));
        assert_eq!(u.keys_text(), "%R~r* %W~w* ~b* ~k*");
        // A pattern given again adds to the first; `%RW~*` is allkeys, `%R~*` is not.
        let u = user(&["%R~a", "%W~a", "%R~*", "%R"]).unwrap();
        assert_eq!(u.keys_text(), "~a %R~* %R~");
        assert!(user(&["%RW~*"]).unwrap().allkeys);
        for bad in ["%", "%~a", "%X~a", "%RR~a", "%RWR~a", "~a b", "%R~a b"] {
            assert_eq!(user(&[bad]).unwrap_err(), format!("{bad}: Syntax error"));
        }
        assert!(user(&["allkeys", "%R~a"])
            .unwrap_err()
            .contains("resetkeys"));
    }

    #[test]
    fn reset_forgets_everything_but_the_name() {
        let mut u = user(&["on", "nopass", "allkeys", "+@all"]).unwrap();
        u.apply(b"reset").unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.describe(), "off resetchannels -@all");
    }
}
