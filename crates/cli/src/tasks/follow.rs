//! Creating task folders: new tasks, the follow-up tasks a verdict calls
//! for, and the sub-tasks of a decomposition. Each creation is idempotent,
//! so a `task run` killed half-way and started again creates nothing twice.

use std::path::Path;

use baton_engine::tasks::{
    Error, Planned, RECORD, Record, Result, SubRef, TaskKind, Tasks, check_name, file_sha256, io,
    now_utc, read_record, write_record,
};
use baton_lifecycle::verdict::COPIED_FILES;

/// Creates `tasks/<name>/` with its record for `task new`.
pub(crate) fn create_task(tasks: &Tasks, name: &str, record: &Record) -> Result<()> {
    check_name(name)?;
    let dir = tasks.root().join(name);
    std::fs::create_dir_all(tasks.root()).map_err(io(&tasks.root()))?;
    // create_dir (not _all): two `task new` at once cannot share a folder.
    std::fs::create_dir(&dir).map_err(io(&dir))?;
    write_record(&dir, record)
}

/// Creates a planned follow-up task unless it exists: its record, copies
/// of `SPEC.md`, `BUG_REPORT.md` and `ADVERSARIAL_BUG_REPORT.md` (those
/// present), and an empty `IMPLEMENTATION.md`, so it starts at
/// implementation with the old reports as input.
pub(crate) fn create_follow_up(tasks: &Tasks, origin: &str, planned: &Planned) -> Result<bool> {
    let dir = tasks.root().join(&planned.name);
    if dir.join(RECORD).is_file() || tasks.archive_root().join(&planned.name).is_dir() {
        return Ok(false);
    }
    let from = tasks
        .anywhere(&planned.copy_from)
        .ok_or_else(|| Error::NotFound(planned.copy_from.clone()))?;
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    for file in COPIED_FILES {
        let source = from.join(file);
        if source.is_file() {
            let target = dir.join(file);
            std::fs::copy(&source, &target).map_err(io(&target))?;
        }
    }
    let implementation = dir.join("IMPLEMENTATION.md");
    std::fs::write(&implementation, "").map_err(io(&implementation))?;
    let description = match planned.kind {
        TaskKind::Fix => format!("Fix, from task {origin}: {}", planned.source),
        TaskKind::Review => format!("Review, from task {origin}: {}", planned.source),
        _ => format!("Settle, from task {origin}: {}", planned.source),
    };
    let spec_copy_sha256 = if planned.kind == TaskKind::Tiebreak {
        file_sha256(&dir.join("SPEC.md"))?
    } else {
        None
    };
    // The record is written last: a folder without one is finished above
    // on the next run.
    write_record(
        &dir,
        &Record {
            description,
            kind: planned.kind,
            origin: Some(origin.to_owned()),
            source: Some(planned.source.clone()),
            created_at: now_utc(),
            spec_copy_sha256,
            ..Record::default()
        },
    )?;
    Ok(true)
}

/// Creates the sub-task folders listed in a parent's `DECOMPOSITION.md`
/// (once: the parent's record keeps the list) and returns them.
pub(crate) fn ensure_sub_tasks(tasks: &Tasks, parent: &str, dir: &Path) -> Result<Vec<SubRef>> {
    let mut record = read_record(dir)?;
    if record.sub_tasks.is_empty() {
        let path = dir.join("DECOMPOSITION.md");
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let subs =
            baton_lifecycle::decomposition::parse(&text).map_err(|error| Error::Content {
                path: path.clone(),
                message: error.to_string(),
            })?;
        let mut planned: Vec<SubRef> = Vec::new();
        for sub in subs {
            let base = format!("{parent}-{}", sub.name);
            // A folder of this parent's from a run killed half-way is
            // reused, not duplicated under a suffix.
            let ours = tasks.root().join(&base).is_dir()
                && read_record(&tasks.root().join(&base))?.parent.as_deref() == Some(parent);
            let name = if ours && !planned.iter().any(|done| done.name == base) {
                base
            } else {
                baton_lifecycle::verdict::unique_name(&base, |name| {
                    tasks.taken(name) || planned.iter().any(|done| done.name == name)
                })
            };
            planned.push(SubRef {
                name,
                short: sub.name,
            });
            // The description is kept in a record written below.
            let last = planned.last().expect("just pushed");
            create_sub_task(tasks, parent, dir, last, &sub.description)?;
        }
        record.sub_tasks = planned;
        write_record(dir, &record)?;
    }
    Ok(record.sub_tasks)
}

fn create_sub_task(
    tasks: &Tasks,
    parent: &str,
    parent_dir: &Path,
    sub: &SubRef,
    description: &str,
) -> Result<()> {
    let dir = tasks.root().join(&sub.name);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    // The parent's spec, under a name the phase table ignores: the
    // sub-task starts at New and writes its own SPEC.md.
    let spec = parent_dir.join("SPEC.md");
    if spec.is_file() {
        let target = dir.join("PARENT_SPEC.md");
        std::fs::copy(&spec, &target).map_err(io(&target))?;
    }
    write_record(
        &dir,
        &Record {
            description: format!(
                "{description}\n\nA sub-task of {parent}; its specification is PARENT_SPEC.md."
            ),
            kind: TaskKind::SubTask,
            parent: Some(parent.to_owned()),
            created_at: now_utc(),
            ..Record::default()
        },
    )
}
