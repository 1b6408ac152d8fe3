//! Running one child process under supervision.
//!
//! [`run`] is the single way baton starts a stage's process. It:
//!
//! 1. resolves the program on the child's `PATH` before anything starts,
//!    so a bad path is an error, not a dead child (the log files are
//!    created when their first byte arrives, see `output.rs`);
//! 2. starts the child (`spawn.rs`) in a new process group with
//!    stdin from `/dev/null` unless bytes are given (a child waiting for a
//!    TTY or stdin must see end-of-file, not hang), and with an explicit
//!    environment;
//! 3. reports pid, process group and start time through `on_started`
//!    *before* waiting, so the engine can persist them and a restarted baton
//!    can kill the group ([`kill_group_if_alive`](crate::kill_group_if_alive));
//! 4. drains stdout and stderr concurrently into capped logs (see
//!    `output.rs`) while watching for exit, the wall and idle timeouts,
//!    cancellation and the output hard cap;
//! 5. on any of those, sends SIGTERM to the group, SIGKILL after the grace
//!    period, and once the leader has exited kills what is left of the
//!    group and what left it carrying the marker, found among baton's
//!    children (`group::kill_leftovers`: baton adopts orphans), and,
//!    where the attempt has a cgroup of its own (`cgroup.rs`), everything
//!    in it, so no background descendant outlives its stage;
//! 6. waits for the pipe readers for at most [`PIPE_DRAIN_TIMEOUT`]: a
//!    descendant that escaped the group can hold the pipes open forever,
//!    and the timeout must bound the whole run.
//!
//! **Zombie rule.** The leader is detected as exited with
//! `waitid(WEXITED | WNOWAIT)` when its pidfd turns readable (see
//! `exit_watch.rs`), which leaves it a zombie. A zombie keeps
//! its pid, and so the group's id, reserved; the group is signalled only in
//! that state or while the leader runs, and the leader is reaped last.
//! Signalling a group after reaping its leader could hit an unrelated group
//! that reused the number.
//!
//! **Cancellation.** Dropping the future returned by [`run`] SIGKILLs the
//! group and the attempt's cgroup (without one, the processes carrying the
//! marker), and a thread of the blocking pool waits for the leader to
//! exit, kills what is left and reaps it.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cgroup;
use crate::error::{Error, Result};
use crate::exit_watch::ExitWatch;
use crate::group::{self, signal_group};
use crate::output::{self, Activity, StreamStats, Tail};
use crate::program::find_program_for_start;
use crate::spawn::{self, Leader, Spawned};
use crate::spawn_clock::SpawnClock;

/// How long [`run`] waits for stdout and stderr to reach end-of-file after
/// the process group is dead. Only a descendant that left the group (and
/// carries no marker) can keep a pipe open that long; its output is then
/// abandoned.
pub const PIPE_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// How much of the end of stderr [`Outcome::stderr_tail`] keeps.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// What the child reads on stdin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Stdin {
    /// `/dev/null`: reads see end-of-file at once.
    #[default]
    Null,
    /// These bytes, then end-of-file. A child that exits without reading
    /// them is not an error.
    Bytes(Vec<u8>),
}

/// Everything needed to start and supervise one process.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The program (argv\[0\]). A name without `/` is looked up in the
    /// child's `PATH` (its explicit `env` entry, else baton's own); a name
    /// with `/` is a path relative to `cwd`.
    pub program: String,
    /// Arguments after argv\[0\].
    pub args: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Variables set explicitly; they win over `env_passthrough`.
    pub env: Vec<(String, String)>,
    /// Names copied from baton's own environment when set there.
    pub env_passthrough: Vec<String>,
    /// Start from an empty environment (agents), or inherit baton's (shell
    /// stages).
    pub clear_env: bool,
    /// What the child reads on stdin.
    pub stdin: Stdin,
    /// Log file for stdout; created or truncated, parent directories
    /// created.
    pub stdout_log: PathBuf,
    /// Log file for stderr; created or truncated, parent directories
    /// created.
    pub stderr_log: PathBuf,
    /// At most this many bytes are written to each log file. The rest is
    /// counted and dropped; the process keeps running and the pipes are
    /// always drained.
    pub log_cap_bytes: u64,
    /// When stdout and stderr together pass this many bytes, the group is
    /// killed with [`KillReason::OutputFlood`].
    pub kill_after_bytes: Option<u64>,
    /// Kill the group this long after the start.
    pub wall_timeout: Option<Duration>,
    /// Kill the group after this long without a byte on stdout or stderr.
    pub idle_timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL to the group.
    pub kill_grace: Duration,
    /// A `(name, value)` environment variable set on the child (after all
    /// others) and inherited by its descendants. When set, descendants that
    /// left the process group are found in `/proc` by it and killed at the
    /// end of the run. The value should be unique per attempt.
    pub marker: Option<(String, String)>,
    /// Run the program through this helper, contained (read-only agents;
    /// see [`crate::contain`]).
    pub contain: Option<Contained>,
}

