//! Why a task operation failed.

use std::path::{Path, PathBuf};

/// Why a task operation failed; every message names the task or file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
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
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An I/O error about `path`.
pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}
