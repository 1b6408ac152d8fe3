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
//! Inline stages with a `script:` need no agent: `next` runs them itself,
//! records their results and looks again, so the orchestrator only ever
//! sees work for agents. Stages that run as units (fan-out, `validation:`,
//! `validates_output` corrections), queue stages and sub-workflows are not
//! driven through this protocol yet: `next` refuses them with an error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_store::{Lease, RunRow, Store, Transition, UnitRow};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::{Executor, FanOutMode};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::create::{self, RunOptions, SourceDigest};
use crate::schedule::{self, Next, State};
use crate::stage::{self, Attempt, Fingerprint, Report, Snapshot};
use crate::worktree::{Place, Worktree};
use crate::{Error, Result, clock, gate, work, workspace};

/// Who executes a run's stages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriverMode {
    /// baton's coordinator spawns every stage ([`crate::drive`]).
    #[default]
    Builtin,
    /// An external orchestrator asks for work with `next` and reports it
    /// with `complete` / `fail`; baton spawns no agents.
    External,
}

impl DriverMode {
    /// Whether this is the default (kept out of the recorded options).
    #[must_use]
    pub fn is_builtin(&self) -> bool {
        *self == DriverMode::Builtin
    }
}

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
    /// Inline scripts `next` ran itself: (stage, status).
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

/// Whether a recorded run is driven externally.
#[must_use]
pub fn is_external(run: &RunRow) -> bool {
    serde_json::from_str::<RunOptions>(&run.options)
        .is_ok_and(|options| options.driver == DriverMode::External)
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
    let compile_options = baton_workflow::compile::Options {
        work_dir: None,
        params: params
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    };
    let (loaded, plan) =
        create::compile(&options.project_dir, &run.workflow_path, &compile_options)?;
    // The same rule as a resume: the plan recorded with the run is the one
    // driven; an edited workflow would hand out different stages.
    let recorded: Vec<SourceDigest> = serde_json::from_str(&run.sources).unwrap_or_default();
    let current = create::digests(&loaded);
    if recorded != current {
        let changed = current
            .iter()
            .filter(|digest| !recorded.contains(digest))
            .map(|digest| digest.path.clone())
            .collect();
        return Err(Error::WorkflowChanged {
            run_id: run_id.to_owned(),
            changed,
        });
    }
    let workspace = PathBuf::from(&run.workspace);
    create::ensure_workspace(
        &workspace,
        run_id,
        &plan,
        &options.project_dir.join(&run.workflow_path),
        run.created_at,
    )?;
    Ok(Opened {
        run,
        options,
        params,
        plan: Arc::new(plan),
        workspace,
    })
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

/// Why a stage cannot be driven through the protocol, if it cannot.
fn unsupported(stage: &PlanStage) -> Option<&'static str> {
    if stage.spec.sub_workflow.is_some() {
        Some("a sub-workflow")
    } else if stage.spec.executor == Executor::WorkerQueue {
        Some("a worker_queue stage")
    } else if stage
        .spec
        .fan_out
        .as_ref()
        .is_some_and(|fan_out| fan_out.mode == FanOutMode::WorkerQueue)
    {
        Some("a fan-out onto the worker queue")
    } else {
        None
    }
}

fn is_script(stage: &PlanStage) -> bool {
    stage.spec.executor == Executor::Inline && stage.spec.script.is_some()
}

fn as_i64(index: usize) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

/// `dispatch/NNN-name.before.json`: the outputs' fingerprints when `next`
/// handed the stage out.
fn before_path(workspace: &Path, stage: &PlanStage) -> PathBuf {
    workspace
        .join("dispatch")
        .join(format!("{}.before.json", stage.file_stem()))
}

fn dispatch_path(workspace: &Path, stage: &PlanStage) -> PathBuf {
    workspace
        .join("dispatch")
        .join(format!("{}.json", stage.file_stem()))
}

