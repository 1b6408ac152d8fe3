//! Resuming the run recorded for a task, unless the task folder changed
//! under it.

use std::path::Path;

use baton_lifecycle::phase::TABLE;
use baton_store::Store;

use super::failure::Failure;
use crate::args::Format;
use crate::commands::drive::{Drive, drive_options, drive_with_progress};
use crate::commands::errors::engine_error;
use crate::tasks::workflow;
use crate::{exit_code, output};

/// Drives a recorded run to its end: `true` once it succeeded, `false`
/// when it was set aside for a new run; anything else is reported.
pub(super) async fn resume(
    name: &str,
    dir: &Path,
    run_id: &str,
    format: Format,
    store: &Store,
) -> Result<bool, Failure> {
    let as_json = format == Format::Json;
    let run = match store.run(run_id).await {
        Ok(run) => run,
        // A store emptied or replaced since: the phases are read from the
        // task folder again and run anew.
        Err(baton_store::Error::NoSuchRun(_)) => {
            output::stderr_line(&format!(
                "task {name}: run {run_id} is not in the store; starting a new run"
            ));
            return Ok(false);
        }
        Err(error) => return Err(Failure::Code(engine_error(&error.into(), as_json))),
    };
    if run.status == "success" {
        return Ok(true);
    }
    if let Some(artifact) = edited_after_run(store, run_id, dir).await? {
        // The engine would run that phase again over the edit: the folder
        // is the truth, so the old run ends and a new one starts from it.
        let ended = matches!(run.status.as_str(), "failed" | "cancelled" | "rejected");
        if !ended {
            baton_engine::cancel(store, run_id)
                .await
                .map_err(|error| Failure::Code(engine_error(&error, as_json)))?;
        }
        output::stderr_line(&format!(
            "task {name}: {artifact} was edited after run {run_id} recorded it; {}a new run starts from the task folder",
            if ended {
                ""
            } else {
                "that run is cancelled and "
            }
        ));
        return Ok(false);
    }
    workflow::link_outputs(Path::new(&run.workspace), name)?;
    let options = drive_options(false, false, false).map_err(Failure::Code)?;
    // Progress goes to stderr (live on a terminal, plain lines otherwise);
    // stdout keeps the task's result.
    let outcome = drive_with_progress(store, Drive::Recorded(run_id), &options, format, None)
        .await
        .map_err(|error| Failure::Code(engine_error(&error, as_json)))?;
    if outcome.status == "success" {
        return Ok(true);
    }
    output::stderr_line(&format!(
        "error: task {name}: run {run_id} ended {}{}",
        outcome.status,
        outcome
            .error
            .as_ref()
            .map(|error| format!(" ({error})"))
            .unwrap_or_default()
    ));
    output::stderr_line(&format!(
        "hint: `baton logs {run_id}` shows the agents' output; `baton task run {name}` resumes the run"
    ));
    Err(Failure::Code(exit_code::RUN_FAILED))
}

/// The artifact of a phase the run recorded as ended (succeeded or failed)
/// that was written after it ended — by a person, since its agent was gone
/// — if any. A phase whose agent was interrupted is not compared: what it
/// left is the engine's to judge, and it runs that phase again.
async fn edited_after_run(
    store: &Store,
    run_id: &str,
    dir: &Path,
) -> Result<Option<&'static str>, Failure> {
    let stages = store
        .stages(run_id)
        .await
        .map_err(|error| Failure::Code(engine_error(&error.into(), false)))?;
    let ended =
        |stage: &&baton_store::StageRow| matches!(stage.status.as_str(), "success" | "failed");
    for stage in stages.iter().filter(ended) {
        let Some(finished) = stage.finished_at else {
            continue;
        };
        let Some(artifact) = TABLE
            .iter()
            .find(|row| row.phase.slug() == stage.name)
            .and_then(|row| row.artifact)
        else {
            continue;
        };
        let path = dir.join(artifact);
        let Ok(modified) = std::fs::metadata(&path).and_then(|m| m.modified()) else {
            continue;
        };
        let modified_ms = modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
            });
        if modified_ms > finished {
            return Ok(Some(artifact));
        }
    }
    Ok(None)
}
