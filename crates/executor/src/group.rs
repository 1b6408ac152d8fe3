//! Process groups: signalling them safely, now and after a restart.
//!
//! Every child baton starts leads its own process group (pgid = its pid), so
//! one `killpg` reaches everything it forked. Two things make that less
//! simple than it sounds:
//!
//! * **Pid reuse.** Once a group's last member is reaped, its number can be
//!   handed to an unrelated process. [`run`](crate::run) therefore signals
//!   the group only while the leader is alive or an unreaped zombie (a
//!   zombie keeps its pid reserved). After a crash baton no longer owns the
//!   leader, so [`kill_group_if_alive`] compares the start time recorded at
//!   spawn with `/proc/<pid>/stat` and signals nothing when they differ.
//! * **Escapees.** A descendant that calls `setsid` (or `setpgid`) leaves
//!   the group. While baton runs, the kernel tracks those for it (a cgroup
//!   per attempt, `cgroup.rs`, else baton as their subreaper,
//!   `subreaper.rs`). After a crash only their marker variable is left
//!   (see [`ProcessSpec::marker`](crate::ProcessSpec::marker)), inherited
//!   by everything a child starts: [`marked_processes`] finds them in a
//!   scan of `/proc` and [`kill_marked_processes`] kills them.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// How long [`kill_group_if_alive`] waits for a killed group to vanish.
pub const GROUP_VANISH_TIMEOUT: Duration = Duration::from_secs(5);

/// How many times a marker sweep rescans `/proc`: a process may fork between
/// the scan and the kill, and its child shows up only in the next scan.
const SWEEP_ROUNDS: usize = 5;

/// Kills the process group `pgid` left behind by an earlier baton process,
/// if its leader `pid` is still the process that was started then.
///
/// The group is signalled (SIGKILL) only when `/proc/<pid>/stat` exists and
/// its start time (field 22, clock ticks since boot) equals `start_time`,
/// as recorded in [`Started`](crate::Started). A pid that has died, or has
/// been reused by another process, is never signalled and `false` is
/// returned.
///
/// After signalling, it reaps any members that are baton's own children and
/// waits up to [`GROUP_VANISH_TIMEOUT`] for the group to disappear (members
/// that were reparented to init are reaped there). Returns `true` when the
/// group was signalled.
///
/// Processes of the group that left it with `setsid` are not reached; use
/// [`kill_marked_processes`] with the attempt's marker for those.
pub fn kill_group_if_alive(pgid: u32, pid: u32, start_time: u64) -> bool {
    let Some(stat) = ProcStat::read(pid) else {
        return false;
    };
    if stat.start_time != start_time {
        return false;
    }
    // The leader is alive (or an unreaped zombie) with the recorded start
    // time, so no other process can have created a group with its pid.
    if !signal_group(pgid, Signal::SIGKILL) {
        return false;
    }
    wait_for_group_to_vanish(pgid, GROUP_VANISH_TIMEOUT);
    true
}

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), or `None` when there is no such process.
pub fn process_start_time(pid: u32) -> Option<u64> {
    ProcStat::read(pid).map(|stat| stat.start_time)
}

/// The pids of live processes (zombies excluded) whose environment contains
/// `name=value`, except baton itself.
///
/// Processes of other users whose environment cannot be read are skipped.
pub fn marked_processes(name: &str, value: &str) -> Vec<u32> {
    let needle = format!("{name}={value}").into_bytes();
    let own_pid = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own_pid && is_marked(pid, &needle))
        .collect()
}

/// Sends SIGKILL to every process [`marked_processes`] finds, rescanning
/// until none is left (a few rounds at most), and returns how many were
/// signalled.
pub fn kill_marked_processes(name: &str, value: &str) -> usize {
    kill_until_gone(|| marked_processes(name, value))
}

