//! One drive of a run under its lease: a loop that feeds the run's state
//! machine ([`RunState`]) what happens — results, cancel requests, gate
//! decisions — and turns what it decides into effects: attempts spawned,
//! transitions committed (`commits`), envelopes written, progress shown.
//! The units of composite stages are run here too, as the machine starts
//! them and `work` plans them.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_store::{Lease, Store, Transition, UnitRow};
use baton_workflow::Plan;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::commits::{Announced, Commits, Shown, Sink, cheap};
use super::launch::{Launch, Running, Slot, Spawner, starts_early};
use super::spans::{self, Spans};
use super::{DriveOptions, Outcome};
use crate::attempt::{Finished, Report, Slots};
use crate::envelopes::EnvelopeWriter;
use crate::governance::RunLedger;
use crate::outputs::write_skip_sentinels;
use crate::progress::Progress;
use crate::run_state::{Action, Budget, End, Event, Gates, RunState, UnitEnd};
use crate::schedule::as_i64;
use crate::start::Start;
use crate::subrun::DriveChild;
use crate::work;
use crate::{Error, Result, clock, gate, reconcile};

/// Where the drive's commits go, borrowed field by field so that the
/// commits themselves can be borrowed mutably beside it.
macro_rules! sink {
    ($driver:expr) => {
        Sink {
            store: $driver.store,
            plan: &$driver.plan,
            run: &$driver.run,
            progress: $driver.progress,
        }
    };
}

/// How often a driver looks for a cancel request (a cheap read), besides
/// when it renews its lease.
const CANCEL_POLL: Duration = Duration::from_millis(250);

/// Drives the run under `lease` until it ends or waits at a gate.
pub(super) async fn drive_owned(
    store: &Store,
    lease: &mut Lease,
    created: Option<crate::Created>,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
    drive_child: DriveChild,
) -> Result<Outcome> {
    let span = spans::run(&lease.run_id);
    async {
        let mut driver =
            Driver::open(store, lease, created, options, progress, drive_child).await?;
        let end = driver.run().await?;
        driver.finish(&end).await
    }
    .instrument(span)
    .await
}

/// A drive under way: what its loop keeps between steps.
struct Driver<'a> {
    store: &'a Store,
    lease: &'a mut Lease,
    options: &'a DriveOptions,
    progress: &'a (dyn Fn(Progress) + Sync),
    plan: Arc<Plan>,
    workspace: PathBuf,
    run: RunState,
    max_parallel: usize,
    ttl: i64,
    running: HashMap<Slot, Running>,
    spans: Spans,
    commits: Commits,
    spawner: Spawner,
    reports: mpsc::UnboundedReceiver<Report>,
    renew: tokio::time::Interval,
    cancel_poll: tokio::time::Interval,
    local_worker: Option<crate::queue::LocalWorker>,
}

/// What one step of the loop came to.
enum Stepped {
    /// Something started or changed: step again.
    Again,
    /// Nothing can start now: wait for something to happen.
    Wait,
    Ended(End),
}

