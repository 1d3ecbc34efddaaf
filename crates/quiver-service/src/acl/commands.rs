//! A user's command permissions, as Redis 7.0 keeps them: one bit per command and per
//! subcommand (`+config|get` allows one subcommand of a container, `-client|kill` denies one
//! of an allowed command), the first arguments allowed of a command otherwise denied
//! (`+select|0`, Redis 7.0's first-arg rules), and the rules as `ACL LIST` shows them.
//!
//! Names of Redis 7.0 commands that Quiver does not implement (`-eval`, `-script|flush`) are
//! accepted and shown, to no effect (`table::is_absent`): a hardening file written for Redis
//! works here. A name Redis does not know is refused with Redis's words.

use bytes::Bytes;

use crate::table::{self, Cmd, CommandSpec, COMMANDS, SUBCOMMANDS};

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

/// Redis's reasons for a bad `+name` / `-name` rule.
pub const UNKNOWN_NAME: &str = "Unknown command or category name in ACL";
const SYNTAX: &str = "Syntax error";
const FIRST_ARG_OF_SUBCOMMAND: &str = "Allowing first-arg of a subcommand is not supported";

/// The commands of a category (`read`, not `@read`), as `ACL CAT` lists them.
pub fn commands_in(category: &str) -> impl Iterator<Item = &'static CommandSpec> + '_ {
    COMMANDS.iter().filter(move |c| in_category(c, category))
}

fn in_category(c: &CommandSpec, category: &str) -> bool {
    c.acl_categories()
        .any(|n| n.strip_prefix('@') == Some(category))
}

