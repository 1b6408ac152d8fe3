//! Preparing a stage's process and its pipes, starting it, and reaping it.
//!
//! std's `Command` is correct but does work per child that a run of many
//! short stages pays for every time: every stage sets a few variables of
//! its own (`BATON_RUN_ID`, the marker, …), and a command with any
//! variable set copies baton's whole environment into a map and a fresh
//! `envp` at each spawn, on the path from one stage's exit to the next
//! one's start (bench/README.md has what that cost). Here baton's own
//! environment becomes C strings once ([`BaseEnv`]), and a spawn only adds
//! its own variables.
//!
//! The start itself is in `vfork.rs`: a vfork-style clone, as glibc's
//! `posix_spawn` (the call std makes) does, that reports a failed `exec`
//! as an error here rather than as a dead child. The child gets exactly
//! what std gave it: its own process group, an empty signal mask, `SIGPIPE`
//! back to its default (Rust ignores it in baton), its working directory,
//! and stdin, stdout and stderr as the only descriptors it inherits (every
//! descriptor baton opens is close-on-exec).
//!
//! baton never changes its own environment after it starts, so a snapshot
//! taken at the first spawn is the environment std would have read.

use std::ffi::{CString, OsStr, OsString, c_char};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::OnceLock;

use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{Pid, WaitOptions, waitpid};

use crate::{sys, vfork};

/// What a child reads on stdin.
pub(crate) enum ChildStdin<'a> {
    /// This descriptor (duplicated onto 0).
    From(BorrowedFd<'a>),
    /// A new pipe, whose write end [`Spawned::stdin`] holds.
    Piped,
}

/// Everything [`spawn`] needs. Variables are applied in order, later ones
/// winning: baton's environment (unless `clear_env`), then `overrides`.
pub(crate) struct Request<'a> {
    /// The program's path, already resolved.
    pub(crate) program: &'a Path,
    /// argv\[0\], then the arguments.
    pub(crate) argv: Vec<&'a OsStr>,
    /// The child's working directory.
    pub(crate) cwd: &'a Path,
    /// Start from an empty environment rather than baton's.
    pub(crate) clear_env: bool,
    /// Variables to set, in order; a later name wins over an earlier one.
    pub(crate) overrides: Vec<(&'a OsStr, &'a OsStr)>,
    /// What the child reads on stdin.
    pub(crate) stdin: ChildStdin<'a>,
    /// The directory of the cgroup the child starts in, if any (see
    /// `cgroup.rs`).
    pub(crate) cgroup: Option<BorrowedFd<'a>>,
}

/// A started child: its leader and baton's ends of its pipes.
pub(crate) struct Spawned {
    pub(crate) leader: Leader,
    /// The leader's pidfd, when the kernel made one at the start.
    pub(crate) pidfd: Option<OwnedFd>,
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    /// Why the child could not start in its cgroup, if it could not: it
    /// runs without.
    pub(crate) cgroup_refused: Option<io::Error>,
}

/// A child of this process, until it is reaped.
#[derive(Debug)]
pub(crate) struct Leader {
    pid: u32,
    status: Option<ExitStatus>,
}

impl Leader {
    /// The child's pid.
    pub(crate) fn id(&self) -> u32 {
        self.pid
    }

