//! Statements that write many rows at once, as PostgreSQL takes them best.
//!
//! PostgreSQL parses and plans every statement text it has not prepared on
//! the connection before, and a `VALUES` list of a new length is a new
//! text: a drive's commits, each with its own number of rows, had the
//! server parse about one statement for every two it ran. Here the rows go
//! as one array per column, unnested by the server, so each kind of write
//! is one statement text, prepared once per connection whatever the
//! batch's size.

use sqlx::{AssertSqlSafe, PgConnection};

use crate::Result;
use crate::attempts::{End, Net, Rows, attempt_status};
use crate::error::query_error;
use crate::model::NewUnit;
use crate::unit_writes;

/// Most units one statement of a plan writes (8 values each).
const UNITS_PER_STATEMENT: usize = 500;

/// Appends `events` (time, kind, detail) to the run's event log, in order.
pub(crate) async fn insert_events(
    connection: &mut PgConnection,
    run_id: &str,
    events: &[(i64, String, String)],
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    // `ORDER BY n`: the log's sequence numbers follow the batch's order.
    sqlx::query(
        "INSERT INTO events (run_id, at, kind, detail) \
         SELECT $1, e.at, e.kind, e.detail \
         FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[]) WITH ORDINALITY AS e(at, kind, detail, n) \
         ORDER BY e.n",
    )
    .bind(run_id)
    .bind(column(events, |event| event.0))
    .bind(column(events, |event| event.1.as_str()))
    .bind(column(events, |event| event.2.as_str()))
    .execute(&mut *connection)
    .await
    .map_err(query_error("log events"))?;
    Ok(())
}

