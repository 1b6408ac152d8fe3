//! Agents run in a contained view of the project.
//!
//! No agent may change baton's own state (`.baton/`: the store, other
//! runs' workspaces, logs, gates), and a read-only agent may change its
//! workspace and nothing else of the repository. Asking the agent CLI is
//! not enough (a shell tool, a hook or a leftover process writes where it
//! likes), and comparing the repository before and after blames the stage
//! for whatever else changed meanwhile. So baton runs every agent through a
//! helper, `baton __contain`, which gives the agent's processes a view of
//! their own:
//!
//! * a new mount namespace in which, for a read-only agent, the repository
//!   is an overlay: reads see the real files, writes land in a scratch
//!   layer on a tmpfs that only this attempt sees; directories the agent
//!   may not write at all (`.baton/`) are mounted read-only; the workspace
//!   (and any other writable path: a worktree, the store's files, which
//!   baton's own hooks write) is bind-mounted through, so the stage's
//!   reports reach the real disk;
//! * a new PID namespace whose first process is the helper's init: when the
//!   agent exits, the kernel kills everything else in the namespace, a
//!   daemon started with `setsid` included, so nothing outlives the stage;
//! * for a read-only agent, when it is gone, the helper lists what the
//!   scratch layer holds (files written, created, deleted; a file rewritten
//!   with the same bytes does not count) into a report file, and the tmpfs
//!   vanishes with the namespace: the real repository never saw the writes.
//!
//! The engine reads the report ([`read_report`]) and fails the stage naming
//! the files. Where the kernel refuses the namespaces ([`check`] says why),
//! the engine falls back to comparing the repository before and after, and
//! `.baton/` stays writable.

mod changes;
mod namespace;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use namespace::SUBCOMMAND;

/// How one agent process is contained.
#[derive(Debug, Clone, Default)]
pub struct Containment {
    /// The tree the agent may read but whose changes are kept from the
    /// disk (a read-only agent's repository), if any.
    pub overlay: Option<Overlay>,
    /// Directories the agent may read but not write at all.
    pub read_only: Vec<PathBuf>,
    /// Directories and files the agent may change, within those above.
    pub writable: Vec<PathBuf>,
}

/// A tree seen through an overlay whose changes are listed, then dropped.
#[derive(Debug, Clone)]
pub struct Overlay {
    /// The tree.
    pub root: PathBuf,
    /// An empty directory under a writable one, where the helper mounts
    /// its scratch tmpfs; the agent sees it empty.
    pub scratch: PathBuf,
    /// Where the helper writes the paths the agent changed, one per line,
    /// relative to `root`.
    pub report: PathBuf,
}

impl Containment {
    /// The argv that runs `program` (an absolute path) with `args` inside
    /// the containment, through `helper` (the `baton` binary).
    pub fn wrap(&self, helper: &Path, program: &Path, args: &[String]) -> (String, Vec<String>) {
        let mut argv = vec![SUBCOMMAND.to_owned(), "run".to_owned()];
        if let Some(overlay) = &self.overlay {
            for (flag, path) in [
                ("--overlay", &overlay.root),
                ("--scratch", &overlay.scratch),
                ("--report", &overlay.report),
            ] {
                argv.push(flag.to_owned());
                argv.push(text(path));
            }
        }
        for (flag, paths) in [
            ("--read-only", &self.read_only),
            ("--writable", &self.writable),
        ] {
            for path in paths {
                argv.push(flag.to_owned());
                argv.push(text(path));
            }
        }
        argv.push("--".to_owned());
        argv.push(text(program));
        argv.extend(args.iter().cloned());
        (text(helper), argv)
    }
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs the helper: `args` are the arguments after [`SUBCOMMAND`]. Must be
/// called before the process starts a second thread (namespaces are
/// per-process). Returns the exit code, or why the helper itself failed.
pub fn main(args: Vec<OsString>) -> Result<i32, String> {
    namespace::main(args)
}

/// The exit code of a helper that failed itself (as `env` and `unshare`
/// use).
pub const HELPER_FAILED: u8 = 125;

/// Whether this machine lets `helper` contain a process (it runs `helper
/// __contain check`), or why not.
pub fn check(helper: &Path) -> Result<(), String> {
    #[expect(
        clippy::disallowed_methods,
        reason = "a short check that runs to its end, with no output to supervise"
    )]
    let output = std::process::Command::new(helper)
        .args([SUBCOMMAND, "check"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", helper.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let reason = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Err(if reason.is_empty() {
        format!("the containment check exited with {}", output.status)
    } else {
        reason
    })
}

/// The paths a contained agent changed outside its writable directories,
/// from the helper's report (written after every contained run, empty when
/// nothing changed).
pub fn read_report(report: &Path) -> Result<Vec<String>, String> {
    std::fs::read_to_string(report)
        .map(|text| text.lines().map(str::to_owned).collect())
        .map_err(|error| {
            format!(
                "the containment helper left no report at {}: {error}",
                report.display()
            )
        })
}