/// Renders the stage's prompt (for an isolated stage, the prompt of its
/// worktree) and writes its dispatch and prompt files.
fn hand_out(
    plan: &Plan,
    stage: &PlanStage,
    workspace: &Path,
    worktree: Option<&Worktree>,
) -> Result<Ready> {
    let io = |source| Error::Workspace {
        path: workspace.to_path_buf(),
        source,
    };
    let prompt = match worktree {
        Some(worktree) => worktree.prompt(plan, stage),
        None => crate::prompt::render(plan, stage, workspace),
    };
    let dispatch_file = dispatch_path(workspace, stage);
    workspace::write_json(
        &dispatch_file,
        &crate::prompt::dispatch(plan, stage, workspace, &prompt),
    )
    .map_err(io)?;
    workspace::write_atomic(
        &workspace
            .join("dispatch")
            .join(format!("{}.prompt.md", stage.file_stem())),
        prompt.as_bytes(),
    )
    .map_err(io)?;
    Ok(Ready {
        stage: stage.name().to_owned(),
        prompt,
        dispatch_file,
        worktree: worktree.map(|worktree| worktree.path.clone()),
    })
}

/// Where an isolated stage (or fan-out child) of this run lives, for
/// [`Worktree`].
fn place<'a>(
    store: &'a Store,
    opened: &'a Opened,
    index: usize,
    env: &'a [(String, String)],
) -> Place<'a> {
    Place {
        store,
        run_id: &opened.run.run_id,
        project_dir: &opened.options.project_dir,
        workspace: &opened.workspace,
        plan: &opened.plan,
        index,
        item: env
            .iter()
            .find(|(name, _)| name == "BATON_ITEM_NAME")
            .map(|(_, value)| value.as_str()),
    }
}

/// The worktree of an isolated stage being handed out: the one an earlier
/// `next` made (the orchestrator's agent may be at work in it), else a new
/// one with its `inputs/` filled.
async fn worktree_for(
    store: &Store,
    opened: &Opened,
    index: usize,
    stage: &PlanStage,
    env: &[(String, String)],
) -> Result<Option<Worktree>> {
    if !crate::worktree::isolated(stage) {
        return Ok(None);
    }
    let place = place(store, opened, index, env);
    if let Ok(found) = Worktree::find(stage, &place).await {
        return Ok(Some(found));
    }
    Worktree::create(stage, &place)
        .await
        .map(Some)
        .map_err(|error| Error::Refused(format!("stage '{}': {error}", stage.name())))
}

/// Lists the stages ready for the orchestrator, recording each as started.
/// Stages handed out before and not completed are listed again. Inline
/// scripts that are ready run here, and their dependants are looked at
/// again.
///
/// # Errors
///
/// No such run, a run not driven externally, a stage the protocol cannot
/// drive, a changed workflow, a live process holding the run, or the store
/// failing.
pub async fn next(store: &Store, run_id: &str) -> Result<Standing> {
    let opened = open(store, run_id).await?;
    if ended(&opened.run.status) {
        return standing(store, &opened, Vec::new(), Vec::new()).await;
    }
    let mut lease = take(store, run_id).await?;
    let result = next_owned(store, &mut lease, &opened).await;
    let _ = store.release(&lease).await;
    result
}

/// A script baton runs itself during `next`: a stage, or a unit of one.
struct Script {
    index: usize,
    attempt: i64,
    stage: PlanStage,
    unit: Option<String>,
    values: Vec<(String, String)>,
    env: Vec<(String, String)>,
    defer_checks: bool,
}

/// The units of a run, by stage, in ordinal order.
async fn units_by_stage(store: &Store, run_id: &str) -> Result<HashMap<usize, Vec<UnitRow>>> {
    let mut by_stage: HashMap<usize, Vec<UnitRow>> = HashMap::new();
    for unit in store.units(run_id).await? {
        if let Ok(index) = usize::try_from(unit.index) {
            by_stage.entry(index).or_default().push(unit);
        }
    }
    for units in by_stage.values_mut() {
        units.sort_by_key(|unit| unit.ordinal);
    }
    Ok(by_stage)
}

