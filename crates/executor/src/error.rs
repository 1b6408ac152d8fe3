//! The crate's error type for starting and supervising processes.

use std::io;
use std::path::PathBuf;

/// Shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a process could not be started or supervised.
///
/// A process that starts and then fails is not an error: its exit status,
/// signal or kill reason is in the [`Outcome`](crate::Outcome).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The program is not an executable file on the child's `PATH` (or, for
    /// a name containing `/`, at that path relative to the working
    /// directory).
    #[error("cannot find program `{program}` on PATH")]
    ProgramNotFound {
        /// The program as given.
        program: String,
    },

    /// The operating system refused to start the process.
    #[error("cannot start `{program}`")]
    Spawn {
        /// The program as given.
        program: String,
        /// What the start (`clone`, then `exec` in the child) reported.
        #[source]
        source: io::Error,
    },

    /// A log file (or its directory) could not be created.
    #[error("cannot create log file {path}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// `/proc/<pid>/stat` of a just-started child could not be read, so its
    /// start time cannot be recorded; the child has been killed.
    #[error("cannot read the start time of process {pid} from /proc")]
    StartTime {
        /// The child's pid.
        pid: u32,
    },

    /// Waiting for the child failed.
    #[error("cannot wait for process {pid}")]
    Wait {
        /// The child's pid.
        pid: u32,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}