/// Inserts a stage's planned units as `VALUES` lists; a key the stage has
/// already is left as it is.
pub(crate) async fn insert_units(
    connection: &mut PgConnection,
    run_id: &str,
    index: i64,
    units: &[NewUnit],
) -> Result<()> {
    for chunk in units.chunks(UNITS_PER_STATEMENT) {
        let sql = crate::placeholders::insert_units(true, chunk.len());
        let query = chunk
            .iter()
            .fold(sqlx::query(AssertSqlSafe(sql)), |query, unit| {
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
    connection: &mut PgConnection,
    run_id: &str,
    starts: &[unit_writes::Start<'_>],
    ends: &[unit_writes::End<'_>],
) -> Result<()> {
    if !starts.is_empty() {
        sqlx::query(
            "UPDATE units SET status = 'running', attempts = units.attempts + 1, started_at = v.started_at, \
             finished_at = NULL, exit_code = NULL, error = NULL \
             FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::BIGINT[]) AS v(idx, unit_key, started_at) \
             WHERE units.run_id = $1 AND units.idx = v.idx AND units.unit_key = v.unit_key",
        )
        .bind(run_id)
        .bind(column(starts, |start| start.index))
        .bind(column(starts, |start| start.key))
        .bind(column(starts, |start| start.at))
        .execute(&mut *connection)
        .await
        .map_err(query_error("start units"))?;
    }
    if !ends.is_empty() {
        sqlx::query(
            "UPDATE units SET status = v.status, finished_at = v.finished_at, exit_code = v.exit_code, \
             error = v.error, artifacts = v.artifacts \
             FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], $7::TEXT[], $8::TEXT[]) \
             AS v(idx, unit_key, status, finished_at, exit_code, error, artifacts) \
             WHERE units.run_id = $1 AND units.idx = v.idx AND units.unit_key = v.unit_key",
        )
        .bind(run_id)
        .bind(column(ends, |end| end.index))
        .bind(column(ends, |end| end.key))
        .bind(column(ends, |end| end.status))
        .bind(column(ends, |end| end.at))
        .bind(column(ends, |end| end.exit_code))
        .bind(column(ends, |end| end.error))
        .bind(column(ends, |end| end.artifacts.as_str()))
        .execute(&mut *connection)
        .await
        .map_err(query_error("finish units"))?;
    }
    Ok(())
}

/// Writes a group's attempt starts, process ids and ends (see
/// `attempts.rs`); the statements and their net effect are those of the
/// `VALUES` form SQLite takes.
pub(crate) async fn write_attempts(
    connection: &mut PgConnection,
    run_id: &str,
    nets: &[Net<'_>],
) -> Result<()> {
    let rows = Rows::of(nets);
    insert_attempts(connection, run_id, &rows.started).await?;
    end_attempts(connection, run_id, &rows.ended).await?;
    record_processes(connection, run_id, &rows.running).await?;
    set_stages(connection, run_id, &rows.stages).await?;
    replace_artifacts(connection, run_id, &rows).await
}

/// New attempts, ended already if their end is in the group.
async fn insert_attempts(
    connection: &mut PgConnection,
    run_id: &str,
    started: &[&Net<'_>],
) -> Result<()> {
    if started.is_empty() {
        return Ok(());
    }
    // New attempts, ended already if their end is in the batch.
    sqlx::query(
        "INSERT INTO attempts (run_id, idx, attempt, status, started_at, finished_at, exit_code, error, pid, pgid, proc_start) \
         SELECT $1, a.* FROM UNNEST($2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], \
         $7::BIGINT[], $8::TEXT[], $9::BIGINT[], $10::BIGINT[], $11::BIGINT[]) AS a",
    )
    .bind(run_id)
    .bind(column(started, |net| net.index))
    .bind(column(started, |net| net.attempt))
    .bind(column(started, |net| {
        end_of(net).map_or("running", |end| attempt_status(end.status))
    }))
    .bind(column(started, |net| net.started_at))
    .bind(column(started, |net| end_of(net).map(|end| end.at)))
    .bind(column(started, |net| end_of(net).and_then(|end| end.exit_code)))
    .bind(column(started, |net| end_of(net).and_then(|end| end.error)))
    .bind(column(started, |net| net.process.map(|process| process.0)))
    .bind(column(started, |net| net.process.map(|process| process.1)))
    .bind(column(started, |net| net.process.map(|process| process.2)))
    .execute(&mut *connection)
    .await
    .map_err(query_error("record an attempt"))?;
    Ok(())
}

/// Attempts started before the group and ended in it.
async fn end_attempts(
    connection: &mut PgConnection,
    run_id: &str,
    ended: &[&Net<'_>],
) -> Result<()> {
    if ended.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE attempts SET status = v.status, finished_at = v.finished_at, exit_code = v.exit_code, \
         error = v.error, pid = COALESCE(v.pid, attempts.pid), pgid = COALESCE(v.pgid, attempts.pgid), \
         proc_start = COALESCE(v.proc_start, attempts.proc_start) \
         FROM UNNEST($2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], $7::TEXT[], \
         $8::BIGINT[], $9::BIGINT[], $10::BIGINT[]) \
         AS v(idx, attempt, status, finished_at, exit_code, error, pid, pgid, proc_start) \
         WHERE attempts.run_id = $1 AND attempts.idx = v.idx AND attempts.attempt = v.attempt",
    )
    .bind(run_id)
    .bind(column(ended, |net| net.index))
    .bind(column(ended, |net| net.attempt))
    .bind(column(ended, |net| {
        end_of(net).map_or("success", |end| attempt_status(end.status))
    }))
    .bind(column(ended, |net| end_of(net).map(|end| end.at)))
    .bind(column(ended, |net| end_of(net).and_then(|end| end.exit_code)))
    .bind(column(ended, |net| end_of(net).and_then(|end| end.error)))
    .bind(column(ended, |net| net.process.map(|process| process.0)))
    .bind(column(ended, |net| net.process.map(|process| process.1)))
    .bind(column(ended, |net| net.process.map(|process| process.2)))
    .execute(&mut *connection)
    .await
    .map_err(query_error("finish an attempt"))?;
    Ok(())
}

/// The processes of attempts started before the group.
async fn record_processes(
    connection: &mut PgConnection,
    run_id: &str,
    running: &[&Net<'_>],
) -> Result<()> {
    if running.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE attempts SET pid = v.pid, pgid = v.pgid, proc_start = v.proc_start \
         FROM UNNEST($2::BIGINT[], $3::BIGINT[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[]) \
         AS v(idx, attempt, pid, pgid, proc_start) \
         WHERE attempts.run_id = $1 AND attempts.idx = v.idx AND attempts.attempt = v.attempt",
    )
    .bind(run_id)
    .bind(column(running, |net| net.index))
    .bind(column(running, |net| net.attempt))
    .bind(column(running, |net| net.process.map(|process| process.0)))
    .bind(column(running, |net| net.process.map(|process| process.1)))
    .bind(column(running, |net| net.process.map(|process| process.2)))
    .execute(&mut *connection)
    .await
    .map_err(query_error("record a process"))?;
    Ok(())
}

/// The stages the group starts or ends: a start sets the attempt count and
/// start time and clears the end; an end sets the status, end time and error.
async fn set_stages(
    connection: &mut PgConnection,
    run_id: &str,
    stages: &[&Net<'_>],
) -> Result<()> {
    if stages.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE stages SET status = v.status, attempts = COALESCE(v.attempts, stages.attempts), \
         started_at = COALESCE(v.started_at, stages.started_at), finished_at = v.finished_at, error = v.error \
         FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[], $7::TEXT[]) \
         AS v(idx, status, attempts, started_at, finished_at, error) \
         WHERE stages.run_id = $1 AND stages.idx = v.idx",
    )
    .bind(run_id)
    .bind(column(stages, |net| net.index))
    .bind(column(stages, |net| end_of(net).map_or("running", |end| end.status)))
    .bind(column(stages, |net| net.started_at.map(|_| net.attempt)))
    .bind(column(stages, |net| net.started_at))
    .bind(column(stages, |net| end_of(net).map(|end| end.at)))
    .bind(column(stages, |net| end_of(net).and_then(|end| end.error)))
    .execute(&mut *connection)
    .await
    .map_err(query_error("record a stage's state"))?;
    Ok(())
}

/// An end replaces whatever outputs its stage had recorded.
async fn replace_artifacts(
    connection: &mut PgConnection,
    run_id: &str,
    rows: &Rows<'_, '_>,
) -> Result<()> {
    let ends = &rows.ends;
    if ends.is_empty() {
        return Ok(());
    }
    sqlx::query("DELETE FROM artifacts WHERE run_id = $1 AND idx = ANY($2::BIGINT[])")
        .bind(run_id)
        .bind(column(ends, |net| net.index))
        .execute(&mut *connection)
        .await
        .map_err(query_error("replace artifacts"))?;
    let artifacts = &rows.artifacts;
    if !artifacts.is_empty() {
        sqlx::query(
            "INSERT INTO artifacts (run_id, idx, path, sha256, bytes) \
             SELECT $1, a.* FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[]) AS a",
        )
        .bind(run_id)
        .bind(column(artifacts, |(index, _)| *index))
        .bind(column(artifacts, |(_, (path, _, _))| path.as_str()))
        .bind(column(artifacts, |(_, (_, sha256, _))| sha256.as_str()))
        .bind(column(artifacts, |(_, (_, _, bytes))| *bytes))
        .execute(&mut *connection)
        .await
        .map_err(query_error("record an artifact"))?;
    }
    Ok(())
}

/// How the attempt ended, when its end is in the group.
fn end_of<'a, 'n>(net: &'a Net<'n>) -> Option<&'a End<'n>> {
    net.end.as_ref()
}

/// One column of `rows`, to bind as an array.
fn column<'r, R, T>(rows: &'r [R], value: impl Fn(&'r R) -> T) -> Vec<T> {
    rows.iter().map(value).collect()
}