impl<'a> Driver<'a> {
    /// Takes the run up: its plan, what a crash left repaired, its state
    /// as recorded, and the run marked running (committed at once only
    /// when something was repaired; else with the loop's first commit).
    async fn open(
        store: &'a Store,
        lease: &'a mut Lease,
        created: Option<crate::Created>,
        options: &'a DriveOptions,
        progress: &'a (dyn Fn(Progress) + Sync),
        drive_child: DriveChild,
    ) -> Result<Driver<'a>> {
        let run_id = lease.run_id.clone();
        let start = match created {
            Some(created) => Start::created(created),
            None => Start::recorded(store, &run_id, options.accept_changes).await?,
        };
        let (ledger, opening) = open_ledger(store, lease, &start, options).await?;
        let fresh = start.fresh;
        let created_stages = fresh.then(|| start.pending_stages());
        let Start {
            workspace_dir: workspace,
            run_options,
            params,
            plan,
            ..
        } = start;
        let now = clock::now_ms();
        // A run created a moment ago is all pending, with nothing to
        // reconcile: reading it back would cost six queries.
        let (stages, units, mut transitions) = match created_stages {
            Some(stages) => (stages, Vec::new(), Vec::new()),
            None => reconcile::recorded(store, lease, &plan, &workspace, now, progress).await?,
        };
        let interrupted = interrupted(&transitions, &units);
        // Nothing to reconcile (always so for a new run): the stages and
        // units just read are what the store still holds, and marking the
        // run running (with its ledger's opening) waits for the loop's first
        // commit, like the starts of plain processes (see `starts_early`):
        // anything else commits it before it starts. What was reconciled is
        // committed first.
        let reconciled = !transitions.is_empty();
        transitions.push(running_status(now));
        transitions.extend(opening);
        let (stages, units, opened) = if reconciled {
            store.apply(lease, &transitions).await?;
            let stages = store.stages(&run_id).await?;
            (stages, store.units(&run_id).await?, Vec::new())
        } else {
            (stages, units, transitions)
        };
        // Gates are approved through `baton gate`; reloaded while waiting
        // at a gate.
        let gates = gate::Gates::load(store, &run_id, &plan, &workspace).await?;
        // One copy of the plan, shared with every attempt.
        let plan = Arc::new(plan);
        let max_parallel = (options.max_parallel)
            .unwrap_or(run_options.max_parallel)
            .max(1);
        let mut run = RunState::new(Arc::clone(&plan), params.clone(), &stages, gates.clone())
            .with_units(units, max_parallel);
        if let Some(limit) = options.budget_usd.or(run_options.budget_usd) {
            // A new run has spent nothing; a resumed one what it recorded.
            let spent = if fresh {
                0.0
            } else {
                spent_usd(store, &run_id).await?
            };
            run.set_budget(Budget { limit, spent });
        }
        let (report_sender, reports) = mpsc::unbounded_channel::<Report>();
        let spawner = Spawner {
            run_id,
            workspace: workspace.clone(),
            params: params.into_iter().collect(),
            options: Arc::new(options.clone()),
            plan: Arc::clone(&plan),
            slots: Arc::new(Slots::new(options.agents.as_deref())),
            store: store.clone(),
            reports: report_sender,
            interrupted,
            run_options,
            drive_child,
            gates: Gates::default(),
        };
        let mut driver = Driver {
            spans: Spans::new(&plan.name),
            max_parallel,
            ttl: options.lease_ttl_ms(),
            commits: Commits::new(opened, ledger, EnvelopeWriter::start(&workspace)),
            local_worker: crate::queue::LocalWorker::start(
                store,
                options.local_worker.as_ref(),
                (&lease.run_id, &plan),
            ),
            renew: clock::every(options.lease_ttl / 3),
            cancel_poll: clock::every(CANCEL_POLL),
            store,
            lease,
            options,
            progress,
            plan,
            workspace,
            run,
            running: HashMap::new(),
            spawner,
            reports,
        };
        // A push-back decided while no driver could act on it.
        driver.push_back(gates);
        Ok(driver)
    }

    /// Steps until the run ends (or waits at a gate without `wait_gates`).
    async fn run(&mut self) -> Result<End> {
        loop {
            match self.step().await? {
                Stepped::Again => continue,
                Stepped::Ended(end) => return Ok(end),
                Stepped::Wait => {}
            }
            // Nothing can start: record the results that arrived before
            // waiting, so a result is never held back while others run.
            self.commits.when_due(&sink!(self), self.lease).await?;
            tokio::select! {
                report = self.reports.recv() => {
                    let now = clock::now_ms();
                    let waiting = std::iter::from_fn(|| self.reports.try_recv().ok());
                    let batch: Vec<Report> = report.into_iter().chain(waiting).collect();
                    for report in batch {
                        self.receive(report, now);
                    }
                }
                landed = self.commits.wake() => {
                    if landed? {
                        self.commits.landed(&sink!(self));
                    }
                }
                _ = self.renew.tick() => {
                    let now = clock::now_ms();
                    let wants_cancel = self.store.renew(self.lease, now, self.ttl).await?;
                    if wants_cancel && !self.run.cancelled() {
                        self.cancel();
                    }
                }
                _ = self.cancel_poll.tick(), if !self.run.cancelled() => {
                    if self.store.cancel_requested(&self.lease.run_id).await? {
                        self.cancel();
                    }
                }
            }
        }
    }

    /// Stops every running attempt; nothing more starts.
    fn cancel(&mut self) {
        self.run.apply(Event::CancelRequested);
        (self.progress)(Progress::Note(
            "cancel requested; stopping running stages".to_owned(),
        ));
        for attempt in self.running.values() {
            let _ = attempt.cancel.send(true);
        }
    }

    /// One step: asks the machine what may start and starts it, and takes
    /// the next step of composite stages whose units have all finished,
    /// asking again until none has: units just planned start in the same
    /// commit as their planning (and as their stage's start), so a crash
    /// never separates them.
    async fn step(&mut self) -> Result<Stepped> {
        let mut launches: Vec<Launch> = Vec::new();
        let mut composite_starts = Vec::new();
        let (mut started, mut stepped, mut end) = (false, true, None);
        while stepped {
            stepped = false;
            let now = clock::now_ms();
            let free = (self.max_parallel).saturating_sub(self.running.len() + launches.len());
            for action in self.run.apply(Event::Poll { free, now }) {
                match action {
                    Action::End(ended) => end = Some(ended),
                    Action::Step { index } => {
                        (started, stepped) = (true, true);
                        self.advance_composite(index, now);
                    }
                    Action::Interrupt { index, .. } => {
                        self.commits.pending.extend(action.transition(now));
                        let stage = &self.plan.stages[index];
                        self.spans.stage_ended(index, stage, "interrupted");
                    }
                    action => {
                        started = true;
                        self.begin(action, now, &mut launches, &mut composite_starts)?;
                    }
                }
            }
        }
        if self.run.stopping() {
            return Ok(end.map_or(Stepped::Wait, Stepped::Ended));
        }
        if started || !launches.is_empty() {
            self.launch(launches, composite_starts).await?;
            return Ok(Stepped::Again);
        }
        match end {
            Some(End::AwaitingGate { index }) if self.options.wait_gates => {
                self.wait_at_gate(index).await?;
                Ok(Stepped::Again)
            }
            Some(end) => Ok(Stepped::Ended(end)),
            None => Ok(Stepped::Wait),
        }
    }

    /// Carries out what the machine decided for a ready stage.
    fn begin(
        &mut self,
        action: Action,
        now: i64,
        launches: &mut Vec<Launch>,
        composite_starts: &mut Vec<usize>,
    ) -> Result<()> {
        let finished = |stage: &str, status: &str, error| Progress::Finished {
            stage: stage.to_owned(),
            status: status.to_owned(),
            duration_ms: 0,
            error,
        };
        self.commits.pending.extend(action.transition(now));
        match action {
            Action::End(_) | Action::Step { .. } | Action::Interrupt { .. } => {}
            Action::StartUnit { index, key, .. } => {
                let context = work::Context {
                    plan: &self.plan,
                    stage: &self.plan.stages[index],
                    workspace: &self.workspace,
                    now,
                };
                let unit = (self.run.composite(index))
                    .and_then(|composite| composite.unit(&key))
                    .expect("a unit the machine started");
                launches.push(Launch {
                    index,
                    item: unit.kind == work::ITEM,
                    unit: Some((
                        unit.key.clone(),
                        unit.label.clone(),
                        unit.attempts,
                        work::materialize(&context, unit),
                    )),
                });
            }
            Action::Fail { index, error, .. } => {
                let stage = &self.plan.stages[index];
                self.spans.stage_ended(index, stage, "failed");
                (self.progress)(finished(stage.name(), "failed", Some(error)));
            }
            Action::Skip { index, .. } => {
                let stage = &self.plan.stages[index];
                self.spans.stage_ended(index, stage, "skipped");
                write_skip_sentinels(stage, &self.workspace)?;
                (self.progress)(finished(stage.name(), "skipped", None));
                let times = (Some(now), Some(now));
                (self.commits.envelopes).stage(stage, index, "skipped", times, Vec::new());
            }
            Action::Start { index, .. } => {
                let stage = &self.plan.stages[index];
                self.spans.stage_started(index, stage);
                if work::is_composite(stage) {
                    composite_starts.push(index);
                } else {
                    launches.push(Launch {
                        index,
                        unit: None,
                        item: false,
                    });
                }
            }
        }
        Ok(())
    }

    /// Composite stage `index`, whose units have all finished, takes its
    /// next step: more units, or the end of the stage.
    fn advance_composite(&mut self, index: usize, now: i64) {
        let context = work::Context {
            plan: &self.plan,
            stage: &self.plan.stages[index],
            workspace: &self.workspace,
            now,
        };
        let Some(composite) = self.run.composite(index) else {
            return;
        };
        let (units, attempt) = (&composite.units[..], self.run.attempt(index));
        let finished = match work::advance(&context, (units, attempt), &mut self.commits.pending) {
            work::Advanced::Planned(units) => {
                self.run.apply(Event::UnitsPlanned { index, units });
                return;
            }
            work::Advanced::Ended(finished) => *finished,
        };
        let started_at = composite.started_at;
        self.run.apply(Event::Finished {
            index,
            success: finished.success,
            error: finished.error.clone(),
        });
        let stage = &self.plan.stages[index];
        self.spans.stage_ended(index, stage, finished.status());
        self.commits.pending.push(finished.transition(now));
        let shown = Announced::arrived(finished, (started_at, now), None);
        self.commits.shown.push(shown);
    }

    /// Spawns `launches`. Plain processes start before their start is
    /// committed (see `starts_early`), which happens with what comes next
    /// (see `LINGER`); anything else starts once its start is recorded.
    async fn launch(&mut self, launches: Vec<Launch>, composite_starts: Vec<usize>) -> Result<()> {
        let early =
            !self.commits.urgent && starts_early(self.lease, self.ttl, &self.plan, &launches);
        if !early {
            self.commits.now(&sink!(self), self.lease).await?;
        }
        for index in composite_starts {
            self.commits.shown.push(Shown::Start(Progress::Started {
                stage: self.plan.stages[index].name().to_owned(),
                attempt: self.run.attempt(index),
            }));
        }
        for launch in launches {
            let attempt = self.run.attempt(launch.index);
            let spawned = self
                .spawner
                .spawn(launch, attempt, &mut self.running, &self.spans);
            if let Some(started) = spawned {
                self.commits.shown.push(Shown::Start(started));
            }
        }
        if !early {
            // Only these starts, committed above, are queued.
            self.commits.announce(&sink!(self));
        }
        Ok(())
    }

    /// Waits at gate `index` for a decision, keeping the lease. Deciders
    /// read the gate's result from the store: it is committed first.
    async fn wait_at_gate(&mut self, index: usize) -> Result<()> {
        self.commits.pending.push(Transition::RunStatus {
            status: "awaiting_human".to_owned(),
            at: clock::now_ms(),
            error: None,
        });
        self.commits.now(&sink!(self), self.lease).await?;
        (self.progress)(Progress::AwaitingGate {
            stage: self.plan.stages[index].name().to_owned(),
        });
        let waited = gate::wait(
            self.store,
            self.lease,
            &self.plan,
            &self.workspace,
            index,
            &mut self.renew,
            self.ttl,
        )
        .await?;
        match waited {
            Some(decided) => {
                self.push_back(decided.clone());
                self.run.apply(Event::GatesRead(decided));
                self.commits.pending.push(running_status(clock::now_ms()));
            }
            None => {
                self.run.apply(Event::CancelRequested);
            }
        }
        Ok(())
    }

    /// Sets the stages of pushed-back gates back to pending (recorded with
    /// the next commit, before their new attempt starts), and keeps the
    /// decisions for the prompts of the attempts that answer them.
    fn push_back(&mut self, gates: Gates) {
        for &index in &gates.pushed_back {
            let Some(decision) = gates.push_backs.get(&index) else {
                continue;
            };
            self.commits
                .pending
                .extend(gate::push_back_transitions(as_i64(index), decision));
            self.run.apply(Event::PushedBack { index });
            (self.progress)(Progress::Note(format!(
                "gate '{}' pushed back by {}: it runs again with the comment in its prompt",
                self.plan.stages[index].name(),
                decision.decided_by
            )));
        }
        self.spawner.gates = gates;
    }

    fn receive(&mut self, report: Report, now: i64) {
        match report {
            Report::Started { unit: Some(_), .. } => {}
            Report::Note { note } => (self.progress)(Progress::Note(note)),
            Report::SubRun { index, unit, event } => {
                // Shown as it comes: the child committed it already.
                let slot = match unit {
                    Some(key) => Slot::Unit(index, key),
                    None => Slot::Stage(index),
                };
                let stage = self
                    .running
                    .get(&slot)
                    .and_then(|running| running.label.clone())
                    .unwrap_or_else(|| self.plan.stages[index].name().to_owned());
                (self.progress)(Progress::SubRun {
                    stage,
                    event: Box::new(event),
                });
            }
            Report::Retry(retry) => {
                (self.progress)(Progress::Note(retry.note()));
                // Recorded, so `baton status` says why the stage waits; it
                // commits within `LINGER`.
                self.commits.pending.push(retry.transition(now));
            }
            Report::Started {
                index,
                unit: None,
                attempt,
                started,
            } => self.commits.pending.push(Transition::ProcessStarted {
                index: as_i64(index),
                attempt,
                pid: i64::from(started.pid),
                pgid: i64::from(started.pgid),
                proc_start: i64::try_from(started.start_time).unwrap_or(0),
            }),
            Report::Finished(result) => self.finished(*result, now),
        }
    }

    /// An attempt's result: recorded, and the machine told for a stage's.
    fn finished(&mut self, result: Finished, now: i64) {
        // A continued session is recorded even when the agent's output
        // reported no usage.
        let nothing = baton_executor::profile::Usage::default();
        let usage = result
            .usage
            .as_ref()
            .or_else(|| result.resumed.as_ref().map(|_| &nothing));
        if let Some(usd) = result.usage.as_ref().and_then(|usage| usage.cost_usd) {
            self.run.apply(Event::Spent { usd });
        }
        if let Some(usage) = usage {
            self.commits
                .pending
                .push(Transition::UsageRecorded(crate::usage::row(
                    as_i64(result.index),
                    result.unit.as_deref(),
                    result.attempt,
                    usage,
                    result.resumed.as_deref(),
                )));
        }
        self.commits.pending.push(result.transition(now));
        if result.unit.is_some() {
            self.unit_finished(result, now);
            return;
        }
        self.run.apply(Event::Finished {
            index: result.index,
            success: result.success,
            error: result.error.clone(),
        });
        let stage = &self.plan.stages[result.index];
        self.spans.stage_ended(result.index, stage, result.status());
        // The slot is free at once; the result is shown once it is committed.
        let started_at = self
            .running
            .remove(&Slot::Stage(result.index))
            .map_or(now, |attempt| {
                spans::attempt_ended(&attempt.span, &result);
                attempt.started_at
            });
        self.commits.urgent |= !cheap(&self.plan.stages[result.index], started_at, now);
        let shown = Announced::arrived(result, (started_at, now), None);
        self.commits.shown.push(shown);
    }

    fn unit_finished(&mut self, result: Finished, now: i64) {
        let Some(key) = result.unit.clone() else {
            return;
        };
        let slot = self.running.remove(&Slot::Unit(result.index, key.clone()));
        let started_at = slot.as_ref().map_or(now, |slot| {
            spans::attempt_ended(&slot.span, &result);
            slot.started_at
        });
        self.commits.urgent |= !cheap(&self.plan.stages[result.index], started_at, now);
        let end = UnitEnd {
            status: result.status().to_owned(),
            at: now,
            exit_code: result.exit_code,
            error: result.error.clone(),
            artifacts: serde_json::to_string(&result.artifacts).unwrap_or_else(|_| "[]".to_owned()),
        };
        (self.run).apply(Event::UnitFinished {
            index: result.index,
            key: key.clone(),
            end,
        });
        if let Some(mut slot) = slot {
            let unit = slot.stage.take().zip(slot.label.take());
            let shown = Announced::arrived(result, (slot.started_at, now), unit);
            self.commits.shown.push(shown);
        }
    }

    /// Records how the run ended in the drive's last commit, which gives
    /// the lease up.
    async fn finish(mut self, end: &End) -> Result<Outcome> {
        let outcome = Outcome {
            run_id: self.lease.run_id.clone(),
            status: end.status().to_owned(),
            gate: end
                .gate()
                .map(|index| self.plan.stages[index].name().to_owned()),
            error: end.error(),
        };
        let span = tracing::Span::current();
        spans::run_ended(&span, &outcome.status, outcome.error.as_deref());
        self.commits.pending.push(Transition::RunStatus {
            status: outcome.status.clone(),
            at: clock::now_ms(),
            error: outcome.error.clone(),
        });
        self.commits.last(&sink!(self), self.lease).await?;
        if let Some(worker) = self.local_worker.take() {
            worker.finish().await;
        }
        Ok(outcome)
    }
}

