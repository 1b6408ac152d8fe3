//! Task folders in the shapes baton shows them: `baton task list` and
//! `baton task status` print these values as JSON, and `baton serve`
//! answers `/api/tasks` and `/api/tasks/{name}` with the very same ones.

use baton_lifecycle::next;
use baton_lifecycle::phase::Status;
use serde_json::{Value, json};

use crate::tasks::{self, Record, Tasks};

/// What `task status` says about one active task: `{task, phase, signal,
/// next_phase, why}` — the detected phase and what `task run` would do
/// next.
///
/// # Errors
///
/// A bad name, no such active task, or a file of the task that cannot be
/// read.
pub fn describe(tasks: &Tasks, name: &str) -> tasks::Result<Value> {
    let dir = tasks.active(name)?;
    let record = tasks::read_record(&dir)?;
    let status = tasks::status(&dir)?;
    let redo = tasks::redo_research(&dir, &record)?;
    let next_phase = next_step(tasks, &status, &record, redo)?;
    let mut why = status.why.clone();
    why.push_str(&format!("; the table's next: {}", status.next_phase));
    if redo {
        why.push_str("; SPEC.md is still the copy this tie-break started with");
    }
    Ok(json!({
        "task": name,
        "phase": status.phase.name(),
        "signal": status.signal,
        "next_phase": next_phase,
        "why": why,
    }))
}

/// The next thing `task run` does, by name: a phase, waiting for
/// sub-tasks, or acting on the verdict.
///
/// # Errors
///
/// A sub-task's artifacts cannot be read.
pub fn next_step(
    tasks: &Tasks,
    status: &Status,
    record: &Record,
    redo: bool,
) -> tasks::Result<String> {
    if status.counted.contains(&"DECOMPOSITION.md") {
        if record.sub_tasks.is_empty() {
            return Ok("create the sub-tasks listed in DECOMPOSITION.md".to_owned());
        }
        let waiting = tasks::unsettled(tasks, &record.sub_tasks)?;
        if !waiting.is_empty() {
            return Ok(format!("wait for sub-tasks: {}", waiting.join(", ")));
        }
    }
    Ok(
        match next::phases(status, record.optional(), redo).first() {
            Some(phase) => phase.name().to_owned(),
            None => "verdict: complete, or follow-up tasks".to_owned(),
        },
    )
}

/// What `task list` says of the active (or archived) tasks, by name:
/// `[{task, phase, kind, description, archived}]`. A task whose files
/// cannot be read is listed at phase `?`, never left out.
///
/// # Errors
///
/// The tasks folder cannot be read.
pub fn list(tasks: &Tasks, archived: bool) -> tasks::Result<Vec<Value>> {
    let root = tasks.root_of(archived);
    let rows = tasks
        .names(archived)?
        .iter()
        .map(|name| {
            let dir = root.join(name);
            let phase =
                tasks::status(&dir).map_or_else(|_| "?".to_owned(), |s| s.phase.name().to_owned());
            let record = tasks::read_record(&dir).unwrap_or_default();
            json!({
                "task": name,
                "phase": phase,
                "kind": record.kind,
                "description": record.description,
                "archived": archived,
            })
        })
        .collect();
    Ok(rows)
}