/// Whether a unit's materialized stage is a script (baton runs it).
fn unit_is_script(opened: &Opened, unit: &UnitRow, now: i64) -> bool {
    let Ok(index) = usize::try_from(unit.index) else {
        return false;
    };
    let context = work::Context {
        plan: &opened.plan,
        stage: &opened.plan.stages[index],
        workspace: &opened.workspace,
        now,
    };
    work::materialize(&context, unit).is_ok_and(|materialized| is_script(&materialized.stage))
}

/// Writes the fingerprints of `stage`'s declared outputs for `complete`.
fn write_before(stage: &PlanStage, workspace: &Path) -> Result<()> {
    let before: Vec<(PathBuf, Fingerprint)> =
        stage::snapshot(stage, workspace).into_iter().collect();
    workspace::write_json(
        &before_path(workspace, stage),
        &serde_json::to_value(before).expect("plain data"),
    )
    .map_err(|source| Error::Workspace {
        path: workspace.to_path_buf(),
        source,
    })
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass of the protocol's scheduling reads best in one piece"
)]
async fn next_owned(store: &Store, lease: &mut Lease, opened: &Opened) -> Result<Standing> {
    let plan = &opened.plan;
    let workspace = &opened.workspace;
    let run_id = &opened.run.run_id;
    let mut scripts = Vec::new();
    // A script recorded as running was left by a `next` that died while it
    // ran (calls hold the lease one at a time). Its processes, marked with
    // the run's id, must not keep writing while it runs again.
    let rows = store.stages(run_id).await?;
    let now = clock::now_ms();
    let left_stage = plan
        .stages
        .iter()
        .any(|stage| rows[stage.index].status == "running" && is_script(stage));
    let left_unit = store
        .units(run_id)
        .await?
        .iter()
        .any(|unit| unit.status == "running" && unit_is_script(opened, unit, now));
    if left_stage || left_unit {
        crate::reconcile::kill_leftovers(run_id);
    }
    loop {
        let rows = store.stages(run_id).await?;
        let states: Vec<State> = rows
            .iter()
            .map(|row| State::from_status(&row.status))
            .collect();
        let gates = gate::Gates::load(store, run_id, plan, workspace).await?;
        if gates.rejected().is_some() {
            return settle(store, lease, opened, Vec::new(), scripts).await;
        }
        let halting = schedule::required_failure(plan, &states).is_some();
        let units = units_by_stage(store, run_id).await?;
        let now = clock::now_ms();
        let mut transitions = Vec::new();
        let mut to_run: Vec<Script> = Vec::new();
        let mut envelopes: Vec<Envelope> = Vec::new();
        // Whether something changed that may make more work ready.
        let mut progressed = false;

        // Stages in progress.
        for stage in plan
            .stages
            .iter()
            .filter(|stage| rows[stage.index].status == "running")
        {
            let index = stage.index;
            if !work::is_composite(stage) {
                if is_script(stage) {
                    // Only a `next` that died while the script ran leaves
                    // it running (calls hold the lease one at a time): it
                    // runs again.
                    transitions.push(Transition::AttemptInterrupted {
                        index: as_i64(index),
                        attempt: rows[index].attempts,
                        at: now,
                    });
                    progressed = true;
                }
                continue;
            }
            let own = units.get(&index).map(Vec::as_slice).unwrap_or_default();
            let out = own
                .iter()
                .filter(|unit| unit.status == "running" && !unit_is_script(opened, unit, now))
                .count();
            let handed = out > 0;
            // `--max-parallel` is the orchestrator's business, but a
            // fan-out's own `max_parallel` is part of the workflow: no more
            // of its children are out at once.
            let cap = stage
                .spec
                .fan_out
                .as_ref()
                .and_then(|fan_out| fan_out.max_parallel)
                .map_or(usize::MAX, |cap| usize::try_from(cap).unwrap_or(usize::MAX));
            let waiting: Vec<&UnitRow> = own
                .iter()
                .filter(|unit| {
                    unit.status == "pending"
                        || (unit.status == "running" && unit_is_script(opened, unit, now))
                })
                .take(cap.saturating_sub(out))
                .collect();
            let held_back = own.iter().any(|unit| unit.status == "pending") && waiting.is_empty();
            if halting {
                // As the coordinator does: no new units once the run halts;
                // a stage with none out goes back to pending, its finished
                // units kept.
                if !handed {
                    transitions.push(Transition::AttemptInterrupted {
                        index: as_i64(index),
                        attempt: rows[index].attempts,
                        at: now,
                    });
                    progressed = true;
                }
                continue;
            }
            let context = work::Context {
                plan,
                stage,
                workspace,
                now,
            };
            if !waiting.is_empty() {
                for unit in waiting {
                    transitions.push(Transition::UnitStarted {
                        index: as_i64(index),
                        key: unit.key.clone(),
                        at: now,
                    });
                    match work::materialize(&context, unit) {
                        Err(error) => {
                            transitions.push(Transition::UnitFinished {
                                index: as_i64(index),
                                key: unit.key.clone(),
                                status: "failed".to_owned(),
                                at: now,
                                exit_code: None,
                                error: Some(error),
                                artifacts: Vec::new(),
                            });
                            progressed = true;
                        }
                        Ok(materialized) if is_script(&materialized.stage) => {
                            to_run.push(Script {
                                index,
                                attempt: unit.attempts + 1,
                                stage: materialized.stage,
                                unit: Some(unit.key.clone()),
                                values: materialized.values,
                                env: materialized.env,
                                defer_checks: materialized.defer_checks,
                            });
                        }
                        Ok(materialized) => write_before(&materialized.stage, workspace)?,
                    }
                }
                continue;
            }
            if handed || held_back {
                continue;
            }
            // Every unit has finished: the stage's program takes its next
            // step, exactly as in the coordinator.
            progressed = true;
            match work::step(&context, own) {
                work::Step::Next { units, record } => {
                    transitions.extend(record);
                    if units.is_empty() {
                        transitions.push(stage_finished(
                            index,
                            rows[index].attempts,
                            false,
                            Some("internal error: the stage planned no further work".to_owned()),
                            Vec::new(),
                        ));
                    } else {
                        transitions.push(Transition::UnitsPlanned {
                            index: as_i64(index),
                            units,
                            at: now,
                        });
                    }
                }
                work::Step::Done { record } => {
                    transitions.extend(record);
                    envelopes.push(Envelope {
                        stage: stage.clone(),
                        index,
                        status: "success",
                        started_at: rows[index].started_at,
                        error: None,
                    });
                    let artifacts = hash_outputs(workspace, own);
                    transitions.push(stage_finished(
                        index,
                        rows[index].attempts,
                        true,
                        None,
                        artifacts,
                    ));
                }
                work::Step::Fail { error, record } => {
                    transitions.extend(record);
                    envelopes.push(Envelope {
                        stage: stage.clone(),
                        index,
                        status: "failed",
                        started_at: rows[index].started_at,
                        error: Some(error.clone()),
                    });
                    transitions.push(stage_finished(
                        index,
                        rows[index].attempts,
                        false,
                        Some(error),
                        Vec::new(),
                    ));
                }
            }
        }

        // Stages that may start.
        let ready = if progressed {
            // Look again once this step's changes are recorded.
            Vec::new()
        } else {
            match schedule::next(plan, &states, |index| gates.approved(index), usize::MAX) {
                Next::Start(ready) => ready,
                _ => Vec::new(),
            }
        };
        if let Some(stage) = ready
            .iter()
            .map(|&index| &plan.stages[index])
            .find(|stage| unsupported(stage).is_some())
        {
            return Err(Error::Refused(format!(
                "stage '{}' is {}, which the driver protocol does not drive yet; run this workflow with `baton run` instead",
                stage.name(),
                unsupported(stage).unwrap_or_default()
            )));
        }
        for &index in &ready {
            let stage = &plan.stages[index];
            let attempt = rows[index].attempts + 1;
            progressed = true;
            if let Some(decided) = decide_when(stage, attempt, &opened.params, workspace, now)? {
                let status = match &decided {
                    Transition::StageSkipped { .. } => "skipped",
                    _ => "failed",
                };
                envelopes.push(Envelope {
                    stage: stage.clone(),
                    index,
                    status,
                    started_at: Some(now),
                    error: None,
                });
                transitions.push(decided);
                continue;
            }
            if work::is_composite(stage) {
                // Its units are planned on the next pass.
            } else if is_script(stage) {
                to_run.push(Script {
                    index,
                    attempt,
                    stage: stage.clone(),
                    unit: None,
                    values: Vec::new(),
                    env: Vec::new(),
                    defer_checks: false,
                });
            } else {
                // The outputs as they are now, kept on disk for `complete`,
                // which runs in another process; written before the start
                // is recorded so a recorded start always has its snapshot.
                write_before(stage, workspace)?;
            }
            transitions.push(Transition::AttemptStarted {
                index: as_i64(index),
                attempt,
                at: now,
            });
        }
        if !transitions.is_empty() {
            transitions.push(Transition::RunStatus {
                status: "running".to_owned(),
                at: now,
                error: None,
            });
            store.apply(lease, &transitions).await?;
        }
        write_envelopes(workspace, envelopes);
        for script in to_run {
            progressed = true;
            let (index, attempt, unit) = (script.index, script.attempt, script.unit.clone());
            let name = match &unit {
                Some(_) => script.stage.name().to_owned(),
                None => plan.stages[index].name().to_owned(),
            };
            let ran = script.stage.clone();
            let started_at = Some(clock::now_ms());
            let finished = run_script(store, lease, opened, script).await?;
            let status = status_text(finished.success);
            let envelope = Envelope {
                stage: ran,
                index,
                status,
                started_at,
                error: finished.error.clone(),
            };
            scripts.push((name, status.to_owned()));
            let transition = match unit {
                Some(key) => Transition::UnitFinished {
                    index: as_i64(index),
                    key,
                    status: status.to_owned(),
                    at: clock::now_ms(),
                    exit_code: finished.exit_code,
                    error: finished.error,
                    artifacts: finished.artifacts,
                },
                None => Transition::AttemptFinished {
                    index: as_i64(index),
                    attempt,
                    status: status.to_owned(),
                    at: clock::now_ms(),
                    exit_code: finished.exit_code,
                    error: finished.error,
                    artifacts: finished.artifacts,
                },
            };
            store.apply(lease, &[transition]).await?;
            write_envelopes(workspace, vec![envelope]);
        }
        if progressed {
            continue;
        }
        // Settled: every stage and unit handed out and not completed is
        // listed.
        let units = units_by_stage(store, run_id).await?;
        let mut handed = Vec::new();
        for stage in plan
            .stages
            .iter()
            .filter(|stage| rows[stage.index].status == "running")
        {
            if !work::is_composite(stage) {
                let worktree = worktree_for(store, opened, stage.index, stage, &[]).await?;
                handed.push(hand_out(plan, stage, workspace, worktree.as_ref())?);
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
                    let worktree = worktree_for(
                        store,
                        opened,
                        stage.index,
                        &materialized.stage,
                        &materialized.env,
                    )
                    .await?;
                    let mut ready =
                        hand_out(plan, &materialized.stage, workspace, worktree.as_ref())?;
                    ready.stage.clone_from(&unit.label);
                    handed.push(ready);
                }
            }
        }
        return settle(store, lease, opened, handed, scripts).await;
    }
}

