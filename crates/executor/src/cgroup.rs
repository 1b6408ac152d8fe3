//! A cgroup (v2) of its own for each attempt, where baton may make one.
//!
//! The kernel then keeps the list of everything the attempt started,
//! wherever it went: out of the process group, into a session of its own,
//! with the marker scrubbed from its environment. At the attempt's end
//! `cgroup.kill` kills all of it at once, forks in flight included, and
//! `cgroup.events` says when it is gone.
//!
//! The attempt's cgroup is made beside baton's own (`baton-PID-N` in the
//! cgroup `/proc/self/cgroup` names, on the cgroup2 mount
//! `/proc/self/mountinfo` lists), and the child starts in it
//! (`clone3` with `CLONE_INTO_CGROUP`, `sys.rs`), so its first fork is
//! already inside. Where that start is refused (a kernel before 5.7, a
//! sandbox that forbids `clone3`, an architecture other than x86-64), the
//! child moves itself in before its `execve` (`vfork.rs`), which costs
//! more. Where the directory cannot be made (a machine with cgroup v1
//! alone, a cgroup baton may not write to, a container without the mount)
//! or the child cannot be put in it, baton goes on without: the process
//! group, the marker and the subreaper (`group.rs`) find what an attempt
//! leaves, as they do everywhere. [`set_enabled`]
//! turns cgroups off (the CLI's `BATON_CGROUPS=off`).
//!
//! An ended attempt's cgroup, once empty, is kept for the next attempt,
//! unless it was killed (some kernels then kill whatever starts in it).
//! Those a baton leaves when it exits or is killed are removed by the next
//! baton that makes one, once they are empty (what runs in one is left to
//! `baton resume`, which knows its run).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Whether attempts get a cgroup where the machine allows it.
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Cgroups made by this process, for their directories' names.
static CGROUPS: AtomicU64 = AtomicU64::new(0);

/// Says whether attempts get a cgroup of their own where the machine
/// allows it (the default), or never.
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

/// Where attempts started now get a cgroup of their own: the directory of
/// baton's cgroup, if cgroups are enabled and baton can make one there.
pub fn directory() -> Option<&'static Path> {
    parent().filter(|_| ENABLED.load(Ordering::Relaxed))
}

/// The directory attempts' cgroups are made in: the cgroup baton runs in,
/// if it could make one there (tried once).
fn parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let own = own_cgroup()?;
            let probe = own.join(format!("baton-{}-probe", std::process::id()));
            std::fs::create_dir(&probe).ok()?;
            let _ = std::fs::remove_dir(&probe);
            remove_abandoned(&own);
            Some(own)
        })
        .as_deref()
}

/// The directory of baton's own cgroup in the cgroup2 hierarchy, if one
/// is mounted where baton can see it.
fn own_cgroup() -> Option<PathBuf> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    cgroup_dir(&cgroup, &mounts).filter(|dir| dir.is_dir())
}

/// Where the cgroup2 path of `cgroup` (as `/proc/self/cgroup` reads) is
/// in the file system, given the mounts `mountinfo` lists.
fn cgroup_dir(cgroup: &str, mountinfo: &str) -> Option<PathBuf> {
    let path = cgroup.lines().find_map(|line| line.strip_prefix("0::"))?;
    for line in mountinfo.lines() {
        // ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS [OPTIONAL…] - TYPE …
        let (fields, rest) = line.split_once(" - ")?;
        if rest.split(' ').next() != Some("cgroup2") {
            continue;
        }
        let fields: Vec<&str> = fields.split(' ').collect();
        let (root, point) = (*fields.get(3)?, *fields.get(4)?);
        let Some(below) = path.strip_prefix(root.trim_end_matches('/')) else {
            continue;
        };
        if !below.is_empty() && !below.starts_with('/') {
            continue;
        }
        let mut dir = PathBuf::from(unescape(point));
        let below = below.trim_start_matches('/');
        if !below.is_empty() {
            dir.push(below);
        }
        return Some(dir);
    }
    None
}

/// A mount point as `mountinfo` writes it: space, tab, newline and
/// backslash as octal escapes.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Removes the empty cgroups of batons that are gone (one that had this
/// process's pid included: this one has made none yet).
fn remove_abandoned(parent: &Path) {
    let own = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("baton-"))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if pid == own || !Path::new("/proc").join(pid).exists() {
            let _ = remove_tree(&entry.path());
        }
    }
}

/// One attempt's cgroup. Dropped once empty, it waits for the next
/// attempt: making a cgroup and removing it costs more than the start in
/// it; one that was killed is removed instead. One still holding a process
/// (it outlived the kill's wait) is left to the sweep of a later baton.
pub(crate) struct Attempt(Option<Cgroup>);

/// A cgroup of baton's and the files it keeps open.
struct Cgroup {
    dir: PathBuf,
    /// The directory, opened, for `clone3`.
    handle: File,
    /// `cgroup.events`, read again from its start for `populated`.
    events: File,
    /// Whether `cgroup.kill` was written: such a cgroup is not used again.
    /// Some kernels (6.18 among them) kill every child started into a
    /// cgroup by `clone3` once anything killed that cgroup.
    killed: AtomicBool,
}

/// Cgroups of ended attempts, empty, for the next ones.
static IDLE: Mutex<Vec<Cgroup>> = Mutex::new(Vec::new());

