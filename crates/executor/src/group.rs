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
//!   the group. Children carry a marker variable in their environment (see
//!   [`ProcessSpec::marker`](crate::ProcessSpec::marker)), inherited by
//!   everything they start; [`marked_processes`] finds them in `/proc` and
//!   [`kill_marked_processes`] kills them. A process that scrubs its own
//!   environment still escapes; closing that gap needs a cgroup.

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
    marked_processes_since(name, value, 0, None, None, || false)
}

/// Sends SIGKILL to every process [`marked_processes`] finds, rescanning
/// until none is left (a few rounds at most), and returns how many were
/// signalled.
pub fn kill_marked_processes(name: &str, value: &str) -> usize {
    kill_until_gone(|| marked_processes_since(name, value, 0, None, None, || false))
}

/// SIGKILLs marked processes started at or after `since` (clock ticks since
/// boot); older processes cannot be descendants of a child started at
/// `since`, and skipping them saves reading their environment.
///
/// `leader` leads the group whose escapees are swept. When `forks_before`
/// is the system's fork count ([`forks`]) read before the leader was
/// started, `leader` is also the process they descend from: pids are handed
/// out in increasing order, so unless the counter wrapped since the leader
/// started, every descendant has a pid between the leader's and the last
/// one handed out, and the scan reads nothing about other processes. That
/// keeps the sweep cheap: a few `/proc` reads. (When no process but other
/// stages' leaders was started since the leader, [`alone_since_start`]
/// spares the sweep altogether.) `started` is an instant from before the
/// leader's start.
pub(crate) fn sweep_marked(
    name: &str,
    value: &str,
    since: u64,
    leader: u32,
    forks_before: Option<u64>,
    started: Instant,
) -> usize {
    let min_pid = Some((leader, started)).filter(|_| forks_before.is_some());
    kill_until_gone(|| {
        // Reading the pids one by one is complete only if the pid counter
        // has not gone all the way round since the leader started: it could
        // then have come back above the leader, below some descendant.
        // Asked only when some pid was handed out after the leader's.
        let unwrapped = || {
            too_soon_to_wrap(started.elapsed())
                || forks_before.zip(forks()).is_some_and(|(before, now)| {
                    now.saturating_sub(before) <= u64::from(DIRECT_RANGE)
                })
        };
        marked_processes_since(name, value, since, min_pid, Some(leader), unwrapped)
    })
}

/// Whether the exited leader `leader` is provably alone in its group: no
/// pid was handed out since it started except to leaders started here.
/// Every descendant would hold a pid handed out after the leader's, so its
/// group then holds only the leader's zombie, nothing carries its marker,
/// and neither the group kill nor the sweep has anything to reach. In a
/// chain of stages that fork nothing, on an otherwise quiet machine, that
/// is most stages: any other process, or a thread of baton's, that takes a
/// pid in the meantime makes the answer `false`.
///
/// This is [`marked_processes_since`]'s reasoning without reading any
/// process: the pid counter must not have wrapped since the leader started
/// (see [`sweep_marked`]). A process started before the leader that moved
/// into its group (same session, `setpgid` to that number) is not in the
/// range; it is killed by its own attempt's sweep, as a descendant that
/// moved into another group is (see [`register_live`]).
pub(crate) fn alone_since_start(leader: u32, forks_before: Option<u64>, started: Instant) -> bool {
    let Some(last) = last_pid() else {
        return false;
    };
    if last == leader {
        // The leader's pid is still held by its zombie: the counter
        // cannot have come round to hand it out again.
        return true;
    }
    if last < leader || last - leader > DIRECT_RANGE {
        return false;
    }
    let unwrapped = too_soon_to_wrap(started.elapsed())
        || forks_before
            .zip(forks())
            .is_some_and(|(before, now)| now.saturating_sub(before) <= u64::from(DIRECT_RANGE));
    unwrapped && all_started_here_since(leader + 1..=last, started)
}

/// More pids than any machine hands out in a second. Creating a process
/// or thread takes microseconds of one core and every pid is taken under
/// one kernel lock; measured rates are in the hundreds of thousands per
/// second.
const MAX_PIDS_PER_SECOND: u128 = 10_000_000;