/// A stage's (or unit's) result envelope, `stages/NNN-name.json`, as the
/// coordinator writes it, so the workspace looks the same however the run
/// was driven. Written once the result is recorded.
struct Envelope {
    stage: PlanStage,
    index: usize,
    status: &'static str,
    started_at: Option<i64>,
    error: Option<String>,
}

fn write_envelopes(workspace: &Path, envelopes: Vec<Envelope>) {
    if envelopes.is_empty() {
        return;
    }
    // Dropping the writer writes everything queued.
    let writer = crate::envelopes::EnvelopeWriter::start(workspace);
    let now = clock::now_ms();
    for envelope in envelopes {
        writer.stage(
            &envelope.stage,
            envelope.index,
            envelope.status,
            (envelope.started_at, Some(now)),
            envelope.error.into_iter().collect(),
        );
    }
}

fn status_text(success: bool) -> &'static str {
    if success { "success" } else { "failed" }
}

fn stage_finished(
    index: usize,
    attempt: i64,
    success: bool,
    error: Option<String>,
    artifacts: Vec<(String, String, i64)>,
) -> Transition {
    Transition::AttemptFinished {
        index: as_i64(index),
        attempt,
        status: if success { "success" } else { "failed" }.to_owned(),
        at: clock::now_ms(),
        exit_code: None,
        error,
        artifacts,
    }
}