    /// Reaps the child if it has exited, without blocking.
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.wait_with(WaitOptions::NOHANG)
    }

    /// Waits for the child to exit and reaps it.
    pub(crate) fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.wait_with(WaitOptions::empty())? {
                return Ok(status);
            }
        }
    }

    fn wait_with(&mut self, options: WaitOptions) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let pid = i32::try_from(self.pid)
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| io::Error::other("not a pid"))?;
        loop {
            match waitpid(Some(pid), options) {
                Ok(Some((_, status))) => {
                    let status = ExitStatus::from_raw(status.as_raw());
                    self.status = Some(status);
                    return Ok(Some(status));
                }
                Ok(None) => return Ok(None),
                Err(rustix::io::Errno::INTR) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
}

/// Starts `request`'s program.
///
/// # Errors
///
/// A string with a NUL byte, a pipe that cannot be made, or the error
/// the start returns (the program missing or not executable, the
/// working directory missing, …).
pub(crate) fn spawn(request: &Request<'_>) -> io::Result<Spawned> {
    let program = c_string(request.program.as_os_str())?;
    let cwd = c_string(request.cwd.as_os_str())?;
    let argv = request
        .argv
        .iter()
        .map(|arg| c_string(arg))
        .collect::<io::Result<Vec<CString>>>()?;
    let owned_env = env_overrides(&request.overrides)?;
    let base = if request.clear_env {
        &[][..]
    } else {
        &BaseEnv::get().entries[..]
    };
    let envp = envp(base, &owned_env);
    let argv_ptrs = pointers(argv.iter().map(|arg| arg.as_ptr()));

    // The child's ends are 3 or above: `dup2` of a descriptor onto itself
    // would leave it close-on-exec, and a low source could be overwritten
    // by an earlier duplication (baton started with a standard stream
    // closed hands 0, 1 or 2 out to its own files).
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let stdin_pipe = match request.stdin {
        ChildStdin::Piped => Some(pipe()?),
        ChildStdin::From(_) => None,
    };
    let low_stdin;
    let stdin_source = match (&request.stdin, &stdin_pipe) {
        (ChildStdin::From(fd), _) if fd.as_raw_fd() > 2 => fd.as_raw_fd(),
        (ChildStdin::From(fd), _) => {
            low_stdin = rustix::io::fcntl_dupfd_cloexec(fd, 3)?;
            low_stdin.as_raw_fd()
        }
        (ChildStdin::Piped, Some((read, _))) => read.as_raw_fd(),
        (ChildStdin::Piped, None) => unreachable!("a piped stdin has its pipe"),
    };

    let child = vfork::start(&sys::Exec {
        program: &program,
        argv: &argv_ptrs,
        envp: &envp,
        cwd: &cwd,
        stdio: [
            stdin_source,
            stdout_write.as_raw_fd(),
            stderr_write.as_raw_fd(),
        ],
        cgroup: request.cgroup,
    })?;
    Ok(Spawned {
        leader: Leader {
            pid: child.pid,
            status: None,
        },
        pidfd: child.pidfd,
        stdin: stdin_pipe.map(|(_, write)| write),
        stdout: stdout_read,
        stderr: stderr_read,
        cgroup_refused: child.cgroup_refused,
    })
}

/// A close-on-exec pipe whose ends are both 3 or above.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
    Ok((above_standard(read)?, above_standard(write)?))
}

/// `fd` itself when it is 3 or above, else a close-on-exec duplicate that
/// is (and `fd` is closed).
fn above_standard(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} contains a NUL byte", text.to_string_lossy()),
        )
    })
}

/// baton's environment as `NAME=value` C strings, read once.
struct BaseEnv {
    entries: Vec<(OsString, CString)>,
}

impl BaseEnv {
    fn get() -> &'static BaseEnv {
        static BASE: OnceLock<BaseEnv> = OnceLock::new();
        BASE.get_or_init(|| BaseEnv {
            entries: crate::environment::all()
                .filter_map(|(name, value)| {
                    let entry = assignment(&name, &value)?;
                    Some((name, entry))
                })
                .collect(),
        })
    }
}

/// `NAME=value`; `None` when either holds a NUL byte (no C string can).
fn assignment(name: &OsStr, value: &OsStr) -> Option<CString> {
    let mut bytes = Vec::with_capacity(name.len() + value.len() + 1);
    bytes.extend_from_slice(name.as_bytes());
    bytes.push(b'=');
    bytes.extend_from_slice(value.as_bytes());
    CString::new(bytes).ok()
}

