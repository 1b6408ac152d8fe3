//! Where tasks live: `tasks/<name>/` for the active ones and
//! `tasks/archive/<name>/` for the rest, and which names a task may have.

use std::path::{Path, PathBuf};

use super::error::{Error, Result, io};

/// The folder of active tasks, relative to the project.
pub const TASKS_DIR: &str = "tasks";
/// The folder of archived tasks, inside [`TASKS_DIR`]; never a task name.
pub const ARCHIVE_DIR: &str = "archive";
/// The project's tasks.
#[derive(Debug, Clone)]
pub struct Tasks {
    /// The project directory.
    pub project: PathBuf,
}

impl Tasks {
    /// The tasks of the project at `project`.
    pub fn new(project: &Path) -> Tasks {
        Tasks {
            project: project.to_path_buf(),
        }
    }

    /// `tasks/`.
    pub fn root(&self) -> PathBuf {
        self.project.join(TASKS_DIR)
    }

    /// `tasks/archive/`.
    pub fn archive_root(&self) -> PathBuf {
        self.root().join(ARCHIVE_DIR)
    }

    /// [`Tasks::archive_root`] for the archived tasks, else [`Tasks::root`].
    pub fn root_of(&self, archived: bool) -> PathBuf {
        if archived {
            self.archive_root()
        } else {
            self.root()
        }
    }

    /// Whether a name is taken, active or archived (so an archived task's
    /// name is never reused for a new one).
    pub fn taken(&self, name: &str) -> bool {
        name == ARCHIVE_DIR
            || self.root().join(name).exists()
            || self.archive_root().join(name).exists()
    }

    /// The folder of an active task.
    pub fn active(&self, name: &str) -> Result<PathBuf> {
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
    pub fn anywhere(&self, name: &str) -> Option<PathBuf> {
        check_name(name).ok()?;
        [self.root().join(name), self.archive_root().join(name)]
            .into_iter()
            .find(|dir| dir.is_dir())
    }

    /// The names of the active (or archived) tasks, sorted.
    pub fn names(&self, archived: bool) -> Result<Vec<String>> {
        let root = self.root_of(archived);
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
    pub fn archive(&self, name: &str) -> Result<String> {
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
pub fn check_name(name: &str) -> Result<()> {
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
