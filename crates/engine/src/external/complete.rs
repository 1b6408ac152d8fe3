//! `complete` and `fail`: what the orchestrator reports back, refused unless
//! `next` handed it out, verified as the built-in executor verifies.

use baton_executor::redact::Redactor;

use super::handing::place;
use super::record::{Envelope, commit, settle, standing, write_envelopes};
use super::*;
use crate::attempt::Finished;
use crate::outputs::verify;

/// What `complete` or `fail` acts on: a stage handed out, or a unit of
/// a composite stage handed out.
pub(super) enum Target {
    Stage {
        index: usize,
        attempt: i64,
        started_at: Option<i64>,
    },
    Unit {
        index: usize,
        key: String,
        materialized: Box<work::Materialized>,
        started_at: Option<i64>,
    },
}

impl Target {
    /// The stage as handed out (the unit's own stage for a unit).
    fn stage<'a>(&'a self, plan: &'a Plan) -> &'a PlanStage {
        match self {
            Target::Stage { index, .. } => &plan.stages[*index],
            Target::Unit { materialized, .. } => &materialized.stage,
        }
    }
}

/// Finds what `name` refers to and refuses it unless `next` handed it out
/// and it has not ended, saying why.
pub(super) async fn handed_out(store: &Store, opened: &Opened, name: &str) -> Result<Target> {
    let run_id = &opened.run.run_id;
    let run = store.run(run_id).await?;
    if ended(&run.status) {
        return Err(Error::Refused(format!(
            "run {run_id} has already ended ({})",
            run.status
        )));
    }
    let rows = store.stages(run_id).await?;
    let now = clock::now_ms();
    // A unit label (`report[v1:unit:1]`, or a composite stage's own name for
    // its `main` unit).
    let units = store.units(run_id).await?;
    let labelled: Vec<&UnitRow> = units.iter().filter(|unit| unit.label == name).collect();
    let unit = labelled
        .iter()
        .find(|unit| unit.status == "running")
        .or_else(|| labelled.first());
    if let Some(unit) = unit {
        let index = usize::try_from(unit.index).unwrap_or(usize::MAX);
        let stage = opened
            .plan
            .stages
            .get(index)
            .ok_or_else(|| Error::NoSuchStage {
                run_id: run_id.clone(),
                stage: name.to_owned(),
            })?;
        if rows[index].status == "running" {
            return match unit.status.as_str() {
                "running" if !opened.runs_here(unit, now) => {
                    let context = opened.context(stage, now);
                    let materialized = work::materialize(&context, unit).map_err(Error::Refused)?;
                    Ok(Target::Unit {
                        index,
                        key: unit.key.clone(),
                        materialized: Box::new(materialized),
                        started_at: unit.started_at,
                    })
                }
                "running" => Err(Error::Refused(format!(
                    "'{name}' is run by baton itself (an inline script or a queue job)"
                ))),
                "success" | "failed" => Err(Error::Refused(format!(
                    "'{name}' is already completed ({}); `baton next {run_id}` hands out what follows",
                    unit.status
                ))),
                _ => Err(Error::Refused(format!(
                    "'{name}' was not handed out: call `baton next {run_id}` first and complete only what it lists"
                ))),
            };
        }
    }
    let stage = opened
        .plan
        .stages
        .iter()
        .find(|stage| stage.name() == name)
        .ok_or_else(|| Error::NoSuchStage {
            run_id: run_id.clone(),
            stage: name.to_owned(),
        })?;
    let row = &rows[stage.index];
    match row.status.as_str() {
        "running" if work::is_composite(stage) => Err(Error::Refused(format!(
            "stage '{name}' runs as units (validators, corrections, fan-out items): complete the units `baton next {run_id}` lists, by their names"
        ))),
        "running" if stage.spec.sub_workflow.is_some() => Err(Error::Refused(format!(
            "stage '{name}' runs a sub-workflow: complete the entries of its run that `baton next {run_id}` lists, by their names ('{name}/…')"
        ))),
        "running" if super::runs_here(stage) => Err(Error::Refused(format!(
            "stage '{name}' is run by baton itself (an inline script or a queue job)"
        ))),
        "running" => Ok(Target::Stage {
            index: stage.index,
            attempt: row.attempts,
            started_at: row.started_at,
        }),
        "success" | "awaiting_human" => Err(Error::Refused(format!(
            "stage '{name}' is already completed"
        ))),
        "skipped" => Err(Error::Refused(format!("stage '{name}' was skipped"))),
        "failed" => Err(Error::Refused(format!(
            "stage '{name}' has already failed ({}); `baton rerun {run_id} {name}` resets it",
            row.error.as_deref().unwrap_or("no reason recorded")
        ))),
        _ => {
            let waiting: Vec<String> = stage
                .depends_on
                .iter()
                .filter(|&&dependency| !State::from_status(&rows[dependency].status).is_terminal())
                .map(|&dependency| format!("'{}'", opened.plan.stages[dependency].name()))
                .collect();
            Err(Error::Refused(if waiting.is_empty() {
                format!(
                    "stage '{name}' was not handed out: call `baton next {run_id}` first and complete only the stages it lists"
                )
            } else {
                format!(
                    "stage '{name}' is not ready: it depends on {} (not done yet)",
                    waiting.join(", ")
                )
            }))
        }
    }
}

