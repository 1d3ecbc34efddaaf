//! Redis 7.0's key-spec flags (`COMMAND INFO`'s key specifications, `COMMAND
//! GETKEYSANDFLAGS`): what a command does with a key. One of `RW` / `RO` / `OW` / `RM` says
//! how the key is used; `access` that its value reaches the client, `insert`, `delete`,
//! `update` how it changes. ACL's `%R~` / `%W~` patterns are checked against them
//! ([`KeyFlags::access`]), as Redis checks them.

/// A set of key-spec flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyFlags(u16);

/// Each flag and its name, in the order Redis lists them.
const NAMES: [(KeyFlags, &str); 9] = [
    (KeyFlags::RO, "RO"),
    (KeyFlags::RW, "RW"),
    (KeyFlags::OW, "OW"),
    (KeyFlags::RM, "RM"),
    (KeyFlags::ACCESS, "access"),
    (KeyFlags::UPDATE, "update"),
    (KeyFlags::INSERT, "insert"),
    (KeyFlags::DELETE, "delete"),
    (KeyFlags::VARIABLE_FLAGS, "variable_flags"),
];

impl KeyFlags {
    pub const NONE: KeyFlags = KeyFlags(0);
    /// Read and written.
    pub const RW: KeyFlags = KeyFlags(1 << 0);
    /// Read only.
    pub const RO: KeyFlags = KeyFlags(1 << 1);
    /// Overwritten whatever it held.
    pub const OW: KeyFlags = KeyFlags(1 << 2);
    /// Removed.
    pub const RM: KeyFlags = KeyFlags(1 << 3);
    pub const ACCESS: KeyFlags = KeyFlags(1 << 4);
    pub const UPDATE: KeyFlags = KeyFlags(1 << 5);
    pub const INSERT: KeyFlags = KeyFlags(1 << 6);
    pub const DELETE: KeyFlags = KeyFlags(1 << 7);
    /// The flags depend on the arguments (SET ... GET).
    pub const VARIABLE_FLAGS: KeyFlags = KeyFlags(1 << 8);

    pub const fn or(self, other: KeyFlags) -> KeyFlags {
        KeyFlags(self.0 | other.0)
    }

    pub const fn contains(self, other: KeyFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The flags' names, in Redis's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        NAMES
            .into_iter()
            .filter(move |(f, _)| self.contains(*f))
            .map(|(_, n)| n)
    }

    /// What ACL key patterns must allow for a key with these flags.
    pub const fn access(self) -> KeyAccess {
        KeyAccess {
            read: self.contains(KeyFlags::ACCESS),
            write: self.0 & (KeyFlags::INSERT.0 | KeyFlags::DELETE.0 | KeyFlags::UPDATE.0) != 0,
        }
    }
}

/// What a command does with the value at a key, for ACL: `read` if the value reaches the
/// client (ACCESS), `write` if it changes (INSERT, DELETE, UPDATE). A key neither read nor
/// written (EXISTS, TYPE) needs only a pattern of any kind, as in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyAccess {
    pub read: bool,
    pub write: bool,
}

impl KeyAccess {
    pub const NONE: KeyAccess = KeyAccess {
        read: false,
        write: false,
    };
    pub const READ: KeyAccess = KeyAccess {
        read: true,
        write: false,
    };
    pub const WRITE: KeyAccess = KeyAccess {
        read: false,
        write: true,
    };
    pub const READ_WRITE: KeyAccess = KeyAccess {
        read: true,
        write: true,
    };
}

// The flags the table's rows use: [first key, the others].
const fn both(f: KeyFlags) -> [KeyFlags; 2] {
    [f, f]
}
pub const NO_KEY_FLAGS: [KeyFlags; 2] = both(KeyFlags::NONE);
pub const RO: [KeyFlags; 2] = both(KeyFlags::RO);
pub const RO_ACCESS: [KeyFlags; 2] = both(KeyFlags::RO.or(KeyFlags::ACCESS));
pub const RW_ACCESS_UPDATE: [KeyFlags; 2] =
    both(KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE));
pub const RW_ACCESS_DELETE: [KeyFlags; 2] =
    both(KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE));
pub const RW_UPDATE: [KeyFlags; 2] = both(KeyFlags::RW.or(KeyFlags::UPDATE));
pub const RW_INSERT: [KeyFlags; 2] = both(KeyFlags::RW.or(KeyFlags::INSERT));
pub const RW_DELETE: [KeyFlags; 2] = both(KeyFlags::RW.or(KeyFlags::DELETE));
pub const OW_UPDATE: [KeyFlags; 2] = both(KeyFlags::OW.or(KeyFlags::UPDATE));
pub const OW_INSERT: [KeyFlags; 2] = both(KeyFlags::OW.or(KeyFlags::INSERT));
pub const RM_DELETE: [KeyFlags; 2] = both(KeyFlags::RM.or(KeyFlags::DELETE));
/// SET: overwritten, and read too with GET (`admission::keys_and_flags`).
pub const SET_FLAGS: [KeyFlags; 2] = both(
    KeyFlags::RW
        .or(KeyFlags::ACCESS)
        .or(KeyFlags::UPDATE)
        .or(KeyFlags::VARIABLE_FLAGS),
);
/// RENAME: the source read and deleted, the destination overwritten.
pub const RENAME_FLAGS: [KeyFlags; 2] = [RW_ACCESS_DELETE[0], OW_UPDATE[0]];
/// RENAMENX: the destination created.
pub const RENAMENX_FLAGS: [KeyFlags; 2] = [RW_ACCESS_DELETE[0], OW_INSERT[0]];
/// COPY: the source read, the destination overwritten.
pub const COPY_FLAGS: [KeyFlags; 2] = [RO_ACCESS[0], OW_UPDATE[0]];
/// Quiver's BATCH: a key may be checked (read), put or deleted.
pub const BATCH_FLAGS: [KeyFlags; 2] = both(
    KeyFlags::RW
        .or(KeyFlags::ACCESS)
        .or(KeyFlags::UPDATE)
        .or(KeyFlags::DELETE),
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_redis_order_and_access_as_acl_reads_it() {
        let set = SET_FLAGS[0];
        let names: Vec<&str> = set.names().collect();
        assert_eq!(names, ["RW", "access", "update", "variable_flags"]);
        assert_eq!(set.access(), KeyAccess::READ_WRITE);
        assert_eq!(RO[0].access(), KeyAccess::NONE);
        assert_eq!(RM_DELETE[0].access(), KeyAccess::WRITE);
        assert_eq!(COPY_FLAGS[0].access(), KeyAccess::READ);
    }
}