/// (path, sha256, bytes) of the outputs a composite stage's units recorded,
/// as they are now (a later unit may have changed an earlier one's), as the
/// coordinator records them.
fn hash_outputs(workspace: &Path, units: &[UnitRow]) -> Vec<(String, String, i64)> {
    let mut paths: Vec<String> = units
        .iter()
        .filter_map(|unit| serde_json::from_str::<Vec<(String, String, i64)>>(&unit.artifacts).ok())
        .flatten()
        .map(|(path, _, _)| path)
        .collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| {
            let bytes = std::fs::read(workspace.join(&path)).ok()?;
            let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
            Some((path, create::sha256_hex(&bytes), size))
        })
        .collect()
}

/// A `when` that is false skips the stage, one naming an unknown parameter
/// fails it; `None` when the stage runs.
fn decide_when(
    stage: &PlanStage,
    attempt: i64,
    params: &IndexMap<String, String>,
    workspace: &Path,
    now: i64,
) -> Result<Option<Transition>> {
    let Some(when) = &stage.when else {
        return Ok(None);
    };
    if let Some(unknown) = when
        .placeholders()
        .into_iter()
        .find(|name| !params.contains_key(*name))
    {
        return Ok(Some(Transition::AttemptFinished {
            index: as_i64(stage.index),
            attempt,
            status: "failed".to_owned(),
            at: now,
            exit_code: None,
            error: Some(format!(
                "'when' refers to '{{{unknown}}}', which has no value; pass --params {unknown}=…"
            )),
            artifacts: Vec::new(),
        }));
    }
    if when.evaluate(|name| params.get(name).map(String::as_str)) {
        return Ok(None);
    }
    stage::write_skip_sentinels(stage, workspace).map_err(|source| Error::Workspace {
        path: workspace.to_path_buf(),
        source,
    })?;
    let expression = stage
        .spec
        .when
        .as_ref()
        .map(|when| when.value.trim())
        .unwrap_or_default();
    Ok(Some(Transition::StageSkipped {
        index: as_i64(stage.index),
        at: now,
        note: format!("skipped: when {expression}"),
    }))
}

