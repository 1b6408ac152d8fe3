//! The helper's two processes. `run` (outside) enters new mount and PID
//! namespaces, mounts the overlay, starts `init` and, once init is gone,
//! writes the report. `init` is PID 1 of the new PID namespace: it runs the
//! agent, reaps the orphans it adopts, and exits with the agent's status,
//! upon which the kernel kills whatever else the agent left running.
//!
//! Both are short, single-threaded programs that start one child each and
//! wait for it: `std::process::Command` is all they need.
#![expect(
    clippy::disallowed_methods,
    reason = "the helper's processes start their one child with std"
)]

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::errno::Errno;
use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};

use super::SUBCOMMAND;

/// What `__contain run` was asked.
struct Options {
    root: PathBuf,
    scratch: PathBuf,
    report: PathBuf,
    writable: Vec<PathBuf>,
    command: Vec<OsString>,
}

pub(super) fn main(args: Vec<OsString>) -> Result<i32, String> {
    let mut args = args.into_iter();
    match args.next().as_deref().and_then(OsStr::to_str) {
        Some("run") => outer(&Options::parse(args)?),
        Some("init") => init(args.skip_while(|arg| arg != "--").skip(1).collect()),
        Some("check") => check().map(|()| 0),
        _ => Err(format!("usage: baton {SUBCOMMAND} run|init|check …")),
    }
}

impl Options {
    fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Options, String> {
        let mut options = Options {
            root: PathBuf::new(),
            scratch: PathBuf::new(),
            report: PathBuf::new(),
            writable: Vec::new(),
            command: Vec::new(),
        };
        while let Some(arg) = args.next() {
            let mut value = || {
                args.next()
                    .map(PathBuf::from)
                    .ok_or_else(|| format!("{} needs a value", arg.to_string_lossy()))
            };
            match arg.to_str() {
                Some("--root") => options.root = value()?,
                Some("--scratch") => options.scratch = value()?,
                Some("--report") => options.report = value()?,
                Some("--writable") => options.writable.push(value()?),
                Some("--") => {
                    options.command = args.collect();
                    break;
                }
                _ => return Err(format!("unknown argument {}", arg.to_string_lossy())),
            }
        }
        if options.command.is_empty() || options.root.as_os_str().is_empty() {
            return Err("--root and a command after -- are required".to_owned());
        }
        Ok(options)
    }
}

/// Sets up the view, runs init to its end, and reports what changed.
fn outer(options: &Options) -> Result<i32, String> {
    let user_namespace = enter_namespaces()?;
    let root = open_directory(&options.root)?;
    let writable = options
        .writable
        .iter()
        .map(|directory| open_directory(directory))
        .collect::<Result<Vec<_>, _>>()?;
    mount(
        Some("tmpfs"),
        &options.scratch,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0700"),
    )
    .map_err(|error| failed("mount a tmpfs on", &options.scratch, error))?;
    let layer = |name: &str| {
        let path = options.scratch.join(name);
        std::fs::create_dir(&path).map_err(|error| format!("cannot create {name}: {error}"))?;
        open_directory(&path)
    };
    let upper = layer("upper")?;
    let work = layer("work")?;
    let mut data = format!(
        "lowerdir={},upperdir={},workdir={}",
        fd_path(&root),
        fd_path(&upper),
        fd_path(&work)
    );
    if user_namespace {
        data.push_str(",userxattr");
    }
    mount(
        Some("overlay"),
        &options.root,
        Some("overlay"),
        MsFlags::empty(),
        Some(data.as_str()),
    )
    .map_err(|error| failed("mount an overlay on", &options.root, error))?;
    for (path, directory) in options.writable.iter().zip(&writable) {
        mount(
            Some(fd_path(directory).as_str()),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|error| failed("bind-mount", path, error))?;
    }
    let signals = stop_signals();
    signals
        .thread_block()
        .map_err(|error| format!("cannot block signals: {error}"))?;
    // The working directory is looked up again, through the overlay.
    let cwd = std::env::current_dir().map_err(|error| format!("no working directory: {error}"))?;
    let init = Command::new("/proc/self/exe")
        .args([SUBCOMMAND, "init", "--"])
        .args(&options.command)
        .current_dir(cwd)
        .spawn()
        .map_err(|error| format!("cannot start init: {error}"))?;
    let code = wait_for(pid_of(&init), &signals)?;
    let changed = super::changes::list(&upper, &root);
    let mut report = changed.join("\n");
    if !report.is_empty() {
        report.push('\n');
    }
    std::fs::write(&options.report, report)
        .map_err(|error| failed("write the report", &options.report, error))?;
    Ok(code)
}

