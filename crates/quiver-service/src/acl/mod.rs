//! ACL users (Redis 6+): who a connection is, and what it may run on which keys. `Users` is the
//! server's table of users (in `Core`, so nodes and routers alike check through it); a session
//! holds its user's current rules and picks up changes at its next command (`Users::refresh`),
//! as Redis applies an `ACL SETUSER` to connections already logged in. `requirepass` is the
//! `default` user's password, as in Redis.

pub mod commands;
pub mod file;
pub mod log;
pub mod user;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use crate::reply::Reply;
use crate::table::{self, CommandSpec, KeyAccess};
pub use user::User;

/// The user every connection starts as.
pub const DEFAULT_USER: &str = "default";
/// Users a server keeps at most (a bound on what `ACL SETUSER` grows).
pub const USERS_MAX: usize = 10_000;
/// Longest user name.
pub const USER_NAME_MAX: usize = 256;

/// The server's users, and a version that moves on every change.
pub struct Users {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    version: AtomicU64,
}

impl Users {
    /// The `default` user alone: no password (anyone may connect), or `requirepass`.
    pub fn new(requirepass: Option<&str>) -> Users {
        let mut default = User::default_user();
        if let Some(p) = requirepass {
            // A fixed rule on a fresh user: cannot fail.
            let _ = default.apply(format!(">{p}").as_bytes());
        }
        Users {
            users: RwLock::new(BTreeMap::from([(
                DEFAULT_USER.to_owned(),
                Arc::new(default),
            )])),
            version: AtomicU64::new(0),
        }
    }

    /// The users a server starts with: `default` (with `requirepass`), or the `aclfile`'s.
    pub fn at_start(requirepass: Option<&str>, aclfile: Option<&Path>) -> Result<Users, String> {
        let users = Users::new(requirepass);
        if let Some(path) = aclfile {
            users.load(path)?;
        }
        Ok(users)
    }

    /// Replaces every user with the file's (ACL LOAD), all or nothing.
    pub fn load(&self, path: &Path) -> Result<(), String> {
        let loaded = file::read(path)?;
        let mut users = self.users.write();
        *users = loaded
            .into_iter()
            .map(|u| (u.name.clone(), Arc::new(u)))
            .collect();
        // Moved while the table is locked, as by every change (see `refresh`).
        self.version.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Writes every user to the file (ACL SAVE), atomically; refused whole if a user's name
    /// is empty (a file line could not name it).
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let users = self.all();
        if users.iter().any(|u| u.name.is_empty()) {
            return Err(
                "a user with an empty name cannot be written to the aclfile: \
                        ACL DELUSER \"\" first"
                    .into(),
            );
        }
        crate::config::write_atomically(path, &file::render(&users))
    }

    pub fn version(&self) -> u64 {
        self.version.load(Relaxed)
    }

    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.get(DEFAULT_USER)
            .unwrap_or_else(|| Arc::new(User::default_user()))
    }

    /// The user `name` if it is enabled and `password` is one of its passwords.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let name = std::str::from_utf8(name).ok()?;
        self.get(name)
            .filter(|u| u.enabled && u.password_ok(password))
    }

    /// Applies `rules` to user `name` (created first if new), all or nothing. The error is
    /// Redis's: the rule and why it was refused.
    pub fn set_user(&self, name: &[u8], rules: &[Bytes]) -> Result<(), String> {
        let name = std::str::from_utf8(name)
            .ok()
            // The empty name is a name, as in Redis 7.0 (the aclfile cannot hold it: `save`).
            .filter(|n| {
                n.len() <= USER_NAME_MAX && !n.contains(|c: char| c.is_whitespace() || c == '\0')
            })
            .ok_or_else(|| {
                format!(
                    "Usernames can't contain spaces or null characters, and are at most \
                     {USER_NAME_MAX} bytes"
                )
            })?;
        let mut users = self.users.write();
        let mut user = match users.get(name) {
            Some(u) => User::clone(u),
            None if users.len() >= USERS_MAX => {
                return Err(format!("at most {USERS_MAX} users"));
            }
            None => User::new(name),
        };
        for rule in rules {
            user.apply(rule).map_err(|why| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {why}",
                    String::from_utf8_lossy(rule)
                )
            })?;
        }
        users.insert(name.to_owned(), Arc::new(user));
        self.version.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Deletes the named users (never `default`); how many existed.
    pub fn delete(&self, names: &[Bytes]) -> Result<usize, String> {
        if names.iter().any(|n| &n[..] == DEFAULT_USER.as_bytes()) {
            return Err("The 'default' user cannot be removed".into());
        }
        let mut users = self.users.write();
        let n = names
            .iter()
            .filter(|n| {
                std::str::from_utf8(n)
                    .ok()
                    .is_some_and(|n| users.remove(n).is_some())
            })
            .count();
        self.version.fetch_add(1, Relaxed);
        Ok(n)
    }

    /// Every user, by name.
    pub fn all(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Brings a session's copy of its user up to date; `None` if the user was deleted. The
    /// version is read before the user: a change landing in between leaves the session one
    /// version behind, so the next command refreshes again — an update is never missed.
    pub fn refresh(&self, user: &mut Arc<User>, seen: &mut u64) -> Option<()> {
        let now = self.version();
        if *seen != now {
            *user = self.get(&user.name)?;
            *seen = now;
        }
        Some(())
    }
}

/// Why `user` may not run `args` (`spec`, using `keys` so), in Redis's words; `None` if it
/// may.
pub fn refusal<'k>(
    user: &User,
    spec: &CommandSpec,
    args: &[Bytes],
    keys: impl IntoIterator<Item = &'k (Bytes, KeyAccess)>,
) -> Option<Reply> {
    if user.unrestricted() {
        return None;
    }
    if !user.may_run(spec, args) {
        return Some(Reply::error(format!(
            "NOPERM this user has no permissions to run the '{}' command",
            shown_name(spec, args)
        )));
    }
    if keys.into_iter().any(|(k, a)| !user.may_access(k, *a)) {
        return Some(Reply::error(
            "NOPERM this user has no permissions to access one of the keys used as arguments",
        ));
    }
    None
}

/// The name Redis gives a command in NOPERM and ACL LOG: `name|subcommand` for a container.
pub(crate) fn shown_name(spec: &CommandSpec, args: &[Bytes]) -> String {
    match args.get(1) {
        Some(sub) if table::is_container(spec.cmd) => format!(
            "{}|{}",
            spec.name,
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        ),
        _ => spec.name.to_owned(),
    }
}
