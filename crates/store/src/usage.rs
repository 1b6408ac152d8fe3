//! What agent attempts consumed: tokens, cost, turns and session ids, one
//! row per attempt of a stage or of one of its units.
//!
//! Rows are written through [`Transition::UsageRecorded`](crate::Transition)
//! under the run's lease, like every other state change, and read back for
//! `baton status`.

use crate::columns::{Columns, FromColumns};
use crate::model::UsageRow;
use crate::{Result, Store};

impl FromColumns for UsageRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(UsageRow {
            index: row.get("idx")?,
            unit: row.get("unit_key")?,
            attempt: row.get("attempt")?,
            input_tokens: row.get("input_tokens")?,
            output_tokens: row.get("output_tokens")?,
            cache_read_tokens: row.get("cache_read_tokens")?,
            cache_write_tokens: row.get("cache_write_tokens")?,
            cost_microusd: row.get("cost_microusd")?,
            turns: row.get("turns")?,
            session_id: row.get("session_id")?,
            model: row.get("model")?,
            resumed_session: row.get("resumed_session")?,
        })
    }
}

impl Store {
    /// Every recorded usage row of a run, by stage, unit and attempt.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn usage(&self, run_id: &str) -> Result<Vec<UsageRow>> {
        let sql = "SELECT idx, unit_key, attempt, input_tokens, output_tokens, cache_read_tokens, \
                   cache_write_tokens, cost_microusd, turns, session_id, model, resumed_session \
                   FROM usage WHERE run_id = $1 ORDER BY idx, unit_key, attempt";
        self.fetch_all(sql, &[run_id.into()], "list usage").await
    }
}