/// The helper that contains a process, and how.
#[derive(Debug, Clone)]
pub struct Contained {
    /// The `baton` binary, which runs the helper.
    pub helper: PathBuf,
    /// What the process may change.
    pub containment: crate::contain::Containment,
}

/// Identity of a started child, reported before [`run`] waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Started {
    /// The child's pid.
    pub pid: u32,
    /// Its process group (equal to `pid`: the child leads a new group).
    pub pgid: u32,
    /// Its start time in clock ticks since boot (`/proc/<pid>/stat` field
    /// 22). Together with `pid` it identifies the process even after the
    /// pid has been reused.
    pub start_time: u64,
}

/// Why baton killed a process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KillReason {
    /// [`ProcessSpec::wall_timeout`] elapsed.
    WallTimeout,
    /// No output for [`ProcessSpec::idle_timeout`].
    IdleTimeout,
    /// Output passed [`ProcessSpec::kill_after_bytes`].
    OutputFlood,
    /// The cancel signal was raised.
    Cancelled,
}

impl fmt::Display for KillReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            KillReason::WallTimeout => "wall-clock timeout",
            KillReason::IdleTimeout => "idle timeout (no output)",
            KillReason::OutputFlood => "output limit exceeded",
            KillReason::Cancelled => "cancelled",
        })
    }
}

/// How a supervised process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The exit code, when the process exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Set when baton killed the group, with the reason.
    pub killed: Option<KillReason>,
    /// Bytes the child wrote to stdout (all of them, not only the logged
    /// ones).
    pub stdout_bytes: u64,
    /// Bytes the child wrote to stderr.
    pub stderr_bytes: u64,
    /// Whether the stdout log misses bytes (cap reached, write failure, or
    /// the reader abandoned).
    pub stdout_truncated: bool,
    /// Whether the stderr log misses bytes.
    pub stderr_truncated: bool,
    /// From the start to the leader's exit.
    pub elapsed: Duration,
    /// The last [`STDERR_TAIL_BYTES`] of stderr, lossy UTF-8, for error
    /// messages.
    pub stderr_tail: String,
}

impl Outcome {
    /// Exit code 0 and not killed.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && self.killed.is_none()
    }
}

