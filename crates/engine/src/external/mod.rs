//! The driver protocol: a run driven by an external orchestrator (for
//! example a Claude Code skill that spawns its own agents) instead of by
//! [`crate::drive`].
//!
//! The orchestrator loops `next` → run the agents → `complete` (or `fail`).
//! baton keeps the same rules as its own executor: a stage is listed only
//! once its dependencies are done and every earlier gate is approved, its
//! start is recorded before it is handed out, and a completion is accepted
//! only when the stage's declared outputs exist, were written after `next`
//! handed the stage out, and pass their output checks.
//!
//! Every call is a short, separate process: it takes the run's lease for the
//! change it makes (like `rerun` and `cancel`) and releases it. So that
//! `complete` can tell that an output was written after `next`, `next`
//! stores the fingerprints (inode, size, modification and change times) of
//! the declared outputs as they were when it handed the stage out in
//! `dispatch/NNN-name.before.json`, written before the start is recorded;
//! `complete` compares the files with it exactly as the built-in executor
//! compares them with the snapshot it holds in memory.
//!
//! Inline stages with a `script:` and queue stages need no agent: `next`
//! runs the script, or enqueues the job and waits for it, records their
//! results and looks again, so the orchestrator only ever sees work for
//! agents. Stages that run as units (fan-out children, validators,
//! corrections) are handed out unit by unit, a sub-workflow stage's child
//! run entry by entry (`subrun.rs`). Every result is committed with the run
//! ledger's entries for it, as in a run baton drives.

mod complete;
mod handing;
mod next;
mod preview;
mod record;
mod subrun;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_store::{Lease, RunRow, StageRow, Store, UnitRow};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Executor;
use indexmap::IndexMap;
use serde::Serialize;

use crate::attempt::{Attempt, Limits};
use crate::create;
use crate::outputs::{Fingerprint, Snapshot};
use crate::run_options::RunOptions;
pub use crate::run_options::{DriverMode, is_external};
use crate::run_state::RunState;
use crate::schedule::State;
use crate::schedule::as_i64;
use crate::worktree::{Place, Worktree};
use crate::{Error, Result, clock, work, workspace};

pub use complete::{complete, fail, finish_merges};
pub use next::next;
pub use preview::preview;

/// One stage handed to the external orchestrator.
#[derive(Debug, Clone, Serialize)]
pub struct Ready {
    /// The stage's name.
    pub stage: String,
    /// The rendered prompt (the same text the built-in executor gives an agent).
    pub prompt: String,
    /// `dispatch/NNN-name.json` in the workspace (absolute).
    pub dispatch_file: PathBuf,
    /// The directory the agent must work in when the stage is isolated in
    /// a git worktree; `null` while worktree isolation is not wired into
    /// this protocol (the agent works in the workspace).
    pub worktree: Option<PathBuf>,
}

/// Where a run stands after a protocol call.
#[derive(Debug, Clone, Serialize)]
pub struct Standing {
    /// The run.
    pub run_id: String,
    /// The run's status: `running`, `awaiting_human`, `success`, `failed`,
    /// `rejected` or `cancelled`.
    pub status: String,
    /// The gate waited on, if any.
    pub gate: Option<String>,
    /// Why the run failed, if it did.
    pub error: Option<String>,
    /// The stages to work on now (only from `next`).
    pub ready: Vec<Ready>,
    /// What `next` ran itself (inline scripts, queue stages, the same in
    /// child runs as `<stage>/<name>`): (stage, status).
    pub scripts: Vec<(String, String)>,
}

/// What `complete` found.
#[derive(Debug, Clone, Serialize)]
pub struct Completion {
    /// The stage.
    pub stage: String,
    /// Whether its outputs were accepted.
    pub success: bool,
    /// Why not.
    pub error: Option<String>,
    /// Where the run stands afterwards.
    pub run: Standing,
}

/// A run opened for a protocol call: its plan and workspace.
struct Opened {
    run: RunRow,
    options: RunOptions,
    params: IndexMap<String, String>,
    plan: Arc<Plan>,
    workspace: PathBuf,
}

async fn open(store: &Store, run_id: &str) -> Result<Opened> {
    let run = store.run(run_id).await?;
    let options: RunOptions = serde_json::from_str(&run.options).map_err(|_| {
        Error::Refused(format!(
            "run {run_id} has unreadable options; it cannot be driven externally"
        ))
    })?;
    if options.driver != DriverMode::External {
        return Err(Error::Refused(format!(
            "run {run_id} is driven by baton itself, not externally; use `baton resume {run_id}` (start runs for an external orchestrator with `baton run FILE --driver external`)"
        )));
    }
    let params: IndexMap<String, String> = serde_json::from_str(&run.params).unwrap_or_default();
    // The same rule as a resume: the plan recorded with the run is the one
    // driven; an edited workflow would hand out different stages.
    let plan = create::recompile(&run, &options, &params, false)?;
    let workspace = PathBuf::from(&run.workspace);
    create::ensure_workspace(
        &workspace,
        run_id,
        &plan,
        &options.project_dir.join(&run.workflow_path),
        run.created_at,
        None,
    )?;
    Ok(Opened {
        run,
        options,
        params,
        plan: Arc::new(plan),
        workspace,
    })
}

