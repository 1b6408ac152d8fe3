//! Claims, outcomes, heartbeats and the reaper: everything a worker does
//! with a job's lease.
//!
//! [`Store::settle`] reports a batch of outcomes and claims the next jobs in
//! one transaction, so a busy worker pays one commit per round however many
//! jobs it finishes and starts: this is what lets a SQLite file, whose
//! synchronous commits run at a few thousand a second, pass that many jobs.

use super::{JOB_COLUMNS, JobRow};
use crate::columns::Arg;
use crate::tx::Tx;
use crate::{Result, Store};

/// Deferrals allowed before a job is dead: the reference lets a job defer
/// forever, which hides a job that can never run.
pub const MAX_DEFERRALS: i64 = 25;

/// Which jobs to claim, and for whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The queue.
    pub queue: String,
    /// The worker taking the lease (unique per worker process).
    pub owner: String,
    /// At most this many jobs.
    pub limit: i64,
    /// The lease's length in milliseconds.
    pub lease_ms: i64,
    /// Only jobs whose idempotency key starts with this (a driver's own
    /// worker takes only its run's jobs: `<run>/`).
    pub key_prefix: Option<String>,
}

/// How an attempt ended, as the worker reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// The job is done (final).
    Succeeded {
        /// The handler's result (JSON).
        result: String,
    },
    /// The attempt failed: the job is retried after `retry_in_ms`, or is
    /// dead when this was its last attempt.
    Failed {
        /// The reason.
        error: String,
        /// The handler's result (JSON), when it produced one.
        result: Option<String>,
        /// The backoff before the next attempt.
        retry_in_ms: i64,
    },
    /// The job failed for good (`terminal-`): dead at once.
    Terminal {
        /// The reason.
        error: String,
        /// The handler's result (JSON), when it produced one.
        result: Option<String>,
    },
    /// The job asked to run later (`deferred-`): available again after
    /// `retry_in_ms`, without counting an attempt; dead after
    /// [`MAX_DEFERRALS`] deferrals.
    Deferred {
        /// The reason.
        error: String,
        /// The delay.
        retry_in_ms: i64,
    },
    /// The worker gave the job back unfinished (it is stopping): available
    /// at once, without counting an attempt.
    Released {
        /// Why.
        reason: String,
    },
}

/// One outcome to record: fenced by the epoch the job was claimed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The job.
    pub id: i64,
    /// The epoch of the claim this outcome answers.
    pub epoch: i64,
    /// How the attempt ended.
    pub outcome: JobOutcome,
}

/// What became of one [`Completion`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Recorded; the job's status is now this.
    Accepted(String),
    /// Rejected: the epoch is not the job's current claim (the lease was
    /// lost). Nothing changed; the rejection is counted.
    Stale,
}

/// Most ids in one heartbeat statement.
const IDS_PER_STATEMENT: usize = 500;

/// The fenced update each outcome makes: `$1` the job, `$2` the epoch it
/// was claimed at, then the outcome's own values.
const SUCCEEDED: &str = "UPDATE jobs SET status = 'succeeded', result = $3, error = NULL, \
     finished_at = {now}, lease_until = 0 \
     WHERE id = $1 AND lease_epoch = $2 AND status = 'running' RETURNING status";
const FAILED: &str = "UPDATE jobs SET \
     status = CASE WHEN attempts >= max_attempts THEN 'error' ELSE 'failed' END, \
     result = $3, error = $4, not_before = {now} + $5, lease_until = 0, \
     finished_at = CASE WHEN attempts >= max_attempts THEN {now} ELSE NULL END \
     WHERE id = $1 AND lease_epoch = $2 AND status = 'running' RETURNING status";
const TERMINAL: &str = "UPDATE jobs SET status = 'error', result = $3, error = $4, \
     finished_at = {now}, lease_until = 0 \
     WHERE id = $1 AND lease_epoch = $2 AND status = 'running' RETURNING status";
const DEFERRED: &str = "UPDATE jobs SET \
     status = CASE WHEN deferrals >= $5 THEN 'error' ELSE 'available' END, \
     attempts = attempts - 1, deferrals = deferrals + 1, error = $3, not_before = {now} + $4, \
     lease_until = 0, finished_at = CASE WHEN deferrals >= $5 THEN {now} ELSE NULL END \
     WHERE id = $1 AND lease_epoch = $2 AND status = 'running' RETURNING status";
