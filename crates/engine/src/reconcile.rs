//! Putting a run back in order before driving it again: processes left by a
//! crashed driver are killed, attempts that were running are marked
//! interrupted, and recorded outputs that changed or vanished since make
//! their stage (and its dependants) run again.

use std::path::Path;

use baton_store::{ArtifactRow, StageRow};
use baton_workflow::Plan;

use crate::create::sha256_hex;

/// The environment variable that marks every process baton starts for a run.
pub(crate) const RUN_MARKER: &str = "BATON_RUN_ID";

/// Kills every process on this host whose environment carries
/// `BATON_RUN_ID=<run_id>`: the children of a previous driver of this run,
/// which must not keep writing into the workspace while new attempts run.
/// Returns how many were signalled.
pub(crate) fn kill_leftovers(run_id: &str) -> usize {
    baton_executor::group::kill_marked_processes(RUN_MARKER, run_id)
}

/// Indices of successful stages whose recorded outputs no longer match the
/// files in the workspace, plus every stage that depends on them.
pub(crate) fn stale_stages(
    plan: &Plan,
    stages: &[StageRow],
    artifacts: &[ArtifactRow],
    workspace: &Path,
) -> Vec<(usize, String)> {
    let mut stale = vec![None; plan.stages.len()];
    for artifact in artifacts {
        let Ok(index) = usize::try_from(artifact.index) else {
            continue;
        };
        if stages
            .get(index)
            .is_none_or(|stage| stage.status != "success")
            || stale[index].is_some()
        {
            continue;
        }
        let current = std::fs::read(workspace.join(&artifact.path))
            .ok()
            .map(|bytes| sha256_hex(&bytes));
        if current.as_deref() != Some(artifact.sha256.as_str()) {
            let why = if current.is_none() {
                "was deleted"
            } else {
                "changed"
            };
            stale[index] = Some(format!(
                "rerun: recorded output {} {why} since it was recorded",
                artifact.path
            ));
        }
    }
    // Dependants of a stale stage are stale too (indices follow the order).
    for stage in &plan.stages {
        if stale[stage.index].is_none()
            && let Some(&dependency) = stage
                .depends_on
                .iter()
                .find(|&&dependency| stale[dependency].is_some())
        {
            stale[stage.index] = Some(format!(
                "rerun: depends on {}, which reruns",
                plan.stages[dependency].name()
            ));
        }
    }
    stale
        .into_iter()
        .enumerate()
        .filter_map(|(index, note)| {
            note.filter(|_| {
                stages
                    .get(index)
                    .is_some_and(|stage| stage.status != "pending")
            })
            .map(|note| (index, note))
        })
        .collect()
}