/// Starts `spec` and supervises it to the end.
///
/// `on_started` is called once, right after the child starts and before any
/// waiting, with its pid, process group and start time. `cancel` kills the
/// group with [`KillReason::Cancelled`] as soon as it holds `true`
/// (including when it already does); a dropped sender means "never
/// cancelled".
///
/// # Errors
///
/// When the program is not found, the child cannot be started or its start
/// time cannot be read (the child is killed then). Everything that happens
/// after a successful start, including timeouts, signals and a log file
/// that could not be written (marked truncated), is reported in the
/// [`Outcome`].
pub async fn run(
    mut spec: ProcessSpec,
    mut cancel: watch::Receiver<bool>,
    on_started: impl FnOnce(&Started),
) -> Result<Outcome> {
    let program_path = resolve(&spec)?;
    let stdout_log = spec.stdout_log.clone();
    let stderr_log = spec.stderr_log.clone();
    // Before the first child: what it leaves behind must come back here.
    group::adopt_orphans();
    let origin = Instant::now();
    let mut cgroup = cgroup::Attempt::create();
    let clock = SpawnClock::before_spawn();
    let spawned = start(&spec, &program_path, cgroup.as_ref()).map_err(|source| Error::Spawn {
        program: spec.program.clone(),
        source,
    })?;
    let clocked_start = clock.start_time();
    if let Some(error) = &spawned.cgroup_refused {
        cgroup::refused(error);
        cgroup = None;
    }
    let pid = spawned.leader.id();
    group::register_live(pid);
    // From here on the guard owns the leader: it kills the group and reaps
    // the leader if this function returns early or is dropped.
    let mut guard = GroupGuard {
        pgid: pid,
        leader: Some(spawned.leader),
        marker: spec.marker.clone(),
        cgroup,
    };
    let spawn_error = |source| Error::Spawn {
        program: spec.program.clone(),
        source,
    };
    let stdin = spawned
        .stdin
        .map(|fd| ChildStdin::from_std(std::process::ChildStdin::from(fd)))
        .transpose()
        .map_err(spawn_error)?;
    let stdout = ChildStdout::from_std(std::process::ChildStdout::from(spawned.stdout))
        .map_err(spawn_error)?;
    let stderr = ChildStderr::from_std(std::process::ChildStderr::from(spawned.stderr))
        .map_err(spawn_error)?;
    let mut exit = ExitWatch::new(pid, spawned.pidfd).map_err(spawn_error)?;
    let start_time = clocked_start
        .or_else(|| group::process_start_time(pid))
        .ok_or(Error::StartTime { pid })?;
    on_started(&Started {
        pid,
        pgid: pid,
        start_time,
    });

    let stdin_writer = match (std::mem::take(&mut spec.stdin), stdin) {
        (Stdin::Bytes(bytes), Some(mut pipe)) => {
            Some(AbortOnDrop(tokio::spawn(async move {
                // A child that exits without reading gives EPIPE; that is
                // its business, not an error.
                let _ = pipe.write_all(&bytes).await;
                let _ = pipe.shutdown().await;
            })))
        }
        _ => None,
    };

    let activity = Arc::new(Activity::new(origin, spec.kill_after_bytes));
    let stdout_stats = Arc::new(StreamStats::default());
    let stderr_stats = Arc::new(StreamStats::default());
    let stderr_tail = Arc::new(Mutex::new(Tail::new(STDERR_TAIL_BYTES)));
    let redactor = crate::redact::Redactor::for_variables(&spec.env);
    let drain = |pipe, path, stats: &Arc<StreamStats>, tail| {
        let log = output::Log::new(path, spec.log_cap_bytes, Arc::clone(stats), tail);
        let lines = crate::redact::Lines::new(Arc::clone(&redactor));
        AbortOnDrop(tokio::spawn(output::drain(
            pipe,
            log,
            Arc::clone(&activity),
            lines,
        )))
    };
    let mut stdout_reader = drain(Box::new(stdout) as Pipe, stdout_log, &stdout_stats, None);
    let tail = Some(Arc::clone(&stderr_tail));
    let mut stderr_reader = drain(Box::new(stderr) as Pipe, stderr_log, &stderr_stats, tail);

    let killed = supervise(&spec, origin, &activity, &mut cancel, &mut exit).await;
    if killed.is_some() {
        terminate(pid, spec.kill_grace, &mut exit).await;
    }
    let elapsed = origin.elapsed();

    // The leader is a zombie now: kill what is left of its group while the
    // group id is still reserved, and the escapees carrying the marker.
    group::kill_leftovers(pid, spec.marker.as_ref(), guard.cgroup.as_mut());
    let leader = guard
        .leader
        .take()
        .expect("the guard holds the leader until here");
    let status = reap(leader)
        .await
        .map_err(|source| Error::Wait { pid, source })?;

    let readers = async {
        let _ = (&mut stdout_reader.0).await;
        let _ = (&mut stderr_reader.0).await;
    };
    let drained = tokio::time::timeout(PIPE_DRAIN_TIMEOUT, readers)
        .await
        .is_ok();
    drop(stdout_reader);
    drop(stderr_reader);
    drop(stdin_writer);

    let truncated = |stats: &StreamStats| !drained || stats.truncated.load(Ordering::Relaxed);
    let stderr_tail = stderr_tail
        .lock()
        .expect("tail lock is never poisoned")
        .to_string_lossy();
    Ok(Outcome {
        exit_code: status.code(),
        signal: status.signal(),
        killed,
        stdout_bytes: stdout_stats.bytes.load(Ordering::Relaxed),
        stderr_bytes: stderr_stats.bytes.load(Ordering::Relaxed),
        stdout_truncated: truncated(&stdout_stats),
        stderr_truncated: truncated(&stderr_stats),
        elapsed,
        stderr_tail,
    })
}

