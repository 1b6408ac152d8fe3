//! Starting attempts: what occupies a slot, which starts may run before
//! they are recorded, and spawning a stage's or a unit's attempt.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use baton_store::{Lease, Store};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::{Executor, FanOutMode, Isolation};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use super::DriveOptions;
use super::spans::Spans;
use crate::attempt::{Attempt, Continuation, Finished, Params, Report, Slots, redacted};
use crate::clock;
use crate::progress::Progress;
use crate::run_options::RunOptions;
use crate::run_state::Gates;
use crate::stage;
use crate::subrun::{self, DriveChild};
use crate::work;

/// What occupies a slot: a stage's own process, or a unit of a composite stage.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Slot {
    Stage(usize),
    Unit(usize, String),
}

pub(super) struct Running {
    pub(super) cancel: watch::Sender<bool>,
    pub(super) started_at: i64,
    /// For a unit: the stage it runs and its label, for its envelope.
    pub(super) stage: Option<PlanStage>,
    pub(super) label: Option<String>,
    /// The attempt's span, which its end is recorded on.
    pub(super) span: tracing::Span,
}

impl Drop for Running {
    /// Cancels the attempt. An attempt's slot is dropped once its result
    /// arrived, when this does nothing, or when the drive ends with an
    /// error while it runs: then its process must not outlive the drive,
    /// which matters when the runtime goes on (a sub-workflow's drive runs
    /// on its parent's) and the process's start was never recorded.
    fn drop(&mut self) {
        let _ = self.cancel.send(true);
    }
}

/// A process to start once the starts are committed: a stage, or a unit
/// (key, label, attempt number, and what to run or why it cannot run).
pub(super) struct Launch {
    pub(super) index: usize,
    pub(super) unit: Option<(String, String, i64, Result<work::Materialized, String>)>,
    /// A fan-out child: a plain process of its own, which may start before
    /// its start is recorded (see `starts_early`).
    pub(super) item: bool,
}

/// Whether `launches` may start before the commit that records their starts.
///
/// Waiting for that commit puts a synchronous write between every stage's
/// end and the next stage's start; a chain of short stages spends most of
/// its time there. Starting first and committing while the processes run is
/// safe for a plain process (a script or an agent CLI, or one request to an
/// endpoint):
/// * a crash before the commit leaves the stage pending, so a resume runs it
///   again, under the same attempt number, after killing the process by the
///   run's marker; its results were never recorded, so nothing recorded is
///   run twice, and the stale logs of that number are removed
///   (`reconcile::forget_unrecorded_logs`);
/// * a failed commit ends the drive, and with it the processes.
///
/// A fan-out child is such a process too. A crash before its start is
/// recorded leaves its unit as it was (or, with the fan-out's own start,
/// unplanned), so the resume runs it again under the same attempt number,
/// and its stale logs go the same way.
///
/// Everything that leaves durable traces of its own before its process runs
/// (a worktree and branch, a child run, a queue job) and every other unit
/// of a composite stage (a checked stage's main work, validation steps,
/// whose counts bound correction cycles) waits for its start to be
/// recorded. So does every start while the lease is near its end: a driver
/// paused past its lease must find out by a failed commit before it starts
/// anything, as another driver may already own the run.
pub(super) fn starts_early(lease: &Lease, ttl: i64, plan: &Plan, launches: &[Launch]) -> bool {
    lease.until - clock::now_ms() > ttl / 2
        && launches.iter().all(|launch| {
            let stage = &plan.stages[launch.index];
            (launch.unit.is_none() || launch.item)
                && stage.spec.sub_workflow.is_none()
                && stage.spec.executor != Executor::WorkerQueue
                // A fan-out's children are launched under the fan-out
                // stage: their own queue jobs or worktrees come from here.
                && stage.spec.fan_out.as_ref().is_none_or(|fan_out| {
                    fan_out.mode != FanOutMode::WorkerQueue
                        && fan_out.isolation != Isolation::Worktree
                })
                && !crate::worktree::isolated(stage)
        })
}

/// What a unit's attempt adds to its stage's: values for its script, its
/// environment, whether its checks are deferred, the session it continues.
type Extras = (
    Vec<(String, String)>,
    Vec<(String, String)>,
    bool,
    Option<Continuation>,
);

/// What every attempt of a drive shares.
pub(super) struct Spawner {
    pub(super) run_id: String,
    pub(super) workspace: PathBuf,
    pub(super) run_options: RunOptions,
    pub(super) params: Params,
    pub(super) options: Arc<DriveOptions>,
    pub(super) plan: Arc<Plan>,
    pub(super) slots: Arc<Slots>,
    pub(super) store: Store,
    pub(super) reports: mpsc::UnboundedSender<Report>,
    /// Stages and units whose attempt a crash cut short: their next attempt
    /// may adopt the queue job that attempt left (`queued.rs`); no other
    /// attempt does, so a failure or a rerun runs a new job.
    pub(super) interrupted: HashSet<(usize, Option<String>)>,
    /// How a sub-workflow attempt drives its child run.
    pub(super) drive_child: DriveChild,
    /// The gates' decisions as last read: a stage's attempt after a
    /// push-back carries its comment.
    pub(super) gates: Gates,
}

