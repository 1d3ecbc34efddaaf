//! The ACL file (`aclfile`): one `user <name> <rule> ...` line per user, as Redis writes it
//! (`ACL SAVE`) and reads it (at start and on `ACL LOAD`). Reading is all or nothing: a file
//! with any bad line changes no user, and the error names the file and the line. Saving
//! replaces the file atomically (a temporary file, fsync, rename, fsync of the directory), so a
//! crash leaves the old file or the new one.

use std::path::Path;
use std::sync::Arc;

use super::{User, DEFAULT_USER, USERS_MAX};

/// Largest ACL file read (a bound on what a start or `ACL LOAD` takes in).
pub const FILE_BYTES_MAX: u64 = 64 << 20;

/// The users of the file at `path`; `default` as Redis makes it when the file has none.
pub fn read(path: &Path) -> Result<Vec<User>, String> {
    let at = |why: String| format!("{}: {why}", path.display());
    let len = std::fs::metadata(path)
        .map_err(|e| at(e.to_string()))?
        .len();
    if len > FILE_BYTES_MAX {
        return Err(at(format!("larger than {FILE_BYTES_MAX} bytes")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    parse(&text).map_err(at)
}

/// The users a file's text describes.
pub fn parse(text: &str) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            continue;
        };
        if first != "user" {
            return Err(format!("line {line_no}: should start with user keyword"));
        }
        let name = words
            .next()
            .ok_or_else(|| format!("line {line_no}: a user line needs a user name"))?;
        if users.iter().any(|u| u.name == name) {
            return Err(format!("line {line_no}: duplicate user '{name}' found"));
        }
        if users.len() >= USERS_MAX {
            return Err(format!("line {line_no}: more than {USERS_MAX} users"));
        }
        let mut user = User::new(name);
        for rule in words {
            user.apply(rule.as_bytes()).map_err(|why| {
                format!("line {line_no}: Error in user declaration '{rule}': {why}")
            })?;
        }
        users.push(user);
    }
    if !users.iter().any(|u| u.name == DEFAULT_USER) {
        users.push(User::default_user());
    }
    Ok(users)
}

/// The file's text for `users`: `user <name> <description>` lines.
pub fn render(users: &[Arc<User>]) -> String {
    users
        .iter()
        .map(|u| format!("user {} {}\n", u.name, u.describe()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_file_reads_back_the_same_users() {
        let mut bob = User::new("bob");
        for r in ["on", ">pw", "~app:*", "&ch", "+@read", "+set", "-strlen"] {
            bob.apply(r.as_bytes()).unwrap();
        }
        let users = vec![Arc::new(bob), Arc::new(User::default_user())];
        let text = render(&users);
        let back = parse(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], *users[0]);
        assert_eq!(back[1], *users[1]);
    }

    #[test]
    fn bad_lines_are_named() {
        let e = parse("user a on\nuser b +nosuch\n").unwrap_err();
        assert_eq!(
            e,
            "line 2: Error in user declaration '+nosuch': Unknown command or category name in ACL"
        );
        assert!(parse("adduser x\n")
            .unwrap_err()
            .contains("line 1: should start with user"));
        assert!(parse("user a\nuser a\n")
            .unwrap_err()
            .contains("duplicate user 'a'"));
        assert!(parse("user\n").unwrap_err().contains("needs a user name"));
    }

    #[test]
    fn the_default_user_is_made_when_the_file_has_none() {
        let users = parse("\nuser a on nopass +get\n\n").unwrap();
        assert_eq!(users[1], User::default_user());
        let users = parse("user default on >x +@all ~*\n").unwrap();
        assert_eq!(users.len(), 1);
        assert!(!users[0].nopass);
    }
}
