//! The start itself: a vfork-style `clone` that runs a few system calls of
//! baton's own in the child and `execve`s.
//!
//! This is what glibc's `posix_spawn` does, less three costs it pays at
//! every child, which a run of many short stages pays for each stage:
//!
//! * it maps a fresh stack for the child and unmaps it after. In a process
//!   with threads on other CPUs, every unmap interrupts those CPUs to flush
//!   their TLBs: about 12 µs a child in a profile of a 1 000-stage chain.
//!   Here each thread keeps one stack and lends it to its children: a
//!   vfork child runs only while the thread that started it is suspended,
//!   so no two children share it.
//! * in the child it asks for the disposition of all 64 signals and resets
//!   those with a handler, while the parent waits: 64 system calls, about
//!   40 µs a child on the same profile. Here the child resets only the
//!   signals `/proc/self/status` lists as caught, read at the first start
//!   and again only after [`signal_handlers_changed`].
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

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use crate::group::KeptOpen;

/// What the child `execve`s, and with which standard descriptors.
pub(crate) struct Exec<'a> {
    /// The program's path, already resolved.
    pub(crate) program: &'a CStr,
    /// NULL-terminated argv.
    pub(crate) argv: &'a [*const c_char],
    /// NULL-terminated envp.
    pub(crate) envp: &'a [*const c_char],
    /// The child's working directory.
    pub(crate) cwd: &'a CStr,
    /// Duplicated onto 0, 1 and 2. Each is 3 or above: `dup2` of a
    /// descriptor onto itself would leave it close-on-exec.
    pub(crate) stdio: [RawFd; 3],
}

/// A started child.
pub(crate) struct Child {
    pub(crate) pid: u32,
    /// Its pidfd, unless the kernel predates `CLONE_PIDFD` (Linux 5.2).
    pub(crate) pidfd: Option<OwnedFd>,
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

/// Set once a clone with `CLONE_PIDFD` was refused.
static NO_CLONE_PIDFD: AtomicBool = AtomicBool::new(false);

/// `/proc/self/status`, kept open: its `SigCgt` line lists the signals
/// baton catches.
static STATUS: KeptOpen = KeptOpen::new("/proc/self/status");

/// Everything the child reads, in memory it shares with the parent.
struct ChildArgs<'a> {
    exec: &'a Exec<'a>,
    /// Signals (bit n - 1 for signal n) to put back to their default.
    reset: u64,
    /// Whether the child must first ask whether each signal in `reset`
    /// has a handler (the caught set could not be read).
    ask_first: bool,
    /// The errno of the step that failed, 0 while none has.
    error: AtomicI32,
}

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
    let args = ChildArgs {
        exec,
        reset,
        ask_first,
        error: AtomicI32::new(0),
    };
    let (pid, pidfd) = STACK.with(|stack| {
        let mut stack = stack.borrow_mut();
        if stack.is_empty() {
            stack.resize(STACK_WORDS, 0);
        }
        clone_child(&args, stack.as_mut_ptr_range().end.cast())
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
    })
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
/// as much as the 64 questions it replaces (15–25 µs in a profile of
/// 1 000 stages side by side), and the handlers change a few times in a
/// process's life, at most.
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

fn signal_bit(signal: c_int) -> u64 {
    1 << (signal - 1)
}

