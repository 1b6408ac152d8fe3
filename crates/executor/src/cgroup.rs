//! A cgroup v2 per attempt: the kernel's own list of everything an
//! attempt's process started, wherever it went since.
//!
//! A process cannot leave its cgroup by `setsid`, double forks or a
//! scrubbed environment, so killing the cgroup (`cgroup.kill`) ends every
//! descendant, daemons included. baton makes the attempt's cgroup inside
//! its own, which it may do where its cgroup is writable to it: as root on
//! a machine or container that gives it its cgroup, or in a cgroup
//! delegated to its user. Elsewhere (a login session's cgroup belongs to
//! root), or without cgroup v2 at all, the subreaper fallback
//! (`subreaper.rs`) takes over.
//!
//! The leader is moved into the cgroup right after it starts: std's start
//! cannot place it there itself. Whatever it forked in that moment is in
//! its children list by the time the move is done (a move and a fork
//! exclude each other), and is moved after it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long removing a killed cgroup waits for its processes to end.
const EMPTY_TIMEOUT: Duration = Duration::from_secs(5);

/// One attempt's cgroup, removed by [`Cgroup::remove_if_empty`] or
/// [`Cgroup::kill_and_remove`].
#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// A new, empty cgroup, or `None` when this process may not make one.
    ///
    /// # Errors
    ///
    /// Cgroups are usable but this one could not be made (a limit on
    /// descendants, no memory).
    pub(crate) fn create() -> Option<io::Result<Cgroup>> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let parent = parent()?;
        let dir = parent.join(format!(
            "baton-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        Some(std::fs::create_dir(&dir).map(|()| Cgroup { dir }))
    }

    /// Moves `pid`, and what it forked before the move, into the cgroup.
    ///
    /// # Errors
    ///
    /// The leader could not be moved (it is still running outside).
    pub(crate) fn adopt(&self, pid: u32) -> io::Result<()> {
        let procs = self.dir.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string())?;
        let mut moved = vec![pid];
        while let Some(pid) = moved.pop() {
            for child in children(pid) {
                // One that has exited meanwhile cannot be moved, nor
                // needs to be.
                if std::fs::write(&procs, child.to_string()).is_ok() {
                    moved.push(child);
                }
            }
        }
        Ok(())
    }

    /// Removes the cgroup if no live process is left in it; the cheap
    /// end of an attempt whose process left nothing running.
    pub(crate) fn remove_if_empty(&self) -> bool {
        !self.populated() && std::fs::remove_dir(&self.dir).is_ok()
    }

    /// Kills whatever is left in the cgroup and removes it once empty,
    /// waiting up to [`EMPTY_TIMEOUT`] for that; a cgroup still populated
    /// then is left behind.
    pub(crate) fn kill_and_remove(self) {
        if self.remove_if_empty() {
            return;
        }
        self.kill();
        let deadline = Instant::now() + EMPTY_TIMEOUT;
        while std::fs::remove_dir(&self.dir).is_err()
            && self.dir.exists()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills every process in the cgroup, the leader too.
    pub(crate) fn kill(&self) {
        // Fails only if the cgroup is gone already.
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
    }
    /// Whether a live process is in the cgroup (`cgroup.events`). A
    /// zombie is not: it left its cgroup as it exited.
    fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .map(|events| events.lines().any(|line| line == "populated 1"))
            .unwrap_or(false)
    }
}

/// Whether this process may make cgroups for its attempts.
pub(crate) fn usable() -> bool {
    parent().is_some()
}

/// The cgroup baton makes its attempts' cgroups in, probed once: its own
/// cgroup in the cgroup v2 hierarchy, if it may make a child there, move
/// processes into it, and kill it.
fn parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT.get_or_init(probe).as_deref()
}

fn probe() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // The v2 hierarchy's line is `0::<path>`; hybrid machines list the v1
    // controllers too.
    let own = own.lines().find_map(|line| line.strip_prefix("0::"))?;
    let dir = own_dir(&mountinfo, own)?;
    // Moving a process from baton's cgroup into a child of it needs write
    // access to both `cgroup.procs`.
    let writable = |path: &Path| nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok();
    if !writable(&dir.join("cgroup.procs")) {
        return None;
    }
    let probe = dir.join(format!("baton-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    // `cgroup.kill` arrived in Linux 5.14.
    let usable = probe.join("cgroup.kill").exists() && writable(&probe.join("cgroup.procs"));
    let _ = std::fs::remove_dir(&probe);
    usable.then_some(dir)
}

/// Where `own` (a path in the v2 hierarchy) is mounted, from
/// `/proc/self/mountinfo`: a `cgroup2` mount whose root contains it.
fn own_dir(mountinfo: &str, own: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (mount, filesystem) = line.split_once(" - ")?;
        if filesystem.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mut fields = mount.split_whitespace().skip(3);
        let (root, mount_point) = (unescape(fields.next()?), unescape(fields.next()?));
        let relative = Path::new(own).strip_prefix(&root).ok()?;
        Some(Path::new(&mount_point).join(relative))
    })
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escape = bytes
            .get(index + 1..index + 4)
            .filter(|_| bytes[index] == b'\\');
        match escape
            .and_then(|digits| u8::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok())
        {
            Some(byte) => {
                out.push(byte);
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The children of every thread of `pid`, as the kernel lists them.
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 /outer /sys/fs/cgroup/my\\040unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_the_v2_mount_that_holds_its_own_cgroup() {
        assert_eq!(
            own_dir(MOUNTINFO, "/outer/inner"),
            Some(PathBuf::from("/sys/fs/cgroup/my unified/inner"))
        );
        assert_eq!(
            own_dir(MOUNTINFO, "/outer"),
            Some(PathBuf::from("/sys/fs/cgroup/my unified"))
        );
        // Outside the mount's root: not reachable through it.
        assert_eq!(own_dir(MOUNTINFO, "/elsewhere"), None);
        assert_eq!(own_dir("garbage\n", "/"), None);
    }
}
