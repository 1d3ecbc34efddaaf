//! One ACL user and the rules of `ACL SETUSER` (Redis 7.0's, less selectors and per-key
//! read/write permissions): `on` / `off`, passwords (`>pw`, `<pw`, `#sha256`, `!sha256`,
//! `nopass`, `resetpass`), commands (`+cmd`, `-cmd`, `+@category`, `-@category`,
//! `allcommands`, `nocommands`), keys (`~pattern`, `allkeys`, `resetkeys`), channels (accepted
//! and shown; Quiver has no Pub/Sub), and `reset`.

use sha2::{Digest, Sha256};

use crate::table::{self, CommandSpec, COMMANDS};

/// Redis 7's categories, in `ACL CAT`'s order: the ones no Quiver command is in are listed
/// too, so a rule naming any Redis category is accepted.
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Redis's reason for a `+name` / `-name` rule that names no command or category.
const UNKNOWN_NAME: &str = "Unknown command or category name in ACL";

/// The commands of a category (`read`, not `@read`), as its `+@` / `-@` rules and `ACL CAT`
/// see them.
pub fn commands_in(category: &str) -> impl Iterator<Item = &'static CommandSpec> + '_ {
    COMMANDS.iter().filter(move |c| {
        c.acl_categories()
            .any(|n| n.strip_prefix('@') == Some(category))
    })
}

/// Passwords one user may have at most; key patterns likewise (a bound on what SETUSER grows).
pub const PASSWORDS_MAX: usize = 64;
pub const PATTERNS_MAX: usize = 1024;

/// Redis's reason when `<password` or `!hash` names a password the user does not have.
const NO_SUCH_PASSWORD: &str = "The password you are trying to remove from the user does not exist";

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
    /// By command index: whether the user may run it.
    allowed: Vec<bool>,
    /// The command rules as `ACL LIST` shows them (`+@all`, `-@all -get`, ...).
    command_rules: String,
    pub allkeys: bool,
    pub key_patterns: Vec<Vec<u8>>,
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
            allowed: vec![false; COMMANDS.len()],
            command_rules: "-@all".into(),
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

    pub fn may_run(&self, spec: &CommandSpec) -> bool {
        self.allowed[spec.cmd.index()]
    }

    pub fn may_access(&self, key: &[u8]) -> bool {
        self.allkeys
            || self
                .key_patterns
                .iter()
                .any(|p| quiver_resp::glob_match(p, key))
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
        self.unrestricted = self.allkeys && self.allowed.iter().all(|&a| a);
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
            "allcommands" | "+@all" => self.set_all(true),
            "nocommands" | "-@all" => self.set_all(false),
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
            return Err("Syntax error".into());
        };
        match first {
            b'>' => {
                self.add_password(hash_password(rest))?;
            }
            b'<' => self.remove_password(hash_password(rest))?,
            b'#' => self.add_password(parse_hash(rest)?)?,
            b'!' => self.remove_password(parse_hash(rest)?)?,
            b'~' => {
                if self.allkeys {
                    return Err(
                        "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
                            .into(),
                    );
                }
                if self.key_patterns.len() >= PATTERNS_MAX {
                    return Err(format!("at most {PATTERNS_MAX} key patterns"));
                }
                if !self.key_patterns.iter().any(|p| p == rest) {
                    self.key_patterns.push(rest.to_vec());
                }
            }
            b'&' => {
                if !self.allchannels && !self.channel_patterns.iter().any(|p| p == rest) {
                    self.channel_patterns.push(rest.to_vec());
                }
            }
            b'+' | b'-' => {
                let allow = first == b'+';
                let name = std::str::from_utf8(rest)
                    .map_err(|_| UNKNOWN_NAME.to_string())?
                    .to_ascii_lowercase();
                if let Some(category) = name.strip_prefix('@') {
                    if !CATEGORIES.contains(&category) {
                        return Err(UNKNOWN_NAME.into());
                    }
                    for c in commands_in(category) {
                        self.allowed[c.cmd.index()] = allow;
                    }
                } else {
                    if name.contains('|') {
                        return Err(
                            "Quiver's ACL rules name whole commands, not subcommands".into()
                        );
                    }
                    let spec = table::lookup(name.as_bytes()).ok_or(UNKNOWN_NAME)?;
                    self.allowed[spec.cmd.index()] = allow;
                }
                self.command_rules.push(' ');
                self.command_rules.push(first as char);
                self.command_rules.push_str(&name);
            }
            _ => return Err("Syntax error".into()),
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

    fn set_all(&mut self, allow: bool) {
        self.allowed.iter_mut().for_each(|a| *a = allow);
        self.command_rules = if allow { "+@all" } else { "-@all" }.into();
    }

    /// The flags `ACL GETUSER` lists.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f
    }

    pub fn command_rules(&self) -> &str {
        &self.command_rules
    }

    /// `~p1 ~p2` (or `~*`), as `ACL LIST` and `GETUSER` show the keys.
    pub fn keys_text(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        patterns_text(b'~', &self.key_patterns)
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
        parts.push(self.command_rules.clone());
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
        assert!(!u.enabled && !u.may_run(Cmd::Get.spec()) && !u.may_access(b"k"));
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
        assert!(u.may_run(Cmd::Get.spec()) && u.may_run(Cmd::MGet.spec()));
        assert!(u.may_run(Cmd::Set.spec()) && !u.may_run(Cmd::Del.spec()));
        assert!(!u.may_run(Cmd::StrLen.spec()) && !u.may_run(Cmd::Keys.spec()));
        assert!(u.may_access(b"app:1") && !u.may_access(b"other"));
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
    fn reset_forgets_everything_but_the_name() {
        let mut u = user(&["on", "nopass", "allkeys", "+@all"]).unwrap();
        u.apply(b"reset").unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.describe(), "off resetchannels -@all");
    }
}
