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

use crate::columns::{Columns, FromColumns};
use crate::model::NewLedgerEvent;
use crate::tx::Tx;
use crate::{Error, Result, Store};

/// Bumps a scope's counter (creating it at 1) and returns the new number.
const NUMBER: &str = "INSERT INTO ledger_scopes (scope_kind, scope_key, last_seq, created_at, updated_at) \
     VALUES ($1, $2, 1, $3, $3) \
     ON CONFLICT (scope_kind, scope_key) DO UPDATE \
     SET last_seq = ledger_scopes.last_seq + 1, updated_at = excluded.updated_at \
     RETURNING last_seq";

/// Writes one event under the number [`NUMBER`] returned.
const INSERT: &str = "INSERT INTO ledger_events \
     (scope_kind, scope_key, seq, kind, payload, profile, model, session, recorded_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

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

impl FromColumns for LedgerEventRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(LedgerEventRow {
            seq: row.get("seq")?,
            kind: row.get("kind")?,
            payload: row.get("payload")?,
            profile: row.get("profile")?,
            model: row.get("model")?,
            session: row.get("session")?,
            recorded_at: row.get("recorded_at")?,
        })
    }
}

impl FromColumns for LedgerScope {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(LedgerScope {
            kind: row.get("scope_kind")?,
            key: row.get("scope_key")?,
            events: row.get("last_seq")?,
            created_at: row.get("created_at")?,
            updated_at: row.get("updated_at")?,
        })
    }
}

/// Appends `event` in the caller's transaction (see
/// [`Store::append_ledger`]); an error leaves the transaction to be
/// dropped, which rolls the counter back.
pub(crate) async fn append(
    tx: &mut Tx,
    event: &NewLedgerEvent,
    expected_last: Option<i64>,
) -> Result<i64> {
    let scope = [
        (&event.scope_kind).into(),
        (&event.scope_key).into(),
        event.recorded_at.into(),
    ];
    let seq: i64 = tx
        .fetch_one(NUMBER, &scope, "number a ledger event")
        .await?;
    if let Some(expected) = expected_last
        && seq != expected + 1
    {
        return Err(Error::LedgerMoved {
            scope: format!("{} {}", event.scope_kind, event.scope_key),
            expected,
            found: seq - 1,
        });
    }
    let args = [
        scope[0],
        scope[1],
        seq.into(),
        (&event.kind).into(),
        (&event.payload).into(),
        (&event.profile).into(),
        (&event.model).into(),
        (&event.session).into(),
        event.recorded_at.into(),
    ];
    tx.execute(INSERT, &args, "append a ledger event").await?;
    Ok(seq)
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
        let mut tx = self.begin().await?;
        let seq = append(&mut tx, event, expected_last).await?;
        tx.commit().await?;
        Ok(seq)
    }

    /// The events of one scope, in ledger order (empty for an unknown scope).
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn ledger_events(&self, kind: &str, key: &str) -> Result<Vec<LedgerEventRow>> {
        let sql = "SELECT seq, kind, payload, profile, model, session, recorded_at \
                   FROM ledger_events WHERE scope_kind = $1 AND scope_key = $2 ORDER BY seq";
        self.fetch_all(sql, &[kind.into(), key.into()], "list ledger events")
            .await
    }

    /// Every scope with events, by kind, then key.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn ledger_scopes(&self) -> Result<Vec<LedgerScope>> {
        let sql = "SELECT scope_kind, scope_key, last_seq, created_at, updated_at \
                   FROM ledger_scopes ORDER BY scope_kind, scope_key";
        self.fetch_all(sql, &[], "list ledger scopes").await
    }
}