impl Opened {
    /// Its stage rows and state machine (with its composite stages' units)
    /// as the store holds them now.
    async fn state(&self, store: &Store) -> Result<(Vec<StageRow>, RunState)> {
        let (plan, run_id) = (&self.plan, &self.run.run_id);
        let rows = store.stages(run_id).await?;
        let gates = crate::gate::Gates::load(store, run_id, plan, &self.workspace).await?;
        let units = store.units(run_id).await?;
        // How many units are out at once is the orchestrator's business,
        // except where the workflow says (a fan-out's `max_parallel`, one at
        // a time for agents editing the checkout), which the machine keeps.
        let mut run = RunState::new(Arc::clone(plan), self.params.clone(), &rows, gates)
            .with_units(units, usize::MAX);
        // A unit recorded as running is out with the orchestrator, unless
        // it is a script: only a `next` that died while it ran leaves one,
        // and it runs again.
        let now = clock::now_ms();
        let out = |unit: &UnitRow| unit.status == "running" && !self.runs_here(unit, now);
        run.resume_composites(&rows, out);
        // `baton cancel` asks whoever holds the run (a `next` running a
        // script): the run stops as cancelled.
        if store.cancel_requested(run_id).await? {
            run.apply(crate::run_state::Event::CancelRequested);
        }
        Ok((rows, run))
    }

    /// Whether baton carries a unit out itself (see [`runs_here`]).
    fn runs_here(&self, unit: &UnitRow, now: i64) -> bool {
        let Ok(index) = usize::try_from(unit.index) else {
            return false;
        };
        let context = self.context(&self.plan.stages[index], now);
        work::materialize(&context, unit).is_ok_and(|materialized| runs_here(&materialized.stage))
    }

    /// Attempt `number` of stage `index` as baton carries it out itself
    /// (a script, a queue job, a child run): no agents, default limits.
    fn attempt(&self, store: &Store, index: usize, number: i64) -> Attempt {
        Attempt {
            run_id: self.run.run_id.clone(),
            index,
            attempt: number,
            workspace: self.workspace.clone(),
            project_dir: self.options.project_dir.clone(),
            params: self.params.clone().into_iter().collect(),
            limits: Limits::default(),
            plan: Arc::clone(&self.plan),
            agents: None,
            contain_helper: None,
            slots: Arc::default(),
            adopt_job: false,
            unit: None,
            env: Vec::new(),
            push_back: None,
            defer_checks: false,
            store: store.clone(),
            continues: None,
            accept_merge: false,
        }
    }

    /// What the work of `stage` is carried out with, at `now`.
    fn context<'a>(&'a self, stage: &'a PlanStage, now: i64) -> work::Context<'a> {
        work::Context {
            plan: &self.plan,
            stage,
            workspace: &self.workspace,
            now,
        }
    }
}

/// Records a run for an external orchestrator (`baton run --driver
/// external`), refusing first a workflow with a stage the protocol cannot
/// drive: a sub-workflow whose result is validated (its child would have
/// to run as the stage's main unit).
///
/// # Errors
///
/// As [`create::create_run`]; [`Error::Refused`] naming such a stage.
pub async fn create_run(store: &Store, request: &create::RunRequest) -> Result<create::Created> {
    let prepared = create::prepare_run(request, DriverMode::External)?;
    let undrivable = prepared
        .plan()
        .stages
        .iter()
        .find(|stage| stage.spec.sub_workflow.is_some() && work::is_composite(stage));
    if let Some(stage) = undrivable {
        return Err(Error::Refused(format!(
            "stage '{}' is a sub-workflow whose result is validated, which the driver protocol does not drive; run this workflow with `baton run`",
            stage.name()
        )));
    }
    create::record_run(store, prepared).await
}

/// How long a protocol call waits for another one to release the run.
const TAKE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Takes the run's lease for one call. An orchestrator completes stages
/// from parallel agents at once, and each call holds the lease only for a
/// moment: a call that finds it held by another live process waits for it
/// (up to [`TAKE_PATIENCE`]) rather than failing.
async fn take(store: &Store, run_id: &str) -> Result<Lease> {
    let deadline = std::time::Instant::now() + TAKE_PATIENCE;
    loop {
        match crate::control::take(store, run_id).await {
            Err(Error::Owned { .. }) if std::time::Instant::now() < deadline => {
                let jitter = clock::entropy() % 50;
                tokio::time::sleep(std::time::Duration::from_millis(50 + jitter)).await;
            }
            taken => return taken,
        }
    }
}

fn ended(status: &str) -> bool {
    matches!(status, "success" | "failed" | "cancelled" | "rejected")
}

/// Whether `next` carries a stage (or a unit's materialized stage) out
/// itself rather than handing it out: an inline script runs, a queue
/// stage's job is enqueued and waited for, as `baton run` does both.
fn runs_here(stage: &PlanStage) -> bool {
    stage.spec.runs_script() || stage.spec.executor == Executor::WorkerQueue
}

/// `dispatch/NNN-name.before.json`: the outputs' fingerprints when `next`
/// handed the stage out.
fn before_path(workspace: &Path, stage: &PlanStage) -> PathBuf {
    workspace::dispatch_file(workspace, stage, "before.json")
}

fn dispatch_path(workspace: &Path, stage: &PlanStage) -> PathBuf {
    workspace::dispatch_file(workspace, stage, "json")
}
