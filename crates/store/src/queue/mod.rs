//! The durable job queue: jobs live in the same store as runs.
//!
//! A job is `available` (or `failed`, waiting for its retry) until a worker
//! claims it: the claim sets `running`, names the worker in the lease, bumps
//! the job's epoch and sets the lease's expiry. The worker renews the lease
//! by heartbeats and reports the outcome together with the epoch it claimed
//! at; an outcome whose epoch is no longer the job's (the lease expired and
//! the job was taken again, or released) changes nothing and is counted as
//! a stale completion. Every claim counts as an attempt, so lease expiries
//! count too and a job that kills its worker cannot run forever.
//!
//! Lease times are the database's clock (`clock_timestamp()` on PostgreSQL,
//! `unixepoch('subsec')` on SQLite), never the caller's: workers on hosts
//! with skewed clocks agree on when a lease has expired. Callers pass
//! durations (a lease length, a retry delay), never instants.
//!
//! `lease.rs` has the claim, the outcomes, heartbeats and the reaper; this
//! file the rows, enqueueing and the operator's queries.

mod lease;

use sqlx::AssertSqlSafe;

use crate::columns::{Columns, FromColumns};
use crate::{Error, Result, Store};

pub use lease::{ClaimRequest, Completion, JobOutcome, MAX_DEFERRALS, Settled};

/// Job statuses, as stored.
pub mod status {
    /// Waiting to be claimed.
    pub const AVAILABLE: &str = "available";
    /// Claimed by a worker whose lease runs.
    pub const RUNNING: &str = "running";
    /// Finished successfully (final).
    pub const SUCCEEDED: &str = "succeeded";
    /// An attempt failed or its lease expired; claimable again once
    /// `not_before` passes.
    pub const FAILED: &str = "failed";
    /// Dead: attempts exhausted, a `terminal-` failure or too many
    /// deferrals. The reason is in `error`; `retry` requeues it by hand.
    pub const ERROR: &str = "error";
}

/// A job to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The queue's name (`default` unless chosen).
    pub queue: String,
    /// `shell` or `workflow_stage`.
    pub kind: String,
    /// The handler's input, a JSON document.
    pub payload: String,
    /// Lower runs first (the reference's rule).
    pub priority: i64,
    /// Claims allowed before the job is dead (lease expiries count).
    pub max_attempts: i64,
    /// Not claimable before this many milliseconds from now (database time).
    pub delay_ms: i64,
    /// Enqueueing a key that exists returns the existing job instead.
    pub idempotency_key: Option<String>,
}

/// What [`Store::enqueue`] did with one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// The job's id (the existing job's, for a known key).
    pub id: i64,
    /// False when the idempotency key named an existing job.
    pub created: bool,
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    /// The job's id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// `shell` or `workflow_stage`.
    pub kind: String,
    /// The handler's input (JSON).
    pub payload: String,
    /// Lower runs first.
    pub priority: i64,
    /// One of [`status`].
    pub status: String,
    /// Claims so far (lease expiries included, deferrals and releases not).
    pub attempts: i64,
    /// The poison limit.
    pub max_attempts: i64,
    /// Times the job asked to be deferred.
    pub deferrals: i64,
    /// Not claimable before (ms since the epoch, database time).
    pub not_before: i64,
    /// The worker holding or last holding the lease.
    pub lease_owner: Option<String>,
    /// The fencing epoch: bumped by every claim.
    pub lease_epoch: i64,
    /// When the lease expires (ms since the epoch, database time).
    pub lease_until: i64,
    /// The handler's result (JSON), of the last attempt that reported one.
    pub result: Option<String>,
    /// The last failure's reason; for a dead job, why it is dead.
    pub error: Option<String>,
    /// The key that deduplicates enqueues.
    pub idempotency_key: Option<String>,
    /// When the job was enqueued.
    pub created_at: i64,
    /// When the latest claim started.
    pub started_at: Option<i64>,
    /// When the job succeeded or died.
    pub finished_at: Option<i64>,
}

