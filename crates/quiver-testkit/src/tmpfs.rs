//! A small tmpfs for the full-disk tests: a real file system that fills up. Mounting needs
//! root; without it [`Tmpfs::mount`] says the test is skipped and returns `None` (the test then
//! passes without running).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a fresh directory; unmounted (and the directory removed) on drop, also
/// when the test panics. Declare it before whatever uses it (a store, a server), so that is
/// dropped first.
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. "8m"); `None`, after saying the test
    /// is skipped and why, when it cannot (not root).
    pub fn mount(size: &str) -> Option<Tmpfs> {
        let path = tempfile::tempdir().unwrap().keep();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { path }),
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                eprintln!(
                    "SKIPPED full-disk test: cannot mount a tmpfs on {} ({why}); it needs root",
                    path.display()
                );
                let _ = std::fs::remove_dir(&path);
                None
            }
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds a file open (a leaked store or server): detach lazily.
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}