/// `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)` with every signal blocked
/// around it; returns the pid and, when the kernel made one, the pidfd.
#[expect(
    unsafe_code,
    reason = "the clone itself: the child runs `child_main` on `stack_top`, a stack of this \
              thread's that nothing else uses while the thread is suspended, and reads only \
              `args`, which outlives the call because the parent resumes only at the child's \
              exec or exit"
)]
fn clone_child(
    args: &ChildArgs<'_>,
    stack_top: *mut c_void,
) -> io::Result<(c_int, Option<OwnedFd>)> {
    // Every signal, glibc's own two included: no handler of baton's may
    // run in the child, which shares baton's memory.
    let old = set_signal_mask(u64::MAX);
    let arg = std::ptr::from_ref(args).cast_mut().cast::<c_void>();
    let result;
    loop {
        let with_pidfd = !NO_CLONE_PIDFD.load(Ordering::Relaxed);
        let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
        if with_pidfd {
            flags |= libc::CLONE_PIDFD;
        }
        let mut pidfd: c_int = -1;
        // SAFETY: see the reason above. With CLONE_PIDFD the kernel writes
        // the pidfd to the parent-tid argument.
        let pid = unsafe { libc::clone(child_main, stack_top, flags, arg, &raw mut pidfd) };
        if pid == -1 {
            let error = io::Error::last_os_error();
            // A kernel before 5.2 ignores the flag; a sandbox may refuse
            // it as unknown or forbidden.
            let refused = [libc::EINVAL, libc::ENOSYS, libc::EPERM];
            if with_pidfd
                && error
                    .raw_os_error()
                    .is_some_and(|code| refused.contains(&code))
            {
                NO_CLONE_PIDFD.store(true, Ordering::Relaxed);
                continue;
            }
            result = Err(error);
        } else {
            // SAFETY: the kernel made this descriptor for us alone.
            let pidfd = (with_pidfd && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
            result = Ok((pid, pidfd));
        }
        break;
    }
    set_signal_mask(old);
    result
}

/// Sets the calling thread's signal mask to `mask` (bit n - 1 for signal
/// n) and returns the one it had. The raw system call, not glibc's
/// wrapper: that one never blocks glibc's own two signals, and it is safe
/// to call in the vfork child.
#[expect(
    unsafe_code,
    reason = "rt_sigprocmask on two live 8-byte sets, the kernel's sigset size"
)]
fn set_signal_mask(mask: u64) -> u64 {
    let mut old: u64 = 0;
    // SAFETY: both pointers are valid for the call.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const mask,
            &raw mut old,
            size_of::<u64>(),
        );
    }
    old
}

/// The child, between the clone and the `execve`. It runs on the borrowed
/// stack with baton's memory and every signal blocked, so it calls only
/// system call wrappers, allocates nothing and cannot panic.
#[expect(
    unsafe_code,
    reason = "system calls in the vfork child on pointers `start` prepared: C strings and \
              NULL-terminated arrays that live until the parent resumes"
)]
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `ChildArgs` the parent passed, alive while the
    // parent is suspended.
    let args = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    let exec = args.exec;
    let fail = || -> c_int {
        // SAFETY: errno of the call that just failed.
        let error = unsafe { *libc::__errno_location() };
        args.error.store(
            if error == 0 { libc::EIO } else { error },
            Ordering::Release,
        );
        // SAFETY: ends the child without running anything of baton's.
        unsafe { libc::_exit(127) }
    };
    // SAFETY: each call gets valid pointers or constants; see above.
    unsafe {
        for signal in 1..=64 {
            if args.reset & signal_bit(signal) == 0
                || signal == libc::SIGKILL
                || signal == libc::SIGSTOP
            {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            if args.ask_first && signal != libc::SIGPIPE && signal != libc::SIGCHLD {
                // glibc refuses its own two signals; they then stay as set.
                if libc::sigaction(signal, std::ptr::null(), &raw mut action) != 0 {
                    continue;
                }
                if action.sa_sigaction == libc::SIG_DFL || action.sa_sigaction == libc::SIG_IGN {
                    continue;
                }
                action = std::mem::zeroed();
            }
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &raw const action, std::ptr::null_mut());
        }
        if libc::setpgid(0, 0) != 0 {
            return fail();
        }
        for (target, source) in (0..).zip(exec.stdio) {
            if libc::dup2(source, target) != target {
                return fail();
            }
        }
        if libc::chdir(exec.cwd.as_ptr()) != 0 {
            return fail();
        }
        set_signal_mask(0);
        libc::execve(
            exec.program.as_ptr(),
            exec.argv.as_ptr(),
            exec.envp.as_ptr(),
        );
    }
    fail()
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