/// Which jobs [`Store::jobs`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this status.
    pub status: Option<String>,
    /// Only this queue.
    pub queue: Option<String>,
    /// At most this many (the newest are dropped).
    pub limit: Option<i64>,
    /// Only jobs with a greater id: the last id of one page lists the next
    /// (keyset paging, which costs the same on every page).
    pub after: Option<i64>,
}

/// The queue's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Outcomes rejected because their epoch was stale.
    pub stale_completions: i64,
    /// Leases the reaper found expired.
    pub lease_expiries: i64,
}

/// Columns of [`JobRow`], in one place.
pub(crate) const JOB_COLUMNS: &str = "id, queue, kind, payload, priority, status, attempts, max_attempts, deferrals, not_before, lease_owner, lease_epoch, lease_until, result, error, idempotency_key, created_at, started_at, finished_at";

impl FromColumns for JobRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(JobRow {
            id: row.get("id")?,
            queue: row.get("queue")?,
            kind: row.get("kind")?,
            payload: row.get("payload")?,
            priority: row.get("priority")?,
            status: row.get("status")?,
            attempts: row.get("attempts")?,
            max_attempts: row.get("max_attempts")?,
            deferrals: row.get("deferrals")?,
            not_before: row.get("not_before")?,
            lease_owner: row.get("lease_owner")?,
            lease_epoch: row.get("lease_epoch")?,
            lease_until: row.get("lease_until")?,
            result: row.get("result")?,
            error: row.get("error")?,
            idempotency_key: row.get("idempotency_key")?,
            created_at: row.get("created_at")?,
            started_at: row.get("started_at")?,
            finished_at: row.get("finished_at")?,
        })
    }
}

impl Store {
    /// `text` with `{now}` replaced by the database's clock in milliseconds
    /// and `{skip_locked}` by PostgreSQL's row-lock clause (nothing on
    /// SQLite, whose `BEGIN IMMEDIATE` already serialises writers).
    pub(crate) fn queue_sql(&self, text: &str) -> AssertSqlSafe<String> {
        let dialect = self.dialect();
        // Only these fixed fragments are spliced in; every value is bound.
        AssertSqlSafe(
            text.replace("{now}", dialect.now)
                .replace("{skip_locked}", dialect.skip_locked),
        )
    }

