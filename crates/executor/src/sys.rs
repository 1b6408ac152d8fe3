//! Every line of baton that Rust's checks do not cover: the vfork-style
//! `clone` that starts a child and the system calls that child makes
//! before its `execve` (`vfork.rs` prepares them and says why a child is
//! started this way), and the allocator settings the `baton` binary sets
//! at its start. The workspace denies `unsafe` everywhere else; each
//! function here says why its use is sound.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// glibc gives each thread that allocates an arena of its own, and keeps
/// freed memory at the top of a heap once large blocks have come and gone
/// (its trim threshold keeps rising). A run's threads (the runtime's, each
/// SQLite connection's, the envelope writer's) then hold on to more memory
/// than the run uses; two arenas and a fixed trim threshold keep a large
/// run's peak lower at the same speed (figures in bench/README.md). The
/// `baton` binary calls this first thing, before any other thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(
    unsafe_code,
    reason = "mallopt is a foreign function; it only sets allocator parameters"
)]
pub fn limit_malloc_arenas() {
    // SAFETY: `mallopt` takes two integers and touches nothing but the
    // allocator's settings.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
    }
}

/// Other C libraries keep their own allocator settings.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_malloc_arenas() {}

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
    /// `cgroup.procs` of the cgroup the child moves itself into, if any.
    pub(crate) cgroup: Option<RawFd>,
}

/// Everything the child reads, in memory it shares with the parent.
pub(crate) struct ChildArgs<'a> {
    pub(crate) exec: &'a Exec<'a>,
    /// Signals (bit n - 1 for signal n) to put back to their default.
    pub(crate) reset: u64,
    /// Whether the child must first ask whether each signal in `reset`
    /// has a handler (the caught set could not be read).
    pub(crate) ask_first: bool,
    /// The errno of the step that failed, 0 while none has.
    pub(crate) error: AtomicI32,
    /// The errno of the move into the cgroup, 0 unless it failed: the
    /// child then goes on without.
    pub(crate) cgroup_error: AtomicI32,
}

/// Set once a clone with `CLONE_PIDFD` was refused.
static NO_CLONE_PIDFD: AtomicBool = AtomicBool::new(false);

/// `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)` with every signal blocked
/// around it; returns the pid and, when the kernel made one, the pidfd.
#[expect(
    unsafe_code,
    reason = "the clone itself: the child runs `child_main` on `stack_top`, a stack of this \
              thread's that nothing else uses while the thread is suspended, and reads only \
              `args`, which outlives the call because the parent resumes only at the child's \
              exec or exit"
)]
pub(crate) fn clone_child(
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
pub(crate) fn set_signal_mask(mask: u64) -> u64 {
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
    let errno = || {
        // SAFETY: errno of the call that just failed.
        let error = unsafe { *libc::__errno_location() };
        if error == 0 { libc::EIO } else { error }
    };
    let fail = || -> c_int {
        args.error.store(errno(), Ordering::Release);
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
        if let Some(procs) = exec.cgroup
            && libc::write(procs, b"0".as_ptr().cast(), 1) != 1
        {
            args.cgroup_error.store(errno(), Ordering::Release);
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

/// Signal `signal`'s bit in a set: bit n - 1 for signal n.
pub(crate) fn signal_bit(signal: c_int) -> u64 {
    1 << (signal - 1)
}