/// Runs an inline script through the executor, renewing the lease while
/// it runs.
async fn run_script(
    store: &Store,
    lease: &mut Lease,
    opened: &Opened,
    script: Script,
) -> Result<stage::Finished> {
    let index = script.index;
    let mut params: stage::Params = opened
        .params
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    params.extend(script.values);
    let attempt = Attempt {
        run_id: opened.run.run_id.clone(),
        index,
        attempt: script.attempt,
        workspace: opened.workspace.clone(),
        project_dir: opened.options.project_dir.clone(),
        params,
        limits: stage::Limits::default(),
        plan: Arc::clone(&opened.plan),
        agents: None,
        unit: script.unit,
        env: script.env,
        defer_checks: script.defer_checks,
        store: store.clone(),
    };
    let (_cancel, cancelled) = watch::channel(false);
    let (sender, mut reports) = mpsc::unbounded_channel();
    let task = tokio::spawn(stage::run(script.stage, attempt, cancelled, sender));
    let ttl = crate::control::TTL_MS;
    let mut renew = tokio::time::interval(std::time::Duration::from_millis(
        u64::try_from(ttl / 3).unwrap_or(3_000),
    ));
    renew.tick().await;
    let finished = loop {
        tokio::select! {
            report = reports.recv() => match report {
                Some(Report::Finished(finished)) => break finished,
                Some(Report::Started { .. }) => {}
                None => break stage::Finished {
                    index,
                    unit: None,
                    attempt: 0,
                    success: false,
                    exit_code: None,
                    error: Some("the script's attempt ended without a result".to_owned()),
                    artifacts: Vec::new(),
                    cancelled: false,
                    usage: None,
                },
            },
            _ = renew.tick() => {
                store.renew(lease, clock::now_ms(), ttl).await?;
            }
        }
    };
    let _ = task.await;
    Ok(finished)
}