/// Verifies a handed-out stage's (or unit's) outputs exactly as the
/// built-in executor does and records its success (with the outputs'
/// hashes) or its failure. A composite stage takes its next step (more
/// units, or its end) at the next `next`.
///
/// # Errors
///
/// [`Error::Refused`] for a stage not handed out by `next`, already
/// completed or failed, or not ready; no such run or stage; the store
/// failing.
pub async fn complete(store: &Store, run_id: &str, name: &str) -> Result<Completion> {
    let opened = open(store, run_id).await?;
    if let Some((child, entry)) = super::subrun::route(&opened, name) {
        // Where the parent stands is what its orchestrator goes on from.
        let mut completion = Box::pin(complete(store, &child, entry)).await?;
        completion.stage = name.to_owned();
        completion.run = standing(store, &opened, Vec::new(), Vec::new()).await?;
        return Ok(completion);
    }
    let target = handed_out(store, &opened, name).await?;
    let stage = target.stage(&opened.plan);
    let before = read_before(&opened.workspace, stage)?;
    let defer_checks = match &target {
        Target::Unit { materialized, .. } => materialized.defer_checks,
        Target::Stage { .. } => false,
    };
    // An isolated stage's outputs come back from its worktree first, and
    // its branch is merged once they are verified, as the built-in
    // executor does.
    let (index, env) = match &target {
        Target::Stage { index, .. } => (*index, &[][..]),
        Target::Unit {
            index,
            materialized,
            ..
        } => (*index, materialized.env.as_slice()),
    };
    let worktree = if crate::worktree::isolated(stage) {
        match Worktree::find(stage, &place(store, &opened, index, env)).await {
            Ok(worktree) => Some(worktree),
            Err(error) => {
                return Err(Error::Refused(format!("stage '{name}': {error}")));
            }
        }
    } else {
        None
    };
    let copied = match &worktree {
        Some(worktree) => worktree.copy_back(stage, &opened.workspace),
        None => Ok(()),
    };
    let verified = copied.and_then(|()| verify(stage, &opened.workspace, &before, defer_checks));
    // A merge begun is marked until its result is recorded, so that a
    // `baton resume` after a crash in between finishes it.
    let marker = crate::workspace::dispatch_file(&opened.workspace, stage, "merging");
    let verified = match (verified, &worktree) {
        (Ok(artifacts), Some(worktree)) => {
            workspace::write_atomic(&marker, name.as_bytes()).map_err(|source| {
                Error::Workspace {
                    path: marker.clone(),
                    source,
                }
            })?;
            worktree
                .integrate(
                    stage,
                    &opened.run.run_id,
                    Some(opened.plan.stages[index].name()),
                )
                .await
                .map(|()| artifacts)
        }
        (verified, _) => verified,
    };
    let (success, error, artifacts) = match verified {
        Ok(artifacts) => (true, None, artifacts),
        Err(error) => {
            let error = Redactor::global().redact(&error).into_owned();
            (false, Some(error), Vec::new())
        }
    };
    let run = finish(store, &opened, name, success, error.clone(), artifacts).await?;
    let _ = std::fs::remove_file(&marker);
    Ok(Completion {
        stage: name.to_owned(),
        success,
        error,
        run,
    })
}

