//! The start itself: a vfork-style `clone` that runs a few system calls of
//! baton's own in the child and `execve`s.
//!
//! This is what glibc's `posix_spawn` does, less three costs it pays at
//! every child, which a run of many short stages pays for each stage:
//!
//! * it maps a fresh stack for the child and unmaps it after. In a process
//!   with threads on other CPUs, every unmap interrupts those CPUs to flush
//!   their TLBs. Here each thread keeps one stack and lends it to its
//!   children: a vfork child runs only while the thread that started it is
//!   suspended, so no two children share it.
//! * in the child it asks for the disposition of all 64 signals and resets
//!   those with a handler, while the parent waits: 64 system calls. Here
//!   the child resets only the signals `/proc/self/status` lists as caught,
//!   read at the first start and again only after
//!   [`signal_handlers_changed`].
//! * the pidfd that wakes the supervisor at the exit is a `pidfd_open`
//!   after the spawn; `CLONE_PIDFD` returns it from the clone.
//!
//! The child shares baton's memory until its `execve`, so it must run no
//! signal handler of baton's and touch no lock or allocator. The parent
//! blocks every signal before the clone (the child starts with that mask),
//! the child resets the caught ones to their default, and unblocks only
//! right before the `execve`. It calls nothing but plain system call
//! wrappers, and reports a failure as an errno in memory it shares with the
//! parent, then `_exit`s: a failed start is an error here, not a dead child.
//! The clone (a `clone3` when the child starts in a cgroup of its own,
//! `cgroup.rs`, else a move into it by the child) and the child's system
//! calls are in `sys.rs`, with the rest of baton's `unsafe` code.

use std::cell::RefCell;
use std::ffi::c_int;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use crate::group::KeptOpen;
use crate::sys::{self, Exec, signal_bit};

/// A started child.
pub(crate) struct Child {
    pub(crate) pid: u32,
    /// Its pidfd, unless the kernel predates `CLONE_PIDFD` (Linux 5.2).
    pub(crate) pidfd: Option<OwnedFd>,
    /// Why it could not start in its cgroup, if it could not.
    pub(crate) cgroup_refused: Option<io::Error>,
}

/// The child's stack: generous for the few frames it has (no recursion,
/// no allocation, plain system call wrappers). It has no guard page, so
/// those frames must stay small. Nothing in the child resolves a symbol
/// lazily either: Rust links with full RELRO (`-z now`), so the dynamic
/// linker, which takes locks, never runs there.
const STACK_WORDS: usize = 64 * 1024 / size_of::<u128>();

thread_local! {
    /// One stack per thread, made at its first start. `u128` keeps the top
    /// 16-byte aligned, as the x86-64 and AArch64 ABIs ask.
    static STACK: RefCell<Vec<u128>> = const { RefCell::new(Vec::new()) };
}

/// `/proc/self/status`, kept open: its `SigCgt` line lists the signals
/// baton catches.
static STATUS: KeptOpen = KeptOpen::new("/proc/self/status");

/// Starts `exec` in its own process group, with an empty signal mask,
/// every caught signal and SIGPIPE and SIGCHLD at their defaults, and
/// other ignored signals still ignored (as `posix_spawn` leaves them; a
/// signal caught when the caught set was last read and ignored since is
/// put back to its default). glibc's own two signals keep the handlers
/// glibc gave them: its `sigaction` refuses to change them, and nothing
/// sends them to a child.
///
/// # Errors
///
/// `clone` failing (no memory, too many processes), or the child's
/// `setpgid`, `dup2`, `chdir` or `execve` failing (a missing program or
/// directory, …): the child has then exited and been reaped.
pub(crate) fn start(exec: &Exec<'_>) -> io::Result<Child> {
    debug_assert!(exec.argv.last().is_some_and(|last| last.is_null()));
    debug_assert!(exec.envp.last().is_some_and(|last| last.is_null()));
    debug_assert!(exec.stdio.iter().all(|fd| *fd > 2));
    // SIGPIPE is at its default in the child whatever baton does with it:
    // Rust ignores it, and an ignored signal would stay ignored over exec.
    // So is SIGCHLD: tokio installs its handler at its own first process
    // (a `git` command), unannounced, and no child should start with
    // SIGCHLD ignored (its own children would then vanish unreaped).
    let always = signal_bit(libc::SIGPIPE) | signal_bit(libc::SIGCHLD);
    let (reset, ask_first) = match caught_signals() {
        Some(caught) => (caught | always, false),
        None => (u64::MAX, true),
    };
    let mut args = sys::ChildArgs {
        exec,
        reset,
        ask_first,
        join: None,
        join_error: AtomicI32::new(0),
        error: AtomicI32::new(0),
    };
    let (pid, pidfd, cgroup_refused) = STACK.with(|stack| {
        let mut stack = stack.borrow_mut();
        if stack.is_empty() {
            stack.resize(STACK_WORDS, 0);
        }
        clone(&mut args, &mut stack)
    })?;
    let error = args.error.load(Ordering::Acquire);
    if error != 0 {
        // The child has exited (a vfork parent resumes at the child's exec
        // or exit): reap it.
        reap(pid);
        drop(pidfd);
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(Child {
        pid: u32::try_from(pid).map_err(|_| io::Error::other("clone returned a negative pid"))?,
        pidfd,
        cgroup_refused,
    })
}

/// Set once `clone3` into a cgroup was refused as unknown or forbidden (a
/// kernel before 5.7, a sandbox, an architecture `sys.rs` has no start
/// into a cgroup for): later children move themselves in.
pub(crate) static NO_CLONE3: AtomicBool = AtomicBool::new(false);

/// Starts the child, in the cgroup `args` names if any: by `clone3` into
/// it, else by a plain clone whose child moves itself in before its
/// `execve` (the move takes a lock every fork on the machine takes too,
/// so it is the second choice). Returns the pid, the pidfd and why the
/// child could not be put in its cgroup, if it could not: it then runs
/// without.
fn clone(
    args: &mut sys::ChildArgs<'_>,
    stack: &mut [u128],
) -> io::Result<(c_int, Option<OwnedFd>, Option<io::Error>)> {
    let Some(dir) = args.exec.cgroup else {
        let (pid, pidfd) = sys::clone_child(args, stack, None)?;
        return Ok((pid, pidfd, None));
    };
    if !NO_CLONE3.load(Ordering::Relaxed) {
        match sys::clone_child(args, stack, Some(dir.as_raw_fd())) {
            Ok((pid, pidfd)) => return Ok((pid, pidfd, None)),
            // Out of processes or memory: so would the plain clone be.
            Err(error) if matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::ENOMEM)) => {
                return Err(error);
            }
            Err(error) => {
                if matches!(error.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
                    NO_CLONE3.store(true, Ordering::Relaxed);
                }
            }
        }
    }
    let procs = rustix::fs::openat(
        dir,
        "cgroup.procs",
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    );
    let procs = match procs {
        Ok(procs) => procs,
        Err(error) => {
            let (pid, pidfd) = sys::clone_child(args, stack, None)?;
            return Ok((pid, pidfd, Some(error.into())));
        }
    };
    args.join = Some(procs.as_raw_fd());
    let (pid, pidfd) = sys::clone_child(args, stack, None)?;
    let moved = args.join_error.load(Ordering::Acquire);
    Ok((
        pid,
        pidfd,
        (moved != 0).then(|| io::Error::from_raw_os_error(moved)),
    ))
}

