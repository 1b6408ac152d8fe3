//! `next`: records what became ready as started, runs ready inline scripts
//! and queue stages itself, drives sub-workflow stages' child runs one
//! `next` on, and lists every stage and unit handed out.

use std::collections::HashSet;

use baton_store::{GateDecisionRow, Lease, StageRow, Store, Transition, UnitRow};
use baton_workflow::Plan;
use baton_workflow::schema::Executor;

use super::handing::{Script, hand_out, units_by_stage, worktree_for, write_start};
use super::record::{Envelope, commit, renewing, run_script, settle, standing, write_envelopes};
use super::{Opened, Ready, Standing, as_i64, ended, open, runs_here, subrun, take};
use crate::outputs::write_skip_sentinels;
use crate::queue::{LocalWorker, WorkerOptions};
use crate::run_state::{Action, Composite, Event, RunState};
use crate::{Error, Result, clock, work};

/// Lists the stages ready for the orchestrator, recording each as started.
/// Stages handed out before and not completed are listed again. Inline
/// scripts and queue stages that are ready run here (a queue stage's job
/// by `worker`, a queue worker for this call, or by any `baton worker`),
/// and their dependants are looked at again.
///
/// # Errors
///
/// No such run, a run not driven externally, a changed workflow, a live
/// process holding the run, or the store failing.
pub async fn next(store: &Store, run_id: &str, worker: Option<&WorkerOptions>) -> Result<Standing> {
    // A merge a killed `complete` began is finished first: its stage must
    // not be handed out again, for its agent to run twice.
    super::finish_merges(store, run_id).await?;
    let opened = open(store, run_id).await?;
    if ended(&opened.run.status) {
        restore_envelopes(store, &opened).await?;
        return standing(store, &opened, Vec::new(), Vec::new()).await;
    }
    let mut lease = take(store, run_id).await?;
    let mut local_worker = None;
    let result = next_owned(store, &mut lease, &opened, (worker, &mut local_worker)).await;
    if let Some(local_worker) = local_worker {
        local_worker.finish().await;
    }
    let _ = store.release(&lease).await;
    result
}

/// `worker`: how to run a queue worker for this call, and the one started
/// (once a queue stage is to run, so a call without one claims nothing).
async fn next_owned(
    store: &Store,
    lease: &mut Lease,
    opened: &Opened,
    (worker, local_worker): (Option<&WorkerOptions>, &mut Option<LocalWorker>),
) -> Result<Standing> {
    let plan = &opened.plan;
    let mut scripts = Vec::new();
    let mut left = kill_left_scripts(store, opened).await?;
    restore_envelopes(store, opened).await?;
    // A gate edit a killed `baton gate edit` left half done is finished
    // before the gates are read.
    let artifacts = store.artifacts(&opened.run.run_id).await?;
    crate::gate::edit::finish_interrupted(&opened.workspace, &artifacts);
    loop {
        let (rows, mut run) = opened.state(store).await?;
        if run.cancelled() {
            // `baton cancel` asked while this call held the run: it ends as
            // a cancel of a run nobody holds does, its children with it.
            crate::control::mark_cancelled(store, lease).await?;
            store.clear_cancel(&opened.run.run_id).await?;
            crate::control::cancel_children(store, &opened.run.run_id, true).await?;
            return standing(store, opened, Vec::new(), scripts).await;
        }
        if run.stopping() {
            return settle(store, lease, opened, Vec::new(), scripts).await;
        }
        let mut pass = Pass {
            now: clock::now_ms(),
            ..Pass::default()
        };
        pass.rerun_left_scripts(plan, &rows);
        pass.push_back(&mut run);
        // What starts — stages and units — and which composite stages take
        // their next step: the run's state machine decides, as it does for
        // the coordinator.
        let actions = if pass.progressed {
            // Look again once this step's changes are recorded.
            Vec::new()
        } else {
            run.apply(Event::Poll {
                free: usize::MAX,
                now: pass.now,
            })
        };
        for action in actions {
            pass.progressed |= pass.begin(action, opened, &run)?;
        }
        if !pass.transitions.is_empty() {
            pass.transitions.push(Transition::RunStatus {
                status: "running".to_owned(),
                at: pass.now,
                error: None,
            });
            commit(store, lease, opened, std::mem::take(&mut pass.transitions)).await?;
        }
        write_envelopes(&opened.workspace, pass.envelopes);
        pass.progressed |= !pass.to_run.is_empty();
        let enqueues = |script: &Script| script.stage.spec.executor == Executor::WorkerQueue;
        if local_worker.is_none() && pass.to_run.iter().any(enqueues) {
            *local_worker = LocalWorker::start(store, worker, (&opened.run.run_id, &opened.plan));
        }
        for mut script in pass.to_run {
            script.adopt_job = left.remove(&(script.index, script.unit.clone()));
            scripts.push(run_one(store, lease, opened, script).await?);
        }
        if pass.progressed {
            continue;
        }
        let children = drive_children(store, lease, opened, &rows, worker).await?;
        scripts.extend(children.scripts);
        if children.ended {
            continue;
        }
        // Settled: every stage and unit handed out and not completed is
        // listed, the children's entries with them.
        let mut handed = listed(store, opened, &rows, pass.now).await?;
        handed.extend(children.ready);
        return settle(store, lease, opened, handed, scripts).await;
    }
}

