//! Noticing that a child exited without reaping it.
//!
//! The supervisor must signal the child's group while the leader is a
//! zombie (see the zombie rule in `process.rs`), so it waits for the exit
//! with `waitid(WEXITED | WNOWAIT)` rather than by reaping. What wakes it
//! up is the leader's pidfd, which becomes readable when the leader exits:
//! one descriptor in the runtime's epoll set, woken for this child only.
//! The start hands one over (`CLONE_PIDFD`); without it `pidfd_open` makes
//! one. Where both are missing (Linux before 5.3, or a seccomp filter that
//! refuses them), `SIGCHLD` wakes it instead; that signal goes to every
//! supervisor of the process, each of which then asks about its own child.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// How often the `SIGCHLD` fallback asks anyway: tokio keeps one pending
/// notification per listener, and coalesced signals must not leave a
/// supervisor waiting for ever.
const SIGNAL_RECHECK: Duration = Duration::from_millis(500);

/// Wakes the supervisor of one child when the child exits.
pub(crate) struct ExitWatch {
    pid: u32,
    wake: Wake,
}

enum Wake {
    Pidfd(AsyncFd<OwnedFd>),
    Signal(Signal),
}

impl ExitWatch {
    /// Watches `pid`, a child of this process that has not been reaped,
    /// through `pidfd` when the start made one, else one opened here.
    ///
    /// # Errors
    ///
    /// Neither a pidfd nor a `SIGCHLD` listener could be set up.
    pub(crate) fn new(pid: u32, pidfd: Option<OwnedFd>) -> std::io::Result<ExitWatch> {
        let fd = match pidfd {
            Some(fd) => Some(fd),
            None => open_pidfd(pid),
        };
        let wake = match fd.and_then(watch_pidfd) {
            Some(fd) => Wake::Pidfd(fd),
            // Registered after the child started, which cannot lose its
            // exit: `exited` asks `waitid` before every wait.
            // SIGCHLD needs no `signal_handlers_changed`: every child
            // starts with it at its default anyway (see `vfork.rs`).
            None => Wake::Signal(signal(SignalKind::child())?),
        };
        Ok(ExitWatch { pid, wake })
    }

    /// Resolves once the child has exited, leaving it unreaped.
    pub(crate) async fn exited(&mut self) {
        loop {
            if self.has_exited() {
                return;
            }
            match &mut self.wake {
                Wake::Pidfd(fd) => match fd.readable().await {
                    Ok(mut ready) => ready.clear_ready(),
                    // The runtime is shutting down: nothing will wake us.
                    Err(_) => std::future::pending::<()>().await,
                },
                Wake::Signal(signals) => {
                    let _ = tokio::time::timeout(SIGNAL_RECHECK, signals.recv()).await;
                }
            }
        }
    }

    fn has_exited(&self) -> bool {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG;
        let status = match &self.wake {
            Wake::Pidfd(fd) => waitid(Id::PIDFd(fd.get_ref().as_fd()), flags),
            Wake::Signal(_) => waitid(
                Id::Pid(Pid::from_raw(
                    i32::try_from(self.pid).expect("pids fit in i32"),
                )),
                flags,
            ),
        };
        // Exited (a zombie now), or already reaped: either way gone. EINTR
        // only means "ask again".
        !matches!(
            status,
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR)
        )
    }
}

#[expect(
    deprecated,
    reason = "the safe constructor is deprecated for descriptors that may be closed behind the \
              runtime's back; an `OwnedFd` it owns stays open until it is deregistered"
)]
fn watch_pidfd(fd: OwnedFd) -> Option<AsyncFd<OwnedFd>> {
    AsyncFd::with_interest(fd, tokio::io::Interest::READABLE).ok()
}

fn open_pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::NONBLOCK).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Starts `sleep 0.2` and watches it through `wake`.
    #[expect(
        clippy::disallowed_methods,
        reason = "the watch is tested on a child the test starts itself"
    )]
    async fn watch_a_sleep(signal_only: bool) {
        // Taken before the spawn: on a loaded machine setting the watch up
        // may take a good part of the sleep, which still ends 200 ms after this.
        let started = Instant::now();
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .expect("sleep runs");
        let pid = child.id();
        let mut watch = ExitWatch::new(pid, None).expect("a watch");
        if signal_only {
            watch.wake = Wake::Signal(signal(SignalKind::child()).expect("a listener"));
        }
        assert!(matches!(watch.wake, Wake::Pidfd(_)) != signal_only);
        tokio::time::timeout(Duration::from_secs(5), watch.exited())
            .await
            .expect("the exit is noticed");
        // Noticed at the exit, neither before it nor a recheck period late.
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(150),
            "woke after {waited:?}"
        );
        assert!(waited < SIGNAL_RECHECK, "woke after {waited:?}");
        // Left unreaped: the zombie is still ours to reap.
        assert!(child.try_wait().expect("waitable").is_some());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_pidfd_wakes_the_supervisor_at_the_exit() {
        watch_a_sleep(false).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn without_a_pidfd_sigchld_wakes_it() {
        watch_a_sleep(true).await;
    }
}
