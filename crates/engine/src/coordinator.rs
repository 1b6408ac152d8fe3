//! Driving a run: the one loop that owns a run's state.
//!
//! It takes the run's lease, puts the run back in order after a crash, then
//! repeatedly asks the scheduler what may start, records the starts, spawns
//! the attempts, and records their results. Every batch of transitions that
//! arrives together is one store transaction (group commit), fenced by the
//! lease's epoch; the lease is renewed on a timer, and a cancel request
//! (looked for every `CANCEL_POLL` and at renewal) stops every running
//! attempt and starts nothing more.

use std::collections::HashMap;
use std::time::Duration;

use std::collections::BTreeMap;

use baton_store::{Error as StoreError, Lease, Store, Transition, UnitRow};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use tokio::sync::{mpsc, watch};

use crate::create;
use crate::envelopes::{EnvelopeWriter, Ticket};
use crate::schedule::{self, Next, State, States};
use crate::stage::{self, Attempt, Finished, Limits, Report};
use crate::start::Start;
use crate::work::{self, running::Composite};
use crate::{Error, Result, clock, gate, owner, reconcile};

/// How `drive` behaves.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    /// Lease duration; renewed every third of it.
    pub lease_ttl: Duration,
    /// Run even though the workflow or a fragment changed since the run started.
    pub accept_changes: bool,
    /// Finish each isolated stage whose branch failed to merge by merging
    /// the branch as it is now (resolved by hand), without its agent.
    pub accept_merge: bool,
    /// Wait for a lease held on another host to expire, instead of failing.
    pub wait_for_lease: bool,
    /// Override the run's recorded `--max-parallel`.
    pub max_parallel: Option<usize>,
    /// Limits for every stage process.
    pub limits: Limits,
    /// Agent profiles and roles from `baton.toml`; `None` when there is none.
    pub agents: Option<std::sync::Arc<baton_executor::profile::Config>>,
    /// The program that contains read-only agents (the `baton` binary, see
    /// [`baton_executor::contain`]); `None` where the machine cannot, and a
    /// read-only agent's repository is compared before and after instead.
    pub contain_helper: Option<std::path::PathBuf>,
    /// At a human gate, keep the run (and its lease) and wait for a
    /// decision instead of stopping `awaiting_human`.
    pub wait_gates: bool,
    /// A worker for the run's queue jobs, started in this process when the
    /// workflow has `worker_queue` stages or fan-outs; `None` leaves them to
    /// `baton worker` processes.
    pub local_worker: Option<crate::queue::WorkerOptions>,
}

/// Stops every running attempt, once a cancel was requested.
fn stop_running<K>(running: &HashMap<K, Running>, progress: &(dyn Fn(Progress) + Sync)) {
    progress(Progress::Note(
        "cancel requested; stopping running stages".to_owned(),
    ));
    for attempt in running.values() {
        let _ = attempt.cancel.send(true);
    }
}

/// How often a driver looks for a cancel request (a cheap read), besides
/// when it renews its lease.
const CANCEL_POLL: Duration = Duration::from_millis(250);

/// The default [`DriveOptions::lease_ttl`], in ms: also the first lease's,
/// which [`create_run`](crate::create_run) takes along with the run.
pub(crate) const LEASE_TTL_MS: i64 = 30_000;

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            lease_ttl: Duration::from_millis(LEASE_TTL_MS.unsigned_abs()),
            accept_changes: false,
            accept_merge: false,
            wait_for_lease: true,
            max_parallel: None,
            limits: Limits::default(),
            agents: None,
            contain_helper: None,
            wait_gates: false,
            local_worker: None,
        }
    }
}

/// Something worth showing while a run goes on.
#[derive(Debug, Clone)]
pub enum Progress {
    /// A stage attempt started.
    Started {
        /// Stage name.
        stage: String,
        /// Attempt number.
        attempt: i64,
    },
    /// A stage ended.
    Finished {
        /// Stage name.
        stage: String,
        /// `success`, `failed` or `skipped`.
        status: String,
        /// Duration in ms.
        duration_ms: i64,
        /// Why it failed.
        error: Option<String>,
    },
    /// Something the engine did on its own (reconciliation, stale outputs).
    Note(String),
    /// An event of the child run a sub-workflow stage drives.
    SubRun {
        /// The stage whose child it is (for a fan-out item, the item's
        /// label, as its own lines name it).
        stage: String,
        /// The child's event: itself a `SubRun` for a grandchild's.
        event: Box<Progress>,
    },
}

/// How a drive ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The run.
    pub run_id: String,
    /// `success`, `failed`, `awaiting_human`, `rejected` or `cancelled`.
    pub status: String,
    /// The gate waited on, if any.
    pub gate: Option<String>,
    /// Why the run failed.
    pub error: Option<String>,
}

/// Drives a run until it succeeds, fails, waits at a gate or is cancelled.
///
/// # Errors
///
/// The store is unavailable, another live process drives the run, the
/// workflow changed, or this process lost the lease.
pub async fn drive(
    store: &Store,
    run_id: &str,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    {
        let run = store.run(run_id).await?;
        // A cancelled run is driven again (`resume` continues it), without
        // the request it ended with. (Only then: a request that arrives
        // while a drive starts must stop it.)
        if run.status == "cancelled" {
            store.clear_cancel(run_id).await?;
        }
        // A succeeded run is driven again only when outputs it recorded
        // changed or were deleted since: the drive's reconcile runs those
        // stages, and their dependants, again. A rejection stands.
        let rerun = run.status == "success" && reconcile::outputs_changed(store, &run).await?;
        if !rerun && matches!(run.status.as_str(), "success" | "rejected") {
            reconcile::ended(store, &run, options, progress).await?;
            return Ok(Outcome {
                run_id: run_id.to_owned(),
                status: run.status,
                gate: None,
                error: run.error,
            });
        }
    }
    drive_leased(store, run_id, options, progress).await
}