/// Finishes the merges `complete` began and did not record (baton died
/// between verifying an isolated stage and recording its result): each such
/// stage is completed again — its outputs are still the verified ones, and
/// a branch already merged is not merged twice. Returns the completions.
///
/// # Errors
///
/// No such run, a run not driven externally, or the store failing.
pub async fn finish_merges(store: &Store, run_id: &str) -> Result<Vec<Completion>> {
    let opened = open(store, run_id).await?;
    let Ok(entries) = std::fs::read_dir(opened.workspace.join("dispatch")) else {
        return Ok(Vec::new());
    };
    let mut markers: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "merging")
        })
        .collect();
    markers.sort();
    let mut completed = Vec::new();
    for marker in markers {
        let Ok(name) = std::fs::read_to_string(&marker) else {
            continue;
        };
        match complete(store, run_id, name.trim()).await {
            Ok(completion) => completed.push(completion),
            // Recorded after all, or no longer handed out: nothing pending.
            Err(Error::Refused(_)) => {
                let _ = std::fs::remove_file(&marker);
            }
            Err(other) => return Err(other),
        }
    }
    Ok(completed)
}

/// Records a handed-out stage (or unit) as failed with the orchestrator's
/// reason.
///
/// # Errors
///
/// As [`complete`].
pub async fn fail(store: &Store, run_id: &str, name: &str, reason: &str) -> Result<Standing> {
    let opened = open(store, run_id).await?;
    if let Some((child, entry)) = super::subrun::route(&opened, name) {
        Box::pin(fail(store, &child, entry, reason)).await?;
        return standing(store, &opened, Vec::new(), Vec::new()).await;
    }
    handed_out(store, &opened, name).await?;
    finish(
        store,
        &opened,
        name,
        false,
        Some(reason.to_owned()),
        Vec::new(),
    )
    .await
}

pub(super) async fn finish(
    store: &Store,
    opened: &Opened,
    name: &str,
    success: bool,
    error: Option<String>,
    artifacts: Vec<(String, String, i64)>,
) -> Result<Standing> {
    let lease = take(store, &opened.run.run_id).await?;
    let result = async {
        // Checked again under the lease: of two racing completions one is
        // recorded, the other refused.
        let target = handed_out(store, opened, name).await?;
        let stage = target.stage(&opened.plan).clone();
        let (index, unit, attempt, started_at) = match target {
            Target::Stage {
                index,
                attempt,
                started_at,
            } => (index, None, attempt, started_at),
            Target::Unit {
                index,
                key,
                started_at,
                ..
            } => (index, Some(key), 0, started_at),
        };
        // What the orchestrator or git said can hold a secret, as a
        // process's error can in `baton run`.
        let finished = crate::attempt::redacted(Finished {
            unit,
            ..Finished::ended(index, attempt, (success, error), artifacts)
        });
        let transition = finished.transition(clock::now_ms());
        let envelope = Envelope {
            stage,
            index,
            status: finished.status(),
            started_at,
            error: finished.error,
        };
        commit(store, &lease, opened, vec![transition]).await?;
        write_envelopes(&opened.workspace, vec![envelope]);
        settle(store, &lease, opened, Vec::new(), Vec::new()).await
    }
    .await;
    let _ = store.release(&lease).await;
    result
}

pub(super) fn read_before(workspace: &Path, stage: &PlanStage) -> Result<Snapshot> {
    let path = before_path(workspace, stage);
    let text = std::fs::read(&path).map_err(|source| Error::Workspace {
        path: path.clone(),
        source,
    })?;
    let entries: Vec<(PathBuf, Fingerprint)> = serde_json::from_slice(&text).map_err(|error| {
        Error::Refused(format!(
            "{} is not the snapshot `baton next` wrote ({error}); `baton rerun` the stage",
            path.display()
        ))
    })?;
    Ok(entries.into_iter().collect::<HashMap<_, _>>())
}
