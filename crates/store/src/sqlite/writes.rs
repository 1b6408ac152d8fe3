//! Statements that write many rows at once, as SQLite takes them best: a
//! multi-row `VALUES` list with `?` placeholders (a statement is parsed in
//! the process, and a `?` costs next to nothing; see `placeholders.rs`),
//! at most a few hundred rows a statement (SQLite allows 32 766 values).

use sqlx::{AssertSqlSafe, Sqlite, SqliteConnection};

use super::Query;
use crate::Result;
use crate::attempts::{Net, Rows, attempt_status};
use crate::error::query_error;
use crate::model::NewUnit;
use crate::placeholders::Placeholders;
use crate::unit_writes::{End, Start};

/// Most stages one statement of a run's creation inserts (3 values each).
const STAGES_PER_STATEMENT: usize = 1_000;
/// Most events one statement writes (4 values each).
const EVENTS_PER_STATEMENT: usize = 500;
/// Most attempts one statement writes (the insert binds 11 values a row).
const ATTEMPTS_PER_STATEMENT: usize = 200;
/// Most units one statement writes (an end binds 7 values a row).
const UNITS_PER_STATEMENT: usize = 500;

/// How an `UPDATE attempts … FROM (VALUES …)` finds its rows.
const ATTEMPT_MATCHES: &str = "attempts.idx = v.column1 AND attempts.attempt = v.column2";
/// How an `UPDATE units … FROM (VALUES …)` finds its rows.
const UNIT_MATCHES: &str = "units.idx = v.column1 AND units.unit_key = v.column2";

/// `rows` inserted by `head` followed by `VALUES` rows of `columns`
/// placeholders (each row ending in the constant SQL `tail`), at most
/// `per_statement` rows a statement; `bind` binds one row's values.
async fn insert_values<'r, R>(
    connection: &mut SqliteConnection,
    (head, tail): (&str, &str),
    (columns, per_statement): (usize, usize),
    rows: &'r [R],
    what: &'static str,
    bind: impl Fn(Query<'r>, &'r R) -> Query<'r>,
) -> Result<()> {
    for chunk in rows.chunks(per_statement) {
        let mut sql = String::from(head);
        Placeholders::new(false).rows_with(&mut sql, chunk.len(), columns, tail);
        // Only placeholders are spliced in; every value is bound.
        let query = chunk
            .iter()
            .fold(sqlx::query::<Sqlite>(AssertSqlSafe(sql)), &bind);
        query
            .execute(&mut *connection)
            .await
            .map_err(query_error(what))?;
    }
    Ok(())
}

/// `UPDATE table SET set FROM (VALUES …)` for `rows`, at most
/// `per_statement` a statement: `bind` binds one row's `columns` values,
/// then the run is bound (see [`Placeholders::update_from_values`]).
async fn update_values<'r, R>(
    connection: &mut SqliteConnection,
    (table, set, matches): (&str, &str, &str),
    (columns, per_statement): (usize, usize),
    (run_id, rows): (&'r str, &'r [R]),
    what: &'static str,
    bind: impl Fn(Query<'r>, &'r R) -> Query<'r>,
) -> Result<()> {
    for chunk in rows.chunks(per_statement) {
        let sql =
            Placeholders::update_from_values(false, table, set, chunk.len(), columns, matches);
        let query = chunk
            .iter()
            .fold(sqlx::query::<Sqlite>(AssertSqlSafe(sql)), &bind);
        let query = query.bind(run_id);
        query
            .execute(&mut *connection)
            .await
            .map_err(query_error(what))?;
    }
    Ok(())
}