const RELEASED: &str = "UPDATE jobs SET status = 'available', attempts = attempts - 1, \
     error = $3, not_before = {now}, lease_until = 0 \
     WHERE id = $1 AND lease_epoch = $2 AND status = 'running' RETURNING status";

/// An outcome's statement and the values it binds after the job and epoch.
fn outcome_sql(outcome: &JobOutcome) -> (&'static str, Vec<Arg<'_>>) {
    match outcome {
        JobOutcome::Succeeded { result } => (SUCCEEDED, vec![result.into()]),
        JobOutcome::Failed {
            error,
            result,
            retry_in_ms,
        } => (
            FAILED,
            vec![result.into(), error.into(), (*retry_in_ms).max(0).into()],
        ),
        JobOutcome::Terminal { error, result } => (TERMINAL, vec![result.into(), error.into()]),
        JobOutcome::Deferred { error, retry_in_ms } => (
            DEFERRED,
            vec![
                error.into(),
                (*retry_in_ms).max(0).into(),
                MAX_DEFERRALS.into(),
            ],
        ),
        JobOutcome::Released { reason } => (RELEASED, vec![reason.into()]),
    }
}

impl Store {
    /// Records `completions` and then, when `claim` is given, claims up to
    /// `claim.limit` jobs, all in one transaction. Returns what became of
    /// each completion (in order) and the claimed jobs in claim order
    /// (priority, then `not_before`, then id).
    ///
    /// Every claim bumps the job's epoch, counts an attempt and sets the
    /// lease to expire `lease_ms` from now by the database's clock.
    ///
    /// # Errors
    ///
    /// A query fails; nothing is recorded or claimed then.
    pub async fn settle(
        &self,
        completions: &[Completion],
        claim: Option<&ClaimRequest>,
    ) -> Result<(Vec<Settled>, Vec<JobRow>)> {
        let mut tx = self.begin().await?;
        let settled = self.record_outcomes(&mut tx, completions).await?;
        let mut claimed = Vec::new();
        if let Some(claim) = claim.filter(|claim| claim.limit > 0) {
            // `substr`, not `LIKE`: a run's id may hold `_`, which `LIKE`
            // reads as any character.
            let keyed = if claim.key_prefix.is_some() {
                "AND substr(idempotency_key, 1, CAST($5 AS INTEGER)) = $6"
            } else {
                ""
            };
            let sql = self.queue_sql(&format!(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_owner = $1, \
                 lease_epoch = lease_epoch + 1, lease_until = {{now}} + $2, started_at = {{now}} \
                 WHERE id IN (SELECT id FROM jobs WHERE queue = $3 AND status IN ('available', 'failed') \
                 AND not_before <= {{now}} {keyed} ORDER BY priority, not_before, id LIMIT $4 {{skip_locked}}) \
                 RETURNING {JOB_COLUMNS}"
            ));
            let mut args = vec![
                (&claim.owner).into(),
                claim.lease_ms.into(),
                (&claim.queue).into(),
                claim.limit.into(),
            ];
            if let Some(prefix) = &claim.key_prefix {
                let length = i64::try_from(prefix.chars().count()).unwrap_or(i64::MAX);
                args.extend([Arg::from(length), Arg::from(prefix)]);
            }
            claimed = tx.fetch_all(sql, &args, "claim jobs").await?;
            claimed.sort_by_key(|job: &JobRow| (job.priority, job.not_before, job.id));
        }
        tx.commit().await?;
        Ok((settled, claimed))
    }

    /// Records each completion whose epoch is still its job's, in the
    /// caller's transaction, and counts the stale ones.
    async fn record_outcomes(
        &self,
        tx: &mut Tx,
        completions: &[Completion],
    ) -> Result<Vec<Settled>> {
        let mut settled = Vec::with_capacity(completions.len());
        let mut stale = 0_i64;
        for completion in completions {
            let (sql, values) = outcome_sql(&completion.outcome);
            let mut args = vec![completion.id.into(), completion.epoch.into()];
            args.extend(values);
            let sql = self.queue_sql(sql);
            let status = tx
                .fetch_optional(sql, &args, "record a job's outcome")
                .await?;
            settled.push(match status {
                Some(status) => Settled::Accepted(status),
                None => {
                    stale += 1;
                    Settled::Stale
                }
            });
        }
        if stale > 0 {
            add_counter(tx, "stale_completions", stale).await?;
        }
        Ok(settled)
    }

