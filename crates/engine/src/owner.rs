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
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces;
    // the fields after the last ')' are plain.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
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
    start_time(pid) != Some(start)
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
}