/// Records the run's status as the stages now make it and says where it
/// stands.
async fn settle(
    store: &Store,
    lease: &Lease,
    opened: &Opened,
    ready: Vec<Ready>,
    scripts: Vec<(String, String)>,
) -> Result<Standing> {
    let plan = &opened.plan;
    let run_id = &opened.run.run_id;
    let rows = store.stages(run_id).await?;
    let states: Vec<State> = rows
        .iter()
        .map(|row| State::from_status(&row.status))
        .collect();
    let gates = gate::Gates::load(store, run_id, plan, &opened.workspace).await?;
    let (status, error) = if let Some((index, comment, by)) = gates.rejected() {
        (
            "rejected",
            Some(gate::rejection_error(
                plan.stages[index].name(),
                &by,
                &comment,
            )),
        )
    } else {
        match schedule::next(plan, &states, |index| gates.approved(index), usize::MAX) {
            Next::Succeeded => ("success", None),
            Next::Failed(index) => (
                "failed",
                Some(format!(
                    "required stage '{}' failed: {}",
                    plan.stages[index].name(),
                    rows[index].error.clone().unwrap_or_default()
                )),
            ),
            Next::AwaitingGate(_) => ("awaiting_human", None),
            Next::Start(_) | Next::Wait => ("running", None),
        }
    };
    let current = store.run(run_id).await?;
    if current.status != status {
        store
            .apply(
                lease,
                &[Transition::RunStatus {
                    status: status.to_owned(),
                    at: clock::now_ms(),
                    error: error.clone(),
                }],
            )
            .await?;
    }
    let mut standing = standing(store, opened, ready, scripts).await?;
    standing.status = status.to_owned();
    standing.error = error;
    Ok(standing)
}

/// Where the run stands as recorded, without changing it.
async fn standing(
    store: &Store,
    opened: &Opened,
    ready: Vec<Ready>,
    scripts: Vec<(String, String)>,
) -> Result<Standing> {
    let run = store.run(&opened.run.run_id).await?;
    let rows = store.stages(&run.run_id).await?;
    let gates = gate::Gates::load(store, &run.run_id, &opened.plan, &opened.workspace).await?;
    // The earliest gate that succeeded and is not yet approved.
    let gate = opened
        .plan
        .stages
        .iter()
        .filter(|stage| {
            stage.spec.human_gate
                && rows[stage.index].status == "success"
                && !gates.approved(stage.index)
        })
        .min_by_key(|stage| stage.group)
        .map(|stage| stage.name().to_owned())
        .filter(|_| run.status == "awaiting_human");
    Ok(Standing {
        run_id: run.run_id,
        status: run.status,
        gate,
        error: run.error,
        ready,
        scripts,
    })
}

