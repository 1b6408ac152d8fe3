//! Units of work inside a stage (fan-out children, validators,
//! corrections) and validation findings: their queries, and the bulk
//! insert used when a stage plans its units.

use sqlx::Row;

use crate::backend::{Inner, on_pool, query_error};
use crate::model::{FindingRow, NewUnit, UnitRow};
use crate::{Result, Store};

impl Store {
    /// A run's units, by stage and ordinal.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn units(&self, run_id: &str) -> Result<Vec<UnitRow>> {
        on_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT idx, unit_key, ordinal, kind, cycle, label, spec, status, attempts, started_at, finished_at, exit_code, error, artifacts \
                 FROM units WHERE run_id = $1 ORDER BY idx, ordinal",
            )
            .bind(run_id)
            .fetch_all(pool)
            .await
            .map_err(query_error("list units"))?;
            rows.iter()
                .map(|row| {
                    Ok(UnitRow {
                        index: row.try_get("idx")?,
                        key: row.try_get("unit_key")?,
                        ordinal: row.try_get("ordinal")?,
                        kind: row.try_get("kind")?,
                        cycle: row.try_get("cycle")?,
                        label: row.try_get("label")?,
                        spec: row.try_get("spec")?,
                        status: row.try_get("status")?,
                        attempts: row.try_get("attempts")?,
                        started_at: row.try_get("started_at")?,
                        finished_at: row.try_get("finished_at")?,
                        exit_code: row.try_get("exit_code")?,
                        error: row.try_get("error")?,
                        artifacts: row.try_get("artifacts")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read units"))
        })
    }

    /// A run's validation findings, by stage, cycle and position.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn findings(&self, run_id: &str) -> Result<Vec<FindingRow>> {
        on_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT idx, cycle, position, finding_id, status, severity, category, claim, expected, actual, source, fix \
                 FROM findings WHERE run_id = $1 ORDER BY idx, cycle, position",
            )
            .bind(run_id)
            .fetch_all(pool)
            .await
            .map_err(query_error("list findings"))?;
            rows.iter()
                .map(|row| {
                    Ok(FindingRow {
                        index: row.try_get("idx")?,
                        cycle: row.try_get("cycle")?,
                        position: row.try_get("position")?,
                        id: row.try_get("finding_id")?,
                        status: row.try_get("status")?,
                        severity: row.try_get("severity")?,
                        category: row.try_get("category")?,
                        claim: row.try_get("claim")?,
                        expected: row.try_get("expected")?,
                        actual: row.try_get("actual")?,
                        source: row.try_get("source")?,
                        fix: row.try_get("fix")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read findings"))
        })
    }
}

/// Most units written by one statement (8 parameters each).
const UNITS_PER_STATEMENT: usize = 500;

/// Inserts units with as few statements as possible; a key the stage has
/// already is left as it is.
pub(crate) async fn insert_units<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    run_id: &str,
    index: i64,
    units: &[NewUnit],
    numbered: bool,
) -> Result<()>
where
    DB: sqlx::Database,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
{
    for chunk in units.chunks(UNITS_PER_STATEMENT) {
        let mut sql = String::from(
            "INSERT INTO units (run_id, idx, unit_key, ordinal, kind, cycle, label, spec, status) VALUES ",
        );
        crate::attempts::Placeholders::new(numbered).rows_with(
            &mut sql,
            chunk.len(),
            8,
            ", 'pending'",
        );
        sql.push_str(" ON CONFLICT (run_id, idx, unit_key) DO NOTHING");
        let mut query = sqlx::query::<DB>(sqlx::AssertSqlSafe(sql));
        for unit in chunk {
            query = query
                .bind(run_id)
                .bind(index)
                .bind(unit.key.as_str())
                .bind(unit.ordinal)
                .bind(unit.kind.as_str())
                .bind(unit.cycle)
                .bind(unit.label.as_str())
                .bind(unit.spec.as_str());
        }
        query
            .execute(&mut **tx)
            .await
            .map_err(query_error("plan units"))?;
    }
    Ok(())
}

/// `[[path, sha256, bytes], …]` as JSON.
pub(crate) fn artifacts_json(artifacts: &[(String, String, i64)]) -> String {
    serde_json::to_string(artifacts).unwrap_or_else(|_| "[]".to_owned())
}