/// The lowest pid the counter goes back to when it wraps
/// (`RESERVED_PIDS` in the kernel).
const FIRST_PID_AFTER_WRAP: u64 = 300;

/// Whether the pid counter cannot have gone all the way round in
/// `elapsed`: it would have handed out more pids than the system has
/// (`pid_max`, less the reserved ones) faster than
/// [`MAX_PIDS_PER_SECOND`]. This spares most sweeps a read of `/proc/stat`,
/// which the kernel builds from every CPU's counters: with stages running
/// side by side, nearly every stage's sweep asked for it.
fn too_soon_to_wrap(elapsed: Duration) -> bool {
    let mut buffer = [0; 32];
    let Some(pid_max) = PID_MAX
        .read(&mut buffer)
        .and_then(|text| text.trim().parse::<u64>().ok())
    else {
        return false;
    };
    let at_most = elapsed.as_nanos().saturating_mul(MAX_PIDS_PER_SECOND) / 1_000_000_000;
    at_most < u128::from(pid_max.saturating_sub(FIRST_PID_AFTER_WRAP))
}

/// How many processes and threads the system has created since boot (the
/// `processes` line of `/proc/stat`), if readable.
pub(crate) fn forks() -> Option<u64> {
    // Two cores' worth of `/proc/stat` is about 1 KB; a large machine's
    // does not fit, and the sweep then lists `/proc`.
    let mut buffer = [0; 16 * 1024];
    let count = PROC_STAT
        .read(&mut buffer)?
        .lines()
        .find_map(|line| line.strip_prefix("processes "))?
        .trim()
        .parse()
        .ok()?;
    *LAST_FORKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((Instant::now(), count));
    Some(count)
}

/// A fork count read before now, for a process about to start: the last
/// one [`forks`] read if that was recent, else a fresh one.
///
/// Any count read before a leader starts serves as its `forks_before` (see
/// [`sweep_marked`]): an older one only counts more processes since, which
/// at worst sends the sweep to list `/proc`. With stages ending and starting
/// one after another, the last sweep's count is a few processes old, and
/// `/proc/stat` (the costliest file the sweep reads) is read once per stage
/// instead of twice.
pub(crate) fn forks_before_start() -> Option<u64> {
    let recent = *LAST_FORKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match recent {
        Some((at, count)) if at.elapsed() < RECENT_FORKS => Some(count),
        _ => forks(),
    }
}

/// The last fork count read, and when.
static LAST_FORKS: std::sync::Mutex<Option<(Instant, u64)>> = std::sync::Mutex::new(None);

/// How old a fork count [`forks_before_start`] reuses may be.
const RECENT_FORKS: Duration = Duration::from_millis(100);

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

/// Groups whose leader this process started and still supervises.
static LIVE_GROUPS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Records that the group `pgid` is supervised by an attempt still going
/// on. A sweep does not read the environment of its members: they are not
/// escapees (an escapee leaves its group for a new one), and the attempt
/// that owns them kills its whole group when it ends. With many attempts
/// at once, that spares every sweep a read of every other attempt's
/// processes. A descendant that moved into another attempt's group (same
/// session, `setpgid`) is therefore killed when that attempt ends, not
/// when its own does.
///
/// `started` is an instant from before the leader's start: see
/// [`STARTED_LEADERS`].
pub(crate) fn register_live(pgid: u32, started: Instant) {
    LIVE_GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(pgid);
    let mut leaders = STARTED_LEADERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (next, entries) = &mut *leaders;
    entries[*next % entries.len()] = (pgid, Some(started));
    *next = next.wrapping_add(1);
}

