//! A new run's record on PostgreSQL.

use super::Db;
use crate::Result;
use crate::error::insert_run_error;
use crate::events::lease_detail;
use crate::model::{Lease, NewRun};

impl Db {
    /// Records a new run as one statement: each statement is a round trip
    /// to the server, and on a new connection (every `baton run`'s) a
    /// second one to parse it, so the run, its documents, stages and events
    /// and the transaction around them took ten. A single statement is
    /// atomic; the foreign keys are checked at its end, when the run row is
    /// there; a run id already taken fails on the runs table's key.
    pub(crate) async fn create(&self, run: &NewRun, lease: Option<&Lease>) -> Result<()> {
        let mut kinds = vec!["run_created".to_owned()];
        let mut details = vec!["{}".to_owned()];
        if let Some(lease) = lease {
            kinds.push("lease_acquired".to_owned());
            details.push(lease_detail(lease));
        }
        let statement = sqlx::query(
            "WITH run AS (\
               INSERT INTO runs (run_id, workflow, workflow_path, workspace, status, created_at, \
                 lease_owner, lease_epoch, lease_until) \
               VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8)), \
             documents AS (\
               INSERT INTO run_documents (run_id, plan, params, sources, options) \
               VALUES ($1, $9, $10, $11, $12)), \
             stage_rows AS (\
               INSERT INTO stages (run_id, idx, name, status) \
               SELECT $1, s.ordinality - 1, s.name, 'pending' \
               FROM UNNEST($13::TEXT[]) WITH ORDINALITY AS s(name, ordinality)) \
             INSERT INTO events (run_id, at, kind, detail) \
             SELECT $1, $5, e.kind, e.detail \
             FROM UNNEST($14::TEXT[], $15::TEXT[]) WITH ORDINALITY AS e(kind, detail, ordinality) \
             ORDER BY e.ordinality",
        )
        .bind(&run.run_id)
        .bind(&run.workflow)
        .bind(&run.workflow_path)
        .bind(&run.workspace)
        .bind(run.created_at)
        .bind(lease.map(|lease| lease.owner.as_str()))
        .bind(lease.map_or(0, |lease| lease.epoch))
        .bind(lease.map_or(0, |lease| lease.until))
        .bind(&run.plan)
        .bind(&run.params)
        .bind(&run.sources)
        .bind(&run.options)
        .bind(&run.stages)
        .bind(kinds)
        .bind(details);
        crate::failpoint::write(statement.execute(&self.pool))
            .await
            .map_err(|source| insert_run_error(&run.run_id, "record the run", source))?;
        Ok(())
    }
}