/// What `complete` or `fail` acts on: a stage handed out, or a unit of
/// a composite stage handed out.
enum Target {
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
async fn handed_out(store: &Store, opened: &Opened, name: &str) -> Result<Target> {
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
                "running" if !unit_is_script(opened, unit, now) => {
                    let context = work::Context {
                        plan: &opened.plan,
                        stage,
                        workspace: &opened.workspace,
                        now,
                    };
                    let materialized = work::materialize(&context, unit).map_err(Error::Refused)?;
                    Ok(Target::Unit {
                        index,
                        key: unit.key.clone(),
                        materialized: Box::new(materialized),
                        started_at: unit.started_at,
                    })
                }
                "running" => Err(Error::Refused(format!(
                    "'{name}' is an inline script that baton runs itself"
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
        "running" if is_script(stage) => Err(Error::Refused(format!(
            "stage '{name}' is an inline script that baton runs itself"
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
    let verified =
        copied.and_then(|()| stage::verify(stage, &opened.workspace, &before, defer_checks));
    // A merge begun is marked until its result is recorded, so that a
    // `baton resume` after a crash in between finishes it.
    let marker = merging_path(&opened.workspace, stage);
    let verified = match (verified, &worktree) {
        (Ok(artifacts), Some(worktree)) => {
            workspace::write_atomic(&marker, name.as_bytes()).map_err(|source| {
                Error::Workspace {
                    path: marker.clone(),
                    source,
                }
            })?;
            worktree
                .integrate(stage, &opened.run.run_id)
                .await
                .map(|()| artifacts)
        }
        (verified, _) => verified,
    };
    let (success, error, artifacts) = match verified {
        Ok(artifacts) => (true, None, artifacts),
        Err(error) => (false, Some(error), Vec::new()),
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

/// `dispatch/NNN-name.merging`: an isolated stage verified by `complete`
/// whose merge and result are not recorded yet.
fn merging_path(workspace: &Path, stage: &PlanStage) -> PathBuf {
    workspace
        .join("dispatch")
        .join(format!("{}.merging", stage.file_stem()))
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

async fn finish(
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
        let status = status_text(success);
        let envelope = Envelope {
            stage: target.stage(&opened.plan).clone(),
            index: 0,
            status,
            started_at: None,
            error: error.clone(),
        };
        let (transition, envelope) = match target {
            Target::Stage {
                index,
                attempt,
                started_at,
            } => (
                Transition::AttemptFinished {
                    index: as_i64(index),
                    attempt,
                    status: status.to_owned(),
                    at: clock::now_ms(),
                    exit_code: None,
                    error,
                    artifacts,
                },
                Envelope {
                    index,
                    started_at,
                    ..envelope
                },
            ),
            Target::Unit {
                index,
                key,
                started_at,
                ..
            } => (
                Transition::UnitFinished {
                    index: as_i64(index),
                    key,
                    status: status.to_owned(),
                    at: clock::now_ms(),
                    exit_code: None,
                    error,
                    artifacts,
                },
                Envelope {
                    index,
                    started_at,
                    ..envelope
                },
            ),
        };
        store.apply(&lease, &[transition]).await?;
        write_envelopes(&opened.workspace, vec![envelope]);
        settle(store, &lease, opened, Vec::new(), Vec::new()).await
    }
    .await;
    let _ = store.release(&lease).await;
    result
}

fn read_before(workspace: &Path, stage: &PlanStage) -> Result<Snapshot> {
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

/// What `next` would list now, without recording anything: the stages
/// handed out and not completed, and the stages ready to be handed out.
///
/// # Errors
///
/// No such run, a run not driven externally, the store failing.
pub async fn preview(store: &Store, run_id: &str) -> Result<Standing> {
    let opened = open(store, run_id).await?;
    let rows = store.stages(run_id).await?;
    let states: Vec<State> = rows
        .iter()
        .map(|row| State::from_status(&row.status))
        .collect();
    let gates = gate::Gates::load(store, run_id, &opened.plan, &opened.workspace).await?;
    let mut names: Vec<usize> = opened
        .plan
        .stages
        .iter()
        .filter(|stage| rows[stage.index].status == "running")
        .map(|stage| stage.index)
        .collect();
    if let Next::Start(ready) = schedule::next(
        &opened.plan,
        &states,
        |index| gates.approved(index),
        usize::MAX,
    ) {
        names.extend(ready);
    }
    let units = units_by_stage(store, run_id).await?;
    let mut ready = Vec::new();
    for index in names {
        let stage = &opened.plan.stages[index];
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
        let context = work::Context {
            plan: &opened.plan,
            stage,
            workspace: &opened.workspace,
            now: clock::now_ms(),
        };
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
