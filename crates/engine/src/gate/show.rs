//! A gate shown: its outputs now, the list a gate edit changes, and how
//! each output differs from what the gate's latest decision was made on.

use std::path::Path;

use baton_store::{DecidedOutput, GateDecisionRow, Store};

use super::diff::{self, Change, OutputDiff, Since};
use super::stage::{GateStage, find_gate};
use super::{GateStatus, GateView, Output, Result, artifact, edit, list, status_of};

/// A gate with its outputs' contents.
///
/// # Errors
///
/// No such run or stage, the stage is not a gate, or the store fails.
pub async fn show(store: &Store, run_id: &str, stage: &str) -> Result<GateView> {
    let run = store.run(run_id).await?;
    edit::finish_interrupted(Path::new(&run.workspace), &store.artifacts(run_id).await?);
    let stages = store.stages(run_id).await?;
    let gate = find_gate(&run, &stages, stage)?;
    let decisions = store.gate_decisions(run_id).await?;
    let latest = decisions
        .iter()
        .rfind(|decision| decision.index == gate.stage.index);
    let decided = match latest {
        Some(row) => {
            let kept = store
                .decided_outputs(run_id, row.index, row.attempt, &row.sha256)
                .await?;
            Some((row, kept))
        }
        None => None,
    };
    let status = status_of(&run, &gate, &decisions);
    let outputs = outputs(Path::new(&run.workspace), &gate, &status, decided.as_ref());
    Ok(GateView {
        since: decided.map(|(row, kept)| Since {
            decision: row.clone(),
            kept: !kept.is_empty(),
        }),
        status,
        outputs,
    })
}

/// The gate's outputs now, each compared with what `decided` kept of it;
/// then the outputs decided on that are gone.
fn outputs(
    workspace: &Path,
    gate: &GateStage,
    status: &GateStatus,
    decided: Option<&(&GateDecisionRow, Vec<DecidedOutput>)>,
) -> Vec<Output> {
    let editable = edit::editable(workspace, &gate.writes_to).map(|(path, _, _)| path);
    let kept =
        |path: &str| decided.and_then(|(_, kept)| kept.iter().find(|then| then.path == path));
    let mut outputs: Vec<Output> = artifact::files(workspace, &gate.writes_to)
        .into_iter()
        .map(|(path, sha256)| {
            let content = std::fs::read(workspace.join(&path))
                .ok()
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
            let list = content
                .as_deref()
                .filter(|_| editable.as_deref() == Some(path.as_str()))
                .and_then(|text| list::detect(text).map(|kind| (kind, list::items(kind, text))));
            let diff = decided.map(|(row, all)| match all.is_empty() {
                // Decided before outputs were kept: only the whole
                // artifact's hash tells.
                true if row.sha256 == status.sha256 => unchanged(),
                true => OutputDiff {
                    change: Change::NotKept,
                    unified: None,
                    truncated: false,
                },
                false => diff::compare((&sha256, content.as_deref()), kept(&path)),
            });
            Output {
                path,
                content,
                list,
                diff,
            }
        })
        .collect();
    let gone: Vec<Output> = decided
        .into_iter()
        .flat_map(|(_, kept)| kept)
        .filter(|then| then.sha256 != artifact::MISSING)
        .filter(|then| !outputs.iter().any(|output| output.path == then.path))
        .map(|then| Output {
            path: then.path.clone(),
            content: None,
            list: None,
            diff: Some(diff::compare((artifact::MISSING, None), Some(then))),
        })
        .collect();
    outputs.extend(gone);
    outputs
}

fn unchanged() -> OutputDiff {
    OutputDiff {
        change: Change::Unchanged,
        unified: None,
        truncated: false,
    }
}
