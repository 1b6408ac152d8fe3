//! Statements that write many rows at once, in each backend's best form.
//!
//! SQLite takes a multi-row `VALUES` list: a statement is parsed in the
//! process, and `?` placeholders cost next to nothing. PostgreSQL parses and
//! plans every statement text it has not prepared on the connection before,
//! and a `VALUES` list of a new length is a new text: a drive's commits,
//! each with its own number of rows, had the server parse about one
//! statement for every two it ran. There the rows go as one array per
//! column, unnested by the server, so each kind of write is one statement
//! text, prepared once per connection whatever the batch's size.

use std::future::Future;

use sqlx::{Postgres, Sqlite, Transaction};

use crate::Result;
use crate::attempts::{self, Net, Placeholders};
use crate::backend::query_error;
use crate::unit_writes;

/// Most stages one statement of a run's creation inserts on SQLite (3
/// parameters each).
const STAGES_PER_STATEMENT: usize = 1_000;

/// Most events one statement writes on SQLite (4 parameters each; SQLite
/// allows 32 766 parameters per statement).
const EVENTS_PER_STATEMENT: usize = 500;

/// Appends a batch's events to the run's log: see [`Bulk::insert_events`].
pub(crate) async fn insert_events<DB: Bulk>(
    tx: &mut Transaction<'_, DB>,
    run_id: &str,
    events: &[(i64, String, String)],
) -> Result<()> {
    DB::insert_events(tx, run_id, events).await
}

/// Records a new run's stages, all pending: see [`Bulk::insert_stages`].
pub(crate) async fn insert_stages<DB: Bulk>(
    tx: &mut Transaction<'_, DB>,
    run_id: &str,
    names: &[String],
) -> Result<()> {
    DB::insert_stages(tx, run_id, names).await
}

/// A backend's many-row writes.
pub(crate) trait Bulk: sqlx::Database {
    /// Records a new run's stages, all pending, numbered in order. Many to
    /// a statement: a round trip each made creating a run of 10 000 stages
    /// take a quarter of a second.
    fn insert_stages<'t>(
        tx: &'t mut Transaction<'_, Self>,
        run_id: &'t str,
        names: &'t [String],
    ) -> impl Future<Output = Result<()>> + Send + 't;

    /// Appends `events` (time, kind, detail) to the run's event log, in
    /// order.
    fn insert_events<'t>(
        tx: &'t mut Transaction<'_, Self>,
        run_id: &'t str,
        events: &'t [(i64, String, String)],
    ) -> impl Future<Output = Result<()>> + Send + 't;

    /// Writes a group's attempt starts, process ids and ends (see
    /// `attempts.rs`).
    fn write_attempts<'t>(
        tx: &'t mut Transaction<'_, Self>,
        run_id: &'t str,
        nets: &'t [Net<'_>],
    ) -> impl Future<Output = Result<()>> + Send + 't;

    /// Writes a group's unit starts, then its ends (see `unit_writes.rs`).
    fn write_units<'t>(
        tx: &'t mut Transaction<'_, Self>,
        run_id: &'t str,
        starts: &'t [unit_writes::Start<'_>],
        ends: &'t [unit_writes::End<'_>],
    ) -> impl Future<Output = Result<()>> + Send + 't;
}

impl Bulk for Sqlite {
    async fn insert_stages<'t>(
        tx: &'t mut Transaction<'_, Sqlite>,
        run_id: &'t str,
        names: &'t [String],
    ) -> Result<()> {
        let numbered: Vec<(i64, &String)> = (0..).map(index).zip(names).collect();
        insert_values(
            tx,
            (
                "INSERT INTO stages (run_id, idx, name, status) VALUES ",
                ", 'pending'",
            ),
            (3, STAGES_PER_STATEMENT),
            &numbered,
            "insert the stages",
            |query, (position, name)| query.bind(run_id).bind(*position).bind(name.as_str()),
        )
        .await
    }

    fn write_attempts<'t>(
        tx: &'t mut Transaction<'_, Sqlite>,
        run_id: &'t str,
        nets: &'t [Net<'_>],
    ) -> impl Future<Output = Result<()>> + Send + 't {
        attempts::write_values(tx, run_id, nets)
    }

    fn write_units<'t>(
        tx: &'t mut Transaction<'_, Sqlite>,
        run_id: &'t str,
        starts: &'t [unit_writes::Start<'_>],
        ends: &'t [unit_writes::End<'_>],
    ) -> impl Future<Output = Result<()>> + Send + 't {
        unit_writes::write_values(tx, run_id, starts, ends)
    }

    async fn insert_events<'t>(
        tx: &'t mut Transaction<'_, Sqlite>,
        run_id: &'t str,
        events: &'t [(i64, String, String)],
    ) -> Result<()> {
        insert_values(
            tx,
            ("INSERT INTO events (run_id, at, kind, detail) VALUES ", ""),
            (4, EVENTS_PER_STATEMENT),
            events,
            "log events",
            |query, (at, kind, detail)| {
                query
                    .bind(run_id)
                    .bind(*at)
                    .bind(kind.as_str())
                    .bind(detail.as_str())
            },
        )
        .await
    }
}