/// Drives a run [`create_run`](crate::create_run) has just created, with
/// the plan it compiled.
///
/// [`drive`] would load and compile the workflow again to check that it did
/// not change since the run started; for a run created a moment ago by this
/// process that check compares the sources with themselves, and the second
/// parse is most of the time a large run spends before its first stage.
///
/// # Errors
///
/// As [`drive`].
pub async fn drive_created(
    store: &Store,
    mut created: crate::Created,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let lease = match created.lease.take() {
        Some(mut lease) => {
            // Taken for the default time; held for as long as asked from here.
            if options.lease_ttl != DriveOptions::default().lease_ttl {
                let ttl = i64::try_from(options.lease_ttl.as_millis()).unwrap_or(LEASE_TTL_MS);
                store.renew(&mut lease, clock::now_ms(), ttl).await?;
            }
            lease
        }
        None => acquire(store, &created.run_id, options).await?,
    };
    drive_with_lease(store, lease, Some(created), options, progress).await
}

/// Takes the run's lease and drives it.
async fn drive_leased(
    store: &Store,
    run_id: &str,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let lease = acquire(store, run_id, options).await?;
    drive_with_lease(store, lease, None, options, progress).await
}

/// Drives the run under `lease`. A drive that ends gives the lease up in its
/// last commit; one that fails releases it unless it was lost (another
/// driver holds it then).
async fn drive_with_lease(
    store: &Store,
    mut lease: Lease,
    created: Option<crate::Created>,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let result = drive_owned(store, &mut lease, created, options, progress).await;
    if matches!(&result, Err(error) if !matches!(error, Error::Store(StoreError::LostLease { .. })))
    {
        let _ = store.release(&lease).await;
    }
    result
}

async fn acquire(store: &Store, run_id: &str, options: &DriveOptions) -> Result<Lease> {
    let me = owner::me();
    let ttl = i64::try_from(options.lease_ttl.as_millis()).unwrap_or(30_000);
    loop {
        let now = clock::now_ms();
        match store.acquire(run_id, &me, now, ttl, None).await {
            Ok(lease) => return Ok(lease),
            Err(StoreError::Held { owner, until, .. }) => {
                if owner::provably_dead(&owner) {
                    match store.acquire(run_id, &me, now, ttl, Some(&owner)).await {
                        // Another process took the run from the dead holder
                        // first: look again, and be refused by it.
                        Err(StoreError::Held { .. }) => continue,
                        taken => return Ok(taken?),
                    }
                }
                let same_host = owner.rsplitn(3, ':').nth(2) == Some(owner::host().as_str());
                if same_host || !options.wait_for_lease {
                    return Err(Error::Owned {
                        run_id: run_id.to_owned(),
                        owner,
                    });
                }
                let wait = u64::try_from((until - now).clamp(100, 5_000)).unwrap_or(1_000);
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            Err(other) => return Err(other.into()),
        }
    }
}

/// What occupies a slot: a stage's own process, or a unit of a composite stage.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Slot {
    Stage(usize),
    Unit(usize, String),
}

struct Running {
    cancel: watch::Sender<bool>,
    started_at: i64,
    /// For a unit: the stage it runs and its label, for its envelope.
    stage: Option<PlanStage>,
    label: Option<String>,
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
struct Launch {
    index: usize,
    unit: Option<(String, String, i64, Result<work::Materialized, String>)>,
    /// A fan-out child: a plain process of its own, which may start before
    /// its start is recorded (see `starts_early`).
    item: bool,
}

/// Whether a result of `stage`'s attempt that ran from `started_at` to
/// `now` (ms) is cheap to lose: a short inline script's. Only cheap results
/// wait to share a commit (`LINGER`) and let what depends on them start
/// before they are recorded (`starts_early`); an agent's result, or a long
/// script's, is committed before anything else starts, so a crash never
/// costs that work again.
fn cheap(stage: &PlanStage, started_at: i64, now: i64) -> bool {
    stage.spec.executor == baton_workflow::schema::Executor::Inline
        && stage.spec.script.is_some()
        && now - started_at < CHEAP_MS
}

/// How long an inline script may run and still count as [`cheap`] (ms).
const CHEAP_MS: i64 = 100;

/// Resolves at `deadline`, or never without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
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
fn starts_early(lease: &Lease, ttl: i64, plan: &baton_workflow::Plan, launches: &[Launch]) -> bool {
    lease.until - clock::now_ms() > ttl / 2
        && launches.iter().all(|launch| {
            let stage = &plan.stages[launch.index];
            (launch.unit.is_none() || launch.item)
                && stage.spec.sub_workflow.is_none()
                && stage.spec.executor != baton_workflow::schema::Executor::WorkerQueue
                // A fan-out's children are launched under the fan-out
                // stage: their own queue jobs or worktrees come from here.
                && stage.spec.fan_out.as_ref().is_none_or(|fan_out| {
                    fan_out.mode != baton_workflow::schema::FanOutMode::WorkerQueue
                        && fan_out.isolation != baton_workflow::schema::Isolation::Worktree
                })
                && !crate::worktree::isolated(stage)
        })
}

/// A result committed, to show: its envelope and progress line.
struct Announced {
    finished: Finished,
    started_at: i64,
    /// When the result arrived (ms); it is shown once committed, later.
    finished_at: i64,
    /// For a unit: the stage it ran and its label.
    unit: Option<(PlanStage, String)>,
    /// Its envelope when it was written ahead of the commit, to be named
    /// once the commit lands (see [`prepare_envelopes`]).
    envelope: Option<Ticket>,
}

impl Announced {
    /// A result just arrived, to show once committed.
    fn arrived(
        finished: Finished,
        (started_at, finished_at): (i64, i64),
        unit: Option<(PlanStage, String)>,
    ) -> Shown {
        Shown::Result(Box::new(Announced {
            finished,
            started_at,
            finished_at,
            unit,
            envelope: None,
        }))
    }

    /// The stage the envelope is of, its status and its times.
    fn envelope_of<'a>(
        &'a self,
        plan: &'a Plan,
    ) -> (&'a PlanStage, &'static str, (Option<i64>, Option<i64>)) {
        let stage = self
            .unit
            .as_ref()
            .map_or(&plan.stages[self.finished.index], |(stage, _)| stage);
        let status = if self.finished.success {
            "success"
        } else {
            "failed"
        };
        (
            stage,
            status,
            (Some(self.started_at), Some(self.finished_at)),
        )
    }
}

