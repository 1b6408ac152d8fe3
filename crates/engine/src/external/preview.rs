//! What `baton resume` shows for an externally driven run, changing nothing.

use baton_store::{Store, UnitRow};

use super::handing::units_by_stage;
use super::record::standing;
use super::{Ready, Standing, dispatch_path, open};
use crate::run_state::{Action, Event};
use crate::{Error, Result, clock, work};

/// What `next` would list now, without recording anything: the stages
/// handed out and not completed, and the stages ready to be handed out.
///
/// # Errors
///
/// No such run, a run not driven externally, the store failing.
pub async fn preview(store: &Store, run_id: &str) -> Result<Standing> {
    let opened = open(store, run_id).await?;
    let (rows, mut run) = opened.state(store).await?;
    let mut names: Vec<usize> = opened
        .plan
        .stages
        .iter()
        .filter(|stage| rows[stage.index].status == "running")
        .map(|stage| stage.index)
        .collect();
    // What `next` would begin (start, skip or fail); nothing is recorded.
    names.extend(
        run.apply(Event::Poll {
            free: usize::MAX,
            now: clock::now_ms(),
        })
        .iter()
        .filter_map(Action::stage),
    );
    let units = units_by_stage(store, run_id).await?;
    let mut ready = Vec::new();
    for index in names {
        let stage = &opened.plan.stages[index];
        if stage.spec.sub_workflow.is_some() {
            // Its child run's entries, once it has one.
            let child = crate::subrun::child_run_id(run_id, stage.name());
            match Box::pin(preview(store, &child)).await {
                Ok(standing) => {
                    ready.extend(standing.ready.into_iter().map(|mut entry| {
                        entry.stage = format!("{}/{}", stage.name(), entry.stage);
                        entry
                    }));
                    continue;
                }
                Err(Error::Store(baton_store::Error::NoSuchRun(_))) => {}
                Err(other) => return Err(other),
            }
        }
        let out: Vec<&UnitRow> = units
            .get(&index)
            .into_iter()
            .flatten()
            .filter(|unit| unit.status == "running")
            .collect();
        if out.is_empty() {
            ready.push(Ready {
                stage: stage.name().to_owned(),
                prompt: String::new(),
                dispatch_file: dispatch_path(&opened.workspace, stage),
                worktree: None,
            });
            continue;
        }
        // A stage running as units: the units out are what is listed.
        let context = opened.context(stage, clock::now_ms());
        for unit in out {
            if let Ok(materialized) = work::materialize(&context, unit) {
                ready.push(Ready {
                    stage: unit.label.clone(),
                    prompt: String::new(),
                    dispatch_file: dispatch_path(&opened.workspace, &materialized.stage),
                    worktree: None,
                });
            }
        }
    }
    standing(store, &opened, ready, Vec::new()).await
}
