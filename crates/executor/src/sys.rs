//! Every line of baton that Rust's checks do not cover: the vfork-style
//! `clone` (or `clone3`, into a cgroup) that starts a child and the system
//! calls that child makes before its `execve` (`vfork.rs` prepares them
//! and says why a child is started this way), and the allocator settings
//! the `baton` binary sets at its start. The workspace denies `unsafe` everywhere else; each
//! function here says why its use is sound.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
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
    /// The directory of the cgroup the child starts in, if any.
    pub(crate) cgroup: Option<BorrowedFd<'a>>,
}

/// Everything the child reads, in memory it shares with the parent.
pub(crate) struct ChildArgs<'a> {
    pub(crate) exec: &'a Exec<'a>,
    /// Signals (bit n - 1 for signal n) to put back to their default.
    pub(crate) reset: u64,
    /// Whether the child must first ask whether each signal in `reset`
    /// has a handler (the caught set could not be read).
    pub(crate) ask_first: bool,
    /// A cgroup's `cgroup.procs`, opened for writing, for the child to
    /// move itself into first, where it could not start in it.
    pub(crate) join: Option<RawFd>,
    /// The errno of that move, 0 while it has not failed. The child goes
    /// on without its cgroup.
    pub(crate) join_error: AtomicI32,
    /// The errno of the step that failed, 0 while none has.
    pub(crate) error: AtomicI32,
}

/// Set once a clone with `CLONE_PIDFD` was refused.
static NO_CLONE_PIDFD: AtomicBool = AtomicBool::new(false);

/// `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)` with every signal blocked
/// around it, or `clone3` with `CLONE_INTO_CGROUP` as well when `into`
/// names a cgroup's directory: the child then runs in it from its first
/// instruction. Returns the child's pid and, when the kernel made one,
/// its pidfd.
pub(crate) fn clone_child(
    args: &ChildArgs<'_>,
    stack: &mut [u128],
    into: Option<RawFd>,
) -> io::Result<(c_int, Option<OwnedFd>)> {
    // Every signal, glibc's own two included: no handler of baton's may
    // run in the child, which shares baton's memory.
    let old = set_signal_mask(u64::MAX);
    let result = loop {
        let with_pidfd = !NO_CLONE_PIDFD.load(Ordering::Relaxed);
        let cloned = match into {
            Some(cgroup) => clone3_into(args, stack, cgroup, with_pidfd),
            None => clone_vfork(args, stack, with_pidfd),
        };
        match cloned {
            // A kernel before 5.2 ignores the flag; a sandbox may refuse
            // it as unknown or forbidden. (`clone3` came after it: its
            // refusals are the caller's.)
            Err(error)
                if into.is_none()
                    && with_pidfd
                    && error.raw_os_error().is_some_and(|code| {
                        [libc::EINVAL, libc::ENOSYS, libc::EPERM].contains(&code)
                    }) =>
            {
                NO_CLONE_PIDFD.store(true, Ordering::Relaxed);
            }
            cloned => break cloned,
        }
    };
    set_signal_mask(old);
    result
}