/// Drives each sub-workflow stage's child run one `next` on, keeping this
/// run's lease meanwhile, and ends the stages whose child has stopped.
async fn drive_children(
    store: &Store,
    lease: &mut Lease,
    opened: &Opened,
    rows: &[StageRow],
    worker: Option<&WorkerOptions>,
) -> Result<subrun::Children> {
    let mut children = subrun::Children::default();
    for (stage, child) in subrun::children(store, opened, rows).await {
        let child = match child {
            Ok(child) => {
                // A cancel of this run is passed on to the child, whose
                // call then stops what it runs and returns.
                let pass_on = || {
                    let (store, child) = (store.clone(), child.clone());
                    tokio::spawn(async move {
                        let _ = store.request_cancel(&child, clock::now_ms()).await;
                    });
                };
                let call = Box::pin(next(store, &child, worker));
                match renewing(store, lease, pass_on, call).await {
                    Ok(standing) => Ok(standing),
                    // Worth calling again: the store, a held run.
                    Err(error @ (Error::Store(_) | Error::Owned { .. })) => return Err(error),
                    // The child cannot go on (its workflow changed, …): its
                    // stage fails, as in `baton run`.
                    Err(error) => Err(format!("sub-workflow run {child}: {error}")),
                }
            }
            Err(error) => Err(error),
        };
        let at = (stage, &rows[stage.index]);
        children.take((store, lease, opened), at, child).await?;
    }
    Ok(children)
}

/// A script or queue stage recorded as running was left by a `next` that
/// died while it ran (calls hold the lease one at a time). A script's
/// processes, marked with the run's id, must not keep writing while it
/// runs again; a queue stage's job is adopted by its next start. Returns
/// what was left: (stage, unit).
async fn kill_left_scripts(
    store: &Store,
    opened: &Opened,
) -> Result<HashSet<(usize, Option<String>)>> {
    let run_id = &opened.run.run_id;
    let rows = store.stages(run_id).await?;
    let now = clock::now_ms();
    let stages = opened
        .plan
        .stages
        .iter()
        .filter(|stage| {
            rows[stage.index].status == "running" && !work::is_composite(stage) && runs_here(stage)
        })
        .map(|stage| (stage.index, None));
    let units = store.units(run_id).await?;
    let units = units
        .iter()
        .filter(|unit| unit.status == "running" && opened.runs_here(unit, now))
        .filter_map(|unit| Some((usize::try_from(unit.index).ok()?, Some(unit.key.clone()))));
    let left: HashSet<(usize, Option<String>)> = stages.chain(units).collect();
    if !left.is_empty() {
        crate::reconcile::kill_leftovers(run_id);
    }
    Ok(left)
}

/// Writes the envelopes of recorded results that a call killed between
/// its commit and its writing them left missing, as a resume does for a
/// run baton drives.
async fn restore_envelopes(store: &Store, opened: &Opened) -> Result<()> {
    let run_id = &opened.run.run_id;
    let (stages, units) = (store.stages(run_id).await?, store.units(run_id).await?);
    let lacking = crate::envelopes::lacking(&stages, &units, &opened.workspace);
    let rows = (&stages[..], &units[..]);
    crate::envelopes::restore(
        &opened.plan,
        rows,
        &lacking,
        &opened.workspace,
        clock::now_ms(),
    );
    Ok(())
}

