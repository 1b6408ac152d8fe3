//! Queue jobs: what a job's payload says, how to enqueue one and wait for
//! its result, and the worker that runs them ([`worker::work`]).
//!
//! A job is at-least-once: a worker that dies, pauses or loses its database
//! connection for longer than the lease has its jobs taken over, and may
//! have run them already. Only one outcome per job is ever recorded — the
//! store fences every outcome by the epoch of the claim it answers.
//!
//! Engine integration (`executor: worker_queue` stages, queue fan-outs)
//! enqueues with [`enqueue_script`] under an idempotency key per run,
//! stage, item and attempt, so a rerun finds the job it enqueued before,
//! and waits with [`wait_for`].

mod job;
mod options;
pub mod worker;

use std::collections::BTreeMap;
use std::time::Duration;

use baton_store::queue::status;
use baton_store::{Enqueued, JobRow, NewJob, Store};
use baton_workflow::Plan;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use crate::owner::worker_name;
pub use options::WorkerOptions;
pub use worker::{WorkerReport, work};

/// The queue used when none is named.
pub const DEFAULT_QUEUE: &str = "default";
/// Claims a job gets before it is dead, unless the enqueuer says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: i64 = 3;
/// The reference's default priority (lower runs first).
pub const DEFAULT_PRIORITY: i64 = 5;

/// Job kinds.
pub mod kind {
    /// A shell script.
    pub const SHELL: &str = "shell";
    /// A stage (or fan-out item) of a run, enqueued by its driver.
    pub const WORKFLOW_STAGE: &str = "workflow_stage";
}

/// The payload of a `shell` or `workflow_stage` job: a script and where
/// and how to run it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptPayload {
    /// The script (run directly when it is one plain command, else by
    /// `bash -euo pipefail -c`).
    pub script: String,
    /// Working directory; the worker's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Wall-clock bound in seconds; the worker's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// For `workflow_stage` jobs: the run, stage and item they belong to
    /// (informational; the driver matches results by idempotency key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The stage's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The fan-out item's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
}

/// A script job to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptJob {
    /// `shell` or `workflow_stage` ([`kind`]).
    pub kind: &'static str,
    /// The queue.
    pub queue: String,
    /// What to run.
    pub payload: ScriptPayload,
    /// Lower runs first.
    pub priority: i64,
    /// The poison limit.
    pub max_attempts: i64,
    /// Not claimable before this long from now.
    pub delay: Duration,
    /// A key that deduplicates the enqueue (for a stage:
    /// `run_id/stage/item/attempt`).
    pub idempotency_key: Option<String>,
}

impl ScriptJob {
    /// A `shell` job on the default queue with the default limits.
    pub fn shell(script: impl Into<String>) -> Self {
        ScriptJob {
            kind: kind::SHELL,
            queue: DEFAULT_QUEUE.to_owned(),
            payload: ScriptPayload {
                script: script.into(),
                ..ScriptPayload::default()
            },
            priority: DEFAULT_PRIORITY,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            delay: Duration::ZERO,
            idempotency_key: None,
        }
    }

    fn to_new_job(&self) -> NewJob {
        NewJob {
            queue: self.queue.clone(),
            kind: self.kind.to_owned(),
            payload: serde_json::to_string(&self.payload).unwrap_or_else(|_| "{}".to_owned()),
            priority: self.priority,
            max_attempts: self.max_attempts,
            delay_ms: crate::clock::millis(self.delay),
            idempotency_key: self.idempotency_key.clone(),
        }
    }
}

/// Enqueues `jobs` in one transaction; a job whose idempotency key exists
/// already is not added again (its entry names the existing job).
///
/// # Errors
///
/// The store fails.
pub async fn enqueue_script(store: &Store, jobs: &[ScriptJob]) -> crate::Result<Vec<Enqueued>> {
    let rows: Vec<NewJob> = jobs.iter().map(ScriptJob::to_new_job).collect();
    Ok(store.enqueue(&rows).await?)
}

