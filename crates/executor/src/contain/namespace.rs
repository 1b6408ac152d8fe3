//! The helper's two processes. `run` (outside) enters new mount and PID
//! namespaces, mounts the view (an overlay for a read-only agent, read-only
//! and writable binds), starts `init` and, once init is gone, writes the
//! overlay's report. `init` is PID 1 of the new PID namespace: it runs the
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

/// The hidden subcommand of the `baton` binary that runs the helper.
pub const SUBCOMMAND: &str = "__contain";

/// What `__contain run` was asked.
#[derive(Default)]
struct Options {
    overlay: Option<PathBuf>,
    scratch: PathBuf,
    report: PathBuf,
    read_only: Vec<PathBuf>,
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
        let mut options = Options::default();
        while let Some(arg) = args.next() {
            let mut value = || {
                args.next()
                    .map(PathBuf::from)
                    .ok_or_else(|| format!("{} needs a value", arg.to_string_lossy()))
            };
            match arg.to_str() {
                Some("--overlay") => options.overlay = Some(value()?),
                Some("--scratch") => options.scratch = value()?,
                Some("--report") => options.report = value()?,
                Some("--read-only") => options.read_only.push(value()?),
                Some("--writable") => options.writable.push(value()?),
                Some("--") => {
                    options.command = args.collect();
                    break;
                }
                _ => return Err(format!("unknown argument {}", arg.to_string_lossy())),
            }
        }
        if options.command.is_empty() {
            return Err("a command after -- is required".to_owned());
        }
        if options.overlay.is_some()
            && (options.scratch.as_os_str().is_empty() || options.report.as_os_str().is_empty())
        {
            return Err("--overlay needs --scratch and --report".to_owned());
        }
        Ok(options)
    }
}

/// Sets up the view, runs init to its end, and reports what changed.
fn outer(options: &Options) -> Result<i32, String> {
    let user_namespace = enter_namespaces()?;
    // Opened before any mount changes what their names show: the binds
    // reach the real files.
    let writable = options
        .writable
        .iter()
        .map(|path| open_path(path))
        .collect::<Result<Vec<_>, _>>()?;
    let overlay = match &options.overlay {
        Some(root) => Some(mount_overlay(root, options, user_namespace)?),
        None => None,
    };
    for path in &options.read_only {
        bind_read_only(path)?;
    }
    for (path, fd) in options.writable.iter().zip(&writable) {
        bind(fd, path)?;
    }
    let signals = stop_signals();
    signals
        .thread_block()
        .map_err(|error| format!("cannot block signals: {error}"))?;
    // The working directory is looked up again, through the new mounts.
    let cwd = std::env::current_dir().map_err(|error| format!("no working directory: {error}"))?;
    let init = Command::new("/proc/self/exe")
        .args([SUBCOMMAND, "init", "--"])
        .args(&options.command)
        .current_dir(cwd)
        .spawn()
        .map_err(|error| format!("cannot start init: {error}"))?;
    let code = wait_for(pid_of(&init), &signals)?;
    if let Some((upper, lower)) = overlay {
        let changed = super::changes::list(&upper, &lower);
        let mut report = changed.join("\n");
        if !report.is_empty() {
            report.push('\n');
        }
        std::fs::write(&options.report, report)
            .map_err(|error| failed("write the report", &options.report, error))?;
    }
    Ok(code)
}

/// Mounts an overlay on `root` whose upper layer is a tmpfs on the
/// scratch directory; returns the upper layer and the tree beneath.
fn mount_overlay(
    root: &Path,
    options: &Options,
    user_namespace: bool,
) -> Result<(OwnedFd, OwnedFd), String> {
    let lower = open_directory(root)?;
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
        fd_path(&lower),
        fd_path(&upper),
        fd_path(&work)
    );
    if user_namespace {
        data.push_str(",userxattr");
    }
    mount(
        Some("overlay"),
        root,
        Some("overlay"),
        MsFlags::empty(),
        Some(data.as_str()),
    )
    .map_err(|error| failed("mount an overlay on", root, error))?;
    Ok((upper, lower))
}

/// Mounts what `fd` holds (a directory or a file) on `path`.
fn bind(fd: &OwnedFd, path: &Path) -> Result<(), String> {
    mount(
        Some(fd_path(fd).as_str()),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|error| failed("bind-mount", path, error))
}

/// Makes `path` read-only in this namespace: a bind of itself, remounted
/// read-only. The remount keeps the flags the mount beneath already has,
/// which a user namespace may not drop.
fn bind_read_only(path: &Path) -> Result<(), String> {
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|error| failed("bind-mount", path, error))?;
    let kept = nix::sys::statvfs::statvfs(path)
        .map(|stat| locked_flags(stat.flags()))
        .map_err(|error| failed("read the mount flags of", path, error))?;
    mount(
        None::<&str>,
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | kept,
        None::<&str>,
    )
    .map_err(|error| failed("make read-only", path, error))
}

/// The flags of a mount that a remount inside a user namespace must keep.
fn locked_flags(flags: nix::sys::statvfs::FsFlags) -> MsFlags {
    use nix::sys::statvfs::FsFlags;
    [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ]
    .into_iter()
    .filter(|(flag, _)| flags.contains(*flag))
    .fold(MsFlags::empty(), |all, (_, flag)| all | flag)
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
    .map_err(|error| failed("mount an overlay on", &base.join("view"), error))?;
    bind_read_only(&base.join("lower"))
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

fn open_path(path: &Path) -> Result<OwnedFd, String> {
    open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|error| failed("open", path, error))
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
