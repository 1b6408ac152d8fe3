//! Reading units of work inside a stage (fan-out children, validators,
//! corrections) and validation findings. They are written by transitions
//! (`apply.rs`, `unit_writes.rs`).

use crate::columns::{Columns, FromColumns};
use crate::model::{FindingRow, UnitRow};
use crate::{Result, Store};

impl FromColumns for UnitRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(UnitRow {
            index: row.get("idx")?,
            key: row.get("unit_key")?,
            ordinal: row.get("ordinal")?,
            kind: row.get("kind")?,
            cycle: row.get("cycle")?,
            label: row.get("label")?,
            spec: row.get("spec")?,
            status: row.get("status")?,
            attempts: row.get("attempts")?,
            started_at: row.get("started_at")?,
            finished_at: row.get("finished_at")?,
            exit_code: row.get("exit_code")?,
            error: row.get("error")?,
            artifacts: row.get("artifacts")?,
        })
    }
}

impl FromColumns for FindingRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(FindingRow {
            index: row.get("idx")?,
            cycle: row.get("cycle")?,
            position: row.get("position")?,
            id: row.get("finding_id")?,
            status: row.get("status")?,
            severity: row.get("severity")?,
            category: row.get("category")?,
            claim: row.get("claim")?,
            expected: row.get("expected")?,
            actual: row.get("actual")?,
            source: row.get("source")?,
            fix: row.get("fix")?,
        })
    }
}

impl Store {
    /// A run's units, by stage and ordinal.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn units(&self, run_id: &str) -> Result<Vec<UnitRow>> {
        let sql = "SELECT idx, unit_key, ordinal, kind, cycle, label, spec, status, attempts, \
                   started_at, finished_at, exit_code, error, artifacts \
                   FROM units WHERE run_id = $1 ORDER BY idx, ordinal";
        self.fetch_all(sql, &[run_id.into()], "list units").await
    }

    /// A run's validation findings, by stage, cycle and position.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn findings(&self, run_id: &str) -> Result<Vec<FindingRow>> {
        let sql = "SELECT idx, cycle, position, finding_id, status, severity, category, claim, \
                   expected, actual, source, fix \
                   FROM findings WHERE run_id = $1 ORDER BY idx, cycle, position";
        self.fetch_all(sql, &[run_id.into()], "list findings").await
    }
}
