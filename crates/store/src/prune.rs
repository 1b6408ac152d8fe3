//! Per-run tallies for `baton runs`, and deleting finished runs for
//! `baton prune`.

use std::collections::{BTreeMap, HashMap};

use sqlx::AssertSqlSafe;

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
const RUN_TABLES: [&str; 10] = [
    "stages",
    "attempts",
    "artifacts",
    "events",
    "units",
    "gate_decisions",
    "gate_outputs",
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
        let sql = "SELECT run_id, status, COUNT(*) AS n FROM stages GROUP BY run_id, status";
        let counts: Vec<(String, String, i64)> = self.fetch_all(sql, &[], "count stages").await?;
        for (run_id, status, count) in counts {
            let tally = tallies.entry(run_id).or_default();
            tally.stages.insert(status, count);
        }
        // SUM of a BIGINT is NUMERIC on PostgreSQL: cast back.
        let sql = "SELECT run_id, CAST(SUM(cost_microusd) AS BIGINT) AS cost FROM usage \
                   WHERE cost_microusd IS NOT NULL GROUP BY run_id";
        let costs: Vec<(String, i64)> = self.fetch_all(sql, &[], "sum costs").await?;
        for (run_id, cost) in costs {
            tallies.entry(run_id).or_default().cost_microusd = Some(cost);
        }
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
        let mut tx = self.begin().await?;
        // Locks the row (PostgreSQL) while checking it: a driver taking the
        // lease waits for this transaction and then finds no run.
        let claim = "UPDATE runs SET status = status WHERE run_id = $1 \
                     AND status IN ($2, $3, $4, $5) AND lease_until <= $6";
        let [success, failed, cancelled, rejected] = FINISHED_STATUSES;
        let args = [
            run_id.into(),
            success.into(),
            failed.into(),
            cancelled.into(),
            rejected.into(),
            now.into(),
        ];
        let claimed = tx.execute(claim, &args, "claim a run to delete").await? == 1;
        if claimed {
            let run = [run_id.into()];
            for table in RUN_TABLES {
                let sql = format!("DELETE FROM {table} WHERE run_id = $1");
                let deleted = tx.execute(AssertSqlSafe(sql), &run, "delete a run's records");
                deleted.await?;
            }
            for table in ["ledger_events", "ledger_scopes"] {
                let sql =
                    format!("DELETE FROM {table} WHERE scope_kind = 'run' AND scope_key = $1");
                let deleted = tx.execute(AssertSqlSafe(sql), &run, "delete a run's ledger");
                deleted.await?;
            }
            let sql = "DELETE FROM runs WHERE run_id = $1";
            tx.execute(sql, &run, "delete a run").await?;
        }
        tx.commit().await?;
        Ok(claimed)
    }
}
