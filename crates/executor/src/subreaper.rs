//! The fallback where baton may make no cgroup: baton is the subreaper of
//! everything it starts (`PR_SET_CHILD_SUBREAPER`).
//!
//! A descendant whose parent dies becomes baton's child rather than
//! init's, so every descendant still alive once a leader has exited is in
//! the kernel's list of baton's children, or below one of them. At the end
//! of an attempt [`sweep`] reads that list (not all of `/proc`) and kills
//! the attempt's own: members of its process group, and processes that
//! left the group (`setsid`) but carry its marker variable. One that left
//! the group and scrubbed its environment is not found; only a cgroup
//! catches that.
//!
//! A subreaper must also reap what it adopts. Every process baton starts
//! leads a process group of its own (see `spawn.rs`), so it can neither
//! lead a session nor (unless it moves itself) be in another's group: a
//! zombie child of baton's that leads a session or sits in another
//! process's group was adopted, and [`sweep`] reaps it. baton's own
//! children are left to whoever waits for them.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::cgroup::children;
use crate::group::{ProcStat, has_variable};

/// At most this many rounds: each one kills the escapees it sees, whose
/// own children then come to baton for the next.
const MAX_ROUNDS: usize = 64;

/// How long a sweep waits for a killed escapee to end before leaving it
/// to a later sweep.
const REAP_TIMEOUT: Duration = Duration::from_secs(1);

/// Makes this process the subreaper of its descendants; done once, at the
/// first start that needs it.
///
/// # Errors
///
/// The kernel refused (it predates Linux 3.4).
pub(crate) fn enable() -> std::io::Result<()> {
    static ENABLED: OnceLock<Result<(), rustix::io::Errno>> = OnceLock::new();
    (*ENABLED.get_or_init(|| rustix::process::set_child_subreaper(Some(rustix::process::getpid()))))
        .map_err(std::io::Error::from)
}

/// Kills what is left of the attempt whose leader `pgid` has exited (a
/// zombie still, reaped by its supervisor): the members of its group and
/// the processes carrying `marker`, that are or have become children of
/// baton; then reaps them, and every zombie baton adopted. Returns how
/// many were killed.
pub(crate) fn sweep(pgid: u32, marker: Option<&(String, String)>) -> usize {
    let needle = marker.map(|(name, value)| format!("{name}={value}").into_bytes());
    let mut killed = 0;
    for _ in 0..MAX_ROUNDS {
        let mut ours = Vec::new();
        for pid in children(std::process::id()) {
            let Some(stat) = ProcStat::read(pid) else {
                continue;
            };
            if stat.is_dead() {
                if adopted(pid, &stat) {
                    reap(pid, Instant::now());
                }
                continue;
            }
            let member = stat.pgrp == pgid && pid != pgid;
            if member
                || needle
                    .as_deref()
                    .is_some_and(|needle| has_variable(pid, needle))
            {
                ours.push(pid);
            }
        }
        if ours.is_empty() {
            break;
        }
        ours.retain(|&pid| kill(to_pid(pid), Signal::SIGKILL).is_ok());
        if ours.is_empty() {
            // Not ours to kill after all (another user's): nothing changes
            // by asking again.
            break;
        }
        killed += ours.len();
        // Reaped, each one has handed its own children to baton.
        let deadline = Instant::now() + REAP_TIMEOUT;
        for pid in ours {
            reap(pid, deadline);
        }
    }
    killed
}

/// Whether `pid`, a child of baton's, was adopted rather than started by
/// baton (see the module's comment).
fn adopted(pid: u32, stat: &ProcStat) -> bool {
    stat.pgrp != pid || stat.session == pid
}

/// Reaps `pid`, a child of baton's, waiting for its end until `deadline`.
fn reap(pid: u32, deadline: Instant) {
    loop {
        match waitpid(to_pid(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(nix::errno::Errno::EINTR) => {}
            _ => return,
        }
    }
}

fn to_pid(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}