/// Says that this process installed or removed a signal handler, so the
/// next start reads the caught signals afresh. Whatever installs one (a
/// `tokio::signal` listener) calls this after it; builds with debug
/// assertions check at every start that it was not forgotten.
pub fn signal_handlers_changed() {
    HANDLERS_CHANGED.fetch_add(1, Ordering::Release);
}

/// Counts [`signal_handlers_changed`] calls.
static HANDLERS_CHANGED: AtomicU64 = AtomicU64::new(0);

/// The caught signals as last read, and the count of changes then.
static CAUGHT: Mutex<Option<(u64, u64)>> = Mutex::new(None);

/// The signals baton has a handler for, or `None` when they cannot be
/// read. Read from `SigCgt` in `/proc/self/status` at the first start and
/// after each [`signal_handlers_changed`]: generating that file costs about
/// as much as the 64 questions it replaces, and the handlers change a few
/// times in a process's life, at most.
fn caught_signals() -> Option<u64> {
    let changes = HANDLERS_CHANGED.load(Ordering::Acquire);
    let known = *CAUGHT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((read_at, signals)) = known
        && read_at == changes
    {
        if cfg!(debug_assertions) {
            check_nothing_forgotten(changes, signals);
        }
        return Some(signals);
    }
    let signals = read_caught_signals()?;
    *CAUGHT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((changes, signals));
    Some(signals)
}

/// Panics when a handler is installed that `signals` (read at `changes`)
/// lacks and no [`signal_handlers_changed`] followed it. Another thread may
/// be between installing one and saying so: it gets a moment first.
fn check_nothing_forgotten(changes: u64, signals: u64) {
    let Some(now) = read_caught_signals() else {
        return;
    };
    let forgotten = now & !signals & !signal_bit(libc::SIGCHLD);
    if forgotten == 0 {
        return;
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_ne!(
        HANDLERS_CHANGED.load(Ordering::Acquire),
        changes,
        "signal handlers ({forgotten:#x}) were installed without signal_handlers_changed()"
    );
}

/// `SigCgt` of `/proc/self/status`, less the signals glibc keeps for
/// itself (32 up to `SIGRTMIN`: thread cancellation and `setxid`). glibc
/// installs their handlers when it first needs them and refuses to change
/// them; they are sent only to baton's own threads, never to a child.
fn read_caught_signals() -> Option<u64> {
    // A long `Groups:` line can make the file larger than a page.
    let mut buffer = [0; 16 * 1024];
    let status = STATUS.read(&mut buffer)?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))?;
    let caught = u64::from_str_radix(line.trim(), 16).ok()?;
    let reserved = (32..libc::SIGRTMIN()).fold(0, |set, signal| set | signal_bit(signal));
    Some(caught & !reserved)
}

/// Reaps `pid`, a child that has exited.
fn reap(pid: c_int) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        while let Err(rustix::io::Errno::INTR) =
            rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
        {}
    }
}

#[cfg(test)]
mod tests {
    use tokio::signal::unix::{SignalKind, signal};

    use super::*;

    #[tokio::test]
    async fn an_announced_handler_is_among_the_signals_the_next_child_resets() {
        let before = caught_signals().expect("/proc/self/status is readable");
        let usr1 = signal_bit(libc::SIGUSR1);
        let _listener = signal(SignalKind::user_defined1()).expect("a listener");
        signal_handlers_changed();
        let after = caught_signals().expect("/proc/self/status is readable");
        assert_eq!(after & usr1, usr1, "{after:#x}");
        assert_eq!(after & before, before, "{before:#x} then {after:#x}");
    }
}
