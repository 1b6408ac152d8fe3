//! Reading a run's stages, their attempts and their recorded outputs.

use crate::columns::{Columns, FromColumns};
use crate::model::{ArtifactRow, AttemptRow, StageRow};
use crate::{Result, Store};

impl FromColumns for StageRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(StageRow {
            index: row.get("idx")?,
            name: row.get("name")?,
            status: row.get("status")?,
            attempts: row.get("attempts")?,
            started_at: row.get("started_at")?,
            finished_at: row.get("finished_at")?,
            error: row.get("error")?,
            note: row.get("note")?,
        })
    }
}

impl FromColumns for AttemptRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(AttemptRow {
            index: row.get("idx")?,
            attempt: row.get("attempt")?,
            status: row.get("status")?,
            pid: row.get("pid")?,
            pgid: row.get("pgid")?,
            proc_start: row.get("proc_start")?,
            started_at: row.get("started_at")?,
            finished_at: row.get("finished_at")?,
            exit_code: row.get("exit_code")?,
            error: row.get("error")?,
        })
    }
}

impl FromColumns for ArtifactRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(ArtifactRow {
            index: row.get("idx")?,
            path: row.get("path")?,
            sha256: row.get("sha256")?,
            bytes: row.get("bytes")?,
        })
    }
}

impl Store {
    /// A run's stages in index order.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn stages(&self, run_id: &str) -> Result<Vec<StageRow>> {
        let sql = "SELECT idx, name, status, attempts, started_at, finished_at, error, note \
                   FROM stages WHERE run_id = $1 ORDER BY idx";
        self.fetch_all(sql, &[run_id.into()], "list stages").await
    }

    /// A run's attempts, by stage and attempt number.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn attempts(&self, run_id: &str) -> Result<Vec<AttemptRow>> {
        let sql = "SELECT idx, attempt, status, pid, pgid, proc_start, started_at, finished_at, \
                   exit_code, error FROM attempts WHERE run_id = $1 ORDER BY idx, attempt";
        self.fetch_all(sql, &[run_id.into()], "list attempts").await
    }

    /// A run's recorded outputs.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn artifacts(&self, run_id: &str) -> Result<Vec<ArtifactRow>> {
        let sql =
            "SELECT idx, path, sha256, bytes FROM artifacts WHERE run_id = $1 ORDER BY idx, path";
        self.fetch_all(sql, &[run_id.into()], "list artifacts")
            .await
    }
}