impl Attempt {
    /// A cgroup for an attempt, or `None` where baton makes none.
    pub(crate) fn create() -> Option<Self> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        let idle = IDLE.lock().unwrap_or_else(PoisonError::into_inner).pop();
        if let Some(cgroup) = idle {
            return Some(Self(Some(cgroup)));
        }
        let dir = loop {
            let number = CGROUPS.fetch_add(1, Ordering::Relaxed);
            let dir = parent()?.join(format!("baton-{}-{number}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                // Left by an earlier process with this pid, and not empty.
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(_) => return None,
            }
        };
        let opened = File::options()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(&dir)
            .and_then(|handle| Ok((handle, File::open(dir.join("cgroup.events"))?)));
        match opened {
            Ok((handle, events)) => Some(Self(Some(Cgroup {
                dir,
                handle,
                events,
                killed: AtomicBool::new(false),
            }))),
            Err(_) => {
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    fn cgroup(&self) -> &Cgroup {
        self.0
            .as_ref()
            .expect("an attempt holds its cgroup until dropped")
    }

    /// The cgroup's directory, which the child is started in.
    pub(crate) fn handle(&self) -> BorrowedFd<'_> {
        self.cgroup().handle.as_fd()
    }

    /// Whether a live process is in the cgroup (a zombie is not).
    pub(crate) fn populated(&self) -> bool {
        self.cgroup().populated()
    }

    /// Kills everything in the cgroup and waits until it is empty, for at
    /// most until `deadline`; calls `reap` after each look, the one that
    /// finds it empty included, for what died as baton's child. Returns
    /// whether it is empty.
    pub(crate) fn empty(&mut self, deadline: Instant, mut reap: impl FnMut()) -> bool {
        let _ = self.kill();
        loop {
            let empty = !self.cgroup().populated();
            reap();
            if empty {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Kills everything in the cgroup, now; what dies is still to be
    /// waited for.
    pub(crate) fn kill(&self) -> io::Result<()> {
        let cgroup = self.cgroup();
        cgroup.killed.store(true, Ordering::Relaxed);
        std::fs::write(cgroup.dir.join("cgroup.kill"), "1")
    }
}

impl Cgroup {
    /// Whether a live process is in the cgroup or below it (a zombie is
    /// not).
    fn populated(&self) -> bool {
        let mut text = [0; 256];
        match self.events.read_at(&mut text, 0) {
            Ok(length) => String::from_utf8_lossy(&text[..length])
                .lines()
                .any(|line| line == "populated 1"),
            // Unreadable: say empty, so nothing waits on it.
            Err(_) => false,
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        let Some(cgroup) = self.0.take() else {
            return;
        };
        if cgroup.populated() {
            return;
        }
        if cgroup.killed.load(Ordering::Relaxed) {
            let _ = std::fs::remove_dir(&cgroup.dir);
        } else {
            IDLE.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(cgroup);
        }
    }
}

/// Removes a cgroup and the cgroups below it (a baton run inside a stage
/// makes its own there), deepest first; fails while a process is in any.
fn remove_tree(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir(dir) {
        Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {
            for entry in std::fs::read_dir(dir)?.flatten() {
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    remove_tree(&entry.path())?;
                }
            }
            std::fs::remove_dir(dir)
        }
        other => other,
    }
}

/// Why a stage's process could not start in a cgroup of its own, if that
/// happened in this process: no attempt after it had one.
pub fn refusal() -> Option<&'static str> {
    REFUSAL.get().map(String::as_str)
}

static REFUSAL: OnceLock<String> = OnceLock::new();

/// The child could not be started in its cgroup (`error`): no later
/// attempt of this process tries.
pub(crate) fn refused(error: &io::Error) {
    if ENABLED.swap(false, Ordering::Relaxed) {
        let _ = REFUSAL.set(error.to_string());
        tracing::warn!(
            %error,
            "a stage's process could not start in a cgroup of its own; baton goes on without cgroups"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 1 8:1 / / rw - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw
35 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
39 30 0:35 / /sys/fs/cgroup/unified rw shared:9 - cgroup2 cgroup2 rw
";

    #[test]
    fn the_cgroup2_mount_and_the_path_in_it_name_the_directory() {
        fn dir(cgroup: &str, mounts: &str) -> Option<String> {
            cgroup_dir(cgroup, mounts).map(|dir| dir.display().to_string())
        }
        let cgroup = "4:memory:/x\n0::/user.slice/baton.service\n";
        assert_eq!(
            dir(cgroup, HYBRID).as_deref(),
            Some("/sys/fs/cgroup/unified/user.slice/baton.service")
        );
        assert_eq!(
            dir("0::/\n", HYBRID).as_deref(),
            Some("/sys/fs/cgroup/unified")
        );
        // A mount of part of the hierarchy, at a point with a space.
        let part = "40 25 0:40 /user.slice /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            dir("0::/user.slice/a.scope\n", part).as_deref(),
            Some("/mnt/my cgroups/a.scope")
        );
        // Outside what is mounted, v1 alone, or no cgroup2 line.
        assert_eq!(dir("0::/system.slice\n", part), None);
        assert_eq!(dir("0::/user.slicer\n", part), None);
        assert_eq!(dir("0::/\n", &HYBRID.replace("cgroup2", "cgroup")), None);
        assert_eq!(dir("4:memory:/x\n", HYBRID), None);
    }
}