/// Waits for the leader to exit or for a reason to kill it.
async fn supervise(
    spec: &ProcessSpec,
    origin: Instant,
    activity: &Activity,
    cancel: &mut watch::Receiver<bool>,
    exit: &mut ExitWatch,
) -> Option<KillReason> {
    let wall_deadline = spec.wall_timeout.map(|timeout| origin + timeout);
    loop {
        let idle_deadline = spec
            .idle_timeout
            .map(|timeout| activity.last_byte_at() + timeout);
        tokio::select! {
            () = exit.exited() => return None,
            () = sleep_until(wall_deadline) => return Some(KillReason::WallTimeout),
            () = sleep_until(idle_deadline) => {
                // Output may have arrived while we slept; re-arm if so.
                let timeout = spec.idle_timeout.expect("an idle deadline implies a timeout");
                if activity.last_byte_at().elapsed() >= timeout {
                    return Some(KillReason::IdleTimeout);
                }
            }
            () = cancelled(cancel) => return Some(KillReason::Cancelled),
            () = activity.flood.notified() => return Some(KillReason::OutputFlood),
        }
    }
}

/// SIGTERM to the group, SIGKILL after `grace` if the leader still runs.
/// Returns once the leader has exited.
async fn terminate(pid: u32, grace: Duration, exit: &mut ExitWatch) {
    signal_group(pid, Signal::SIGTERM);
    let exited_in_grace = tokio::time::timeout(grace, exit.exited()).await.is_ok();
    if !exited_in_grace {
        signal_group(pid, Signal::SIGKILL);
        exit.exited().await;
    }
}

/// Reaps the leader, a zombie by now: at once, without blocking. Should
/// it still run after all, a thread of the blocking pool waits for it
/// rather than the loop.
async fn reap(mut leader: Leader) -> std::io::Result<std::process::ExitStatus> {
    match leader.try_wait()? {
        Some(status) => Ok(status),
        None => tokio::task::spawn_blocking(move || leader.wait())
            .await
            .map_err(std::io::Error::other)?,
    }
}

/// Resolves at `deadline`, or never without one.
pub async fn sleep_until(deadline: Option<impl Into<tokio::time::Instant>>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|cancelled| *cancelled).await.is_err() {
        // The sender is gone: nobody can cancel any more.
        std::future::pending::<()>().await;
    }
}

fn resolve(spec: &ProcessSpec) -> Result<PathBuf> {
    let child_path = spec
        .env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| OsString::from(value))
        .or_else(|| crate::environment::var("PATH"));
    find_program_for_start(&spec.program, child_path.as_deref(), &spec.cwd).ok_or_else(|| {
        Error::ProgramNotFound {
            program: spec.program.clone(),
        }
    })
}

/// The variables of baton's environment that `names` pass through: each
/// name as written, or, ending in `*`, every variable with that prefix.
fn passed_through(names: &[String]) -> Vec<(OsString, OsString)> {
    let mut passed = Vec::new();
    for name in names {
        match name.strip_suffix('*') {
            Some(prefix) => passed.extend(
                crate::environment::all()
                    .filter(|(key, _)| key.as_encoded_bytes().starts_with(prefix.as_bytes())),
            ),
            None => passed.extend(crate::environment::var(name).map(|value| (name.into(), value))),
        }
    }
    passed
}