fn running_status(now: i64) -> Transition {
    Transition::RunStatus {
        status: "running".to_owned(),
        at: now,
        error: None,
    }
}

/// Governance: a validator may not run under its producer's identity
/// (refused before anything runs), and the run's ledger is extended in the
/// same commits as the results it records. Returns the ledger and its
/// opening events.
async fn open_ledger(
    store: &Store,
    lease: &Lease,
    start: &Start,
    options: &DriveOptions,
) -> Result<(RunLedger, Vec<Transition>)> {
    let waived = match crate::governance::preflight(&start.plan, options.agents.as_deref()) {
        Ok(waived) => waived,
        Err(refusal) => return Err(refuse(store, lease, &refusal).await),
    };
    // A run created a moment ago has no ledger yet.
    let recorded = if start.fresh {
        Vec::new()
    } else {
        store.ledger_events("run", &lease.run_id).await?
    };
    Ok(RunLedger::open(
        &lease.run_id,
        &start.plan,
        &start.workflow_path,
        options.agents.clone(),
        &crate::governance::decode(&recorded).unwrap_or_default(),
        &waived,
        clock::now_ms(),
    ))
}

/// Stages and units whose attempt a crash cut short (see
/// [`Spawner::interrupted`]).
fn interrupted(transitions: &[Transition], units: &[UnitRow]) -> HashSet<(usize, Option<String>)> {
    let index = |index: i64| usize::try_from(index).unwrap_or(usize::MAX);
    let stages = transitions
        .iter()
        .filter_map(|transition| match transition {
            Transition::AttemptInterrupted { index: at, .. } => Some((index(*at), None)),
            _ => None,
        });
    let units = units
        .iter()
        .filter(|unit| unit.status == "running")
        .map(|unit| (index(unit.index), Some(unit.key.clone())));
    stages.chain(units).collect()
}

/// Ends a run that governance refuses to start as `failed`, with the
/// refusal as its error: left pending, `baton runs` would list it as
/// waiting to start, which it never will on its own. A resume continues it
/// once the refusal is settled.
async fn refuse(store: &Store, lease: &Lease, refusal: &str) -> Error {
    let failed = Transition::RunStatus {
        status: "failed".to_owned(),
        at: clock::now_ms(),
        error: Some(refusal.to_owned()),
    };
    if let Err(error) = store.apply(lease, &[failed]).await {
        return error.into();
    }
    Error::Refused(format!(
        "{refusal}\nrun {} is recorded as failed, nothing ran; once that is settled, `baton resume {}` continues it",
        lease.run_id, lease.run_id
    ))
}

/// What a run's recorded attempts spent, in dollars.
async fn spent_usd(store: &Store, run_id: &str) -> Result<f64> {
    let micro: i64 = store
        .usage(run_id)
        .await?
        .iter()
        .filter_map(|row| row.cost_microusd)
        .sum();
    #[expect(clippy::cast_precision_loss, reason = "far below 2^52 micro-dollars")]
    Ok(micro as f64 / 1_000_000.0)
}
