//! A new run's record on SQLite.

use super::{Db, batch, execute};
use crate::Result;
use crate::batch::{Rows, Shape};
use crate::error::insert_run_error;
use crate::events::lease_detail;
use crate::model::{Lease, NewRun};

impl Db {
    /// Records a new run, its documents and its stages, all pending, and
    /// logs its creation, in one transaction; with `lease`, the run row
    /// carries it from the start. Each statement is a round trip to the
    /// connection's thread, so the events go in one statement.
    pub(crate) async fn create(&self, run: &NewRun, lease: Option<&Lease>) -> Result<()> {
        let mut tx = self.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO runs (run_id, workflow, workflow_path, workspace, status, created_at, \
             lease_owner, lease_epoch, lease_until) \
             VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8)",
        )
        .bind(&run.run_id)
        .bind(&run.workflow)
        .bind(&run.workflow_path)
        .bind(&run.workspace)
        .bind(run.created_at)
        .bind(lease.map(|lease| lease.owner.as_str()))
        .bind(lease.map_or(0, |lease| lease.epoch))
        .bind(lease.map_or(0, |lease| lease.until))
        .execute(&mut *tx)
        .await;
        inserted.map_err(|source| insert_run_error(&run.run_id, "insert the run", source))?;
        execute(
            &mut *tx,
            "INSERT INTO run_documents (run_id, plan, params, sources, options) \
             VALUES ($1, $2, $3, $4, $5)",
            &[
                (&run.run_id).into(),
                (&run.plan).into(),
                (&run.params).into(),
                (&run.sources).into(),
                (&run.options).into(),
            ],
            "insert the run's documents",
        )
        .await?;
        // Many stages to a statement: a round trip each made creating a run
        // of 10 000 stages take a quarter of a second.
        let stages: Rows<'_> = (0_i64..)
            .zip(&run.stages)
            .map(|(index, name)| [index.into(), name.into()])
            .collect();
        let shape = Shape::Insert {
            into: "stages (run_id, idx, name, status)",
            tail: ", 'pending'",
            end: "",
        };
        batch::write(&mut tx, &run.run_id, &shape, "insert the stages", &stages).await?;
        let logged = match lease {
            None => {
                let sql = "INSERT INTO events (run_id, at, kind, detail) \
                           VALUES ($1, $2, 'run_created', '{}')";
                execute(
                    &mut *tx,
                    sql,
                    &[(&run.run_id).into(), run.created_at.into()],
                    "log the run",
                )
                .await
            }
            Some(lease) => {
                let sql = "INSERT INTO events (run_id, at, kind, detail) \
                           VALUES ($1, $2, 'run_created', '{}'), ($1, $2, 'lease_acquired', $3)";
                let detail = lease_detail(lease);
                let args = [
                    (&run.run_id).into(),
                    run.created_at.into(),
                    (&detail).into(),
                ];
                execute(&mut *tx, sql, &args, "log the run").await
            }
        };
        logged?;
        crate::failpoint::write(tx.commit())
            .await
            .map_err(crate::error::query_error("commit"))
    }
}