/// Starts the leader: `spec`'s program at `program_path`, with its
/// arguments, directory, environment and stdin (see `spawn.rs`).
fn start(
    spec: &ProcessSpec,
    program_path: &Path,
    cgroup: Option<&cgroup::Attempt>,
) -> std::io::Result<Spawned> {
    // Read from baton's environment now, as std's `Command` would.
    let passed = passed_through(&spec.env_passthrough);
    let overrides = passed
        .iter()
        .map(|(name, value)| (name.as_os_str(), value.as_os_str()))
        .chain(
            spec.env
                .iter()
                .chain(spec.marker.iter())
                .map(|(name, value)| (OsStr::new(name), OsStr::new(value))),
        )
        .collect();
    let dev_null = match spec.stdin {
        Stdin::Null => Some(dev_null()?),
        Stdin::Bytes(_) => None,
    };
    let stdin = match &dev_null {
        Some(file) => spawn::ChildStdin::From(file.as_fd()),
        None => spawn::ChildStdin::Piped,
    };
    // Contained, the helper starts and is supervised in the program's place
    // (it ends when the program does, with its exit code).
    let wrapped = spec.contain.as_ref().map(|contained| {
        let (helper, args) =
            contained
                .containment
                .wrap(&contained.helper, program_path, &spec.args);
        (contained.helper.as_path(), helper, args)
    });
    let (program_path, argv0, args) = match &wrapped {
        Some((path, helper, args)) => (*path, helper.as_str(), args.as_slice()),
        None => (program_path, spec.program.as_str(), spec.args.as_slice()),
    };
    spawn::spawn(&spawn::Request {
        program: program_path,
        argv: std::iter::once(OsStr::new(argv0))
            .chain(args.iter().map(OsStr::new))
            .collect(),
        cwd: &spec.cwd,
        clear_env: spec.clear_env,
        overrides,
        stdin,
        cgroup: cgroup.map(cgroup::Attempt::handle),
    })
}

/// `/dev/null` for a child's stdin, opened once: opening the device anew
/// for every child is a path walk that cost about as much as the rest of
/// the stdin setup.
fn dev_null() -> std::io::Result<&'static std::fs::File> {
    static DEV_NULL: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    if let Some(file) = DEV_NULL.get() {
        return Ok(file);
    }
    let file = std::fs::File::open("/dev/null")?;
    Ok(DEV_NULL.get_or_init(|| file))
}

/// Kills the group if [`run`] returns early or is dropped before the leader
/// is reaped, then reaps it; keeps the group in the live set (see
/// [`group::register_live`]) until then.
struct GroupGuard {
    pgid: u32,
    /// The leader, until [`run`] reaps it.
    leader: Option<Leader>,
    marker: Option<(String, String)>,
    /// The attempt's cgroup, given back (emptied) with the guard.
    cgroup: Option<cgroup::Attempt>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let pgid = self.pgid;
        let mut cgroup = self.cgroup.take();
        let Some(mut leader) = self.leader.take() else {
            group::unregister_live(pgid);
            return;
        };
        // The leader is running or a zombie: its group id is reserved.
        signal_group(pgid, Signal::SIGKILL);
        let marker = self.marker.take();
        // The escapees are killed now, found by their cgroup or searched
        // for in `/proc`: the leader may still be dying, so they need not
        // be baton's children yet, and what is deferred below does not run
        // if the runtime is shutting down.
        match &cgroup {
            Some(cgroup) => drop(cgroup.kill()),
            None => {
                if let Some((name, value)) = &marker {
                    group::kill_marked_processes(name, value);
                }
            }
        }
        // SIGKILLed, the leader is gone in a moment. Once it has exited,
        // what it left is baton's child; then it is reaped.
        let mut finish = move || {
            group::wait_exited(pgid);
            group::kill_leftovers(pgid, marker.as_ref(), cgroup.as_mut());
            let _ = leader.wait();
            group::unregister_live(pgid);
        };
        // A thread of the blocking pool waits rather than the loop; without
        // a runtime (baton is exiting) this thread does.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(finish)),
            Err(_) => finish(),
        }
    }
}

/// A child's stdout or stderr, as read.
type Pipe = Box<dyn tokio::io::AsyncRead + Unpin + Send>;

/// A task that is aborted when its handle is dropped, so a dropped [`run`]
/// leaves no reader behind.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
