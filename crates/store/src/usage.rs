//! What agent attempts consumed: tokens, cost, turns and session ids, one
//! row per attempt of a stage or of one of its units.
//!
//! Rows are written through [`Transition::UsageRecorded`](crate::Transition)
//! under the run's lease, like every other state change, and read back for
//! `baton status`.

use crate::columns::{Columns, FromColumns};
use crate::{Result, Store};

/// The usage of one attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageRow {
    /// Stage index.
    pub index: i64,
    /// The unit's key, or empty for the stage's own attempt.
    pub unit: String,
    /// Attempt number.
    pub attempt: i64,
    /// Input tokens not read from a cache.
    pub input_tokens: Option<i64>,
    /// Output tokens.
    pub output_tokens: Option<i64>,
    /// Input tokens read from the provider's cache.
    pub cache_read_tokens: Option<i64>,
    /// Input tokens written to the provider's cache.
    pub cache_write_tokens: Option<i64>,
    /// Cost in millionths of a USD (integers stay exact on both backends).
    pub cost_microusd: Option<i64>,
    /// Agent turns.
    pub turns: Option<i64>,
    /// The agent's session id.
    pub session_id: Option<String>,
    /// The model baton priced the tokens for, when it did.
    pub model: Option<String>,
    /// The agent session the attempt continued instead of starting a new
    /// one, if it did.
    pub resumed_session: Option<String>,
}

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
