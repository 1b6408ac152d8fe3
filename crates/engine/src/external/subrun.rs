//! Sub-workflow stages through the driver protocol. The child run is a run
//! of its own, driven externally like its parent: the `next` that finds
//! the stage in progress creates it (or finds it, after a crash or on a
//! later attempt, as `baton run` does) and calls `next` on it. The child's
//! entries are handed out under the stage's name, `<stage>/<entry>`, and
//! `complete` / `fail` of such a name go to the child. Once the child has
//! stopped, the stage ends as it would in `baton run`: with the child's
//! success, or failed with the child's end and the way on.

use baton_store::{Lease, StageRow, Store};
use baton_workflow::plan::PlanStage;

use super::record::{Envelope, commit, write_envelopes};
use super::{Opened, Ready, Standing};
use crate::attempt::Finished;
use crate::coordinator::Outcome;
use crate::run_options::DriverMode;
use crate::{Result, clock, subrun};

/// What the children of the stages in progress came to in one pass.
#[derive(Default)]
pub(super) struct Children {
    /// Their entries, named `<stage>/<entry>`.
    pub(super) ready: Vec<Ready>,
    /// What their `next` ran itself: (`<stage>/<name>`, status).
    pub(super) scripts: Vec<(String, String)>,
    /// Whether a stage ended (its dependants may be ready).
    pub(super) ended: bool,
}

/// The child runs of the sub-workflow stages in progress, each created
/// unless it was (or why it cannot be).
pub(super) async fn children<'p>(
    store: &Store,
    opened: &'p Opened,
    rows: &[StageRow],
) -> Vec<(&'p PlanStage, Result<String, String>)> {
    let mut children = Vec::new();
    let in_progress =
        opened.plan.stages.iter().filter(|stage| {
            stage.spec.sub_workflow.is_some() && rows[stage.index].status == "running"
        });
    for stage in in_progress {
        let attempt = opened.attempt(store, stage.index, rows[stage.index].attempts);
        let child = subrun::find_or_create(stage, &attempt)
            .await
            .map_err(|error| format!("cannot start sub-workflow run: {error}"));
        children.push((stage, child));
    }
    children
}

impl Children {
    /// Takes where a stage's child stands after a `next` of its own: its
    /// entries while it runs, else the stage's end, recorded here (`Err`:
    /// why the child cannot go on).
    pub(super) async fn take(
        &mut self,
        (store, lease, opened): (&Store, &Lease, &Opened),
        (stage, row): (&PlanStage, &StageRow),
        child: Result<Standing, String>,
    ) -> Result<()> {
        let prefix = |name: &str| format!("{}/{name}", stage.name());
        let outcome = match child {
            Ok(standing) if standing.status == "running" => {
                for mut ready in standing.ready {
                    ready.stage = prefix(&ready.stage);
                    self.ready.push(ready);
                }
                let scripts = standing.scripts.into_iter();
                self.scripts
                    .extend(scripts.map(|(name, status)| (prefix(&name), status)));
                return Ok(());
            }
            Ok(standing) => Ok(Outcome {
                run_id: standing.run_id,
                status: standing.status,
                gate: standing.gate,
                error: standing.error,
            }),
            Err(error) => Err(error),
        };
        let attempt = opened.attempt(store, stage.index, row.attempts);
        let finished = match outcome {
            Ok(outcome) => subrun::ended(stage, &attempt, &outcome, DriverMode::External),
            Err(error) => Finished {
                error: Some(error),
                ..Finished::unsettled(&attempt)
            },
        };
        let envelope = Envelope {
            stage: stage.clone(),
            index: stage.index,
            status: finished.status(),
            started_at: row.started_at,
            error: finished.error.clone(),
        };
        commit(
            store,
            lease,
            opened,
            vec![finished.transition(clock::now_ms())],
        )
        .await?;
        write_envelopes(&opened.workspace, vec![envelope]);
        self.ended = true;
        Ok(())
    }
}

/// The child run and the entry of it that `name` means, when it is
/// `<stage>/<entry>` for a sub-workflow stage.
pub(super) fn route<'n>(opened: &Opened, name: &'n str) -> Option<(String, &'n str)> {
    let (stage, entry) = name.split_once('/')?;
    let stage = opened
        .plan
        .stages
        .iter()
        .find(|candidate| candidate.name() == stage && candidate.spec.sub_workflow.is_some())?;
    let child = subrun::child_run_id(&opened.run.run_id, stage.name());
    Some((child, entry))
}