/// `rows` inserted by `head` followed by `VALUES` rows of `columns`
/// placeholders (each row ending in the constant SQL `tail`), at most
/// `per_statement` rows a statement; `bind` binds one row's values.
async fn insert_values<'r, R>(
    tx: &mut Transaction<'_, Sqlite>,
    (head, tail): (&str, &str),
    (columns, per_statement): (usize, usize),
    rows: &'r [R],
    what: &'static str,
    bind: impl Fn(SqliteQuery<'r>, &'r R) -> SqliteQuery<'r>,
) -> Result<()> {
    for chunk in rows.chunks(per_statement) {
        let mut sql = String::from(head);
        Placeholders::new(false).rows_with(&mut sql, chunk.len(), columns, tail);
        // Only placeholders are spliced in; every value is bound.
        let query = chunk
            .iter()
            .fold(sqlx::query::<Sqlite>(sqlx::AssertSqlSafe(sql)), &bind);
        query.execute(&mut **tx).await.map_err(query_error(what))?;
    }
    Ok(())
}

/// A query on SQLite with its bound values.
type SqliteQuery<'q> = sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>;

impl Bulk for Postgres {
    async fn insert_stages<'t>(
        tx: &'t mut Transaction<'_, Postgres>,
        run_id: &'t str,
        names: &'t [String],
    ) -> Result<()> {
        let indices: Vec<i64> = (0..names.len()).map(index).collect();
        sqlx::query(
            "INSERT INTO stages (run_id, idx, name, status) \
             SELECT $1, s.idx, s.name, 'pending' FROM UNNEST($2::BIGINT[], $3::TEXT[]) AS s(idx, name)",
        )
        .bind(run_id)
        .bind(indices)
        .bind(names)
        .execute(&mut **tx)
        .await
        .map_err(query_error("insert the stages"))?;
        Ok(())
    }

    fn write_attempts<'t>(
        tx: &'t mut Transaction<'_, Postgres>,
        run_id: &'t str,
        nets: &'t [Net<'_>],
    ) -> impl Future<Output = Result<()>> + Send + 't {
        attempts::write_arrays(tx, run_id, nets)
    }

    fn write_units<'t>(
        tx: &'t mut Transaction<'_, Postgres>,
        run_id: &'t str,
        starts: &'t [unit_writes::Start<'_>],
        ends: &'t [unit_writes::End<'_>],
    ) -> impl Future<Output = Result<()>> + Send + 't {
        unit_writes::write_arrays(tx, run_id, starts, ends)
    }

    async fn insert_events<'t>(
        tx: &'t mut Transaction<'_, Postgres>,
        run_id: &'t str,
        events: &'t [(i64, String, String)],
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let at: Vec<i64> = events.iter().map(|event| event.0).collect();
        let kind: Vec<&str> = events.iter().map(|event| event.1.as_str()).collect();
        let detail: Vec<&str> = events.iter().map(|event| event.2.as_str()).collect();
        // `ORDER BY n`: the log's sequence numbers follow the batch's order.
        sqlx::query(
            "INSERT INTO events (run_id, at, kind, detail) \
             SELECT $1, e.at, e.kind, e.detail \
             FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[]) WITH ORDINALITY AS e(at, kind, detail, n) \
             ORDER BY e.n",
        )
        .bind(run_id)
        .bind(at)
        .bind(kind)
        .bind(detail)
        .execute(&mut **tx)
        .await
        .map_err(query_error("log events"))?;
        Ok(())
    }
}

/// A stage's index as the store keeps it.
fn index(position: usize) -> i64 {
    i64::try_from(position).unwrap_or(i64::MAX)
}