/// The overrides as `NAME=value`, each name once (its last value).
fn env_overrides<'a>(
    overrides: &[(&'a OsStr, &'a OsStr)],
) -> io::Result<Vec<(&'a OsStr, CString)>> {
    let mut entries: Vec<(&OsStr, CString)> = Vec::with_capacity(overrides.len());
    for (name, value) in overrides {
        if name.is_empty() || name.as_bytes().contains(&b'=') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{:?} is not a variable name", name.to_string_lossy()),
            ));
        }
        let entry = assignment(name, value).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the variable {} contains a NUL byte",
                    name.to_string_lossy()
                ),
            )
        })?;
        entries.retain(|(seen, _)| seen != name);
        entries.push((name, entry));
    }
    Ok(entries)
}

/// A NULL-terminated `envp`: the base entries no override names, then the
/// overrides.
fn envp(base: &[(OsString, CString)], overrides: &[(&OsStr, CString)]) -> Vec<*const c_char> {
    pointers(
        base.iter()
            .filter(|(name, _)| {
                !overrides
                    .iter()
                    .any(|(other, _)| *other == name.as_os_str())
            })
            .map(|(_, entry)| entry.as_ptr())
            .chain(overrides.iter().map(|(_, entry)| entry.as_ptr())),
    )
}

