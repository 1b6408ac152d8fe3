//! Creating a run, and reading runs and their event logs.

use sqlx::AssertSqlSafe;

use crate::columns::{Columns, FromColumns};
use crate::model::{EventRow, Lease, NewRun, RunRow};
use crate::store::Inner;
use crate::{Error, Result, Store};

/// A run's columns: the runs row joined with its documents ([`RUNS`]).
const RUN_COLUMNS: &str = "r.run_id, r.workflow, r.workflow_path, r.workspace, r.status, r.created_at, r.finished_at, d.plan, d.params, d.sources, d.options, r.error, r.lease_owner, r.lease_epoch, r.lease_until";
/// Runs with their documents, which live apart so that the small row every
/// commit fences on never drags a large plan along (migration 0006).
const RUNS: &str = "runs r JOIN run_documents d ON d.run_id = r.run_id";

impl FromColumns for RunRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(RunRow {
            run_id: row.get("run_id")?,
            workflow: row.get("workflow")?,
            workflow_path: row.get("workflow_path")?,
            workspace: row.get("workspace")?,
            status: row.get("status")?,
            created_at: row.get("created_at")?,
            finished_at: row.get("finished_at")?,
            plan: row.get("plan")?,
            params: row.get("params")?,
            sources: row.get("sources")?,
            options: row.get("options")?,
            error: row.get("error")?,
            lease_owner: row.get("lease_owner")?,
            lease_epoch: row.get("lease_epoch")?,
            lease_until: row.get("lease_until")?,
        })
    }
}

impl FromColumns for EventRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(EventRow {
            seq: row.get("seq")?,
            at: row.get("at")?,
            kind: row.get("kind")?,
            detail: row.get("detail")?,
        })
    }
}

impl Store {
    /// Records a new run and its stages, all pending.
    ///
    /// # Errors
    ///
    /// A run with the same id exists, or the write fails.
    pub async fn create_run(&self, run: &NewRun) -> Result<()> {
        self.create(run, None).await
    }

    /// Records a new run as [`Store::create_run`] does and, in the same
    /// transaction, gives its first lease (epoch 1) to `owner` until
    /// `run.created_at + ttl_ms`: what [`Store::acquire`] would do next, one
    /// commit sooner, for a process that drives the run it creates.
    ///
    /// # Errors
    ///
    /// As [`Store::create_run`].
    pub async fn create_leased_run(&self, run: &NewRun, owner: &str, ttl_ms: i64) -> Result<Lease> {
        let lease = Lease {
            run_id: run.run_id.clone(),
            owner: owner.to_owned(),
            epoch: 1,
            until: run.created_at + ttl_ms,
        };
        self.create(run, Some(&lease)).await?;
        Ok(lease)
    }

    /// Each database records a run in as few round trips as it can.
    async fn create(&self, run: &NewRun, lease: Option<&Lease>) -> Result<()> {
        match &self.inner {
            Inner::Sqlite(db) => db.create(run, lease).await,
            Inner::Postgres(db) => db.create(run, lease).await,
        }
    }

    /// Every run, oldest first.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn runs(&self) -> Result<Vec<RunRow>> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM {RUNS} ORDER BY r.created_at, r.run_id");
        self.fetch_all(AssertSqlSafe(sql), &[], "list runs").await
    }

    /// The runs whose recorded options name a parent run (`parent_run`):
    /// the child runs of sub-workflow stages, without reading every
    /// other run's documents.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn child_runs(&self) -> Result<Vec<RunRow>> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM {RUNS} WHERE d.options LIKE $1 ORDER BY r.created_at, r.run_id"
        );
        self.fetch_all(
            AssertSqlSafe(sql),
            &["%\"parent_run\":%".into()],
            "list child runs",
        )
        .await
    }

    /// One run.
    ///
    /// # Errors
    ///
    /// No such run, or the read fails.
    pub async fn run(&self, run_id: &str) -> Result<RunRow> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM {RUNS} WHERE r.run_id = $1");
        let run = self
            .fetch_optional(AssertSqlSafe(sql), &[run_id.into()], "read the run")
            .await?;
        run.ok_or_else(|| Error::NoSuchRun(run_id.to_owned()))
    }

    /// Whether a run is recorded: [`Store::run`] without reading its plan.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn has_run(&self, run_id: &str) -> Result<bool> {
        let found: Option<i64> = self
            .fetch_optional(
                "SELECT created_at FROM runs WHERE run_id = $1",
                &[run_id.into()],
                "look for the run",
            )
            .await?;
        Ok(found.is_some())
    }

    /// A run's events after `after` (0 for all), oldest first.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn events(&self, run_id: &str, after: i64) -> Result<Vec<EventRow>> {
        let sql =
            "SELECT seq, at, kind, detail FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq";
        self.fetch_all(sql, &[run_id.into(), after.into()], "list events")
            .await
    }

    /// A run's events of one kind, oldest first.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn events_of_kind(&self, run_id: &str, kind: &str) -> Result<Vec<EventRow>> {
        let sql =
            "SELECT seq, at, kind, detail FROM events WHERE run_id = $1 AND kind = $2 ORDER BY seq";
        self.fetch_all(sql, &[run_id.into(), kind.into()], "list events")
            .await
    }
}