/// Writes the envelopes of the results a drive's last commit records
/// before that commit, without names, to be named once it lands.
///
/// Only the last: naming a file costs about half of writing it, and what
/// happens after the last commit is all that is left of a run. Done for
/// every result, the writing met each next stage's start on a 2-core
/// machine: in a 1 000-stage chain, the median time from one stage's exit
/// to the next one's start went from 423–443 us to 494–526 us.
fn prepare_envelopes(plan: &Plan, envelopes: &EnvelopeWriter, shown: &mut [Shown]) {
    for shown in shown {
        if let Shown::Result(announced) = shown {
            let (stage, status, times) = announced.envelope_of(plan);
            let errors = announced.finished.error.iter().cloned().collect();
            let ticket = envelopes.prepare(stage, announced.finished.index, status, times, errors);
            announced.envelope = Some(ticket);
        }
    }
}

/// What is shown once committed, in the order it happened: a stage's end
/// comes before the starts it allowed.
enum Shown {
    /// A result: its envelope and progress line.
    Result(Box<Announced>),
    /// A start's progress line.
    Start(Progress),
}

/// How long the starts and results of plain processes may wait to be
/// committed, so that the ones that arrive meanwhile share the commit.
///
/// A commit costs about as much CPU as starting a short process, and with
/// stages that start before their start is recorded (`starts_early`) only
/// the coordinator waits for it: waiting a little turns one commit per stage
/// into one per many stages. A crash in that time loses only what a crash
/// just before the commit would: the stages run again on resume. While a
/// commit runs (about 1.5 ms with its fsync on a 2-core machine) nothing new
/// starts, so fewer commits also mean fewer stalls: a run of 1 000 wide
/// `true` stages commits about 45 times at 20 ms and 18 times at 50 ms, and
/// takes 5 % less time at 50 ms (100 ms gains 1 % more). 50 ms is still
/// under what a person watching progress notices.
const LINGER: Duration = Duration::from_millis(50);

/// Most transitions that wait for one commit.
const MAX_BATCH: usize = 1_000;

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

