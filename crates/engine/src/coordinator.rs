//! Driving a run: the one loop that owns a run's state.
//!
//! It takes the run's lease, puts the run back in order after a crash, then
//! repeatedly asks the scheduler what may start, records the starts, spawns
//! the attempts, and records their results. Every batch of transitions that
//! arrives together is one store transaction (group commit), fenced by the
//! lease's epoch; the lease is renewed on a timer, and a cancel request seen
//! at renewal stops every running attempt.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use baton_store::{Error as StoreError, Lease, Store, Transition};
use baton_workflow::Plan;
use indexmap::IndexMap;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::create::{self, RunOptions, SourceDigest};
use crate::schedule::{self, Next, State};
use crate::stage::{self, Attempt, Finished, Limits, Report};
use crate::{Error, Result, clock, owner, reconcile, workspace};

/// How `drive` behaves.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    /// Lease duration; renewed every third of it.
    pub lease_ttl: Duration,
    /// Run even though the workflow or a fragment changed since the run started.
    pub accept_changes: bool,
    /// Wait for a lease held on another host to expire, instead of failing.
    pub wait_for_lease: bool,
    /// Override the run's recorded `--max-parallel`.
    pub max_parallel: Option<usize>,
    /// Limits for every stage process.
    pub limits: Limits,
    /// Agent profiles and roles from `baton.toml`; `None` when there is none.
    pub agents: Option<std::sync::Arc<baton_executor::profile::Config>>,
}

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            lease_ttl: Duration::from_secs(30),
            accept_changes: false,
            wait_for_lease: true,
            max_parallel: None,
            limits: Limits::default(),
            agents: None,
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
}

