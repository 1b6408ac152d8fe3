//! Task folders on disk (docs/tasks.md): `tasks/<name>/` holds a task's
//! artifacts and its record `task.json`; `tasks/archive/<name>/` holds the
//! tasks that left the active list. The decisions (phase, next phases,
//! verdicts) are the pure `baton-lifecycle` crate's; this module gathers
//! the facts for it and carries its decisions out.

pub(crate) mod follow;
pub(crate) mod workflow;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_lifecycle::next::Optional;
use baton_lifecycle::phase::{self, FileInfo, Status};
use serde::{Deserialize, Serialize};

/// The folder of active tasks, relative to the project.
pub(crate) const TASKS_DIR: &str = "tasks";
/// The folder of archived tasks, inside [`TASKS_DIR`]; never a task name.
pub(crate) const ARCHIVE_DIR: &str = "archive";
/// A task's record, beside its artifacts.
pub(crate) const RECORD: &str = "task.json";

/// Why a task operation failed; every message names the task or file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Not a name `task new` could have made.
    #[error(
        "'{0}' is not a task name: use lowercase letters, digits and '-' (as `baton task list` shows them)"
    )]
    BadName(String),
    /// No such active task.
    #[error("no active task '{0}' in tasks/ (`baton task list` shows them)")]
    NotFound(String),
    /// The task is archived.
    #[error("task '{0}' is archived (tasks/archive/{0}); archived tasks are not run")]
    Archived(String),
    /// Another `task run` works on the task.
    #[error("another `baton task run {0}` is running; wait for it to finish")]
    Busy(String),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file's content cannot be used.
    #[error("{}: {message}", path.display())]
    Content {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// `Result` with [`Error`].
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// An I/O error about `path`.
pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a task came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum TaskKind {
    /// Made by `baton task new` (or by hand).
    #[default]
    Task,
    /// `{task}-fix-{issue}`: a finding to fix.
    Fix,
    /// `{task}-review-{issue}`: a remaining issue to review.
    Review,
    /// `{task}-tiebreak-{issue}`: a disagreement to settle, from Research.
    Tiebreak,
    /// One item of a parent's `DECOMPOSITION.md`.
    SubTask,
}

/// A sub-task as its parent records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SubRef {
    /// The sub-task's folder name (`{parent}-{short}`).
    pub(crate) name: String,
    /// Its short name, used in `{parent}-fix-{short}`.
    pub(crate) short: String,
}

/// A verdict already acted on, so a second `task run` creates nothing twice.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Handled {
    /// SHA-256 of the verdicts decided on (the task's and its sub-tasks').
    pub(crate) verdicts_sha256: String,
    /// The follow-up tasks planned for them.
    pub(crate) follow_ups: Vec<follow::Planned>,
}

/// `task.json`: what `task new` or a verdict recorded about a task.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The description given to `task new`, or written for a follow-up.
    #[serde(default)]
    pub(crate) description: String,
    /// Where the task came from.
    #[serde(default)]
    pub(crate) kind: TaskKind,
    /// The task whose verdict created this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) origin: Option<String>,
    /// The finding, issue or tie-break it follows up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<String>,
    /// The parent, for a sub-task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<String>,
    /// When it was created (UTC).
    #[serde(default)]
    pub(crate) created_at: String,
    /// Optional phases asked for.
    #[serde(default)]
    pub(crate) decompose: bool,
    /// Run Design.
    #[serde(default)]
    pub(crate) design: bool,
    /// Run Test design (after Design).
    #[serde(default)]
    pub(crate) test_plan: bool,
    /// For a tie-break: the SHA-256 of the `SPEC.md` copied in; while
    /// `SPEC.md` is still that copy, Research runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) spec_copy_sha256: Option<String>,
    /// The sub-tasks created from `DECOMPOSITION.md`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) sub_tasks: Vec<SubRef>,
    /// The run carrying out the task's phases, while it is not finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<String>,
    /// The verdict last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) handled: Option<Handled>,
}

impl Record {
    /// The optional phases asked for.
    pub(crate) fn optional(&self) -> Optional {
        Optional {
            decompose: self.decompose,
            design: self.design,
            test_plan: self.test_plan,
        }
    }
}

/// The project's tasks.
#[derive(Debug, Clone)]
pub(crate) struct Tasks {
    /// The project directory.
    pub(crate) project: PathBuf,
}

impl Tasks {
    pub(crate) fn new(project: &Path) -> Tasks {
        Tasks {
            project: project.to_path_buf(),
        }
    }

    /// `tasks/`.
    pub(crate) fn root(&self) -> PathBuf {
        self.project.join(TASKS_DIR)
    }

    /// `tasks/archive/`.
    pub(crate) fn archive_root(&self) -> PathBuf {
        self.root().join(ARCHIVE_DIR)
    }

    /// Whether a name is taken, active or archived (so an archived task's
    /// name is never reused for a new one).
    pub(crate) fn taken(&self, name: &str) -> bool {
        name == ARCHIVE_DIR
            || self.root().join(name).exists()
            || self.archive_root().join(name).exists()
    }