#[expect(
    clippy::too_many_lines,
    reason = "the coordinator's loop reads best in one piece"
)]
async fn drive_owned(
    store: &Store,
    lease: &mut Lease,
    created: Option<crate::Created>,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let run_id = lease.run_id.clone();
    let start = match created {
        Some(created) => Start::created(created),
        None => Start::recorded(store, &run_id, options).await?,
    };
    let created_stages = start.fresh.then(|| start.pending_stages());
    let Start {
        workflow_path,
        workspace_dir,
        run_options,
        params,
        plan,
        fresh,
    } = start;
    // Governance: a validator may not run under its producer's identity
    // (refused before anything runs), and the run's ledger is extended in
    // the same commits as the results it records.
    let waived = match crate::governance::preflight(&plan, options.agents.as_deref()) {
        Ok(waived) => waived,
        Err(refusal) => return Err(refuse(store, lease, &refusal).await),
    };
    // A run created a moment ago has no ledger yet.
    let recorded_ledger = if fresh {
        Vec::new()
    } else {
        store.ledger_events("run", &run_id).await?
    };
    let (mut ledger, opening) = crate::governance::RunLedger::open(
        &run_id,
        &plan,
        &workflow_path,
        options.agents.clone(),
        &crate::governance::decode(&recorded_ledger).unwrap_or_default(),
        &waived,
        clock::now_ms(),
    );
    let max_parallel = options
        .max_parallel
        .unwrap_or(run_options.max_parallel)
        .max(1);
    let ttl = i64::try_from(options.lease_ttl.as_millis()).unwrap_or(30_000);
    let slots = std::sync::Arc::new(stage::Slots::new(options.agents.as_deref()));

    let now = clock::now_ms();
    // A run created a moment ago is all pending, with nothing to reconcile:
    // reading it back would cost six queries (about 2 ms for one stage,
    // 7 ms for 1 000).
    let (stages, units, mut transitions) = match created_stages {
        Some(stages) => (stages, Vec::new(), Vec::new()),
        None => reconcile::recorded(store, lease, &plan, &workspace_dir, now, progress).await?,
    };
    // Stages and units whose attempt a crash cut short: their next attempt
    // may adopt the queue job that attempt left (`queued.rs`); no other
    // attempt does, so a failure or a rerun runs a new job.
    let mut interrupted: std::collections::HashSet<(usize, Option<String>)> = transitions
        .iter()
        .filter_map(|transition| match transition {
            Transition::AttemptInterrupted { index, .. } => {
                Some((usize::try_from(*index).unwrap_or(usize::MAX), None))
            }
            _ => None,
        })
        .chain(
            units
                .iter()
                .filter(|unit| unit.status == "running")
                .map(|unit| {
                    (
                        usize::try_from(unit.index).unwrap_or(usize::MAX),
                        Some(unit.key.clone()),
                    )
                }),
        )
        .collect();
    // Nothing to reconcile (always so for a new run): the stages and units
    // just read are what the store still holds, and marking the run running
    // (with its ledger's opening) waits for the loop's first commit, like
    // the starts of plain processes (see `starts_early`): anything else
    // commits it before it starts. What was reconciled is committed first.
    let reconciled = !transitions.is_empty();
    transitions.push(Transition::RunStatus {
        status: "running".to_owned(),
        at: now,
        error: None,
    });
    transitions.extend(opening);
    let opened = if reconciled {
        store.apply(lease, &transitions).await?;
        Vec::new()
    } else {
        transitions
    };

    let (stages, units) = if reconciled {
        (store.stages(&run_id).await?, store.units(&run_id).await?)
    } else {
        (stages, units)
    };
    let mut states = States::new(
        &plan,
        stages.iter().map(|stage| State::from_status(&stage.status)),
    );
    let mut attempt_numbers: Vec<i64> = stages.iter().map(|stage| stage.attempts).collect();
    // Units recorded for stages, by stage; a composite stage takes its own
    // when it starts.
    let mut recorded_units: HashMap<usize, Vec<UnitRow>> = HashMap::new();
    for unit in units {
        if let Ok(index) = usize::try_from(unit.index) {
            recorded_units.entry(index).or_default().push(unit);
        }
    }
    let unit_params: stage::Params = params
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let mut composites: BTreeMap<usize, Composite> = BTreeMap::new();
    // Gates are approved through `baton gate`; until then a succeeded gate
    // holds back every later group. Reloaded while waiting at a gate.
    let gates =
        std::cell::RefCell::new(gate::Gates::load(store, &run_id, &plan, &workspace_dir).await?);
    let approved = |index: usize| gates.borrow().approved(index);

    // One copy of the plan, shared with every attempt.
    let plan = std::sync::Arc::new(plan);
    let shared_plan = std::sync::Arc::clone(&plan);
    let shared_options = std::sync::Arc::new(options.clone());
    let envelopes = EnvelopeWriter::start(&workspace_dir);
    let local_worker = LocalWorker::start(store, options.local_worker.as_ref(), &plan);
    let (report_sender, mut reports) = mpsc::unbounded_channel::<Report>();
    let mut running: HashMap<Slot, Running> = HashMap::new();
    let mut renew = clock::every(options.lease_ttl / 3);
    let mut cancel_poll = clock::every(CANCEL_POLL);
    let mut cancelled = false;

    // Transitions not yet committed, and what to show once they are. The
    // results that arrive together and the starts they make possible are
    // committed as one transaction (group commit); a process's pid is only
    // recorded along with the next commit, since a resume finds leftover
    // processes by the run's marker anyway.
    let mut pending: Vec<Transition> = opened;
    let mut announced: Vec<Shown> = Vec::new();
    // When what is pending must be committed at the latest (see `LINGER`),
    // and whether it holds a result too costly to risk (see `cheap`): then
    // it is committed at once, before anything else starts.
    let mut commit_by: Option<tokio::time::Instant> = None;
    let mut urgent = false;
    // The commit that runs while the loop goes on (see `InFlight`).
    let mut in_flight: Option<InFlight> = None;
    let mut errors: HashMap<usize, String> = HashMap::new();

    let outcome = loop {
        let halting = cancelled || states.required_failure().is_some();
        if halting {
            // A composite stage stops starting units; once none of its units
            // runs, it goes back to pending with its finished units kept.
            let idle: Vec<usize> = composites
                .iter()
                .filter(|(_, composite)| composite.running == 0)
                .map(|(index, _)| *index)
                .collect();
            for index in idle {
                composites.remove(&index);
                pending.push(Transition::AttemptInterrupted {
                    index: as_i64(index),
                    attempt: attempt_numbers[index],
                    at: clock::now_ms(),
                });
                states.set(index, State::Pending);
            }
        }
        let rejected = gates.borrow().rejected();
        let decision = if cancelled {
            if running.is_empty() {
                Some(Ended::Cancelled)
            } else {
                None
            }
        } else if let Some((index, comment, by)) = rejected {
            Some(Ended::Rejected(index, comment, by))
        } else {
            let now = clock::now_ms();
            let mut free = max_parallel.saturating_sub(running.len());
            let mut launches: Vec<Launch> = Vec::new();
            // Units of stages already running come first: finishing started
            // work before starting new work.
            if !halting {
                take_units(
                    &mut composites,
                    &mut free,
                    &plan,
                    &workspace_dir,
                    now,
                    &mut pending,
                    &mut launches,
                );
            }
            let next = schedule::next(&plan, &mut states, approved, free);
            let mut started = false;
            let mut composite_starts: Vec<usize> = Vec::new();
            if let Next::Start(ready) = &next {
                started = true;
                for &index in ready {
                    let stage = &plan.stages[index];
                    if let Some(when) = &stage.when {
                        let lookup = |name: &str| params.get(name).map(String::as_str);
                        let unknown = when
                            .placeholders()
                            .into_iter()
                            .find(|name| !params.contains_key(*name));
                        if let Some(unknown) = unknown {
                            let error = format!(
                                "'when' refers to '{{{unknown}}}', which has no value; pass --params {unknown}=…"
                            );
                            errors.insert(index, error.clone());
                            pending.push(failed_start(
                                index,
                                &mut attempt_numbers,
                                now,
                                error.clone(),
                            ));
                            states.set(index, State::Failed);
                            progress(Progress::Finished {
                                stage: stage.name().to_owned(),
                                status: "failed".to_owned(),
                                duration_ms: 0,
                                error: Some(error),
                            });
                            continue;
                        }
                        if !when.evaluate(lookup) {
                            stage::write_skip_sentinels(stage, &workspace_dir).map_err(
                                |source| Error::Workspace {
                                    path: workspace_dir.clone(),
                                    source,
                                },
                            )?;
                            pending.push(Transition::StageSkipped {
                                index: as_i64(index),
                                at: now,
                                note: stage::skip_note(stage, lookup),
                            });
                            states.set(index, State::Skipped);
                            progress(Progress::Finished {
                                stage: stage.name().to_owned(),
                                status: "skipped".to_owned(),
                                duration_ms: 0,
                                error: None,
                            });
                            envelopes.stage(
                                stage,
                                index,
                                "skipped",
                                (Some(now), Some(now)),
                                Vec::new(),
                            );
                            continue;
                        }
                    }
                    attempt_numbers[index] += 1;
                    pending.push(Transition::AttemptStarted {
                        index: as_i64(index),
                        attempt: attempt_numbers[index],
                        at: now,
                    });
                    states.set(index, State::Running);
                    if work::is_composite(stage) {
                        // Items that edit the checkout in place run one at a time.
                        let cap = if schedule::edits_checkout(stage) {
                            1
                        } else {
                            stage
                                .spec
                                .fan_out
                                .as_ref()
                                .and_then(|fan_out| fan_out.max_parallel)
                                .map_or(max_parallel, |cap| cap as usize)
                        };
                        let units = recorded_units.remove(&index).unwrap_or_default();
                        composites.insert(index, Composite::new(units, cap, now));
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
            // Composite stages whose units have all finished take their
            // next step: more units, or the end of the stage.
            if !halting {
                let idle: Vec<usize> = composites
                    .iter()
                    .filter(|(_, composite)| composite.idle())
                    .map(|(index, _)| *index)
                    .collect();
                for index in idle {
                    started = true;
                    let context = work::Context {
                        plan: &plan,
                        stage: &plan.stages[index],
                        workspace: &workspace_dir,
                        now,
                    };
                    let composite = composites.get_mut(&index).expect("idle composite");
                    if let Some((success, error)) =
                        advance(&context, composite, index, &mut pending)
                    {
                        let composite = composites.remove(&index).expect("idle composite");
                        let artifacts = hash_outputs(&workspace_dir, &composite.artifact_paths());
                        states.set(
                            index,
                            if success {
                                State::Success
                            } else {
                                State::Failed
                            },
                        );
                        if let Some(error) = &error {
                            errors.insert(index, error.clone());
                        }
                        pending.push(Transition::AttemptFinished {
                            index: as_i64(index),
                            attempt: attempt_numbers[index],
                            status: if success { "success" } else { "failed" }.to_owned(),
                            at: now,
                            exit_code: None,
                            error: error.clone(),
                            artifacts: artifacts.clone(),
                        });
                        announced.push(Announced::arrived(
                            Finished {
                                index,
                                unit: None,
                                attempt: attempt_numbers[index],
                                success,
                                exit_code: None,
                                error,
                                artifacts,
                                cancelled: false,
                                usage: None,
                                resumed: None,
                            },
                            (composite.started_at, now),
                            None,
                        ));
                    }
                }
            }
            // Units just planned start in the same commit as their planning
            // (and as their stage's start), so a crash never separates them.
            if !halting {
                let mut free = max_parallel.saturating_sub(running.len() + launches.len());
                take_units(
                    &mut composites,
                    &mut free,
                    &plan,
                    &workspace_dir,
                    now,
                    &mut pending,
                    &mut launches,
                );
            }
            if started || !launches.is_empty() {
                // Plain processes start before their start is committed
                // (see `starts_early`), which happens with what comes next
                // (see `LINGER`); anything else starts once its start is
                // recorded.
                let early = !urgent && starts_early(lease, ttl, &plan, &launches);
                if !early {
                    settle(&mut in_flight, &plan, &envelopes, progress).await?;
                    with_ledger(&mut ledger, &plan, &composites, &mut pending);
                    store.apply(lease, &std::mem::take(&mut pending)).await?;
                    commit_by = None;
                    urgent = false;
                    announce(&plan, &envelopes, &mut announced, progress);
                }
                for index in composite_starts {
                    announced.push(Shown::Start(Progress::Started {
                        stage: plan.stages[index].name().to_owned(),
                        attempt: attempt_numbers[index],
                    }));
                }
                for launch in launches {
                    let (stage_to_run, unit, label, attempt_number, extras) = match launch.unit {
                        None => (
                            plan.stages[launch.index].clone(),
                            None,
                            None,
                            attempt_numbers[launch.index],
                            (Vec::new(), Vec::new(), false, None),
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
                            // The unit cannot even be built: it fails
                            // without a process.
                            let _ = report_sender.send(Report::Finished(Box::new(
                                Finished::before_start(
                                    launch.index,
                                    Some(key.clone()),
                                    attempts,
                                    error,
                                ),
                            )));
                            running.insert(
                                Slot::Unit(launch.index, key),
                                Running {
                                    cancel: watch::channel(false).0,
                                    started_at: clock::now_ms(),
                                    stage: None,
                                    label: None,
                                },
                            );
                            continue;
                        }
                    };
                    let (values, env, defer_checks, continues) = extras;
                    let (cancel_sender, cancel_receiver) = watch::channel(false);
                    let mut attempt_params: stage::Params = unit_params.clone();
                    attempt_params.extend(values);
                    let attempt = Attempt {
                        run_id: run_id.clone(),
                        index: launch.index,
                        attempt: attempt_number,
                        workspace: workspace_dir.clone(),
                        project_dir: run_options.project_dir.clone(),
                        params: attempt_params,
                        limits: options.limits.clone(),
                        plan: std::sync::Arc::clone(&shared_plan),
                        agents: options.agents.clone(),
                        contain_helper: options.contain_helper.clone(),
                        slots: std::sync::Arc::clone(&slots),
                        adopt_job: interrupted.remove(&(launch.index, unit.clone())),
                        unit: unit.clone(),
                        env,
                        defer_checks,
                        store: store.clone(),
                        continues,
                        accept_merge: options.accept_merge,
                    };
                    // A composite stage's main unit is the stage's own
                    // work: the stage's lines already say it started.
                    if unit.as_deref() != Some(work::MAIN) {
                        announced.push(Shown::Start(Progress::Started {
                            stage: label
                                .clone()
                                .unwrap_or_else(|| plan.stages[launch.index].name().to_owned()),
                            attempt: attempt_number,
                        }));
                    }
                    let slot = match &unit {
                        None => Slot::Stage(launch.index),
                        Some(key) => Slot::Unit(launch.index, key.clone()),
                    };
                    let kept = unit.as_ref().map(|_| stage_to_run.clone());
                    // The options ride along so that a sub-workflow attempt
                    // drives its child run as this run is driven.
                    // Boxed: the attempt's future is some 15 KB, which
                    // spawning would otherwise copy more than once.
                    tokio::spawn(crate::subrun::OPTIONS.scope(
                        std::sync::Arc::clone(&shared_options),
                        Box::pin(stage::run(
                            stage_to_run,
                            attempt,
                            cancel_receiver,
                            report_sender.clone(),
                        )),
                    ));
                    running.insert(
                        slot,
                        Running {
                            cancel: cancel_sender,
                            started_at: clock::now_ms(),
                            stage: kept,
                            label,
                        },
                    );
                }
                if !early {
                    // Only these starts, committed above, are queued.
                    announce(&plan, &envelopes, &mut announced, progress);
                }
                continue;
            }
            match next {
                Next::Start(_) | Next::Wait => None,
                Next::Succeeded => Some(Ended::Succeeded),
                Next::Failed(index) => Some(Ended::Failed(index)),
                Next::AwaitingGate(index) if options.wait_gates => {
                    // Deciders read the gate's result from the store: commit
                    // it before waiting.
                    pending.push(Transition::RunStatus {
                        status: "awaiting_human".to_owned(),
                        at: clock::now_ms(),
                        error: None,
                    });
                    settle(&mut in_flight, &plan, &envelopes, progress).await?;
                    with_ledger(&mut ledger, &plan, &composites, &mut pending);
                    store.apply(lease, &std::mem::take(&mut pending)).await?;
                    commit_by = None;
                    announce(&plan, &envelopes, &mut announced, progress);
                    progress(Progress::Note(format!(
                        "waiting at gate '{}' for a decision",
                        plan.stages[index].name()
                    )));
                    let waited =
                        gate::wait(store, lease, &plan, &workspace_dir, index, &mut renew, ttl)
                            .await?;
                    match waited {
                        Some(decided) => {
                            *gates.borrow_mut() = decided;
                            pending.push(Transition::RunStatus {
                                status: "running".to_owned(),
                                at: clock::now_ms(),
                                error: None,
                            });
                        }
                        None => cancelled = true,
                    }
                    continue;
                }
                Next::AwaitingGate(index) => Some(Ended::Gate(index)),
            }
        };
        if let Some(ended) = decision {
            break match ended {
                Ended::Succeeded => Outcome {
                    run_id: run_id.clone(),
                    status: "success".to_owned(),
                    gate: None,
                    error: None,
                },
                Ended::Failed(index) => {
                    let error = match errors.get(&index) {
                        Some(error) => Some(error.clone()),
                        None => stages_error(store, &run_id, index).await,
                    };
                    Outcome {
                        run_id: run_id.clone(),
                        status: "failed".to_owned(),
                        gate: None,
                        error: Some(format!(
                            "required stage '{}' failed: {}",
                            plan.stages[index].name(),
                            error.unwrap_or_default()
                        )),
                    }
                }
                Ended::Gate(index) => Outcome {
                    run_id: run_id.clone(),
                    status: "awaiting_human".to_owned(),
                    gate: Some(plan.stages[index].name().to_owned()),
                    error: None,
                },
                Ended::Rejected(index, comment, by) => {
                    let stage = plan.stages[index].name();
                    Outcome {
                        run_id: run_id.clone(),
                        status: "rejected".to_owned(),
                        gate: Some(stage.to_owned()),
                        error: Some(gate::rejection_error(stage, &by, &comment)),
                    }
                }
                Ended::Cancelled => Outcome {
                    run_id: run_id.clone(),
                    status: "cancelled".to_owned(),
                    gate: None,
                    error: Some("cancelled".to_owned()),
                },
            };
        }
        // Nothing can start: record the results that arrived before waiting,
        // so a result is never held back while other stages run. Process
        // ids alone wait for the next commit (see `pending`): committing
        // them costs a synchronous commit per stage for nothing a resume
        // needs.
        let only_pids = pending
            .iter()
            .all(|transition| matches!(transition, Transition::ProcessStarted { .. }));
        if !announced.is_empty() || !only_pids {
            let now = tokio::time::Instant::now();
            let due = urgent
                || *commit_by.get_or_insert(now + LINGER) <= now
                || pending.len() >= MAX_BATCH;
            if due && urgent {
                // Committed before anything else starts (see `cheap`).
                settle(&mut in_flight, &plan, &envelopes, progress).await?;
                with_ledger(&mut ledger, &plan, &composites, &mut pending);
                store.apply(lease, &std::mem::take(&mut pending)).await?;
                commit_by = None;
                urgent = false;
                announce(&plan, &envelopes, &mut announced, progress);
            } else if due && in_flight.is_none() {
                // One commit at a time, in order; one that comes due while
                // another runs starts when that one is done.
                with_ledger(&mut ledger, &plan, &composites, &mut pending);
                in_flight = Some(InFlight::start(
                    store,
                    lease,
                    std::mem::take(&mut pending),
                    std::mem::take(&mut announced),
                ));
                commit_by = None;
            }
        } else {
            // Process ids alone wait for the next commit, with no deadline.
            commit_by = None;
        }

        tokio::select! {
            report = reports.recv() => {
                let mut batch: Vec<Report> = report.into_iter().collect();
                while let Ok(report) = reports.try_recv() {
                    batch.push(report);
                }
                let now = clock::now_ms();
                for report in batch {
                    match report {
                        Report::Started { unit: Some(_), .. } => {}
                        Report::Note { note } => progress(Progress::Note(note)),
                        Report::SubRun { index, unit, event } => {
                            // Shown as it comes: the child committed it already.
                            let slot = match unit {
                                Some(key) => Slot::Unit(index, key),
                                None => Slot::Stage(index),
                            };
                            let stage = running
                                .get(&slot)
                                .and_then(|running| running.label.clone())
                                .unwrap_or_else(|| plan.stages[index].name().to_owned());
                            progress(Progress::SubRun { stage, event: Box::new(event) });
                        }
                        Report::Retry(retry) => {
                            progress(Progress::Note(retry.note()));
                            // Recorded, so `baton status` says why the
                            // stage waits; it commits within `LINGER`.
                            pending.push(retry.transition(now));
                        }
                        Report::Started { index, unit: None, attempt, started } => pending.push(Transition::ProcessStarted {
                            index: as_i64(index),
                            attempt,
                            pid: i64::from(started.pid),
                            pgid: i64::from(started.pgid),
                            proc_start: i64::try_from(started.start_time).unwrap_or(0),
                        }),
                        Report::Finished(result) => {
                            let result = *result;
                            let status = if result.success { "success" } else { "failed" };
                            // A continued session is recorded even when the
                            // agent's output reported no usage.
                            let nothing = baton_executor::profile::Usage::default();
                            let usage = result
                                .usage
                                .as_ref()
                                .or_else(|| result.resumed.as_ref().map(|_| &nothing));
                            if let Some(usage) = usage {
                                pending.push(Transition::UsageRecorded(crate::usage::row(
                                    as_i64(result.index),
                                    result.unit.as_deref(),
                                    result.attempt,
                                    usage,
                                    result.resumed.as_deref(),
                                )));
                            }
                            if let Some(key) = &result.unit {
                                let slot = running.remove(&Slot::Unit(result.index, key.clone()));
                                urgent |= !cheap(&plan.stages[result.index], slot.as_ref().map_or(now, |slot| slot.started_at), now);
                                pending.push(Transition::UnitFinished {
                                    index: as_i64(result.index),
                                    key: key.clone(),
                                    status: status.to_owned(),
                                    at: now,
                                    exit_code: result.exit_code,
                                    error: result.error.clone(),
                                    artifacts: result.artifacts.clone(),
                                });
                                if let Some(composite) = composites.get_mut(&result.index) {
                                    composite.running = composite.running.saturating_sub(1);
                                    if let Some(position) = composite.position(key) {
                                        let unit = &mut composite.units[position];
                                        unit.status = status.to_owned();
                                        unit.finished_at = Some(now);
                                        unit.exit_code = result.exit_code;
                                        unit.error.clone_from(&result.error);
                                        unit.artifacts = serde_json::to_string(&result.artifacts)
                                            .unwrap_or_else(|_| "[]".to_owned());
                                    }
                                }
                                if let Some(mut slot) = slot {
                                    let unit = slot.stage.take().zip(slot.label.take());
                                    announced.push(Announced::arrived(result, (slot.started_at, now), unit));
                                }
                                continue;
                            }
                            pending.push(Transition::AttemptFinished {
                                index: as_i64(result.index),
                                attempt: result.attempt,
                                status: status.to_owned(),
                                at: now,
                                exit_code: result.exit_code,
                                error: result.error.clone(),
                                artifacts: result.artifacts.clone(),
                            });
                            states.set(result.index, if result.success { State::Success } else { State::Failed });
                            if let Some(error) = &result.error {
                                errors.insert(result.index, error.clone());
                            }
                            // The slot is free at once; the result is shown
                            // once it is committed.
                            let started_at = running.remove(&Slot::Stage(result.index)).map_or(now, |attempt| attempt.started_at);
                            urgent |= !cheap(&plan.stages[result.index], started_at, now);
                            announced.push(Announced::arrived(result, (started_at, now), None));
                        }
                    }
                }
            }
            // A commit that came due while another ran waits for that one,
            // not for its deadline again.
            () = until(commit_by.filter(|_| in_flight.is_none())) => {}
            landed = landing(&mut in_flight) => {
                let flight = in_flight.take().expect("a commit was in flight");
                landed?;
                let mut shown = flight.shown;
                announce(&plan, &envelopes, &mut shown, progress);
            }
            _ = renew.tick() => {
                let wants_cancel = store.renew(lease, clock::now_ms(), ttl).await?;
                if wants_cancel && !cancelled {
                    cancelled = true;
                    stop_running(&running, progress);
                }
            }
            _ = cancel_poll.tick(), if !cancelled => {
                if store.cancel_requested(&lease.run_id).await? {
                    cancelled = true;
                    stop_running(&running, progress);
                }
            }
        }
    };

    let final_status = match outcome.status.as_str() {
        "failed" => "failed",
        "awaiting_human" => "awaiting_human",
        "cancelled" => "cancelled",
        "rejected" => "rejected",
        _ => "success",
    };
    pending.push(Transition::RunStatus {
        status: final_status.to_owned(),
        at: clock::now_ms(),
        error: outcome.error.clone(),
    });
    prepare_envelopes(&plan, &envelopes, &mut announced);
    settle(&mut in_flight, &plan, &envelopes, progress).await?;
    with_ledger(&mut ledger, &plan, &composites, &mut pending);
    store.apply_and_release(lease, &pending).await?;
    announce(&plan, &envelopes, &mut announced, progress);
    if let Some(worker) = local_worker {
        worker.finish().await;
    }
    Ok(outcome)
}

/// The queue worker a drive runs for its own `worker_queue` jobs.
struct LocalWorker {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl LocalWorker {
    /// Starts one if the plan enqueues jobs and the caller wants it.
    fn start(
        store: &Store,
        options: Option<&crate::queue::WorkerOptions>,
        plan: &Plan,
    ) -> Option<LocalWorker> {
        let queued = plan.stages.iter().any(|stage| {
            stage.spec.executor == baton_workflow::schema::Executor::WorkerQueue
                || stage.spec.fan_out.as_ref().is_some_and(|fan_out| {
                    fan_out.mode == baton_workflow::schema::FanOutMode::WorkerQueue
                })
        });
        let options = options.filter(|_| queued)?.clone();
        let store = store.clone();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            // A worker error ends the local worker only; the run's jobs then
            // wait for another worker, and the drive goes on.
            let _ = crate::queue::work(&store, &options, stopped).await;
        });
        Some(LocalWorker { stop, task })
    }

    /// Stops it: running jobs finish (or are released after the grace).
    async fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// How the loop ended.
enum Ended {
    Succeeded,
    Failed(usize),
    Gate(usize),
    /// A gate was rejected: (index, comment, who).
    Rejected(usize, String, String),
    Cancelled,
}

/// A commit of short results and early starts (see `LINGER`) that runs as
/// a task of its own while the coordinator goes on starting stages: a
/// commit of a few hundred transitions takes milliseconds, and nothing
/// that waits for it may start before it lands anyway. What it recorded is
/// shown once it lands. Everything committed in the loop itself, and the
/// next commit of this kind, waits for it first ([`settle`]), so commits
/// land in the order their transitions happened.
struct InFlight {
    commit: tokio::task::JoinHandle<std::result::Result<(), baton_store::Error>>,
    shown: Vec<Shown>,
}

impl InFlight {
    fn start(store: &Store, lease: &Lease, pending: Vec<Transition>, shown: Vec<Shown>) -> Self {
        let store = store.clone();
        let lease = lease.clone();
        InFlight {
            commit: tokio::spawn(async move { store.apply(&lease, &pending).await }),
            shown,
        }
    }
}

/// Resolves when the commit in flight has landed, with its result; never
/// without one.
async fn landing(in_flight: &mut Option<InFlight>) -> Result<()> {
    let Some(flight) = in_flight else {
        return std::future::pending().await;
    };
    match (&mut flight.commit).await {
        Ok(result) => result.map_err(Error::from),
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // Cancelled only when the runtime shuts down, with this task.
        Err(_) => std::future::pending().await,
    }
}

/// Waits for the commit in flight, if any, and shows what it recorded.
async fn settle(
    in_flight: &mut Option<InFlight>,
    plan: &Plan,
    envelopes: &EnvelopeWriter,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<()> {
    if in_flight.is_some() {
        landing(in_flight).await?;
        if let Some(mut flight) = in_flight.take() {
            announce(plan, envelopes, &mut flight.shown, progress);
        }
    }
    Ok(())
}

/// After a commit: the result envelopes and progress lines of the results
/// it recorded.
fn announce(
    plan: &Plan,
    envelopes: &EnvelopeWriter,
    shown: &mut Vec<Shown>,
    progress: &(dyn Fn(Progress) + Sync),
) {
    let mut committed = None;
    for shown in shown.drain(..) {
        let announced = match shown {
            Shown::Result(announced) => *announced,
            Shown::Start(started) => {
                progress(started);
                continue;
            }
        };
        match announced.envelope {
            Some(ticket) => committed = Some(ticket),
            None => {
                let (stage, status, times) = announced.envelope_of(plan);
                let errors = announced.finished.error.iter().cloned().collect();
                envelopes.stage(stage, announced.finished.index, status, times, errors);
            }
        }
        let Announced {
            finished: result,
            started_at,
            finished_at: now,
            unit,
            ..
        } = announced;
        let status = if result.success { "success" } else { "failed" };
        let label = match &unit {
            Some((_, label)) => label.as_str(),
            None => plan.stages[result.index].name(),
        };
        if result.unit.as_deref() == Some(work::MAIN) {
            // Its stage's own line follows (see the starts).
            continue;
        }
        progress(Progress::Finished {
            stage: label.to_owned(),
            status: status.to_owned(),
            duration_ms: now - started_at,
            error: result.error,
        });
    }
    // Only the last commit's results are prepared, all of them shown here.
    if let Some(envelope) = committed {
        envelopes.publish(envelope);
    }
}

/// Adds the ledger events of the results in `pending` to it, so they are
/// committed together.
fn with_ledger(
    ledger: &mut crate::governance::RunLedger,
    plan: &Plan,
    composites: &BTreeMap<usize, Composite>,
    pending: &mut Vec<Transition>,
) {
    let kind_of = |index: i64, key: &str| {
        let composite = composites.get(&usize::try_from(index).ok()?)?;
        let unit = composite.units.iter().find(|unit| unit.key == key)?;
        Some(unit.kind.clone())
    };
    let events = ledger.derive(plan, pending, kind_of, clock::now_ms());
    pending.extend(events);
}

/// Starts waiting units of running composite stages while slots are free:
/// records their starts and queues their launches.
fn take_units(
    composites: &mut BTreeMap<usize, Composite>,
    free: &mut usize,
    plan: &Plan,
    workspace_dir: &std::path::Path,
    now: i64,
    pending: &mut Vec<Transition>,
    launches: &mut Vec<Launch>,
) {
    for (&index, composite) in composites.iter_mut() {
        while *free > 0 {
            let Some(position) = composite.take() else {
                break;
            };
            *free -= 1;
            let context = work::Context {
                plan,
                stage: &plan.stages[index],
                workspace: workspace_dir,
                now,
            };
            let unit = &mut composite.units[position];
            unit.status = "running".to_owned();
            unit.attempts += 1;
            unit.started_at = Some(now);
            pending.push(Transition::UnitStarted {
                index: as_i64(index),
                key: unit.key.clone(),
                at: now,
            });
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
    }
}

/// Takes a composite stage's next steps while all its units have finished:
/// plans more units (`None`), or ends the stage (`Some((success, error))`).
fn advance(
    context: &work::Context<'_>,
    composite: &mut Composite,
    index: usize,
    pending: &mut Vec<Transition>,
) -> Option<(bool, Option<String>)> {
    if !composite.idle() {
        return None;
    }
    match work::step(context, &composite.units) {
        work::Step::Next { units, record } => {
            pending.extend(record);
            if units.is_empty() {
                return Some((
                    false,
                    Some("internal error: the stage planned no further work".to_owned()),
                ));
            }
            pending.push(Transition::UnitsPlanned {
                index: as_i64(index),
                units: units.clone(),
                at: context.now,
            });
            composite.add(as_i64(index), units);
            None
        }
        work::Step::Done { record } => {
            pending.extend(record);
            Some((true, None))
        }
        work::Step::Fail { error, record } => {
            pending.extend(record);
            Some((false, Some(error)))
        }
    }
}

/// (path, sha256, bytes) of the outputs a composite stage's units wrote,
/// as they are now (a later unit may have changed an earlier one's).
fn hash_outputs(workspace_dir: &std::path::Path, paths: &[String]) -> Vec<(String, String, i64)> {
    paths
        .iter()
        .filter_map(|path| {
            let bytes = std::fs::read(workspace_dir.join(path)).ok()?;
            Some((
                path.clone(),
                create::sha256_hex(&bytes),
                i64::try_from(bytes.len()).unwrap_or(i64::MAX),
            ))
        })
        .collect()
}

fn as_i64(index: usize) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

fn failed_start(index: usize, attempts: &mut [i64], now: i64, error: String) -> Transition {
    attempts[index] += 1;
    Transition::AttemptFinished {
        index: as_i64(index),
        attempt: attempts[index],
        status: "failed".to_owned(),
        at: now,
        exit_code: None,
        error: Some(error),
        artifacts: Vec::new(),
    }
}

async fn stages_error(store: &Store, run_id: &str, index: usize) -> Option<String> {
    store
        .stages(run_id)
        .await
        .ok()?
        .into_iter()
        .find(|stage| usize::try_from(stage.index).ok() == Some(index))?
        .error
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