/// The last leaders this process started, live or reaped, each with an
/// instant from before its start (0 and `None` for none yet): a ring
/// written by [`register_live`].
///
/// A sweep that reads pids one by one knows the counter has not wrapped
/// since its leader started, so each pid in its range was handed out once
/// since then; one handed to a leader baton started since then is that
/// leader, not a descendant that escaped, even after it was reaped. An
/// entry from before the leader's start proves nothing: the counter may
/// have wrapped between it and the leader and handed its pid to one of the
/// leader's descendants. With stages side by side, most pids in a range
/// are the other stages' leaders, many of them reaped already, and skipping
/// them spares a `/proc` read each.
type StartedRing = (usize, [(u32, Option<Instant>); STARTED_KEPT]);
static STARTED_LEADERS: std::sync::Mutex<StartedRing> =
    std::sync::Mutex::new((0, [(0, None); STARTED_KEPT]));

/// How many leaders [`STARTED_LEADERS`] remembers: more than a sweep's
/// range ([`DIRECT_RANGE`]) holds.
const STARTED_KEPT: usize = 128;

/// Whether every pid in `pids` is among the last leaders this process
/// started at or after `since`.
fn all_started_here_since(pids: std::ops::RangeInclusive<u32>, since: Instant) -> bool {
    let leaders = STARTED_LEADERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    pids.into_iter().all(|pid| {
        pid != 0
            && leaders
                .1
                .iter()
                .any(|&(leader, started)| leader == pid && started.is_some_and(|at| at >= since))
    })
}

/// Whether `pid` is among the last leaders this process started at or after
/// `since`.
fn started_here_since(pid: u32, since: Instant) -> bool {
    all_started_here_since(pid..=pid, since)
}

/// Undoes [`register_live`] once the attempt that supervised `pgid` ended.
pub(crate) fn unregister_live(pgid: u32) {
    let mut groups = LIVE_GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(position) = groups.iter().position(|&live| live == pgid) {
        groups.swap_remove(position);
    }
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
        .any(|stat| stat.pgrp == pgid && stat.state != 'Z' && stat.state != 'X')
}

/// The pid the kernel handed out last, if readable.
fn last_pid() -> Option<u32> {
    let mut buffer = [0; 32];
    NS_LAST_PID.read(&mut buffer)?.trim().parse().ok()
}

/// `/proc/stat`, for [`forks`].
static PROC_STAT: KeptOpen = KeptOpen::new("/proc/stat");

/// The last pid handed out, for [`last_pid`].
static NS_LAST_PID: KeptOpen = KeptOpen::new("/proc/sys/kernel/ns_last_pid");

/// The largest pid, for [`too_soon_to_wrap`]. Read at every use: an
/// administrator may lower it.
static PID_MAX: KeptOpen = KeptOpen::new("/proc/sys/kernel/pid_max");

/// A `/proc` file read after every stage, opened once.
///
/// Opening `/proc/sys/kernel/ns_last_pid` walks the sysctl tables and
/// `/proc/stat` its directory: most of what reading them cost. These, and
/// `pid_max` and `/proc/self/status`, are generated afresh by every read
/// from offset 0, so the descriptor is kept (close-on-exec, like every
/// descriptor baton opens) and read with `pread`.
pub(crate) struct KeptOpen {
    path: &'static str,
    file: std::sync::Mutex<Option<std::fs::File>>,
}

impl KeptOpen {
    pub(crate) const fn new(path: &'static str) -> KeptOpen {
        KeptOpen {
            path,
            file: std::sync::Mutex::new(None),
        }
    }

    /// The whole file, as [`read_small`] reads it.
    pub(crate) fn read<'b>(&self, buffer: &'b mut [u8]) -> Option<&'b str> {
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if file.is_none() {
            *file = Some(std::fs::File::open(self.path).ok()?);
        }
        match read_whole(file.as_ref()?, buffer) {
            Ok(text) => text,
            Err(_) => {
                // Opened again next time.
                *file = None;
                None
            }
        }
    }
}

/// Reads a small `/proc` file into `buffer` with as few system calls as
/// possible: `std::fs::read_to_string` also stats the file and reads in
/// growing steps, which for the sweep after every stage made eight calls
/// per process instead of three. `None` when the file cannot be read or
/// does not fit.
fn read_small<'b>(path: &str, buffer: &'b mut [u8]) -> Option<&'b str> {
    read_whole(&std::fs::File::open(path).ok()?, buffer)
        .ok()
        .flatten()
}