    /// The folder of an active task.
    pub(crate) fn active(&self, name: &str) -> Result<PathBuf> {
        check_name(name)?;
        let dir = self.root().join(name);
        if dir.is_dir() {
            Ok(dir)
        } else if self.archive_root().join(name).is_dir() {
            Err(Error::Archived(name.to_owned()))
        } else {
            Err(Error::NotFound(name.to_owned()))
        }
    }

    /// The folder of a task, active or archived, if it exists.
    pub(crate) fn anywhere(&self, name: &str) -> Option<PathBuf> {
        check_name(name).ok()?;
        [self.root().join(name), self.archive_root().join(name)]
            .into_iter()
            .find(|dir| dir.is_dir())
    }

    /// The names of the active (or archived) tasks, sorted.
    pub(crate) fn names(&self, archived: bool) -> Result<Vec<String>> {
        let root = if archived {
            self.archive_root()
        } else {
            self.root()
        };
        let entries = match std::fs::read_dir(&root) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io(&root)(error)),
        };
        let mut names: Vec<String> = entries
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| name != ARCHIVE_DIR && check_name(name).is_ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Moves an active task to `tasks/archive/` (never deletes): under its
    /// own name, or the first free `-N` suffix.
    pub(crate) fn archive(&self, name: &str) -> Result<String> {
        let from = self.active(name)?;
        let archive = self.archive_root();
        std::fs::create_dir_all(&archive).map_err(io(&archive))?;
        let target = baton_lifecycle::verdict::unique_name(name, |candidate| {
            archive.join(candidate).exists()
        });
        let to = archive.join(&target);
        std::fs::rename(&from, &to).map_err(io(&from))?;
        Ok(target)
    }
}

/// Names are what `kebab` makes: they never climb out of `tasks/`, and fit
/// in one file name (255 bytes).
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name != ARCHIVE_DIR
        && name.len() <= 255
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::BadName(name.to_owned()))
    }
}

/// Reads a task's record; a folder without one is a task made by hand.
pub(crate) fn read_record(dir: &Path) -> Result<Record> {
    let path = dir.join(RECORD);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|error| Error::Content {
            path,
            message: format!("not a task record: {error}"),
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
        Err(error) => Err(io(&path)(error)),
    }
}

/// Writes a task's record atomically (a temporary file renamed over it).
pub(crate) fn write_record(dir: &Path, record: &Record) -> Result<()> {
    let path = dir.join(RECORD);
    let text = serde_json::to_string_pretty(record).expect("plain data") + "\n";
    let temporary = dir.join(".task.json.tmp");
    std::fs::write(&temporary, text).map_err(io(&temporary))?;
    std::fs::rename(&temporary, &path).map_err(io(&path))
}

/// The phase of a task folder, from its artifacts' sizes and times.
pub(crate) fn status(dir: &Path) -> Result<Status> {
    let mut files = BTreeMap::new();
    for row in phase::TABLE {
        let Some(name) = row.artifact else { continue };
        let path = dir.join(name);
        let metadata = match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_file() => metadata,
            Ok(_) => continue,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(io(&path)(error)),
        };
        // Whitespace alone is empty: an agent that wrote a blank line did
        // not write the artifact.
        let non_empty = metadata.len() > 0
            && std::fs::read(&path)
                .map_err(io(&path))?
                .iter()
                .any(|byte| !byte.is_ascii_whitespace());
        let modified = metadata.modified().map_err(io(&path))?;
        files.insert(
            name.to_owned(),
            FileInfo {
                non_empty,
                modified,
            },
        );
    }
    Ok(phase::detect(&files))
}

/// Hex SHA-256 of a file, if it exists.
pub(crate) fn file_sha256(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(baton_engine::create::sha256_hex(&bytes))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io(path)(error)),
    }
}

/// Whether a tie-break task's `SPEC.md` is still the copy it started with.
pub(crate) fn redo_research(dir: &Path, record: &Record) -> Result<bool> {
    let Some(copy) = &record.spec_copy_sha256 else {
        return Ok(false);
    };
    Ok(file_sha256(&dir.join("SPEC.md"))?.as_deref() == Some(copy.as_str()))
}

/// The current time as the store writes it.
pub(crate) fn now_utc() -> String {
    baton_engine::workspace::utc(baton_engine::clock::now_ms())
}

/// Holds `.baton/tasks/<name>/lock` while a `task run` works on the task:
/// two at once would create two runs writing the same artifacts. The
/// kernel releases the lock when the holder dies, so a killed `task run`
/// never leaves the task locked.
pub(crate) fn lock(project: &Path, name: &str) -> Result<std::fs::File> {
    let dir = project.join(workflow::state_dir(name));
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let path = dir.join("lock");
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(&path))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Busy(name.to_owned())),
        Err(std::fs::TryLockError::Error(error)) => Err(io(&path)(error)),
    }
}

/// The sub-tasks without a verdict that counts (an archived sub-task passed).
pub(crate) fn unsettled(tasks: &Tasks, subs: &[SubRef]) -> Result<Vec<String>> {
    let mut waiting = Vec::new();
    for sub in subs {
        if tasks.archive_root().join(&sub.name).is_dir() {
            continue;
        }
        let dir = tasks.root().join(&sub.name);
        if !dir.is_dir() || status(&dir)?.phase != phase::Phase::Referee {
            waiting.push(sub.name.clone());
        }
    }
    Ok(waiting)
}
