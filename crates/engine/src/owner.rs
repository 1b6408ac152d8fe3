//! Who this process is, as recorded in a run's lease, and whether a recorded
//! holder is provably dead.
//!
//! An owner is `host:pid:start`, where `start` is the process start time from
//! `/proc/<pid>/stat`: a pid reused by another process has a different start
//! time, so a dead holder is never mistaken for a live one, and a live one is
//! never declared dead.

/// This host's name.
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}

/// The start time (clock ticks since boot) of a process, if it exists.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|(_, start)| start)
}

/// The state letter (field 3) and start time (field 22) of a process.
fn stat(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces;
    // the fields after the last ')' are plain.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

/// Whether `pid`, a zombie, is what is left of a whole process: its other
/// threads are gone. A leader that ended alone (`pthread_exit`) is a zombie
/// too while its threads run on.
fn zombie_process(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
        tasks
            .flatten()
            .all(|task| task.file_name().to_str() == Some(pid.to_string().as_str()))
    })
}

/// A name for a queue worker of this process, `host:pid:start:tag`: the
/// start time tells a reused pid from this process (a driver that adopts a
/// job of a dead worker relies on it, see [`worker_gone`]); the tag tells
/// apart the workers of one process (a run's and its child runs' local
/// workers).
pub fn worker_name() -> String {
    format!("{}:{:08x}", me(), crate::clock::entropy() as u32)
}

/// Whether a queue worker named by [`worker_name`] is provably dead: see
/// [`provably_dead`]. Another form of name never is: its job waits for its
/// lease to expire.
pub(crate) fn worker_gone(owner: &str) -> bool {
    let parts: Vec<&str> = owner.split(':').collect();
    match parts[..] {
        // A start time that could not be read (0) proves nothing.
        [owner_host, pid, start, _tag] if start != "0" => {
            provably_dead(&format!("{owner_host}:{pid}:{start}"))
        }
        _ => false,
    }
}

/// This process's owner string.
pub(crate) fn me() -> String {
    let pid = std::process::id();
    format!("{}:{pid}:{}", host(), start_time(pid).unwrap_or(0))
}

/// Whether the recorded owner is a process on this host that no longer runs.
pub(crate) fn provably_dead(owner: &str) -> bool {
    let mut parts = owner.rsplitn(3, ':');
    let (Some(start), Some(pid), Some(owner_host)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    if owner_host != host() {
        return false;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    match stat(pid) {
        // A holder killed a moment ago stays a zombie until its parent
        // reaps it (an init that never reaps keeps it for good): it drives
        // nothing any more.
        Some((state, started)) if started == start => {
            matches!(state, 'Z' | 'X') && zombie_process(pid)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_dead() {
        assert!(!provably_dead(&me()));
        let pid = std::process::id();
        assert!(provably_dead(&format!("{}:{pid}:1", host())));
        assert!(!provably_dead(&format!("elsewhere:{pid}:1")));
        assert!(!provably_dead("garbage"));
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test needs a process of its own to kill and leave unreaped"
    )]
    fn a_killed_holder_left_unreaped_is_dead() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let pid = child.id();
        let owner = format!("{}:{pid}:{}", host(), start_time(pid).expect("started"));
        assert!(!provably_dead(&owner), "a running holder is alive");
        child.kill().expect("killed");
        // Not reaped: wait for the zombie without waiting for the child.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while stat(pid).is_some_and(|(state, _)| state != 'Z') {
            assert!(
                std::time::Instant::now() < deadline,
                "never became a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(provably_dead(&owner), "a zombie holder drives nothing");
        child.wait().expect("reaped");
        assert!(provably_dead(&owner));
    }
}