/// One pass of `next`: what it records, the scripts it runs, the
/// envelopes it writes, and whether anything changed that may make more
/// work ready.
#[derive(Default)]
struct Pass {
    now: i64,
    transitions: Vec<Transition>,
    to_run: Vec<Script>,
    envelopes: Vec<Envelope>,
    progressed: bool,
}

impl Pass {
    /// Only a `next` that died while a stage's script ran leaves it
    /// running (calls hold the lease one at a time): it runs again.
    fn rerun_left_scripts(&mut self, plan: &Plan, rows: &[StageRow]) {
        for stage in &plan.stages {
            let row = &rows[stage.index];
            if row.status == "running" && !work::is_composite(stage) && runs_here(stage) {
                self.transitions.push(Transition::AttemptInterrupted {
                    index: as_i64(stage.index),
                    attempt: row.attempts,
                    at: self.now,
                });
                self.progressed = true;
            }
        }
    }

    /// A gate pushed back while another call held the run, or whose
    /// push-back a kill cut short, is set back to pending here, as `baton
    /// run` does: `baton gate push-back` sets it back only while nobody
    /// holds the run.
    fn push_back(&mut self, run: &mut RunState) {
        let gates = run.gates();
        let pushed: Vec<(usize, GateDecisionRow)> = gates
            .pushed_back
            .iter()
            .filter_map(|index| Some((*index, gates.push_backs.get(index)?.clone())))
            .collect();
        for (index, decision) in pushed {
            self.transitions
                .extend(crate::gate::push_back_transitions(as_i64(index), &decision));
            run.apply(Event::PushedBack { index });
            self.progressed = true;
        }
    }

    /// Starts a unit the machine started: a script runs in this pass, the
    /// rest is handed out. Returns whether it changed anything beyond that.
    fn start_unit(&mut self, context: &work::Context<'_>, unit: &UnitRow) -> Result<bool> {
        let index = context.stage.index;
        match work::materialize(context, unit) {
            Err(error) => {
                self.transitions.push(Transition::UnitFinished {
                    index: as_i64(index),
                    key: unit.key.clone(),
                    status: "failed".to_owned(),
                    at: self.now,
                    exit_code: None,
                    error: Some(error),
                    artifacts: Vec::new(),
                });
                return Ok(true);
            }
            Ok(materialized) if runs_here(&materialized.stage) => {
                self.to_run.push(Script {
                    index,
                    attempt: unit.attempts,
                    stage: materialized.stage,
                    unit: Some(unit.key.clone()),
                    values: materialized.values,
                    env: materialized.env,
                    defer_checks: materialized.defer_checks,
                    adopt_job: false,
                });
            }
            Ok(materialized) => write_start(&materialized.stage, context.workspace)?,
        }
        Ok(false)
    }

    /// Every unit of a composite stage has finished: the stage's program
    /// takes its next step, exactly as in the coordinator.
    fn step(&mut self, context: &work::Context<'_>, composite: &Composite, attempt: i64) {
        let units = (&composite.units[..], attempt);
        let work::Advanced::Ended(finished) = work::advance(context, units, &mut self.transitions)
        else {
            return;
        };
        self.envelopes.push(Envelope {
            stage: context.stage.clone(),
            index: context.stage.index,
            status: finished.status(),
            started_at: Some(composite.started_at),
            error: finished.error.clone(),
        });
        self.transitions.push(finished.transition(self.now));
    }
}

/// Runs a script `next` runs itself and records its result; returns
/// (name, status) for the standing.
async fn run_one(
    store: &Store,
    lease: &mut Lease,
    opened: &Opened,
    script: Script,
) -> Result<(String, String)> {
    let index = script.index;
    let name = match &script.unit {
        Some(_) => script.stage.name().to_owned(),
        None => opened.plan.stages[index].name().to_owned(),
    };
    let ran = script.stage.clone();
    let started_at = Some(clock::now_ms());
    let finished = run_script(store, lease, opened, script).await?;
    let status = finished.status();
    let envelope = Envelope {
        stage: ran,
        index,
        status,
        started_at,
        error: finished.error.clone(),
    };
    let transition = finished.transition(clock::now_ms());
    commit(store, lease, opened, vec![transition]).await?;
    write_envelopes(&opened.workspace, vec![envelope]);
    Ok((name, status.to_owned()))
}