    /// Claims up to `claim.limit` jobs (see [`Store::settle`]).
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn claim(&self, claim: &ClaimRequest) -> Result<Vec<JobRow>> {
        Ok(self.settle(&[], Some(claim)).await?.1)
    }

    /// Records one outcome (see [`Store::settle`]).
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn complete(&self, completion: Completion) -> Result<Settled> {
        let (mut settled, _) = self.settle(&[completion], None).await?;
        Ok(settled.pop().unwrap_or(Settled::Stale))
    }

    /// Extends by `lease_ms` the leases `owner` still holds among `held`
    /// (`(job id, epoch)` pairs) and returns the ones it no longer holds:
    /// their lease expired and the job was reaped or claimed again, so the
    /// worker must stop them.
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn heartbeat(
        &self,
        owner: &str,
        held: &[(i64, i64)],
        lease_ms: i64,
    ) -> Result<Vec<(i64, i64)>> {
        let mut still = std::collections::HashSet::new();
        for chunk in held.chunks(IDS_PER_STATEMENT) {
            let ids = (0..chunk.len())
                .map(|position| format!("${}", position + 3))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = self.queue_sql(&format!(
                "UPDATE jobs SET lease_until = {{now}} + $1 \
                 WHERE lease_owner = $2 AND status = 'running' AND id IN ({ids}) RETURNING id, lease_epoch"
            ));
            let mut args = vec![lease_ms.into(), owner.into()];
            args.extend(chunk.iter().map(|(id, _)| Arg::from(*id)));
            // One statement, no explicit transaction: a renewal is a single
            // round trip, so a busy database delays it least.
            let renewed: Vec<(i64, i64)> =
                self.write_returning(sql, &args, "renew job leases").await?;
            still.extend(renewed);
        }
        Ok(held
            .iter()
            .filter(|pair| !still.contains(pair))
            .copied()
            .collect())
    }

    /// Requeues every running job whose lease expired (by the database's
    /// clock): the expiry counts as an attempt, so a job whose attempts are
    /// spent is dead, with the reason. Returns the ids reaped.
    ///
    /// Jobs another transaction holds are left to it (PostgreSQL's `SKIP
    /// LOCKED`): every worker reaps, and reapers that waited for each
    /// other's rows deadlocked, each cycle costing the database's deadlock
    /// timeout. A skipped job is reaped by the next sweep if it still needs it.
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn reap_expired(&self) -> Result<Vec<i64>> {
        let sql = self.queue_sql(
            "UPDATE jobs SET status = CASE WHEN attempts >= max_attempts THEN 'error' ELSE 'failed' END, \
             error = 'the lease of ' || COALESCE(lease_owner, 'a worker') || ' expired on attempt ' \
                 || CAST(attempts AS TEXT) || ' of ' || CAST(max_attempts AS TEXT), \
             finished_at = CASE WHEN attempts >= max_attempts THEN {now} ELSE NULL END, \
             not_before = {now}, lease_until = 0 \
             WHERE id IN (SELECT id FROM jobs WHERE status = 'running' AND lease_until < {now} \
             {skip_locked}) RETURNING id",
        );
        let mut tx = self.begin().await?;
        let ids: Vec<i64> = tx.fetch_all(sql, &[], "reap expired leases").await?;
        if !ids.is_empty() {
            let reaped = i64::try_from(ids.len()).unwrap_or(i64::MAX);
            add_counter(&mut tx, "lease_expiries", reaped).await?;
        }
        tx.commit().await?;
        Ok(ids)
    }
}

/// Adds `by` to the counter `name`, in the caller's transaction.
async fn add_counter(tx: &mut Tx, name: &str, by: i64) -> Result<()> {
    let sql = "INSERT INTO queue_counters (name, value) VALUES ($1, $2) \
               ON CONFLICT (name) DO UPDATE SET value = queue_counters.value + excluded.value";
    tx.execute(sql, &[name.into(), by.into()], "count").await?;
    Ok(())
}