/// Whether a job's status is final: `succeeded`, or `error` (dead).
pub fn is_final(job: &JobRow) -> bool {
    job.status == status::SUCCEEDED || job.status == status::ERROR
}

/// Waits until every job in `ids` is final and returns them in the same
/// order, polling the store every `poll` (jobs may be worked by other
/// processes on other hosts, so there is nothing to subscribe to).
///
/// # Errors
///
/// The store fails, or a job does not exist.
pub async fn wait_for(store: &Store, ids: &[i64], poll: Duration) -> crate::Result<Vec<JobRow>> {
    let mut done: Vec<Option<JobRow>> = vec![None; ids.len()];
    loop {
        for (slot, id) in done.iter_mut().zip(ids) {
            if slot.is_none() {
                let job = store.job(*id).await?;
                if is_final(&job) {
                    *slot = Some(job);
                }
            }
        }
        if done.iter().all(Option::is_some) {
            return Ok(done.into_iter().flatten().collect());
        }
        tokio::time::sleep(poll).await;
    }
}

/// Exponential backoff with jitter for the `n`th retry (from 1): between
/// half and all of `base · 2^(n-1)`, capped at `max`, so workers that
/// failed together do not retry together.
pub fn backoff(n: i64, base: Duration, max: Duration) -> Duration {
    let exponent = u32::try_from(n.clamp(1, 31) - 1).unwrap_or(0);
    let full = base.saturating_mul(2_u32.saturating_pow(exponent)).min(max);
    let half = full / 2;
    let spread = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
    let jitter = if spread == 0 {
        0
    } else {
        crate::clock::entropy() % (spread + 1)
    };
    half + Duration::from_millis(jitter)
}

/// The queue worker a driver runs for its own run's `worker_queue` jobs
/// (`baton run`'s whole drive, one `baton next` call). It takes no other
/// run's jobs: their runs wait for them elsewhere, and this one would
/// have to finish them before its driver ends.
pub(crate) struct LocalWorker {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl LocalWorker {
    /// Starts one if the plan enqueues jobs and the caller wants it.
    pub(crate) fn start(
        store: &Store,
        options: Option<&WorkerOptions>,
        (run_id, plan): (&str, &Plan),
    ) -> Option<LocalWorker> {
        let queued = plan.stages.iter().any(|stage| {
            stage.spec.executor == baton_workflow::schema::Executor::WorkerQueue
                || stage.spec.fan_out.as_ref().is_some_and(|fan_out| {
                    fan_out.mode == baton_workflow::schema::FanOutMode::WorkerQueue
                })
        });
        let mut options = options.filter(|_| queued)?.clone();
        options.only_run = Some(run_id.to_owned());
        let store = store.clone();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            // A worker error ends the local worker only; the run's jobs then
            // wait for another worker, and the drive goes on.
            let _ = work(&store, &options, stopped).await;
        });
        Some(LocalWorker { stop, task })
    }

    /// Stops it: running jobs finish (or are released after the grace).
    pub(crate) async fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_jitter_and_caps() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        for n in 1..=6 {
            let full = (base * 2_u32.pow(u32::try_from(n - 1).unwrap())).min(max);
            let delay = backoff(n, base, max);
            assert!(delay >= full / 2 && delay <= full, "n={n}: {delay:?}");
        }
        assert!(backoff(1000, base, max) <= max);
        assert_eq!(backoff(3, Duration::ZERO, max), Duration::ZERO);
    }

    #[test]
    fn payload_round_trips_and_omits_empty_fields() {
        let payload = ScriptPayload {
            script: "echo hi".to_owned(),
            ..ScriptPayload::default()
        };
        let text = serde_json::to_string(&payload).unwrap();
        assert_eq!(text, r#"{"script":"echo hi"}"#);
        assert_eq!(
            serde_json::from_str::<ScriptPayload>(&text).unwrap(),
            payload
        );
    }
}