fn pointers(items: impl Iterator<Item = *const c_char>) -> Vec<*const c_char> {
    items.chain(std::iter::once(std::ptr::null())).collect()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn run(request: &Request<'_>) -> (ExitStatus, String) {
        let mut spawned = spawn(request).expect("spawns");
        let mut out = String::new();
        std::fs::File::from(spawned.stdout)
            .read_to_string(&mut out)
            .expect("reads");
        (spawned.leader.wait().expect("reaps"), out)
    }

    fn request<'a>(argv: &[&'a str], cwd: &'a Path) -> Request<'a> {
        Request {
            program: Path::new("/bin/sh"),
            argv: argv.iter().map(|arg| OsStr::new(*arg)).collect(),
            cwd,
            clear_env: false,
            overrides: Vec::new(),
            stdin: ChildStdin::Piped,
            cgroup: None,
        }
    }

    #[test]
    fn the_child_runs_in_its_directory_with_baton_s_environment_and_the_overrides() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut request = request(
            &["sh", "-c", "pwd; echo \"$PATH|$A|$B\"; exit 3"],
            dir.path(),
        );
        request.overrides = vec![
            (OsStr::new("A"), OsStr::new("first")),
            (OsStr::new("B"), OsStr::new("b")),
            (OsStr::new("A"), OsStr::new("last")),
        ];
        let (status, out) = run(&request);
        assert_eq!(status.code(), Some(3));
        let path = std::env::var("PATH").unwrap_or_default();
        let cwd = dir.path().canonicalize().expect("canonical");
        assert_eq!(out, format!("{}\n{path}|last|b\n", cwd.display()));
    }

    #[test]
    fn a_cleared_environment_holds_only_the_overrides() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut request = request(&["sh", "-c", "env | sort"], dir.path());
        request.clear_env = true;
        request.overrides = vec![(OsStr::new("ONLY"), OsStr::new("this"))];
        let (_, out) = run(&request);
        let names: Vec<&str> = out
            .lines()
            .filter_map(|line| line.split('=').next())
            .collect();
        // sh adds PWD, and may add SHLVL and `_`, to what it was given.
        assert!(names.contains(&"ONLY"), "{out}");
        assert!(
            !names.contains(&"HOME") && !names.contains(&"PATH"),
            "{out}"
        );
    }

    #[test]
    fn the_child_leads_its_own_group_with_no_signal_blocked_or_ignored() {
        let dir = tempfile::tempdir().expect("a directory");
        let request = request(
            &[
                "sh",
                "-c",
                "cut -d ' ' -f 1,5 /proc/$$/stat; exec grep -E '^Sig(Blk|Ign)' /proc/self/status",
            ],
            dir.path(),
        );
        let (_, out) = run(&request);
        let mut lines = out.lines();
        let ids: Vec<&str> = lines
            .next()
            .expect("pid and pgid")
            .split_whitespace()
            .collect();
        assert_eq!(ids[0], ids[1], "pid and pgid: {out}");
        for line in lines {
            let mask = line.split_whitespace().nth(1).expect("a mask");
            let bits = u64::from_str_radix(mask, 16).expect("hex");
            // What grep inherited through sh: SIGPIPE (bit 12) is back at
            // its default although baton ignores it.
            assert_eq!(bits & (1 << 12), 0, "{line}");
            if line.starts_with("SigBlk") {
                assert_eq!(bits, 0, "{line}");
            }
        }
    }

    #[test]
    fn stdin_is_the_pipe_and_baton_s_own_descriptors_are_not_inherited() {
        let dir = tempfile::tempdir().expect("a directory");
        // Numbered above the few the child opens itself (ls opens 3).
        let own = std::fs::File::open("/dev/null").expect("a descriptor of baton's");
        let own = rustix::io::fcntl_dupfd_cloexec(&own, 100).expect("a high descriptor");
        let request = request(&["sh", "-c", "cat; exec ls /proc/self/fd"], dir.path());
        let mut spawned = spawn(&request).expect("spawns");
        let mut stdin = std::fs::File::from(spawned.stdin.take().expect("a stdin pipe"));
        std::io::Write::write_all(&mut stdin, b"hello\n").expect("writes");
        // cat ends only if no copy of the pipe's write end is left open,
        // in baton or in the child.
        drop(stdin);
        let mut out = String::new();
        std::fs::File::from(spawned.stdout)
            .read_to_string(&mut out)
            .expect("reads");
        assert!(spawned.leader.wait().expect("reaps").success());
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("hello"));
        let mut fds: Vec<i32> = lines.filter_map(|fd| fd.parse().ok()).collect();
        fds.sort_unstable();
        assert!(fds.starts_with(&[0, 1, 2]), "{fds:?}");
        assert!(!fds.contains(&own.as_raw_fd()), "{fds:?}");
    }

    #[test]
    fn a_missing_program_or_directory_is_an_error_not_a_dead_child() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut missing = request(&["nope"], dir.path());
        missing.program = Path::new("/nonexistent/program");
        let error = spawn(&missing).err().expect("an error");
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        let gone = dir.path().join("gone");
        let request = request(&["sh", "-c", "true"], &gone);
        let error = spawn(&request).err().expect("an error");
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn the_child_starts_in_the_cgroup_it_is_given() {
        assert_starts_in_its_cgroup();
    }

    /// Where `clone3` is refused (a kernel before 5.7, a sandbox, another
    /// architecture than x86-64), the child moves itself in.
    #[test]
    fn where_clone3_is_refused_the_child_moves_into_its_cgroup() {
        crate::vfork::NO_CLONE3.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_starts_in_its_cgroup();
    }

    /// The child's `/proc/self/cgroup` names the cgroup it was given.
    fn assert_starts_in_its_cgroup() {
        let Some(cgroup) = crate::cgroup::Attempt::create() else {
            baton_test_support::needs::missing(
                baton_test_support::needs::Need::Cgroups,
                "a cgroup v2 hierarchy the test may make cgroups in",
            );
            return;
        };
        let dir = tempfile::tempdir().expect("a directory");
        let mut request = request(&["sh", "-c", "grep '^0::' /proc/self/cgroup"], dir.path());
        request.cgroup = Some(cgroup.handle());
        let mut spawned = spawn(&request).expect("spawns");
        assert!(
            spawned.cgroup_refused.is_none(),
            "{:?}",
            spawned.cgroup_refused
        );
        let mut out = String::new();
        std::fs::File::from(spawned.stdout)
            .read_to_string(&mut out)
            .expect("reads");
        assert!(spawned.leader.wait().expect("reaps").success());
        let ours = format!("/baton-{}-", std::process::id());
        assert!(out.starts_with("0::") && out.contains(&ours), "{out}");
    }

    /// A start into a cgroup that is refused (here: the descriptor is no
    /// cgroup's) starts the child without, and says why.
    #[test]
    fn a_refused_start_into_a_cgroup_starts_the_child_without() {
        let dir = tempfile::tempdir().expect("a directory");
        let not_a_cgroup = std::fs::File::open("/dev/null").expect("a descriptor");
        let mut request = request(&["sh", "-c", "echo ran"], dir.path());
        request.cgroup = Some(std::os::fd::AsFd::as_fd(&not_a_cgroup));
        let mut spawned = spawn(&request).expect("spawns");
        assert!(spawned.cgroup_refused.is_some(), "the start was refused");
        let mut out = String::new();
        std::fs::File::from(spawned.stdout)
            .read_to_string(&mut out)
            .expect("reads");
        assert!(spawned.leader.wait().expect("reaps").success());
        assert_eq!(out, "ran\n");
    }

    #[test]
    fn a_program_that_cannot_run_is_the_exec_s_own_error() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a directory");
        let script = dir.path().join("not-executable");
        std::fs::write(&script, "#!/bin/sh\n").expect("writes");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let mut not_executable = request(&["not-executable"], dir.path());
        not_executable.program = &script;
        let error = spawn(&not_executable).err().expect("an error");
        assert_eq!(error.raw_os_error(), Some(libc::EACCES));
        // A working directory that is a file.
        let error = spawn(&request(&["sh", "-c", "true"], &script))
            .err()
            .expect("an error");
        assert_eq!(error.raw_os_error(), Some(libc::ENOTDIR));
    }

    #[test]
    fn the_pidfd_from_the_start_names_the_child_and_the_mask_is_restored() {
        let blocked = || {
            std::fs::read_to_string("/proc/thread-self/status")
                .expect("status")
                .lines()
                .find(|line| line.starts_with("SigBlk:"))
                .map(str::to_owned)
        };
        let dir = tempfile::tempdir().expect("a directory");
        let before = blocked();
        let mut spawned = spawn(&request(&["sh", "-c", "exit 0"], dir.path())).expect("spawns");
        // The start blocked every signal around the clone, and put back
        // this thread's mask after it.
        assert_eq!(blocked(), before);
        let pidfd = spawned.pidfd.take().expect("a pidfd (Linux 5.2 and later)");
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd()))
            .expect("fdinfo");
        let named = info
            .lines()
            .find_map(|line| line.strip_prefix("Pid:"))
            .map(str::trim);
        assert_eq!(
            named,
            Some(spawned.leader.id().to_string().as_str()),
            "{info}"
        );
        assert!(spawned.leader.wait().expect("reaps").success());
    }

    #[test]
    fn threads_starting_children_at_once_each_get_their_own() {
        let dir = tempfile::tempdir().expect("a directory");
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let dir = dir.path();
                scope.spawn(move || {
                    for round in 0..25 {
                        let code = (thread * 25 + round) % 200;
                        let script = format!("echo {code}; exit {code}");
                        let (status, out) = run(&request(&["sh", "-c", &script], dir));
                        assert_eq!(status.code(), Some(code));
                        assert_eq!(out, format!("{code}\n"));
                    }
                });
            }
        });
    }

    #[test]
    fn a_nul_byte_is_refused_before_anything_starts() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut request = request(&["sh", "-c", "true"], dir.path());
        request.overrides = vec![(OsStr::new("X"), OsStr::new("a\0b"))];
        let error = spawn(&request).err().expect("an error");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn try_wait_reaps_once_and_remembers() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut spawned = spawn(&request(&["sh", "-c", "exit 7"], dir.path())).expect("spawns");
        let status = spawned.leader.wait().expect("reaps");
        assert_eq!(status.code(), Some(7));
        assert_eq!(spawned.leader.try_wait().expect("remembered"), Some(status));
    }
}
