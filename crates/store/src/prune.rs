//! Per-run tallies for `baton runs`, and deleting finished runs for
//! `baton prune`.

use std::collections::{BTreeMap, HashMap};

use sqlx::Row;

use crate::backend::{Inner, in_transaction, on_pool, query_error};
use crate::{Result, Store};

/// The run statuses that end a run for good as far as pruning goes: no
/// driver is on it and nobody waits on it (a run at a human gate waits).
pub const FINISHED_STATUSES: [&str; 4] = ["success", "failed", "cancelled", "rejected"];

/// What `baton runs` adds to a run's row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunTally {
    /// How many of its stages have each status.
    pub stages: BTreeMap<String, i64>,
    /// Its recorded cost in millionths of a USD; `None` when no attempt
    /// reported or priced one.
    pub cost_microusd: Option<i64>,
}

/// Every table whose rows belong to one run, children before `runs`.
const RUN_TABLES: [&str; 9] = [
    "stages",
    "attempts",
    "artifacts",
    "events",
    "units",
    "gate_decisions",
    "findings",
    "usage",
    "run_documents",
];

impl Store {
    /// The stage counts and cost of every run that has stages or usage, by
    /// run id: two grouped reads, whatever the number of runs.
    ///
    /// # Errors
    ///
    /// A read fails.
    pub async fn run_tallies(&self) -> Result<HashMap<String, RunTally>> {
        let mut tallies: HashMap<String, RunTally> = HashMap::new();
        on_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT run_id, status, COUNT(*) AS n FROM stages GROUP BY run_id, status",
            )
            .fetch_all(pool)
            .await
            .map_err(query_error("count stages"))?;
            for row in &rows {
                let (run_id, status, count): (String, String, i64) =
                    (|| Ok::<_, sqlx::Error>((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))(
                    )
                    .map_err(query_error("read stage counts"))?;
                tallies
                    .entry(run_id)
                    .or_default()
                    .stages
                    .insert(status, count);
            }
            // SUM of a BIGINT is NUMERIC on PostgreSQL: cast back.
            let rows = sqlx::query(
                "SELECT run_id, CAST(SUM(cost_microusd) AS BIGINT) AS cost FROM usage \
                 WHERE cost_microusd IS NOT NULL GROUP BY run_id",
            )
            .fetch_all(pool)
            .await
            .map_err(query_error("sum costs"))?;
            for row in &rows {
                let (run_id, cost): (String, i64) =
                    (|| Ok::<_, sqlx::Error>((row.try_get(0)?, row.try_get(1)?)))()
                        .map_err(query_error("read costs"))?;
                tallies.entry(run_id).or_default().cost_microusd = Some(cost);
            }
        });
        Ok(tallies)
    }

    /// Deletes a run and everything recorded for it (stages, attempts,
    /// outputs' hashes, events, units, gate decisions, findings, usage, its
    /// governance ledger) in one transaction, if it is finished ([`FINISHED_STATUSES`])
    /// and no driver holds its lease at `now`. Returns whether it was
    /// deleted: a run resumed or taken meanwhile is left whole.
    ///
    /// # Errors
    ///
    /// A write fails.
    pub async fn delete_finished_run(&self, run_id: &str, now: i64) -> Result<bool> {
        let deleted = in_transaction!(self, |tx| {
            // Locks the row (PostgreSQL) while checking it: a driver taking
            // the lease waits for this transaction and then finds no run.
            let claimed = sqlx::query(
                "UPDATE runs SET status = status WHERE run_id = $1 \
                 AND status IN ($2, $3, $4, $5) AND lease_until <= $6",
            )
            .bind(run_id)
            .bind(FINISHED_STATUSES[0])
            .bind(FINISHED_STATUSES[1])
            .bind(FINISHED_STATUSES[2])
            .bind(FINISHED_STATUSES[3])
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(query_error("claim a run to delete"))?;
            if claimed.rows_affected() == 1 {
                for table in RUN_TABLES {
                    let sql = sqlx::AssertSqlSafe(format!("DELETE FROM {table} WHERE run_id = $1"));
                    sqlx::query(sql)
                        .bind(run_id)
                        .execute(&mut *tx)
                        .await
                        .map_err(query_error("delete a run's records"))?;
                }
                for table in ["ledger_events", "ledger_scopes"] {
                    let sql = sqlx::AssertSqlSafe(format!(
                        "DELETE FROM {table} WHERE scope_kind = 'run' AND scope_key = $1"
                    ));
                    sqlx::query(sql)
                        .bind(run_id)
                        .execute(&mut *tx)
                        .await
                        .map_err(query_error("delete a run's ledger"))?;
                }
                sqlx::query("DELETE FROM runs WHERE run_id = $1")
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(query_error("delete a run"))?;
            }
            claimed.rows_affected() == 1
        });
        Ok(deleted)
    }
}