/// `file` from offset 0 to its end, read with `pread` into `buffer`;
/// `None` when it does not fit or is not UTF-8.
///
/// A read that leaves room in `buffer` ends it. Every file read here is a
/// `/proc` file the kernel generates whole at each read (a `seq_file` of
/// one record, or a sysctl), so such a read has returned all of it, and a
/// second one to see end-of-file would generate it all again: for
/// `/proc/stat` that is summing every CPU's counters.
fn read_whole<'b>(file: &std::fs::File, buffer: &'b mut [u8]) -> std::io::Result<Option<&'b str>> {
    use std::os::unix::fs::FileExt;
    let mut filled = 0;
    loop {
        match file.read_at(&mut buffer[filled..], filled as u64) {
            Ok(0) => break,
            Ok(read) => {
                filled += read;
                if filled == buffer.len() {
                    return Ok(None);
                }
                break;
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(std::str::from_utf8(&buffer[..filled]).ok())
}

/// The marked processes; `own` is the group being swept, the only live
/// group (see [`register_live`]) whose members are read.
///
/// With `min_pid` (a leader's pid, and an instant from before its start),
/// only pids from there up to the last one handed out can be descendants
/// (see [`sweep_marked`]). When that range is short they are
/// read one by one, without listing `/proc` at all: with stages running
/// side by side it holds only the other stages' processes, or nothing.
/// `unwrapped_since` says whether the pid counter surely has not wrapped
/// since `min_pid` was handed out; it is asked only when that matters.
fn marked_processes_since(
    name: &str,
    value: &str,
    since: u64,
    min_pid: Option<(u32, Instant)>,
    own: Option<u32>,
    unwrapped_since: impl Fn() -> bool,
) -> Vec<u32> {
    let live: Vec<u32> = LIVE_GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .copied()
        .filter(|&group| Some(group) != own)
        .collect();
    let needle = format!("{name}={value}").into_bytes();
    let own_pid = std::process::id();
    let marked = |pid: u32| pid != own_pid && is_marked(pid, &needle, since, &live);
    // Pids are in order only if the counter did not wrap since `min_pid`.
    let last = last_pid();
    let min_pid = min_pid.filter(|&(min, _)| last.is_some_and(|last| last >= min));
    if let (Some((min, started)), Some(last)) = (min_pid, last) {
        // The leader itself is the group's own, and dead: only pids after
        // it can be escapees. When none was handed out since, none exists;
        // the leader's pid, still held by its zombie, cannot have been
        // handed out again.
        if last == min {
            return Vec::new();
        }
        if last - min <= DIRECT_RANGE && unwrapped_since() {
            // A pid in the range that leads a live group is that group's
            // leader, held by it (or its zombie) since the counter did not
            // wrap, and one handed to a leader started here since and
            // reaped has not been handed out again (see `STARTED_LEADERS`):
            // stages running side by side are skipped unread.
            return (min + 1..=last)
                .filter(|&pid| {
                    !live.contains(&pid) && !started_here_since(pid, started) && marked(pid)
                })
                .collect();
        }
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| min_pid.is_none_or(|(min, _)| pid >= min) && marked(pid))
        .collect()
}

/// The longest range of pids [`marked_processes_since`] reads one by one
/// rather than listing `/proc`.
const DIRECT_RANGE: u32 = 64;

/// Whether `pid` is a live process started at or after `since`, outside
/// the `live` groups, whose environment holds `needle` (`name=value`).
fn is_marked(pid: u32, needle: &[u8], since: u64, live: &[u32]) -> bool {
    let Some(stat) = ProcStat::read(pid) else {
        return false;
    };
    if stat.start_time < since
        || stat.state == 'Z'
        || stat.state == 'X'
        || live.contains(&stat.pgrp)
    {
        return false;
    }
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    // Re-read the start time: if the pid died and was reused while we read
    // its environment, the environment belonged to someone else.
    environ
        .split(|byte| *byte == 0)
        .any(|entry| entry == needle)
        && process_start_time(pid) == Some(stat.start_time)
}

fn to_pid(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}

/// The fields of `/proc/<pid>/stat` baton needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) state: char,
    pub(crate) pgrp: u32,
    pub(crate) start_time: u64,
}

impl ProcStat {
    pub(crate) fn read(pid: u32) -> Option<ProcStat> {
        // A stat line is 52 numbers and a command name of at most 64
        // bytes: well under a page.
        let mut buffer = [0; 4096];
        ProcStat::parse(read_small(&format!("/proc/{pid}/stat"), &mut buffer)?)
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
    #[expect(
        clippy::disallowed_methods,
        reason = "a plain child process, to see the count move"
    )]
    fn the_fork_count_counts_a_new_process() {
        let before = forks().expect("/proc/stat has a processes line");
        std::process::Command::new("true")
            .status()
            .expect("true runs");
        let after = forks().expect("/proc/stat has a processes line");
        assert!(after > before, "{before} -> {after}");
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "a plain child process, to see the count move"
    )]
    fn a_recent_fork_count_is_reused_before_a_start() {
        let last_read = || {
            *LAST_FORKS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let read_at = Instant::now();
        let before = forks().expect("/proc/stat has a processes line");
        let ours = last_read();
        std::process::Command::new("true")
            .status()
            .expect("true runs");
        let reused = forks_before_start().expect("a count");
        // Reused while recent: the process started since is not counted.
        // (Read afresh only if this test was paused past the limit, or
        // replaced by another test's read in the same process meanwhile.)
        assert!(
            reused == before || read_at.elapsed() >= RECENT_FORKS || last_read() != ours,
            "{before} -> {reused}"
        );
        assert!(reused <= forks().expect("a count"));
    }

    #[test]
    fn the_pid_counter_cannot_wrap_in_a_moment_but_can_in_an_hour() {
        let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .expect("pid_max is readable")
            .trim()
            .parse()
            .expect("pid_max is a number");
        assert!(too_soon_to_wrap(Duration::ZERO));
        assert!(too_soon_to_wrap(Duration::from_micros(500)));
        // Just long enough to hand out every pid at the assumed top rate.
        let nanos = u64::try_from(
            u128::from(pid_max - FIRST_PID_AFTER_WRAP) * 1_000_000_000 / MAX_PIDS_PER_SECOND,
        )
        .expect("fits");
        assert!(!too_soon_to_wrap(Duration::from_nanos(nanos + 1)));
        assert!(!too_soon_to_wrap(Duration::from_secs(3600)));
    }

    #[test]
    fn the_last_leaders_started_here_are_remembered_with_their_start() {
        // Pids above any pid_max, so no real leader collides with them.
        let first = 5_000_000;
        let before = Instant::now();
        for pid in first..first + 10 {
            register_live(pid, Instant::now());
            unregister_live(pid);
        }
        assert!(started_here_since(first, before) && started_here_since(first + 9, before));
        assert!(all_started_here_since(first..=first + 9, before));
        assert!(!started_here_since(first + 10, before) && !started_here_since(0, before));
        assert!(!all_started_here_since(first..=first + 10, before));
        // An entry from before a leader's start proves nothing about a pid
        // handed out since (the counter may have wrapped in between).
        let after = Instant::now();
        assert!(!started_here_since(first, after));
        // The ring keeps the last `STARTED_KEPT`: a long run forgets the
        // oldest.
        let later = first + 100;
        let kept = u32::try_from(STARTED_KEPT).expect("small");
        for pid in later..later + kept {
            register_live(pid, Instant::now());
            unregister_live(pid);
        }
        assert!(!started_here_since(first, before));
        assert!(all_started_here_since(later..=later + kept - 1, before));
    }

    #[test]
    fn refuses_nonexistent_and_special_groups() {
        assert!(!signal_group(0, Signal::SIGKILL));
        assert!(!signal_group(1, Signal::SIGKILL));
        assert!(!kill_group_if_alive(u32::MAX / 2, u32::MAX / 2, 1));
    }
}
