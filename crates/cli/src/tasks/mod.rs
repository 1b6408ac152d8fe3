//! Task folders as `baton task` changes them: creating follow-ups and
//! sub-tasks (`follow`), the workflow of a task's remaining phases
//! (`workflow`), and the lock a `task run` holds. Reading the folders
//! (names, records, phases) is `baton_engine::tasks`', which `baton serve`
//! shares.

pub(crate) mod follow;
pub(crate) mod workflow;

use std::path::Path;

pub(crate) use baton_engine::tasks::{
    ARCHIVE_DIR, Error, Handled, Planned, Record, Result, TASKS_DIR, Tasks, check_name, io,
    now_utc, read_record, redo_research, status, unsettled, write_record,
};

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