/// PID 1 of the new namespace: runs the agent and exits with its status.
fn init(command: Vec<OsString>) -> Result<i32, String> {
    // A /proc of this namespace, so the agent's tools see its own
    // processes by the pids they know. Where the kernel refuses (a user
    // namespace under a masked /proc), the old one still serves
    // `/proc/self`, which is what programs mostly read.
    let _ = mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    );
    let signals = stop_signals();
    signals
        .thread_block()
        .map_err(|error| format!("cannot block signals: {error}"))?;
    let (program, args) = command
        .split_first()
        .ok_or_else(|| "no command to run".to_owned())?;
    let agent = Command::new(program)
        .args(args)
        .spawn()
        .map_err(|error| format!("cannot start {}: {error}", program.to_string_lossy()))?;
    wait_for(pid_of(&agent), &signals)
}

/// Enters new mount and PID namespaces, and a user namespace too where
/// that is what grants the right to mount (an unprivileged user); mounts
/// made from now on stay in this namespace. Says whether a user namespace
/// was needed.
fn enter_namespaces() -> Result<bool, String> {
    let flags = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID;
    let user_namespace = match unshare(flags) {
        Ok(()) => false,
        Err(Errno::EPERM) => {
            let (uid, gid) = (Uid::current(), Gid::current());
            unshare(flags | CloneFlags::CLONE_NEWUSER).map_err(|error| {
                format!("the kernel refuses new mount and PID namespaces to this user: {error}")
            })?;
            // The same ids inside: files the agent writes stay its user's.
            let write = |file: &str, text: String| {
                std::fs::write(file, text).map_err(|error| format!("cannot write {file}: {error}"))
            };
            write("/proc/self/setgroups", "deny".to_owned())?;
            write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
            write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
            true
        }
        Err(error) => return Err(format!("cannot create namespaces: {error}")),
    };
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|error| format!("cannot make the mounts private: {error}"))?;
    Ok(user_namespace)
}

/// Whether [`outer`] would work here: the same namespaces and an overlay
/// on a tmpfs, tried on a private `/tmp`.
fn check() -> Result<(), String> {
    let user_namespace = enter_namespaces()?;
    let base = Path::new("/tmp");
    mount(
        Some("tmpfs"),
        base,
        Some("tmpfs"),
        MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|error| failed("mount a tmpfs on", base, error))?;
    for name in ["lower", "upper", "work", "view"] {
        std::fs::create_dir(base.join(name))
            .map_err(|error| format!("cannot create /tmp/{name}: {error}"))?;
    }
    let mut data = "lowerdir=/tmp/lower,upperdir=/tmp/upper,workdir=/tmp/work".to_owned();
    if user_namespace {
        data.push_str(",userxattr");
    }
    mount(
        Some("overlay"),
        &base.join("view"),
        Some("overlay"),
        MsFlags::empty(),
        Some(data.as_str()),
    )
    .map_err(|error| failed("mount an overlay on", &base.join("view"), error))
}

/// Waits for `child`, passing on the signals that ask a process to stop,
/// and reaping every other child on the way (PID 1 adopts orphans).
/// Returns the child's exit code, 128 + the signal that killed it.
fn wait_for(child: Pid, signals: &SigSet) -> Result<i32, String> {
    loop {
        loop {
            match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => return Ok(code),
                Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                    return Ok(128 + signal as i32);
                }
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) | Err(Errno::EINTR) => {}
                Err(error) => return Err(format!("cannot wait for the agent: {error}")),
            }
        }
        match signals.wait() {
            Ok(Signal::SIGCHLD) => {}
            Ok(signal) => {
                let _ = kill(child, signal);
            }
            Err(error) => return Err(format!("cannot wait for signals: {error}")),
        }
    }
}

/// The signals the helper's processes handle: the child's end, and those
/// that ask for a stop (passed on to the child).
fn stop_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        set.add(signal);
    }
    set
}

fn pid_of(child: &std::process::Child) -> Pid {
    Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX))
}

fn open_directory(path: &Path) -> Result<OwnedFd, String> {
    open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|error| failed("open", path, error))
}

/// A path the kernel resolves to the directory `fd` holds, whatever the
/// mounts on its name since: mount options cannot quote a `,` or `:` in a
/// path, this name has none.
fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

fn failed(what: &str, path: &Path, error: impl std::fmt::Display) -> String {
    format!("cannot {what} {}: {error}", path.display())
}