/// How a drive ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The run.
    pub run_id: String,
    /// `success`, `failed`, `awaiting_human` or `cancelled`.
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
    let run = store.run(run_id).await?;
    if matches!(run.status.as_str(), "success" | "cancelled") {
        return Ok(Outcome {
            run_id: run_id.to_owned(),
            status: run.status,
            gate: None,
            error: run.error,
        });
    }
    let mut lease = acquire(store, run_id, options).await?;
    let result = drive_owned(store, &mut lease, options, progress).await;
    if !matches!(result, Err(Error::Store(StoreError::LostLease { .. }))) {
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

struct Running {
    cancel: watch::Sender<bool>,
    started_at: i64,
}

#[expect(
    clippy::too_many_lines,
    reason = "the coordinator's loop reads best in one piece"
)]
async fn drive_owned(
    store: &Store,
    lease: &mut Lease,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let run_id = lease.run_id.clone();
    let run = store.run(&run_id).await?;
    let run_options: RunOptions = serde_json::from_str(&run.options).unwrap_or(RunOptions {
        project_dir: PathBuf::from("."),
        max_parallel: 4,
    });
    let params: IndexMap<String, String> = serde_json::from_str(&run.params).unwrap_or_default();
    let compile_options = baton_workflow::compile::Options {
        work_dir: None,
        params: params
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    };
    let (loaded, plan) = create::compile(
        &run_options.project_dir,
        &run.workflow_path,
        &compile_options,
    )?;
    let recorded: Vec<SourceDigest> = serde_json::from_str(&run.sources).unwrap_or_default();
    let current = create::digests(&loaded);
    if recorded != current && !options.accept_changes {
        let mut changed: Vec<String> = current
            .iter()
            .filter(|digest| !recorded.contains(digest))
            .map(|digest| digest.path.clone())
            .collect();
        changed.extend(
            recorded
                .iter()
                .filter(|digest| !current.iter().any(|now| now.path == digest.path))
                .map(|digest| digest.path.clone()),
        );
        return Err(Error::WorkflowChanged { run_id, changed });
    }
    let workspace_dir = PathBuf::from(&run.workspace);
    create::ensure_workspace(
        &workspace_dir,
        &run_id,
        &plan,
        &run_options.project_dir.join(&run.workflow_path),
        run.created_at,
    )?;
    let max_parallel = options
        .max_parallel
        .unwrap_or(run_options.max_parallel)
        .max(1);
    let ttl = i64::try_from(options.lease_ttl.as_millis()).unwrap_or(30_000);

    // Reconcile: nothing of a previous driver may keep running, attempts it
    // left running are interrupted, failed stages are retried, and stages
    // whose recorded outputs changed run again.
    let killed = reconcile::kill_leftovers(&run_id);
    if killed > 0 {
        progress(Progress::Note(format!(
            "killed {killed} process(es) left by an earlier baton"
        )));
    }
    let stages = store.stages(&run_id).await?;
    let attempts = store.attempts(&run_id).await?;
    let artifacts = store.artifacts(&run_id).await?;
    let now = clock::now_ms();
    let mut transitions = Vec::new();
    for attempt in attempts
        .iter()
        .filter(|attempt| attempt.status == "running")
    {
        transitions.push(Transition::AttemptInterrupted {
            index: attempt.index,
            attempt: attempt.attempt,
            at: now,
        });
    }
    for stage in stages.iter().filter(|stage| stage.status == "failed") {
        transitions.push(Transition::StageReset {
            index: stage.index,
            note: "retried on resume after it failed".to_owned(),
        });
    }
    for (index, note) in reconcile::stale_stages(&plan, &stages, &artifacts, &workspace_dir) {
        progress(Progress::Note(format!(
            "{}: {note}",
            plan.stages[index].name()
        )));
        transitions.push(Transition::StageReset {
            index: i64::try_from(index).unwrap_or(i64::MAX),
            note,
        });
    }
    transitions.push(Transition::RunStatus {
        status: "running".to_owned(),
        at: now,
        error: None,
    });
    store.apply(lease, &transitions).await?;

    let stages = store.stages(&run_id).await?;
    let mut states: Vec<State> = stages
        .iter()
        .map(|stage| State::from_status(&stage.status))
        .collect();
    let mut attempt_numbers: Vec<i64> = stages.iter().map(|stage| stage.attempts).collect();
    // Gates are approved through `baton gate`; until then a succeeded gate
    // holds back every later group.
    let approved = |_: usize| false;

    // One copy of the plan, shared with every attempt.
    let plan = std::sync::Arc::new(plan);
    let shared_plan = std::sync::Arc::clone(&plan);
    let (report_sender, mut reports) = mpsc::unbounded_channel::<Report>();
    let mut running: HashMap<usize, Running> = HashMap::new();
    let mut renew = tokio::time::interval(options.lease_ttl / 3);
    renew.tick().await;
    let mut cancelled = false;

    // Transitions not yet committed, and what to show once they are. The
    // results that arrive together and the starts they make possible are
    // committed as one transaction (group commit); a process's pid is only
    // recorded along with the next commit, since a resume finds leftover
    // processes by the run's marker anyway.
    let mut pending: Vec<Transition> = Vec::new();
    let mut announced: Vec<(Finished, i64)> = Vec::new();
    let mut errors: HashMap<usize, String> = HashMap::new();

    let outcome = loop {
        let decision = if cancelled {
            if running.is_empty() {
                Some(Ended::Cancelled)
            } else {
                None
            }
        } else {
            let free = max_parallel.saturating_sub(running.len());
            match schedule::next(&plan, &states, approved, free) {
                Next::Start(ready) => {
                    let now = clock::now_ms();
                    let mut launches = Vec::new();
                    for index in ready {
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
                                states[index] = State::Failed;
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
                                let expression = stage
                                    .spec
                                    .when
                                    .as_ref()
                                    .map(|when| when.value.trim())
                                    .unwrap_or_default();
                                pending.push(Transition::StageSkipped {
                                    index: as_i64(index),
                                    at: now,
                                    note: format!("skipped: when {expression}"),
                                });
                                states[index] = State::Skipped;
                                progress(Progress::Finished {
                                    stage: stage.name().to_owned(),
                                    status: "skipped".to_owned(),
                                    duration_ms: 0,
                                    error: None,
                                });
                                write_envelope(
                                    &plan,
                                    &workspace_dir,
                                    index,
                                    "skipped",
                                    Some(now),
                                    Some(now),
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
                        states[index] = State::Running;
                        launches.push(index);
                    }
                    // Starts are recorded before any process exists.
                    store.apply(lease, &std::mem::take(&mut pending)).await?;
                    announce(&plan, &workspace_dir, &mut announced, progress);
                    for index in launches {
                        let (cancel_sender, cancel_receiver) = watch::channel(false);
                        let attempt = Attempt {
                            run_id: run_id.clone(),
                            index,
                            attempt: attempt_numbers[index],
                            workspace: workspace_dir.clone(),
                            project_dir: run_options.project_dir.clone(),
                            params: params
                                .iter()
                                .map(|(key, value)| (key.clone(), value.clone()))
                                .collect(),
                            limits: options.limits.clone(),
                            plan: std::sync::Arc::clone(&shared_plan),
                            agents: options.agents.clone(),
                        };
                        progress(Progress::Started {
                            stage: plan.stages[index].name().to_owned(),
                            attempt: attempt_numbers[index],
                        });
                        tokio::spawn(stage::run(
                            plan.stages[index].clone(),
                            attempt,
                            cancel_receiver,
                            report_sender.clone(),
                        ));
                        running.insert(
                            index,
                            Running {
                                cancel: cancel_sender,
                                started_at: now,
                            },
                        );
                    }
                    continue;
                }
                Next::Wait => None,
                Next::Succeeded => Some(Ended::Succeeded),
                Next::Failed(index) => Some(Ended::Failed(index)),
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
                Ended::Cancelled => Outcome {
                    run_id: run_id.clone(),
                    status: "cancelled".to_owned(),
                    gate: None,
                    error: Some("cancelled".to_owned()),
                },
            };
        }
        // Nothing can start: record the results that arrived before waiting,
        // so a result is never held back while other stages run.
        if !announced.is_empty() {
            store.apply(lease, &std::mem::take(&mut pending)).await?;
            announce(&plan, &workspace_dir, &mut announced, progress);
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
                        Report::Started { index, attempt, started } => pending.push(Transition::ProcessStarted {
                            index: as_i64(index),
                            attempt,
                            pid: i64::from(started.pid),
                            pgid: i64::from(started.pgid),
                            proc_start: i64::try_from(started.start_time).unwrap_or(0),
                        }),
                        Report::Finished(result) => {
                            let status = if result.success { "success" } else { "failed" };
                            pending.push(Transition::AttemptFinished {
                                index: as_i64(result.index),
                                attempt: result.attempt,
                                status: status.to_owned(),
                                at: now,
                                exit_code: result.exit_code,
                                error: result.error.clone(),
                                artifacts: result.artifacts.clone(),
                            });
                            states[result.index] = if result.success { State::Success } else { State::Failed };
                            if let Some(error) = &result.error {
                                errors.insert(result.index, error.clone());
                            }
                            // The slot is free at once; the result is shown
                            // once it is committed.
                            let started_at = running.remove(&result.index).map_or(now, |attempt| attempt.started_at);
                            announced.push((result, started_at));
                        }
                    }
                }
            }
            _ = renew.tick() => {
                let wants_cancel = store.renew(lease, clock::now_ms(), ttl).await?;
                if wants_cancel && !cancelled {
                    cancelled = true;
                    progress(Progress::Note("cancel requested; stopping running stages".to_owned()));
                    for attempt in running.values() {
                        let _ = attempt.cancel.send(true);
                    }
                }
            }
        }
    };

    let final_status = match outcome.status.as_str() {
        "failed" => "failed",
        "awaiting_human" => "awaiting_human",
        "cancelled" => "cancelled",
        _ => "success",
    };
    pending.push(Transition::RunStatus {
        status: final_status.to_owned(),
        at: clock::now_ms(),
        error: outcome.error.clone(),
    });
    store.apply(lease, &pending).await?;
    announce(&plan, &workspace_dir, &mut announced, progress);
    Ok(outcome)
}

