//! Task folders on disk (docs/tasks.md): `tasks/<name>/` holds a task's
//! artifacts and its record `task.json`; `tasks/archive/<name>/` holds the
//! tasks that left the active list. The decisions (phase, next phases,
//! verdicts) are the pure `baton-lifecycle` crate's; this module gathers
//! the facts for it. `baton task` carries its decisions out, and
//! [`crate::view::tasks`] shows them as `baton task list|status` and
//! `baton serve` do.

mod error;
mod folders;
mod record;

use std::collections::BTreeMap;
use std::path::Path;

use baton_lifecycle::phase::{self, FileInfo, Status};

pub use error::{Error, Result, io};
pub use folders::{ARCHIVE_DIR, TASKS_DIR, Tasks, check_name};
pub use record::{
    Handled, Planned, RECORD, Record, SubRef, TaskKind, file_sha256, now_utc, read_record,
    write_record,
};

/// The phase of a task folder, from its artifacts' sizes and times.
///
/// # Errors
///
/// An artifact's metadata or content cannot be read.
pub fn status(dir: &Path) -> Result<Status> {
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

/// Whether a tie-break task's `SPEC.md` is still the copy it started with.
///
/// # Errors
///
/// `SPEC.md` exists but cannot be read.
pub fn redo_research(dir: &Path, record: &Record) -> Result<bool> {
    let Some(copy) = &record.spec_copy_sha256 else {
        return Ok(false);
    };
    Ok(file_sha256(&dir.join("SPEC.md"))?.as_deref() == Some(copy.as_str()))
}

/// The sub-tasks without a verdict that counts (an archived sub-task passed).
///
/// # Errors
///
/// A sub-task's artifacts cannot be read.
pub fn unsettled(tasks: &Tasks, subs: &[SubRef]) -> Result<Vec<String>> {
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