    /// The database's clock, in milliseconds since the epoch.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn queue_now(&self) -> Result<i64> {
        let sql = self.queue_sql("SELECT {now}");
        let now = self.fetch_optional(sql, &[], "read the database clock");
        Ok(now.await?.unwrap_or_default())
    }

    /// Enqueues `jobs` in one transaction. A job whose idempotency key is
    /// already in the queue is not added: its entry names the existing job
    /// (whatever its status), so a rerun never enqueues duplicates.
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn enqueue(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let insert = self.queue_sql(
            "INSERT INTO jobs (queue, kind, payload, priority, status, max_attempts, not_before, idempotency_key, created_at) \
             VALUES ($1, $2, $3, $4, 'available', $5, {now} + $6, $7, {now}) \
             ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
        );
        let mut tx = self.begin().await?;
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            let args = [
                (&job.queue).into(),
                (&job.kind).into(),
                (&job.payload).into(),
                job.priority.into(),
                job.max_attempts.max(1).into(),
                job.delay_ms.max(0).into(),
                (&job.idempotency_key).into(),
            ];
            let inserted =
                tx.fetch_optional(AssertSqlSafe(insert.0.as_str()), &args, "enqueue a job");
            let entry = match inserted.await? {
                Some(id) => Enqueued { id, created: true },
                None => {
                    // Only a key conflict skips an insert.
                    let find = "SELECT id FROM jobs WHERE idempotency_key = $1";
                    let key = [(&job.idempotency_key).into()];
                    let id = tx
                        .fetch_one(find, &key, "find the job with that key")
                        .await?;
                    Enqueued { id, created: false }
                }
            };
            out.push(entry);
        }
        tx.commit().await?;
        Ok(out)
    }

    /// One job.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchJob`], or the read fails.
    pub async fn job(&self, id: i64) -> Result<JobRow> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1");
        let job = self
            .fetch_optional(AssertSqlSafe(sql), &[id.into()], "read the job")
            .await?;
        job.ok_or(Error::NoSuchJob(id))
    }

    /// The job enqueued with `key`, if any.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn job_by_key(&self, key: &str) -> Result<Option<JobRow>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE idempotency_key = $1");
        self.fetch_optional(AssertSqlSafe(sql), &[key.into()], "read the job")
            .await
    }

    /// Jobs matching `filter`, oldest first.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn jobs(&self, filter: &JobFilter) -> Result<Vec<JobRow>> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR queue = $2) AND id > $4 \
             ORDER BY id LIMIT $3"
        );
        let args = [
            (&filter.status).into(),
            (&filter.queue).into(),
            filter.limit.unwrap_or(i64::MAX).max(0).into(),
            filter.after.unwrap_or(i64::MIN).into(),
        ];
        self.fetch_all(AssertSqlSafe(sql), &args, "list jobs").await
    }

    /// Puts a dead or failed job back in the queue now, with its attempts
    /// and deferrals reset. Returns false when the job is in another state.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchJob`], or the write fails.
    pub async fn retry_job(&self, id: i64) -> Result<bool> {
        let sql = self.queue_sql(
            "UPDATE jobs SET status = 'available', attempts = 0, deferrals = 0, not_before = {now}, \
             finished_at = NULL WHERE id = $1 AND status IN ('error', 'failed')",
        );
        let changed = self.write(sql, &[id.into()], "retry the job").await? > 0;
        if !changed {
            // Tell "no such job" from "not dead".
            self.job(id).await?;
        }
        Ok(changed)
    }

    /// Puts every dead job (of `queue`, or of all queues) back in the queue.
    /// Returns how many.
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn requeue_errors(&self, queue: Option<&str>) -> Result<u64> {
        let sql = self.queue_sql(
            "UPDATE jobs SET status = 'available', attempts = 0, deferrals = 0, not_before = {now}, \
             finished_at = NULL WHERE status = 'error' AND ($1 IS NULL OR queue = $1)",
        );
        self.write(sql, &[queue.into()], "requeue dead jobs").await
    }

    /// Deletes succeeded and dead jobs that finished more than
    /// `older_than_ms` ago. Returns how many.
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn purge_jobs(&self, older_than_ms: i64) -> Result<u64> {
        let sql = self.queue_sql(
            "DELETE FROM jobs WHERE status IN ('succeeded', 'error') AND finished_at < {now} - $1",
        );
        let args = [older_than_ms.max(0).into()];
        self.write(sql, &args, "purge jobs").await
    }

    /// How many jobs each status holds, by queue: `(queue, status, count)`,
    /// ordered by queue then status.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn job_counts(&self) -> Result<Vec<(String, String, i64)>> {
        let sql = "SELECT queue, status, COUNT(*) FROM jobs GROUP BY queue, status ORDER BY queue, status";
        self.fetch_all(sql, &[], "count the jobs").await
    }

    /// The queue's counters.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn queue_counters(&self) -> Result<QueueCounters> {
        let sql = "SELECT name, value FROM queue_counters";
        let rows: Vec<(String, i64)> = self.fetch_all(sql, &[], "read the queue counters").await?;
        let mut counters = QueueCounters::default();
        for (name, value) in rows {
            match name.as_str() {
                "stale_completions" => counters.stale_completions = value,
                "lease_expiries" => counters.lease_expiries = value,
                _ => {}
            }
        }
        Ok(counters)
    }
}