/// What a `+name` / `-name` rule names.
enum Target {
    /// A command, with its subcommands.
    Command(&'static CommandSpec),
    /// A subcommand, by ACL id.
    Subcommand(usize),
    /// A first argument of a command that has no subcommands (`select|0`).
    FirstArg(Cmd, String),
    /// A Redis 7.0 command (or subcommand, or first argument of one) Quiver does not have.
    Absent,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commands {
    /// By ACL id (`table::acl_ids`: the commands, then the subcommands): whether allowed.
    allowed: Vec<bool>,
    /// First arguments allowed of a command that is not (Redis 7.0's first-arg rules).
    first_args: Vec<(Cmd, Vec<String>)>,
    /// Whether the rules start from `+@all` (else from `-@all`).
    all: bool,
    /// The rules after it, lower case: each in the order given, a later rule for the same
    /// command, subcommand or category replacing the earlier ones (`describe`).
    rules: Vec<String>,
}

impl Commands {
    /// No command allowed (`-@all`).
    pub fn none() -> Commands {
        Commands {
            allowed: vec![false; table::acl_ids()],
            first_args: Vec::new(),
            all: false,
            rules: Vec::new(),
        }
    }

    /// Whether every command and subcommand is allowed.
    pub fn all_allowed(&self) -> bool {
        self.allowed.iter().all(|&a| a)
    }

    /// `+@all` / `allcommands` (or `-@all` / `nocommands`): the rules start over.
    pub fn set_all(&mut self, allow: bool) {
        self.allowed.iter_mut().for_each(|a| *a = allow);
        self.first_args.clear();
        self.all = allow;
        self.rules.clear();
    }

    /// Applies `+name` (`allow`) or `-name`: a command, `command|subcommand`, `command|arg`,
    /// or `@category`. The error is Redis's reason.
    pub fn apply(&mut self, allow: bool, name: &[u8]) -> Result<(), String> {
        let name = std::str::from_utf8(name)
            .map_err(|_| UNKNOWN_NAME.to_string())?
            .to_ascii_lowercase();
        if let Some(category) = name.strip_prefix('@') {
            if category == "all" {
                self.set_all(allow);
                return Ok(());
            }
            self.set_category(category, allow)?;
        } else {
            match resolve(&name, allow)? {
                Target::Command(spec) => self.set_command(spec.cmd, allow),
                Target::Subcommand(id) => self.allowed[id] = allow,
                Target::FirstArg(cmd, arg) => self.add_first_arg(cmd, arg),
                Target::Absent => {}
            }
        }
        self.note_rule(allow, &name);
        Ok(())
    }

    /// A category's commands and subcommands, each by its own categories: as in Redis, a
    /// container's own (`@slow`) do not carry to its subcommands (`-@dangerous` denies
    /// CONFIG SET, not CONFIG HELP).
    fn set_category(&mut self, category: &str, allow: bool) -> Result<(), String> {
        if !CATEGORIES.contains(&category) {
            return Err(UNKNOWN_NAME.into());
        }
        for c in commands_in(category) {
            self.allowed[c.cmd.index()] = allow;
            self.first_args.retain(|(cmd, _)| *cmd != c.cmd);
        }
        for (i, s) in SUBCOMMANDS.iter().enumerate() {
            if s.acl.iter().any(|n| n.strip_prefix('@') == Some(category)) {
                self.allowed[COMMANDS.len() + i] = allow;
            }
        }
        Ok(())
    }

    /// A whole command: its subcommands too, and its first-arg rules are forgotten.
    fn set_command(&mut self, cmd: Cmd, allow: bool) {
        self.allowed[cmd.index()] = allow;
        for (id, _) in table::subcommands_of(cmd) {
            self.allowed[id] = allow;
        }
        self.first_args.retain(|(c, _)| *c != cmd);
    }

    fn add_first_arg(&mut self, cmd: Cmd, arg: String) {
        match self.first_args.iter_mut().find(|(c, _)| *c == cmd) {
            Some((_, args)) if args.contains(&arg) => {}
            Some((_, args)) => args.push(arg),
            None => self.first_args.push((cmd, vec![arg])),
        }
    }

    /// Redis 7.2's `ACLUpdateCommandRules`: a rule replaces the earlier ones for the same name
    /// and, for a command, those for its subcommands and first arguments (`+config` drops
    /// `+config|get`).
    fn note_rule(&mut self, allow: bool, name: &str) {
        self.rules.retain(|r| {
            let n = &r[1..];
            !(n == name || n.strip_prefix(name).is_some_and(|t| t.starts_with('|')))
        });
        self.rules
            .push(format!("{}{name}", if allow { '+' } else { '-' }));
    }

    /// Whether the request `args` (`spec`) may run: by its subcommand's bit for a container
    /// (by the container's own for a subcommand the table does not know, which then fails
    /// as it runs), else by the command's, or a first-arg rule naming `args[1]`.
    pub fn may_run(&self, spec: &CommandSpec, args: &[Bytes]) -> bool {
        let first = args.get(1);
        if let Some((id, _)) = first.and_then(|a| table::subcommand(spec.cmd, a)) {
            return self.allowed[id];
        }
        self.allowed[spec.cmd.index()]
            || first.is_some_and(|a| {
                self.first_args.iter().any(|(c, allowed)| {
                    *c == spec.cmd && allowed.iter().any(|f| a.eq_ignore_ascii_case(f.as_bytes()))
                })
            })
    }

    /// The rules as `ACL LIST` and `ACL GETUSER` show them: `+@all` or `-@all`, then the
    /// rules in the order given (a later one for the same name replacing earlier ones), as
    /// Redis 7.2 shows them. Redis 7.0 rebuilds a list from the permission bits instead, its
    /// single commands in an order that changes at every start; for one category rule and
    /// one command rule after it the two agree.
    pub fn describe(&self) -> String {
        let mut text = String::from(if self.all { "+@all" } else { "-@all" });
        for r in &self.rules {
            text.push(' ');
            text.push_str(r);
        }
        text
    }
}

/// What the rule name `name` (lower case, no category) names, as Redis 7.0 resolves it: the
/// last `|` splits off a subcommand or a first argument; a `-` rule must name a command or a
/// subcommand (no first-arg rule denies).
fn resolve(name: &str, allow: bool) -> Result<Target, String> {
    let Some((base, arg)) = name.rsplit_once('|') else {
        return match table::lookup(name.as_bytes()) {
            Some(spec) => Ok(Target::Command(spec)),
            None if table::is_absent(name) => Ok(Target::Absent),
            None => Err(UNKNOWN_NAME.into()),
        };
    };
    if base.contains('|') {
        // `config|get|x`: Redis finds the subcommand `config|get`, then refuses.
        let sub_exists = base
            .split_once('|')
            .and_then(|(c, s)| table::lookup(c.as_bytes()).map(|spec| (spec, s)))
            .is_some_and(|(spec, s)| table::subcommand(spec.cmd, s.as_bytes()).is_some());
        return Err(if allow && (sub_exists || table::is_absent(base)) {
            FIRST_ARG_OF_SUBCOMMAND
        } else {
            UNKNOWN_NAME
        }
        .into());
    }
    if let Some(spec) = table::lookup(base.as_bytes()) {
        if allow && arg.is_empty() {
            return Err(SYNTAX.into());
        }
        if table::is_container(spec.cmd) {
            return table::subcommand(spec.cmd, arg.as_bytes())
                .map(|(id, _)| Target::Subcommand(id))
                .ok_or_else(|| UNKNOWN_NAME.to_string());
        }
        return if allow {
            Ok(Target::FirstArg(spec.cmd, arg.to_owned()))
        } else {
            Err(UNKNOWN_NAME.into())
        };
    }
    if !table::is_absent(base) {
        return Err(UNKNOWN_NAME.into());
    }
    // A command Quiver lacks: a subcommand of it if Redis has one so named, else a first
    // argument (Redis's rules for a container and for another command, as above).
    let container = table::redis::ABSENT
        .iter()
        .any(|n| n.strip_prefix(base).is_some_and(|t| t.starts_with('|')));
    match (container, allow, arg.is_empty()) {
        (true, _, _) if table::is_absent(name) => Ok(Target::Absent),
        (true, _, _) | (false, false, _) => Err(UNKNOWN_NAME.into()),
        (false, true, true) => Err(SYNTAX.into()),
        (false, true, false) => Ok(Target::Absent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    fn commands(rules: &[&str]) -> Result<Commands, String> {
        let mut c = Commands::none();
        for r in rules {
            let (sign, name) = r.split_at(1);
            c.apply(sign == "+", name.as_bytes())
                .map_err(|e| format!("{r}: {e}"))?;
        }
        Ok(c)
    }

    fn may(c: &Commands, words: &[&str]) -> bool {
        let a = args(words);
        let spec = table::lookup(&a[0]).unwrap();
        c.may_run(spec, &a)
    }

    #[test]
    fn one_subcommand_of_a_container() {
        let c = commands(&["+config|get", "+acl|whoami"]).unwrap();
        assert!(may(&c, &["CONFIG", "GET", "x"]) && may(&c, &["acl", "WhoAmI"]));
        assert!(!may(&c, &["config", "set", "a", "b"]) && !may(&c, &["acl", "list"]));
        assert!(
            !may(&c, &["config", "bogus"]),
            "unknown: the container's own bit"
        );
        assert_eq!(c.describe(), "-@all +config|get +acl|whoami");
    }

    #[test]
    fn one_subcommand_denied_of_an_allowed_command() {
        let mut c = commands(&["-client|kill", "-config|set"]).unwrap();
        c.set_all(true);
        assert_eq!(c.describe(), "+@all");
        c.apply(false, b"client|kill").unwrap();
        c.apply(false, b"CONFIG|SET").unwrap();
        assert!(!may(&c, &["client", "kill", "x"]) && may(&c, &["client", "id"]));
        assert!(!may(&c, &["config", "set", "a", "b"]) && may(&c, &["config", "get", "a"]));
        assert!(may(&c, &["get", "k"]));
        assert_eq!(c.describe(), "+@all -client|kill -config|set");
        c.apply(true, b"config").unwrap();
        assert!(may(&c, &["config", "set", "a", "b"]));
        assert_eq!(
            c.describe(),
            "+@all -client|kill +config",
            "+config drops config|set"
        );
    }

    #[test]
    fn categories_apply_to_subcommands_by_their_own() {
        let mut c = Commands::none();
        c.set_all(true);
        c.apply(false, b"@dangerous").unwrap();
        assert!(!may(&c, &["config", "set", "a", "b"]) && may(&c, &["config", "help"]));
        assert!(!may(&c, &["client", "kill", "x"]) && may(&c, &["client", "id"]));
        c.apply(true, b"config|get").unwrap();
        assert_eq!(c.describe(), "+@all -@dangerous +config|get");
        assert!(may(&c, &["config", "get", "x"]));
    }

    #[test]
    fn first_arg_rules() {
        let c = commands(&["+select|0", "+debug|object"]).unwrap();
        assert!(may(&c, &["select", "0"]) && !may(&c, &["select", "1"]));
        assert!(may(&c, &["DEBUG", "OBJECT", "k"]) && !may(&c, &["debug", "sleep", "0"]));
        assert_eq!(c.describe(), "-@all +select|0 +debug|object");
        let c = commands(&["+select|0", "+select"]).unwrap();
        assert_eq!(c.describe(), "-@all +select");
    }

    #[test]
    fn absent_redis_commands_are_accepted_to_no_effect() {
        let mut c = Commands::none();
        c.set_all(true);
        for r in ["eval", "script", "script|flush"] {
            c.apply(false, r.as_bytes()).unwrap();
        }
        c.apply(true, b"eval|x").unwrap();
        assert!(c.all_allowed());
        assert_eq!(c.describe(), "+@all -eval -script -script|flush +eval|x");
        assert_eq!(c.apply(false, b"eval|x").unwrap_err(), UNKNOWN_NAME);
        assert_eq!(c.apply(true, b"script|bogus").unwrap_err(), UNKNOWN_NAME);
    }

    #[test]
    fn bad_rules_get_redis_reasons() {
        let refused = |r: &str| commands(&[r]).unwrap_err();
        assert_eq!(
            refused("+config|bogus"),
            format!("+config|bogus: {UNKNOWN_NAME}")
        );
        assert_eq!(
            refused("-config|bogus"),
            format!("-config|bogus: {UNKNOWN_NAME}")
        );
        assert_eq!(refused("-select|0"), format!("-select|0: {UNKNOWN_NAME}"));
        assert_eq!(refused("+config|"), "+config|: Syntax error");
        assert_eq!(refused("-config|"), format!("-config|: {UNKNOWN_NAME}"));
        assert_eq!(refused("+get|"), "+get|: Syntax error");
        assert_eq!(
            refused("+config|get|x"),
            format!("+config|get|x: {FIRST_ARG_OF_SUBCOMMAND}")
        );
        assert_eq!(refused("+nosuch|x"), format!("+nosuch|x: {UNKNOWN_NAME}"));
        assert_eq!(
            refused("+nosuchcommand"),
            format!("+nosuchcommand: {UNKNOWN_NAME}")
        );
        assert_eq!(refused("+@nosuch"), format!("+@nosuch: {UNKNOWN_NAME}"));
    }
}
