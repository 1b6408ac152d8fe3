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
//!   everything they start. Baton is a child subreaper, so a descendant
//!   whose parent dies becomes baton's child: when a stage ends,
//!   [`kill_leftovers`] looks for its group's members and its marker among
//!   baton's children only, kills them and reaps them. After a crash,
//!   [`kill_marked_processes`] searches all of `/proc` for the marker. A
//!   process that leaves the group and scrubs its own environment still
//!   escapes; closing that gap needs a cgroup.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
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
    let own = std::process::id();
    proc_pids()
        .filter(|&pid| pid != own && is_marked(pid, &needle))
        .collect()
}

/// Sends SIGKILL to every process [`marked_processes`] finds, rescanning
/// until none is left (a few rounds at most), and returns how many were
/// signalled.
pub fn kill_marked_processes(name: &str, value: &str) -> usize {
    let mut killed = 0;
    for _ in 0..SWEEP_ROUNDS {
        let pids = marked_processes(name, value);
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

/// Makes baton a child subreaper, once: a process whose parent dies is
/// handed to baton instead of init. What a stage leaves running when its
/// leader exits (a background job, a daemon that double-forked and called
/// `setsid`) therefore stays baton's child, and [`kill_leftovers`] finds it
/// among baton's few children instead of searching every process on the
/// machine. Returns whether baton is one.
pub(crate) fn adopt_orphans() -> bool {
    static ADOPTING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ADOPTING.get_or_init(|| nix::sys::prctl::set_child_subreaper(true).is_ok())
}

/// Kills what is left of an attempt whose leader, `pgid`, has exited but
/// is not reaped yet (so the group id is still its own): every member of
/// its group, and every process carrying `marker` (`name=value`) that left
/// the group.
///
/// Baton being a subreaper ([`adopt_orphans`]), each of them is baton's
/// child by now, or becomes one when the process above it dies. So each
/// round kills the group, then kills and reaps the children that belong to
/// the attempt, and looks again, until none is left; at most
/// [`GROUP_VANISH_TIMEOUT`] is spent waiting for them to die. A process that
/// left the group and scrubbed the marker from its environment is found
/// only by the attempt's `cgroup`, which is then killed and waited for as
/// well. Without the subreaper, `/proc` is searched for the marker.
pub(crate) fn kill_leftovers(
    pgid: u32,
    marker: Option<&(String, String)>,
    cgroup: Option<&mut crate::cgroup::Attempt>,
) {
    let deadline = Instant::now() + GROUP_VANISH_TIMEOUT;
    // Looked at first: a process of the cgroup that dies after the search
    // below is reaped by the wait for the cgroup, one dead before it by the
    // search. (Looked at after, the cgroup could be empty already and its
    // last process a zombie neither reaped.)
    let cgroup = cgroup.filter(|cgroup| cgroup.populated());
    if !adopt_orphans() {
        signal_group(pgid, Signal::SIGKILL);
        if let Some((name, value)) = marker {
            kill_marked_processes(name, value);
        }
        if let Some(cgroup) = cgroup {
            cgroup.empty(deadline, || {});
        }
        return;
    }
    kill_adopted(pgid, marker, deadline);
    if let Some(cgroup) = cgroup {
        // What is left there died as baton's child or will: it is reaped
        // once dead, as strays are (see `adopted`).
        cgroup.empty(deadline, || drop(adopted(pgid, None)));
    }
}

/// Kills and reaps the group's members and the marked processes among
/// baton's children, round after round until none is left or `deadline`.
fn kill_adopted(pgid: u32, marker: Option<&(String, String)>, deadline: Instant) {
    loop {
        signal_group(pgid, Signal::SIGKILL);
        let leftovers = adopted(pgid, marker);
        if leftovers.is_empty() || Instant::now() >= deadline {
            return;
        }
        for &pid in &leftovers {
            let _ = kill(to_pid(pid), Signal::SIGKILL);
        }
        for pid in leftovers {
            reap_by(pid, deadline);
        }
    }
}

/// Baton's children that belong to the attempt whose group is `pgid`: the
/// group's members, and processes outside every live group that carry
/// `marker`. Other attempts' leaders and members are left to them.
///
/// A child found dead outside baton's own process group and every live one
/// is reaped on the way: a stage's descendant that exited by itself after
/// its stage ended (baton's own helpers, `git` and the like, stay in
/// baton's group and are reaped by whoever started them).
fn adopted(pgid: u32, marker: Option<&(String, String)>) -> Vec<u32> {
    let children = own_children();
    if children.is_empty() {
        return children;
    }
    let live = live_groups();
    let mut needle = None;
    let mut found = Vec::new();
    for pid in children {
        // The leader is reaped by whoever started it.
        if pid == pgid || live.contains(&pid) {
            continue;
        }
        let Some(stat) = ProcStat::read(pid) else {
            continue;
        };
        let dead = stat.state == 'Z' || stat.state == 'X';
        if stat.pgrp == pgid {
            found.push(pid);
        } else if live.contains(&stat.pgrp)
            || stat.pgrp == nix::unistd::getpgrp().as_raw().unsigned_abs()
        {
            // Another attempt's, or baton's own.
        } else if dead {
            let _ = waitpid(to_pid(pid), Some(WaitPidFlag::WNOHANG));
        } else if let Some((name, value)) = marker {
            let needle = needle.get_or_insert_with(|| format!("{name}={value}").into_bytes());
            if is_marked(pid, needle) {
                found.push(pid);
            }
        }
    }
    found
}

/// The pids of baton's children, read from its main thread's `children`
/// file, where the kernel puts the processes it hands to a subreaper; when
/// that file is missing (a kernel built without it), from every process's
/// parent in `/proc`.
fn own_children() -> Vec<u32> {
    static CHILDREN: std::sync::OnceLock<KeptOpen> = std::sync::OnceLock::new();
    let file = CHILDREN.get_or_init(|| {
        let path = format!("/proc/self/task/{}/children", std::process::id());
        KeptOpen::new(Box::leak(path.into_boxed_str()))
    });
    let mut buffer = [0; 16 * 1024];
    if let Some(text) = file.read(&mut buffer) {
        return text
            .split_ascii_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect();
    }
    let own = std::process::id();
    proc_pids()
        .filter(|&pid| ProcStat::read(pid).is_some_and(|stat| stat.ppid == own))
        .collect()
}

/// Reaps baton's child `pid`, waiting for it to die until `deadline`.
fn reap_by(pid: u32, deadline: Instant) {
    while let Ok(WaitStatus::StillAlive) = waitpid(to_pid(pid), Some(WaitPidFlag::WNOHANG)) {
        if Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until the child `pid` has exited, leaving it unreaped.
pub(crate) fn wait_exited(pid: u32) {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
    while waitid(Id::Pid(to_pid(pid)), flags) == Err(Errno::EINTR) {}
}

/// Groups whose leader this process started and still supervises: a
/// sweep leaves their leaders and members to them.
static LIVE_GROUPS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Records that the group `pgid` is supervised by an attempt still going
/// on (or by a probe waiting for its leader).
pub(crate) fn register_live(pgid: u32) {
    LIVE_GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(pgid);
}

/// Undoes [`register_live`] once the leader of `pgid` is reaped.
pub(crate) fn unregister_live(pgid: u32) {
    let mut groups = LIVE_GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(position) = groups.iter().position(|&live| live == pgid) {
        groups.swap_remove(position);
    }
}

fn live_groups() -> Vec<u32> {
    LIVE_GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
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
    proc_pids()
        .filter_map(ProcStat::read)
        .any(|stat| stat.pgrp == pgid && stat.state != 'Z' && stat.state != 'X')
}

/// A `/proc` file read at every stage, opened once.
///
/// Opening a file under `/proc` walks its directory: most of what reading
/// it costs. The files kept (baton's children, `/proc/self/status`) are
/// generated afresh by every read from offset 0, so the descriptor is kept
/// (close-on-exec, like every descriptor baton opens) and read with
/// `pread`.
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

/// Every pid listed in `/proc`.
fn proc_pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
}

/// Whether `pid` is a live process whose environment holds `needle`
/// (`name=value`).
fn is_marked(pid: u32, needle: &[u8]) -> bool {
    let Some(stat) = ProcStat::read(pid) else {
        return false;
    };
    if stat.state == 'Z' || stat.state == 'X' {
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
    pub(crate) ppid: u32,
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
            ppid: fields.get(1)?.parse().ok()?,
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
                ppid: 1,
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

    /// What a group leaves when its leader exits, started from a thread
    /// other than the main one as stages are: a member of the group and a
    /// double-forked daemon in a session of its own carrying the marker.
    /// Both come back to baton, are killed and reaped, not left zombies.
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "a leader that leaves processes behind, started by hand"
    )]
    fn leftovers_come_back_to_baton_and_are_killed_and_reaped() {
        use std::io::Read;
        use std::os::unix::process::CommandExt;
        assert!(adopt_orphans(), "prctl(PR_SET_CHILD_SUBREAPER) failed");
        let marker = (
            "BATON_GROUP_TEST".to_owned(),
            format!("m{}", std::process::id()),
        );
        let script = "sleep 300 >/dev/null 2>&1 & echo $!; \
                      setsid sh -c 'sleep 300 >/dev/null 2>&1 & echo $!'";
        let (mut leader, pids) = std::thread::spawn(move || {
            let mut leader = std::process::Command::new("sh")
                .args(["-c", script])
                .env(&marker.0, &marker.1)
                .stdout(std::process::Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("sh starts");
            let mut text = String::new();
            let mut stdout = leader.stdout.take().expect("piped");
            stdout.read_to_string(&mut text).expect("reads");
            let pids: Vec<u32> = text
                .split_whitespace()
                .map(|pid| pid.parse().expect("a pid"))
                .collect();
            (leader, pids)
        })
        .join()
        .expect("the thread ends");
        let pgid = leader.id();
        wait_exited(pgid);
        assert_eq!(pids.len(), 2, "{pids:?}");
        let children = own_children();
        for &pid in &pids {
            assert!(children.contains(&pid), "{pid} not among {children:?}");
            let stat = ProcStat::read(pid).expect("still there");
            assert_eq!(stat.ppid, std::process::id(), "{pid}");
        }
        let daemon = ProcStat::read(pids[1]).expect("the daemon");
        assert_ne!(daemon.pgrp, pgid, "the daemon left the group");
        kill_leftovers(
            pgid,
            Some(&(
                "BATON_GROUP_TEST".to_owned(),
                format!("m{}", std::process::id()),
            )),
            None,
        );
        for &pid in &pids {
            assert!(
                ProcStat::read(pid).is_none(),
                "{pid} is still there: {:?}",
                ProcStat::read(pid)
            );
        }
        assert!(leader.wait().expect("reaped").success());
    }

    #[test]
    fn refuses_nonexistent_and_special_groups() {
        assert!(!signal_group(0, Signal::SIGKILL));
        assert!(!signal_group(1, Signal::SIGKILL));
        assert!(!kill_group_if_alive(u32::MAX / 2, u32::MAX / 2, 1));
    }
}
