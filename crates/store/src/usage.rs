//! What agent attempts consumed: tokens, cost, turns and session ids, one
//! row per attempt of a stage or of one of its units.
//!
//! Rows are written through [`Transition::UsageRecorded`](crate::Transition)
//! under the run's lease, like every other state change, and read back for
//! `baton status`.

use sqlx::Row;

use crate::backend::{Inner, on_pool, query_error};
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

impl Store {
    /// Every recorded usage row of a run, by stage, unit and attempt.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn usage(&self, run_id: &str) -> Result<Vec<UsageRow>> {
        on_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT idx, unit_key, attempt, input_tokens, output_tokens, cache_read_tokens, \
                 cache_write_tokens, cost_microusd, turns, session_id, model, resumed_session \
                 FROM usage WHERE run_id = $1 ORDER BY idx, unit_key, attempt",
            )
            .bind(run_id)
            .fetch_all(pool)
            .await
            .map_err(query_error("list usage"))?;
            rows.iter()
                .map(|row| {
                    Ok(UsageRow {
                        index: row.try_get("idx")?,
                        unit: row.try_get("unit_key")?,
                        attempt: row.try_get("attempt")?,
                        input_tokens: row.try_get("input_tokens")?,
                        output_tokens: row.try_get("output_tokens")?,
                        cache_read_tokens: row.try_get("cache_read_tokens")?,
                        cache_write_tokens: row.try_get("cache_write_tokens")?,
                        cost_microusd: row.try_get("cost_microusd")?,
                        turns: row.try_get("turns")?,
                        session_id: row.try_get("session_id")?,
                        model: row.try_get("model")?,
                        resumed_session: row.try_get("resumed_session")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read usage"))
        })
    }
}
