//! The governance ledger: append-only events of one piece of agent work (a
//! run, a task or a free agent session), with their evidence.
//!
//! Order is the only clock. Each scope has a counter row; an append bumps it
//! with one upsert and writes the event under the number it returned, in the
//! same transaction. On PostgreSQL the upsert takes the row lock, so a
//! concurrent append to the same scope waits for the first to commit and
//! gets the next number; on SQLite `BEGIN IMMEDIATE` serialises writers. The
//! key `(scope_kind, scope_key, seq)` makes a collision an error, never a
//! silent overwrite.

use sqlx::Row;

use crate::backend::{Inner, in_transaction, on_pool, query_error};
use crate::{Error, Result, Store};

/// Bumps a scope's counter (creating it at 1) and returns the new number.
pub(crate) const NUMBER: &str = "INSERT INTO ledger_scopes (scope_kind, scope_key, last_seq, created_at, updated_at) \
     VALUES ($1, $2, 1, $3, $3) \
     ON CONFLICT (scope_kind, scope_key) DO UPDATE \
     SET last_seq = ledger_scopes.last_seq + 1, updated_at = excluded.updated_at \
     RETURNING last_seq";

/// Writes one event under the number [`NUMBER`] returned.
pub(crate) const INSERT: &str = "INSERT INTO ledger_events \
     (scope_kind, scope_key, seq, kind, payload, profile, model, session, recorded_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// An event to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLedgerEvent {
    /// `run`, `task` or `session`.
    pub scope_kind: String,
    /// The run id, task name or session id.
    pub scope_key: String,
    /// The event's kind (`edited`, `validated`, …).
    pub kind: String,
    /// The evidence, as JSON text.
    pub payload: String,
    /// Who acted: the agent profile.
    pub profile: String,
    /// Who acted: the model, when configured.
    pub model: Option<String>,
    /// Who acted: the session.
    pub session: String,
    /// When it was recorded (ms since the epoch); informational only.
    pub recorded_at: i64,
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEventRow {
    /// Position in the scope, from 1.
    pub seq: i64,
    /// The event's kind.
    pub kind: String,
    /// The evidence, as JSON text.
    pub payload: String,
    /// The agent profile.
    pub profile: String,
    /// The model, when configured.
    pub model: Option<String>,
    /// The session.
    pub session: String,
    /// When it was recorded (ms).
    pub recorded_at: i64,
}

/// A scope with at least one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerScope {
    /// `run`, `task` or `session`.
    pub kind: String,
    /// The run id, task name or session id.
    pub key: String,
    /// How many events it holds.
    pub events: i64,
    /// When its first event was recorded (ms).
    pub created_at: i64,
    /// When its last event was recorded (ms).
    pub updated_at: i64,
}

impl Store {
    /// Appends `event` to its scope and returns its sequence number.
    ///
    /// With `expected_last = Some(n)` the append happens only if the scope's
    /// last event is still number `n` (0 for an empty scope): a caller that
    /// checked the event against the folded ledger knows nobody appended in
    /// between. Otherwise nothing is written and [`Error::LedgerMoved`] says
    /// what the scope holds now.
    ///
    /// # Errors
    ///
    /// [`Error::LedgerMoved`], or the write fails.
    pub async fn append_ledger(
        &self,
        event: &NewLedgerEvent,
        expected_last: Option<i64>,
    ) -> Result<i64> {
        in_transaction!(self, |tx| {
            let seq: i64 = sqlx::query(NUMBER)
                .bind(&event.scope_kind)
                .bind(&event.scope_key)
                .bind(event.recorded_at)
                .fetch_one(&mut *tx)
                .await
                .and_then(|row| row.try_get(0))
                .map_err(query_error("number a ledger event"))?;
            if let Some(expected) = expected_last
                && seq != expected + 1
            {
                // Dropping the transaction rolls the counter back.
                return Err(Error::LedgerMoved {
                    scope: format!("{} {}", event.scope_kind, event.scope_key),
                    expected,
                    found: seq - 1,
                });
            }
            sqlx::query(INSERT)
                .bind(&event.scope_kind)
                .bind(&event.scope_key)
                .bind(seq)
                .bind(&event.kind)
                .bind(&event.payload)
                .bind(&event.profile)
                .bind(&event.model)
                .bind(&event.session)
                .bind(event.recorded_at)
                .execute(&mut *tx)
                .await
                .map_err(query_error("append a ledger event"))?;
            Ok::<i64, Error>(seq)
        })
    }

    /// The events of one scope, in ledger order (empty for an unknown scope).
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn ledger_events(&self, kind: &str, key: &str) -> Result<Vec<LedgerEventRow>> {
        on_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT seq, kind, payload, profile, model, session, recorded_at \
                 FROM ledger_events WHERE scope_kind = $1 AND scope_key = $2 ORDER BY seq",
            )
            .bind(kind)
            .bind(key)
            .fetch_all(pool)
            .await
            .map_err(query_error("list ledger events"))?;
            rows.iter()
                .map(|row| {
                    Ok(LedgerEventRow {
                        seq: row.try_get("seq")?,
                        kind: row.try_get("kind")?,
                        payload: row.try_get("payload")?,
                        profile: row.try_get("profile")?,
                        model: row.try_get("model")?,
                        session: row.try_get("session")?,
                        recorded_at: row.try_get("recorded_at")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read ledger events"))
        })
    }

    /// Every scope with events, by kind, then key.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn ledger_scopes(&self) -> Result<Vec<LedgerScope>> {
        on_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT scope_kind, scope_key, last_seq, created_at, updated_at \
                 FROM ledger_scopes ORDER BY scope_kind, scope_key",
            )
            .fetch_all(pool)
            .await
            .map_err(query_error("list ledger scopes"))?;
            rows.iter()
                .map(|row| {
                    Ok(LedgerScope {
                        kind: row.try_get("scope_kind")?,
                        key: row.try_get("scope_key")?,
                        events: row.try_get("last_seq")?,
                        created_at: row.try_get("created_at")?,
                        updated_at: row.try_get("updated_at")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read ledger scopes"))
        })
    }
}
