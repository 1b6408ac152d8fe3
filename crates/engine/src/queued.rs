//! A stage (or fan-out child) run as a queue job: `executor: worker_queue`
//! and `fan_out.mode: worker_queue`.
//!
//! The attempt enqueues one job under the idempotency key
//! `run/stage/item/attempt` and waits for it to be final; whichever worker
//! claims it — `baton run`'s own local worker or `baton worker` on any host
//! — runs the script in the run's workspace. The result is then verified
//! like any stage's: exit status, declared outputs written during the
//! attempt, output checks.
//!
//! A driver that crashed left its job in the queue. The next attempt of a
//! stage or unit whose attempt the crash cut short adopts that job instead
//! of enqueuing another (it looks up the keys of earlier attempts), unless
//! the job ended dead: then it is a failure to retry, and a new job is
//! enqueued. So a resume never runs a stage's job twice because of the
//! crash alone; and what the job wrote before the new attempt began counts
//! as its output. Any other attempt (after a failure, a rerun) enqueues a
//! job of its own.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_store::JobRow;
use baton_store::queue::status;
use baton_workflow::plan::PlanStage;
use tokio::sync::watch;

use crate::attempt::{
    Attempt, Finished, RUN_MARKER, environment, idempotency_key, substitute_script,
};
use crate::outputs::{Snapshot, snapshot, verify_attempt};
use crate::queue::{self, ScriptJob, ScriptPayload, kind};

/// How often the attempt looks at its job.
const POLL: Duration = Duration::from_millis(100);

/// Runs the attempt as a queue job.
pub(crate) async fn run(
    stage: &PlanStage,
    attempt: &Attempt,
    mut cancel: watch::Receiver<bool>,
) -> Finished {
    let mut finished = Finished::unsettled(attempt);
    let Some(script) = stage.spec.script.as_ref() else {
        finished.error = Some(
            "an executor: worker_queue stage needs a `script` to enqueue (fan_out.mode: worker_queue takes fan_out.script)".to_owned(),
        );
        return finished;
    };
    let substituted = match substitute_script(&script.value, attempt) {
        Ok(substituted) => substituted,
        Err(error) => {
            finished.error = Some(error);
            return finished;
        }
    };
    let before = snapshot(stage, &attempt.workspace);
    let (id, adopted) = match job_for(stage, attempt, substituted).await {
        Ok(found) => found,
        Err(error) => {
            finished.error = Some(format!("cannot enqueue the stage's job: {error}"));
            return finished;
        }
    };
    let ids = [id];
    let job = tokio::select! {
        job = queue::wait_for(&attempt.store, &ids, POLL) => job,
        _ = cancel.wait_for(|cancelled| *cancelled) => {
            // The job stays in the queue; a resume adopts it.
            finished.cancelled = true;
            finished.error = Some(format!("cancelled while job {id} was queued or running"));
            return finished;
        }
    };
    let job = match job {
        Ok(mut jobs) if !jobs.is_empty() => jobs.remove(0),
        Ok(_) => {
            finished.error = Some(format!("job {id} is gone from the queue"));
            return finished;
        }
        Err(error) => {
            finished.error = Some(format!("cannot follow job {id}: {error}"));
            return finished;
        }
    };
    copy_logs(stage, attempt, &job);
    finished.exit_code = result_field(&job, "exit_code").and_then(|value| value.as_i64());
    if job.status != status::SUCCEEDED {
        finished.error = Some(format!(
            "job {id} failed after {} attempt(s): {}",
            job.attempts,
            job.error.as_deref().unwrap_or("no reason recorded")
        ));
        return finished;
    }
    // An adopted job may have written its outputs before this attempt
    // began: what it wrote counts.
    let before = if adopted { Snapshot::new() } else { before };
    verify_attempt(&mut finished, stage, attempt, &before);
    finished
}