/// Every stage and unit handed out and not completed, handed out (again).
async fn listed(store: &Store, opened: &Opened, rows: &[StageRow], now: i64) -> Result<Vec<Ready>> {
    let (plan, workspace) = (&opened.plan, &opened.workspace);
    let units = units_by_stage(store, &opened.run.run_id).await?;
    // A stage pushed back at its gate is handed out with the comment.
    let gates = crate::gate::Gates::load(store, &opened.run.run_id, plan, workspace).await?;
    let mut handed = Vec::new();
    for stage in plan
        .stages
        .iter()
        .filter(|stage| rows[stage.index].status == "running" && stage.spec.sub_workflow.is_none())
    {
        if !work::is_composite(stage) {
            let worktree = worktree_for(store, opened, stage.index, stage, &[]).await?;
            let push_back = gates.push_back_for(stage.index, rows[stage.index].attempts);
            handed.push(hand_out(
                plan,
                stage,
                workspace,
                worktree.as_ref(),
                push_back,
            )?);
            continue;
        }
        let context = work::Context {
            plan,
            stage,
            workspace,
            now,
        };
        for unit in units
            .get(&stage.index)
            .into_iter()
            .flatten()
            .filter(|unit| unit.status == "running")
        {
            if let Ok(materialized) = work::materialize(&context, unit) {
                let (index, env) = (stage.index, &materialized.env);
                let worktree = worktree_for(store, opened, index, &materialized.stage, env).await?;
                let mut ready = hand_out(
                    plan,
                    &materialized.stage,
                    workspace,
                    worktree.as_ref(),
                    None,
                )?;
                ready.stage.clone_from(&unit.label);
                handed.push(ready);
            }
        }
    }
    Ok(handed)
}

impl Pass {
    /// Carries out what the run's state machine decided for a ready stage:
    /// records a skip or a failed `when`, or starts it (a script to run here,
    /// a composite stage whose units the next pass plans, or a stage to hand
    /// out). Returns whether it changed anything.
    fn begin(&mut self, action: Action, opened: &Opened, run: &RunState) -> Result<bool> {
        let (workspace, now) = (&opened.workspace, self.now);
        let envelope = |index: usize, status| Envelope {
            stage: opened.plan.stages[index].clone(),
            index,
            status,
            started_at: Some(now),
            error: None,
        };
        self.transitions.extend(action.transition(now));
        let composite = |index| run.composite(index).expect("a composite stage in progress");
        match action {
            Action::End(_) => return Ok(false),
            Action::Interrupt { .. } => {}
            Action::StartUnit { index, key, .. } => {
                let context = opened.context(&opened.plan.stages[index], now);
                let unit = composite(index)
                    .unit(&key)
                    .expect("a unit the machine started");
                return self.start_unit(&context, unit);
            }
            Action::Step { index } => {
                let context = opened.context(&opened.plan.stages[index], now);
                self.step(&context, composite(index), run.attempt(index));
            }
            Action::Skip { index, .. } => {
                write_skip_sentinels(&opened.plan.stages[index], workspace)?;
                self.envelopes.push(envelope(index, "skipped"));
            }
            Action::Fail { index, .. } => self.envelopes.push(envelope(index, "failed")),
            Action::Start { index, attempt } => {
                let stage = &opened.plan.stages[index];
                if work::is_composite(stage) {
                    // The machine has it take its first step.
                } else if stage.spec.sub_workflow.is_some() {
                    // Its child run is driven once the start is recorded.
                } else if runs_here(stage) {
                    self.to_run.push(Script {
                        index,
                        attempt,
                        stage: stage.clone(),
                        unit: None,
                        values: Vec::new(),
                        env: Vec::new(),
                        defer_checks: false,
                        adopt_job: false,
                    });
                } else {
                    // The outputs as they are now, kept on disk for `complete`,
                    // which runs in another process; written before the start
                    // is recorded so a recorded start always has its snapshot.
                    write_start(stage, workspace)?;
                }
            }
        }
        Ok(true)
    }
}
