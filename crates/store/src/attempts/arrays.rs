//! A group's attempt writes on PostgreSQL: each statement binds one array
//! per column and unnests it, so its text is the same whatever the number
//! of rows, and the server parses it once per connection (see `bulk.rs`).
//! The statements and their net effect are those of the `VALUES` form in
//! `attempts.rs`.

use sqlx::{Postgres, Transaction};

use super::{End, Net, Rows, attempt_status};
use crate::Result;
use crate::backend::query_error;

pub(super) async fn write(
    tx: &mut Transaction<'_, Postgres>,
    run_id: &str,
    nets: &[Net<'_>],
) -> Result<()> {
    let rows = Rows::of(nets);
    let started = &rows.started;
    if !started.is_empty() {
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
        .execute(&mut **tx)
        .await
        .map_err(query_error("record an attempt"))?;
    }
    let ended = &rows.ended;
    if !ended.is_empty() {
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
        .execute(&mut **tx)
        .await
        .map_err(query_error("finish an attempt"))?;
    }
    let running = &rows.running;
    if !running.is_empty() {
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
        .execute(&mut **tx)
        .await
        .map_err(query_error("record a process"))?;
    }
    let stages = &rows.stages;
    if !stages.is_empty() {
        // A start sets the attempt count and start time and clears the
        // end; an end sets the status, end time and error.
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
        .execute(&mut **tx)
        .await
        .map_err(query_error("record a stage's state"))?;
    }
    let ends = &rows.ends;
    if !ends.is_empty() {
        // An end replaces whatever outputs its stage had recorded.
        sqlx::query("DELETE FROM artifacts WHERE run_id = $1 AND idx = ANY($2::BIGINT[])")
            .bind(run_id)
            .bind(column(ends, |net| net.index))
            .execute(&mut **tx)
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
            .execute(&mut **tx)
            .await
            .map_err(query_error("record an artifact"))?;
        }
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