/// SIGKILLs what `find` returns, rescanning until it returns nothing (a few
/// rounds at most); returns how many were signalled.
fn kill_until_gone(find: impl Fn() -> Vec<u32>) -> usize {
    let mut killed = 0;
    for _ in 0..SWEEP_ROUNDS {
        let pids = find();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if kill(to_pid(pid), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
    }
    killed
}

/// Sends `signal` to process group `pgid`; `false` when no such group exists.
pub(crate) fn signal_group(pgid: u32, signal: Signal) -> bool {
    // A pgid of 0 or 1 would signal our own group or init's: never do that.
    if pgid <= 1 {
        return false;
    }
    killpg(to_pid(pgid), signal).is_ok()
}

fn wait_for_group_to_vanish(pgid: u32, bound: Duration) {
    let deadline = Instant::now() + bound;
    loop {
        let done = !group_has_live_members(pgid) || Instant::now() >= deadline;
        // Reap members that are our own children (also the ones that died
        // since the check); other members are reaped by their parent, init
        // or a subreaper.
        reap_children_in_group(pgid);
        if done {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn reap_children_in_group(pgid: u32) {
    let group = Pid::from_raw(-i32::try_from(pgid).unwrap_or(i32::MAX));
    while let Ok(status) = waitpid(group, Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Whether a process other than a zombie belongs to group `pgid`. Zombies
/// are not counted: they are dead, and when their parent is init it may
/// take a while to reap them.
fn group_has_live_members(pgid: u32) -> bool {
    // ESRCH: not even a zombie is left, no need to scan.
    if killpg(to_pid(pgid), None) == Err(Errno::ESRCH) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(ProcStat::read)
        .any(|stat| stat.pgrp == pgid && !stat.is_dead())
}

/// Whether `pid` is a live process whose environment holds `needle`
/// (`name=value`).
fn is_marked(pid: u32, needle: &[u8]) -> bool {
    ProcStat::read(pid).is_some_and(|stat| !stat.is_dead()) && has_variable(pid, needle)
}

/// Whether the environment of `pid` holds `needle` (`name=value`), as it
/// was when the process started (or last `exec`ed). A process of another
/// user, or a zombie, has none to read.
pub(crate) fn has_variable(pid: u32, needle: &[u8]) -> bool {
    let Some(start_time) = process_start_time(pid) else {
        return false;
    };
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    // Re-read the start time: if the pid died and was reused while we read
    // its environment, the environment belonged to someone else.
    environ
        .split(|byte| *byte == 0)
        .any(|entry| entry == needle)
        && process_start_time(pid) == Some(start_time)
}

fn to_pid(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}

/// The fields of `/proc/<pid>/stat` baton needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) state: char,
    pub(crate) pgrp: u32,
    pub(crate) session: u32,
    pub(crate) start_time: u64,
}

impl ProcStat {
    pub(crate) fn read(pid: u32) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// A zombie, or a process on its way to being reaped: dead.
    pub(crate) fn is_dead(&self) -> bool {
        self.state == 'Z' || self.state == 'X'
    }

    /// Parses the stat line. The command name (field 2) is in parentheses
    /// and may itself contain spaces and `)`, so fields are counted from the
    /// last `)`.
    fn parse(text: &str) -> Option<ProcStat> {
        let after_name = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = after_name.split_ascii_whitespace().collect();
        // fields[0] is field 3 (state), so field N is fields[N - 3].
        Some(ProcStat {
            state: fields.first()?.chars().next()?,
            pgrp: fields.get(2)?.parse().ok()?,
            session: fields.get(3)?.parse().ok()?,
            start_time: fields.get(19)?.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_a_hostile_command_name() {
        let line = "4242 (a) b (c) R 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n";
        assert_eq!(
            ProcStat::parse(line),
            Some(ProcStat {
                state: 'R',
                pgrp: 4242,
                session: 4242,
                start_time: 987_654
            })
        );
        assert_eq!(ProcStat::parse("garbage"), None);
        assert_eq!(ProcStat::parse("1 (x) S 0"), None);
    }

    #[test]
    fn reads_our_own_stat() {
        let stat = ProcStat::read(std::process::id()).expect("own stat");
        assert!(stat.start_time > 0);
        assert_eq!(
            process_start_time(std::process::id()),
            Some(stat.start_time)
        );
    }

    #[test]
    fn refuses_nonexistent_and_special_groups() {
        assert!(!signal_group(0, Signal::SIGKILL));
        assert!(!signal_group(1, Signal::SIGKILL));
        assert!(!kill_group_if_alive(u32::MAX / 2, u32::MAX / 2, 1));
    }
}