impl Spawner {
    /// Spawns `launch` (attempt `stage_attempt` for a stage's own process)
    /// into `running`; returns the progress line of its start, if it has one.
    pub(super) fn spawn(
        &mut self,
        launch: Launch,
        stage_attempt: i64,
        running: &mut HashMap<Slot, Running>,
        spans: &Spans,
    ) -> Option<Progress> {
        let (stage_to_run, unit, label, attempt_number, extras) = match launch.unit {
            None => (
                self.plan.stages[launch.index].clone(),
                None,
                None,
                stage_attempt,
                Extras::default(),
            ),
            Some((key, label, attempts, Ok(materialized))) => (
                materialized.stage,
                Some(key),
                Some(label),
                attempts,
                (
                    materialized.values,
                    materialized.env,
                    materialized.defer_checks,
                    materialized.continues,
                ),
            ),
            Some((key, _, attempts, Err(error))) => {
                // The unit cannot even be built: it fails without a process.
                let failed =
                    Finished::before_start(launch.index, Some(key.clone()), attempts, error);
                let _ = self.reports.send(Report::Finished(Box::new(failed)));
                running.insert(
                    Slot::Unit(launch.index, key),
                    Running {
                        cancel: watch::channel(false).0,
                        started_at: clock::now_ms(),
                        stage: None,
                        label: None,
                        span: tracing::Span::none(),
                    },
                );
                return None;
            }
        };
        let (cancel_sender, cancel_receiver) = watch::channel(false);
        let attempt = self.attempt(launch.index, attempt_number, unit.clone(), extras);
        // A composite stage's main unit is the stage's own work: the
        // stage's lines already say it started.
        let started = (unit.as_deref() != Some(work::MAIN)).then(|| Progress::Started {
            stage: label
                .clone()
                .unwrap_or_else(|| self.plan.stages[launch.index].name().to_owned()),
            attempt: attempt_number,
        });
        let slot = match &unit {
            None => Slot::Stage(launch.index),
            Some(key) => Slot::Unit(launch.index, key.clone()),
        };
        let kept = unit.as_ref().map(|_| stage_to_run.clone());
        let span = spans.attempt(
            launch.index,
            &self.plan.stages[launch.index],
            (attempt_number, unit.as_deref()),
            self.options.agents.as_deref(),
        );
        // The options ride along so that a sub-workflow attempt drives its
        // child run as this run is driven. Boxed: the attempt's future is
        // some 15 KB, which spawning would otherwise copy more than once.
        tokio::spawn(
            subrun::OPTIONS
                .scope(
                    Arc::clone(&self.options),
                    Box::pin(run(
                        stage_to_run,
                        attempt,
                        cancel_receiver,
                        self.reports.clone(),
                        self.drive_child,
                    )),
                )
                .instrument(span.clone()),
        );
        running.insert(
            slot,
            Running {
                cancel: cancel_sender,
                started_at: clock::now_ms(),
                stage: kept,
                label,
                span,
            },
        );
        started
    }

    fn attempt(
        &mut self,
        index: usize,
        attempt: i64,
        unit: Option<String>,
        (values, env, defer_checks, continues): Extras,
    ) -> Attempt {
        let mut params = self.params.clone();
        params.extend(values);
        Attempt {
            run_id: self.run_id.clone(),
            index,
            attempt,
            workspace: self.workspace.clone(),
            project_dir: self.run_options.project_dir.clone(),
            params,
            limits: self.options.limits.clone(),
            plan: Arc::clone(&self.plan),
            agents: self.options.agents.clone(),
            contain_helper: self.options.contain_helper.clone(),
            slots: Arc::clone(&self.slots),
            adopt_job: self.interrupted.remove(&(index, unit.clone())),
            unit,
            env,
            defer_checks,
            store: self.store.clone(),
            continues,
            accept_merge: self.options.accept_merge,
            push_back: self.gates.push_back_for(index, attempt).cloned(),
        }
    }
}

/// Runs an attempt: a sub-workflow stage's drives its child run (only the
/// coordinator drives those), any other's runs as [`stage::run`] runs it.
async fn run(
    stage: PlanStage,
    attempt: Attempt,
    cancel: watch::Receiver<bool>,
    reports: mpsc::UnboundedSender<Report>,
    drive_child: DriveChild,
) {
    if stage.spec.sub_workflow.is_none() {
        return stage::run(stage, attempt, cancel, reports).await;
    }
    let finished = subrun::run(&stage, &attempt, cancel, &reports, drive_child).await;
    let _ = reports.send(Report::Finished(Box::new(redacted(finished))));
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_workflow::MemoryLoader;

    fn plan(fan_out_extra: &str) -> Plan {
        let yaml = format!(
            "name: t\nversion: '1'\ndescription: d\ntrigger: {{source: manual}}\nstages:\n  \
             - {{name: src, kind: execute, description: d, executor: inline, script: 'true', writes_to: [src.json]}}\n  \
             - name: fan\n    kind: execute\n    description: Edit {{id}}.txt.\n    \
             agent: {{role: coder, access: read-write}}\n    depends_on: [src]\n    \
             fan_out: {{source: src, field: items, key: id, mode: agent{fan_out_extra}}}\n    \
             writes_to: ['fan-{{id}}.md']\n"
        );
        let loader = MemoryLoader::new().with("w.yaml", &yaml);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles")
    }

    fn child(plan: &Plan) -> Launch {
        let index = plan
            .stages
            .iter()
            .position(|stage| stage.name() == "fan")
            .expect("fan");
        Launch {
            index,
            unit: Some((
                "a".to_owned(),
                "fan[a]".to_owned(),
                1,
                Err("unused".to_owned()),
            )),
            item: true,
        }
    }

    #[test]
    fn fan_out_children_in_worktrees_wait_for_their_start_to_be_recorded() {
        let ttl = 30_000;
        let lease = Lease {
            run_id: "r".to_owned(),
            owner: "o".to_owned(),
            epoch: 1,
            until: clock::now_ms() + ttl,
        };
        let shared = plan("");
        assert!(starts_early(&lease, ttl, &shared, &[child(&shared)]));
        let isolated = plan(", isolation: worktree");
        assert!(!starts_early(&lease, ttl, &isolated, &[child(&isolated)]));
    }
}
