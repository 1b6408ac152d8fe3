//! `baton resume RUN --accept-merge`: a stage whose branch failed to merge
//! is finished by merging its branch as it is now, without running its
//! agent again — after the person merged the branch into the target by hand
//! (the target then contains it and nothing is merged), or committed a
//! resolution on the branch (which then merges cleanly).

use std::path::Path;

use baton_workflow::plan::PlanStage;

use super::{CONFIG_RECORD, MERGE_FAILED, Names, Place, Worktree, config_digest};
use crate::attempt::{Attempt, Finished};
use crate::outputs::{Snapshot, verify};

/// The attempt `--accept-merge` makes of a stage whose last attempt failed
/// at its merge; `None` for any other stage, which runs as usual.
pub(crate) async fn accept(stage: &PlanStage, attempt: &Attempt) -> Option<Finished> {
    let place = Place::of(attempt);
    // A run that cannot name its worktree fails the usual way.
    let names = Names::of(stage, &place).await.ok()?;
    if !names.merge_record.exists() {
        return None;
    }
    let mut finished = Finished::unsettled(attempt);
    // The failed attempt copied the outputs back and verified them; they
    // were written then, not now, so nothing counts as stale.
    match verify(
        stage,
        &attempt.workspace,
        &Snapshot::new(),
        attempt.defer_checks,
    ) {
        Ok(artifacts) => finished.artifacts = artifacts,
        Err(error) => {
            finished.error = Some(format!(
                "cannot accept the merge: {error}; `baton rerun {} {}` runs the stage again",
                attempt.run_id,
                stage.name()
            ));
            return Some(finished);
        }
    }
    match accepted(stage, &attempt.run_id, names).await {
        Ok(()) => finished.success = true,
        Err(error) => {
            finished.artifacts.clear();
            finished.error = Some(error);
        }
    }
    Some(finished)
}

/// Merges the branch as committed: the worktree is not needed (`baton
/// worktree prune` may have removed it) and nothing left uncommitted in it
/// is taken.
async fn accepted(stage: &PlanStage, run_id: &str, names: Names) -> Result<(), String> {
    // The configuration as the run's first isolated stage found it; once
    // pruned, as it is now.
    let config = match std::fs::read_to_string(&names.config_file) {
        Ok(recorded) => recorded,
        Err(_) => config_digest(&names.repository).await,
    };
    let worktree = Worktree {
        repository: names.repository,
        path: names.path,
        branch: names.branch,
        start: String::new(),
        target: names.target,
        root: names.root,
        config,
        merge_record: names.merge_record,
    };
    worktree.check_config().await?;
    worktree.merge(stage, run_id, None).await
}

/// The stages (and fan-out children) of `run_id` whose last attempt failed
/// at its merge, by their worktrees' names: what `--accept-merge` acts on.
///
/// # Errors
///
/// [`Error::Refused`](crate::Error::Refused) when there is none (nothing
/// to accept), or the run or its worktree directory cannot be read.
pub async fn failed_merges(store: &baton_store::Store, run_id: &str) -> crate::Result<Vec<String>> {
    let run = store.run(run_id).await?;
    let project_dir = serde_json::from_str::<crate::run_options::RunOptions>(&run.options)
        .map(|options| options.project_dir)
        .map_err(|_| crate::Error::Refused(format!("run {run_id} has unreadable options")))?;
    let root = super::worktrees_dir(&project_dir).join(super::ref_component(run_id));
    let names = match records(&root) {
        Ok(names) => names,
        Err(source) => return Err(crate::Error::Workspace { path: root, source }),
    };
    if names.is_empty() {
        return Err(crate::Error::Refused(format!(
            "run {run_id} has no stage whose branch failed to merge, so there is no merge to accept; `baton resume {run_id}` continues the run"
        )));
    }
    Ok(names)
}

/// The names in the records of failed merges in a run's worktree directory.
fn records(root: &Path) -> std::io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let suffix = format!(".{MERGE_FAILED}");
    let mut names = Vec::new();
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name != CONFIG_RECORD
            && let Some(stage) = name
                .strip_prefix('.')
                .and_then(|rest| rest.strip_suffix(&suffix))
        {
            names.push(stage.to_owned());
        }
    }
    names.sort();
    Ok(names)
}