/// The plain start: `clone` with `CLONE_VM | CLONE_VFORK`.
#[expect(
    unsafe_code,
    reason = "the clone itself: the child runs `child_main` on `stack`, a stack of this \
              thread's that nothing else uses while the thread is suspended, and reads only \
              `args`, which outlives the call because the parent resumes only at the child's \
              exec or exit"
)]
fn clone_vfork(
    args: &ChildArgs<'_>,
    stack: &mut [u128],
    with_pidfd: bool,
) -> io::Result<(c_int, Option<OwnedFd>)> {
    let arg = std::ptr::from_ref(args).cast_mut().cast::<c_void>();
    let stack_top = stack.as_mut_ptr_range().end.cast::<c_void>();
    let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    if with_pidfd {
        flags |= libc::CLONE_PIDFD;
    }
    let mut pidfd: c_int = -1;
    // SAFETY: see the reason above. With CLONE_PIDFD the kernel writes
    // the pidfd to the parent-tid argument.
    let pid = unsafe { libc::clone(child_main, stack_top, flags, arg, &raw mut pidfd) };
    if pid == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel made this descriptor for us alone.
    let pidfd = (with_pidfd && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok((pid, pidfd))
}

/// `struct clone_args` of `clone3`, as far as `cgroup` (its second
/// version, Linux 5.7).
#[cfg(target_arch = "x86_64")]
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `clone3`'s flag that starts the child in the cgroup `CloneArgs::cgroup`.
#[cfg(target_arch = "x86_64")]
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The start in a cgroup: `clone3` with `CLONE_VM | CLONE_VFORK |
/// CLONE_INTO_CGROUP`. Unlike `clone`, `clone3` has no C wrapper that
/// calls a function on the new stack, hence the few instructions below.
/// Elsewhere the child moves itself into its cgroup (`vfork.rs`).
#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "the clone itself, as in `clone_vfork`: the kernel starts the child on `stack` \
              (this thread's, unused while the thread is suspended), where the instructions \
              below call `child_main(args)`, which execs or exits; should it return, the \
              child exits with its result"
)]
fn clone3_into(
    args: &ChildArgs<'_>,
    stack: &mut [u128],
    cgroup: RawFd,
    with_pidfd: bool,
) -> io::Result<(c_int, Option<OwnedFd>)> {
    let mut pidfd: c_int = -1;
    let mut flags = (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP;
    if with_pidfd {
        flags |= libc::CLONE_PIDFD as u64;
    }
    let clone_args = CloneArgs {
        flags,
        pidfd: (&raw mut pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack.as_mut_ptr() as u64,
        stack_size: size_of_val(stack) as u64,
        cgroup: u64::try_from(cgroup).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?,
        ..CloneArgs::default()
    };
    let arg = std::ptr::from_ref(args).cast_mut().cast::<c_void>();
    let main: extern "C" fn(*mut c_void) -> c_int = child_main;
    let result: i64;
    // SAFETY: see the reason above. The parent's registers other than
    // rax, rcx and r11 are as before the system call; the child never
    // comes back here. Its stack's top is 16-byte aligned (`u128`s), as a
    // call needs.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 => result,
            in("rdi") &raw const clone_args,
            in("rsi") size_of::<CloneArgs>(),
            in("r12") main,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if result < 0 {
        let code = i32::try_from(-result).unwrap_or(libc::EINVAL);
        return Err(io::Error::from_raw_os_error(code));
    }
    let pid = c_int::try_from(result).map_err(|_| io::Error::other("clone3 returned no pid"))?;
    // SAFETY: the kernel made this descriptor for us alone.
    let pidfd = (with_pidfd && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok((pid, pidfd))
}

/// Other architectures than x86-64 have no such instructions here: the
/// start is refused, and the child moves itself in instead (`vfork.rs`).
#[cfg(not(target_arch = "x86_64"))]
fn clone3_into(
    _: &ChildArgs<'_>,
    _: &mut [u128],
    _: RawFd,
    _: bool,
) -> io::Result<(c_int, Option<OwnedFd>)> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
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
/// system call wrappers, allocates nothing and cannot panic. Asked to, it
/// first moves itself into its cgroup: a failed move is reported and the
/// child goes on without.
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
    // SAFETY: a write of one byte from a static buffer.
    if let Some(procs) = args.join
        && unsafe { libc::write(procs, b"0".as_ptr().cast(), 1) } != 1
    {
        // SAFETY: errno of the write that just failed.
        let error = unsafe { *libc::__errno_location() };
        args.join_error.store(
            if error == 0 { libc::EIO } else { error },
            Ordering::Release,
        );
    }
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

/// Signal `signal`'s bit in a set: bit n - 1 for signal n.
pub(crate) fn signal_bit(signal: c_int) -> u64 {
    1 << (signal - 1)
}