/// The id of the attempt's job, and whether it was adopted: after a crash
/// cut the previous attempt short, the job that attempt left (still live,
/// or finished while no driver watched), unless it ended dead; else a new
/// one. A failed or rerun attempt never hands its job on.
async fn job_for(
    stage: &PlanStage,
    attempt: &Attempt,
    substituted: baton_executor::shell::Substituted,
) -> crate::Result<(i64, bool)> {
    let store = &attempt.store;
    let earlier = (1..attempt.attempt).rev().filter(|_| attempt.adopt_job);
    for number in earlier {
        if let Some(job) = store.job_by_key(&key_for(attempt, number)).await? {
            if job.status != status::ERROR {
                give_back_orphan(store, &job).await?;
                return Ok((job.id, true));
            }
            break;
        }
    }
    // The run marker is left out: a resume kills what carries it, and a
    // job belongs to the worker that runs it, not to this driver.
    let env: BTreeMap<String, String> = environment(stage, attempt)
        .into_iter()
        .filter(|(name, _)| name != RUN_MARKER)
        .chain(substituted.env)
        .chain([(
            "BATON_IDEMPOTENCY_KEY".to_owned(),
            key_for(attempt, attempt.attempt),
        )])
        .collect();
    let job = ScriptJob {
        kind: kind::WORKFLOW_STAGE,
        payload: ScriptPayload {
            script: substituted.script,
            cwd: Some(attempt.workspace.to_string_lossy().into_owned()),
            env,
            timeout_secs: Some(attempt.limits.wall.as_secs().max(1)),
            run_id: Some(attempt.run_id.clone()),
            stage: Some(attempt.plan.stages[attempt.index].name().to_owned()),
            item: attempt.unit.clone(),
        },
        idempotency_key: Some(key_for(attempt, attempt.attempt)),
        ..ScriptJob::shell(String::new())
    };
    let enqueued = queue::enqueue_script(store, &[job]).await?;
    Ok((enqueued.first().map_or(0, |job| job.id), false))
}

/// A job running under a worker that died with the crashed driver (its own
/// worker, or one on this host): what it started is killed, and the job is
/// given back to be claimed at once. Left alone, it would run on beside its
/// next claim once its lease expired.
async fn give_back_orphan(store: &baton_store::Store, job: &JobRow) -> crate::Result<()> {
    let Some(owner) = job.lease_owner.as_deref() else {
        return Ok(());
    };
    if job.status != status::RUNNING || !crate::owner::worker_gone(owner) {
        return Ok(());
    }
    let marker = format!("{owner}/{}/{}", job.id, job.lease_epoch);
    baton_executor::group::kill_marked_processes("BATON_JOB_MARKER", &marker);
    store
        .complete(baton_store::Completion {
            id: job.id,
            epoch: job.lease_epoch,
            // An attempt that ran (and may have brought its driver down):
            // counted, claimable at once.
            outcome: baton_store::JobOutcome::Failed {
                error: format!("its worker {owner} is gone"),
                result: None,
                retry_in_ms: 0,
            },
        })
        .await?;
    Ok(())
}

/// The idempotency key of attempt `number` of this stage or unit.
fn key_for(attempt: &Attempt, number: i64) -> String {
    let mut numbered = attempt.clone();
    numbered.attempt = number;
    idempotency_key(&numbered)
}

fn result_field(job: &JobRow, field: &str) -> Option<serde_json::Value> {
    let result: serde_json::Value = serde_json::from_str(job.result.as_deref()?).ok()?;
    result.get(field).cloned()
}

/// Copies the job's output tails into the attempt's log files, so
/// `baton logs` shows what the job printed.
fn copy_logs(stage: &PlanStage, attempt: &Attempt, job: &JobRow) {
    let directory = attempt.workspace.join("logs").join(stage.file_stem());
    if std::fs::create_dir_all(&directory).is_err() {
        return;
    }
    for (field, extension) in [("stdout_tail", "stdout"), ("stderr_tail", "stderr")] {
        let text = result_field(job, field)
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_default();
        let _ = std::fs::write(
            directory.join(format!("{}.{extension}", attempt.attempt)),
            text,
        );
    }
}