/// How the loop ended.
enum Ended {
    Succeeded,
    Failed(usize),
    Gate(usize),
    Cancelled,
}

/// After a commit: the result envelopes and progress lines of the results
/// it recorded.
fn announce(
    plan: &Plan,
    workspace_dir: &std::path::Path,
    announced: &mut Vec<(Finished, i64)>,
    progress: &(dyn Fn(Progress) + Sync),
) {
    let now = clock::now_ms();
    for (result, started_at) in announced.drain(..) {
        let index = result.index;
        let status = if result.success { "success" } else { "failed" };
        write_envelope(
            plan,
            workspace_dir,
            index,
            status,
            Some(started_at),
            Some(now),
            result.error.iter().cloned().collect(),
        );
        progress(Progress::Finished {
            stage: plan.stages[index].name().to_owned(),
            status: status.to_owned(),
            duration_ms: now - started_at,
            error: result.error,
        });
    }
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

/// Writes the reference's result envelope; a failure to write it is not a
/// stage failure (the store is the source of truth).
fn write_envelope(
    plan: &Plan,
    workspace_dir: &std::path::Path,
    index: usize,
    status: &str,
    started: Option<i64>,
    finished: Option<i64>,
    errors: Vec<String>,
) {
    let stage = &plan.stages[index];
    let envelope = workspace::Envelope {
        name: stage.name(),
        index,
        status,
        started_at: started,
        finished_at: finished,
        errors,
        output_files: stage
            .spec
            .writes_to
            .iter()
            .map(|path| path.value.clone())
            .collect(),
        input_stages: stage
            .spec
            .reads_from
            .iter()
            .map(|name| name.value.clone())
            .collect(),
        data: json!({}),
    };
    let mut text = serde_json::to_string_pretty(&envelope.to_json()).expect("plain data");
    text.push('\n');
    let _ = workspace::write_replace(
        &workspace::envelope_path(workspace_dir, index, stage.name()),
        text.as_bytes(),
    );
}