/// Records a new run's stages, all pending, numbered in order. Many to a
/// statement: a round trip each made creating a run of 10 000 stages take a
/// quarter of a second.
pub(super) async fn insert_stages(
    connection: &mut SqliteConnection,
    run_id: &str,
    names: &[String],
) -> Result<()> {
    let numbered: Vec<(i64, &String)> = (0..).zip(names).collect();
    insert_values(
        connection,
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

/// Appends `events` (time, kind, detail) to the run's event log, in order.
pub(crate) async fn insert_events(
    connection: &mut SqliteConnection,
    run_id: &str,
    events: &[(i64, String, String)],
) -> Result<()> {
    insert_values(
        connection,
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

/// Inserts a stage's planned units; a key the stage has already is left as
/// it is.
pub(crate) async fn insert_units(
    connection: &mut SqliteConnection,
    run_id: &str,
    index: i64,
    units: &[NewUnit],
) -> Result<()> {
    for chunk in units.chunks(UNITS_PER_STATEMENT) {
        let sql = crate::placeholders::insert_units(false, chunk.len());
        let query = chunk
            .iter()
            .fold(sqlx::query::<Sqlite>(AssertSqlSafe(sql)), |query, unit| {
                query
                    .bind(run_id)
                    .bind(index)
                    .bind(unit.key.as_str())
                    .bind(unit.ordinal)
                    .bind(unit.kind.as_str())
                    .bind(unit.cycle)
                    .bind(unit.label.as_str())
                    .bind(unit.spec.as_str())
            });
        let done = query.execute(&mut *connection).await;
        done.map_err(query_error("plan units"))?;
    }
    Ok(())
}

/// Writes a group's unit starts, then its ends.
pub(crate) async fn write_units(
    connection: &mut SqliteConnection,
    run_id: &str,
    starts: &[Start<'_>],
    ends: &[End<'_>],
) -> Result<()> {
    update_values(
        connection,
        (
            "units",
            "status = 'running', attempts = units.attempts + 1, started_at = v.column3, \
             finished_at = NULL, exit_code = NULL, error = NULL",
            UNIT_MATCHES,
        ),
        (3, UNITS_PER_STATEMENT),
        (run_id, starts),
        "start units",
        |query, start| query.bind(start.index).bind(start.key).bind(start.at),
    )
    .await?;
    update_values(
        connection,
        (
            "units",
            "status = v.column3, finished_at = v.column4, exit_code = v.column5, \
             error = v.column6, artifacts = v.column7",
            UNIT_MATCHES,
        ),
        (7, UNITS_PER_STATEMENT),
        (run_id, ends),
        "finish units",
        |query, end| {
            query
                .bind(end.index)
                .bind(end.key)
                .bind(end.status)
                .bind(end.at)
                .bind(end.exit_code)
                .bind(end.error)
                .bind(end.artifacts.as_str())
        },
    )
    .await
}

/// Writes a group's attempt starts, process ids and ends (see
/// `attempts.rs`), a few hundred stages a round.
pub(crate) async fn write_attempts(
    connection: &mut SqliteConnection,
    run_id: &str,
    nets: &[Net<'_>],
) -> Result<()> {
    for chunk in nets.chunks(ATTEMPTS_PER_STATEMENT) {
        let rows = Rows::of(chunk);
        insert_attempts(connection, run_id, &rows.started).await?;
        end_attempts(connection, run_id, &rows.ended).await?;
        record_processes(connection, run_id, &rows.running).await?;
        set_stages(connection, run_id, &rows.stages).await?;
        replace_artifacts(connection, run_id, &rows).await?;
    }
    Ok(())
}

/// New attempts, ended already if their end is in the group.
async fn insert_attempts(
    connection: &mut SqliteConnection,
    run_id: &str,
    started: &[&Net<'_>],
) -> Result<()> {
    insert_values(
        connection,
        (
            "INSERT INTO attempts (run_id, idx, attempt, status, started_at, finished_at, \
             exit_code, error, pid, pgid, proc_start) VALUES ",
            "",
        ),
        (11, ATTEMPTS_PER_STATEMENT),
        started,
        "record an attempt",
        |query, net| {
            let end = net.end.as_ref();
            query
                .bind(run_id)
                .bind(net.index)
                .bind(net.attempt)
                .bind(end.map_or("running", |end| attempt_status(end.status)))
                .bind(net.started_at)
                .bind(end.map(|end| end.at))
                .bind(end.and_then(|end| end.exit_code))
                .bind(end.and_then(|end| end.error))
                .bind(net.process.map(|process| process.0))
                .bind(net.process.map(|process| process.1))
                .bind(net.process.map(|process| process.2))
        },
    )
    .await
}

/// Attempts started before the group and ended in it.
async fn end_attempts(
    connection: &mut SqliteConnection,
    run_id: &str,
    ended: &[&Net<'_>],
) -> Result<()> {
    update_values(
        connection,
        (
            "attempts",
            "status = v.column3, finished_at = v.column4, exit_code = v.column5, error = v.column6, \
             pid = COALESCE(v.column7, attempts.pid), pgid = COALESCE(v.column8, attempts.pgid), \
             proc_start = COALESCE(v.column9, attempts.proc_start)",
            ATTEMPT_MATCHES,
        ),
        (9, ATTEMPTS_PER_STATEMENT),
        (run_id, ended),
        "finish an attempt",
        |query, net| {
            let end = net.end.as_ref();
            query
                .bind(net.index)
                .bind(net.attempt)
                .bind(end.map_or("success", |end| attempt_status(end.status)))
                .bind(end.map(|end| end.at))
                .bind(end.and_then(|end| end.exit_code))
                .bind(end.and_then(|end| end.error))
                .bind(net.process.map(|process| process.0))
                .bind(net.process.map(|process| process.1))
                .bind(net.process.map(|process| process.2))
        },
    )
    .await
}

/// The processes of attempts started before the group.
async fn record_processes(
    connection: &mut SqliteConnection,
    run_id: &str,
    running: &[&Net<'_>],
) -> Result<()> {
    update_values(
        connection,
        (
            "attempts",
            "pid = v.column3, pgid = v.column4, proc_start = v.column5",
            ATTEMPT_MATCHES,
        ),
        (5, ATTEMPTS_PER_STATEMENT),
        (run_id, running),
        "record a process",
        |query, net| {
            query
                .bind(net.index)
                .bind(net.attempt)
                .bind(net.process.map(|process| process.0))
                .bind(net.process.map(|process| process.1))
                .bind(net.process.map(|process| process.2))
        },
    )
    .await
}

/// The stages the group starts or ends: a start sets the attempt count and
/// start time and clears the end; an end sets the status, end time and error.
async fn set_stages(
    connection: &mut SqliteConnection,
    run_id: &str,
    stages: &[&Net<'_>],
) -> Result<()> {
    update_values(
        connection,
        (
            "stages",
            "status = v.column2, attempts = COALESCE(v.column3, stages.attempts), \
             started_at = COALESCE(v.column4, stages.started_at), finished_at = v.column5, \
             error = v.column6",
            "stages.idx = v.column1",
        ),
        (6, ATTEMPTS_PER_STATEMENT),
        (run_id, stages),
        "record a stage's state",
        |query, net| {
            let end = net.end.as_ref();
            query
                .bind(net.index)
                .bind(end.map_or("running", |end| end.status))
                .bind(net.started_at.map(|_| net.attempt))
                .bind(net.started_at)
                .bind(end.map(|end| end.at))
                .bind(end.and_then(|end| end.error))
        },
    )
    .await
}

/// An end replaces whatever outputs its stage had recorded.
async fn replace_artifacts(
    connection: &mut SqliteConnection,
    run_id: &str,
    rows: &Rows<'_, '_>,
) -> Result<()> {
    if rows.ends.is_empty() {
        return Ok(());
    }
    let mut sql = String::from("DELETE FROM artifacts WHERE run_id = ? AND idx IN (");
    for row in 0..rows.ends.len() {
        sql.push_str(if row > 0 { ", ?" } else { "?" });
    }
    sql.push(')');
    let query = rows.ends.iter().fold(
        sqlx::query::<Sqlite>(AssertSqlSafe(sql)).bind(run_id),
        |query, net| query.bind(net.index),
    );
    let done = query.execute(&mut *connection).await;
    done.map_err(query_error("replace artifacts"))?;
    insert_values(
        connection,
        (
            "INSERT INTO artifacts (run_id, idx, path, sha256, bytes) VALUES ",
            "",
        ),
        (5, ATTEMPTS_PER_STATEMENT),
        &rows.artifacts,
        "record an artifact",
        |query, (index, (path, sha256, bytes))| {
            query
                .bind(run_id)
                .bind(*index)
                .bind(path.as_str())
                .bind(sha256.as_str())
                .bind(*bytes)
        },
    )
    .await
}
