//! A batch's attempt transitions (starts, process ids, ends) written as a
//! few multi-row statements instead of two or three statements each.
//!
//! A driver commits whatever arrived together, and each statement is a
//! round trip to the database (on SQLite, to sqlx's worker thread). A batch
//! of a dozen stages took some fifty statements; written per kind, it takes
//! five or six whatever its size.
//!
//! Transitions are gathered into a [`Group`] in batch order. A group holds
//! at most one attempt per stage, and each stage's start, process and end
//! in that order, so its rows touch different stages and their order does
//! not matter; a transition that does not fit (a second attempt of a stage,
//! or an end before its start) is written after the group. What a group
//! writes is the net effect of its transitions: a stage that starts and
//! ends in one batch is written once, as ended.

use crate::Result;
use crate::backend::query_error;
use crate::model::Transition;

/// Most stages one statement writes (the attempts insert binds 11 values a
/// row; SQLite allows 32 766 per statement).
const ROWS_PER_STATEMENT: usize = 200;

mod arrays;

/// How an attempt ended.
pub(crate) struct End<'t> {
    status: &'t str,
    at: i64,
    exit_code: Option<i64>,
    error: Option<&'t str>,
    artifacts: &'t [(String, String, i64)],
}

/// The net effect of one attempt's transitions in a group.
pub(crate) struct Net<'t> {
    index: i64,
    attempt: i64,
    started_at: Option<i64>,
    process: Option<(i64, i64, i64)>,
    end: Option<End<'t>>,
}

/// Attempt transitions gathered for writing together.
#[derive(Default)]
pub(crate) struct Group<'t> {
    nets: Vec<Net<'t>>,
}

impl<'t> Group<'t> {
    /// Whether `transition` is an attempt transition, which then belongs to
    /// the group (see [`Group::fits`]).
    pub(crate) fn kind_of(transition: &Transition) -> bool {
        matches!(
            transition,
            Transition::AttemptStarted { .. }
                | Transition::ProcessStarted { .. }
                | Transition::AttemptFinished { .. }
        )
    }

    /// Whether the attempt transition `transition` can join the group
    /// without being reordered before another of its stage.
    pub(crate) fn fits(&self, transition: &Transition) -> bool {
        let (index, attempt) = match transition {
            Transition::AttemptStarted { index, attempt, .. }
            | Transition::ProcessStarted { index, attempt, .. }
            | Transition::AttemptFinished { index, attempt, .. } => (*index, *attempt),
            _ => return false,
        };
        let Some(net) = self.nets.iter().find(|net| net.index == index) else {
            return true;
        };
        net.attempt == attempt
            && net.end.is_none()
            && match transition {
                Transition::ProcessStarted { .. } => net.process.is_none(),
                Transition::AttemptFinished { .. } => true,
                _ => false,
            }
    }

    /// Adds an attempt transition that [`fits`](Group::fits).
    pub(crate) fn add(&mut self, transition: &'t Transition) {
        let (index, attempt) = match transition {
            Transition::AttemptStarted { index, attempt, .. }
            | Transition::ProcessStarted { index, attempt, .. }
            | Transition::AttemptFinished { index, attempt, .. } => (*index, *attempt),
            _ => return,
        };
        let position = match self.nets.iter().position(|net| net.index == index) {
            Some(position) => position,
            None => {
                self.nets.push(Net {
                    index,
                    attempt,
                    started_at: None,
                    process: None,
                    end: None,
                });
                self.nets.len() - 1
            }
        };
        let net = &mut self.nets[position];
        match transition {
            Transition::AttemptStarted { at, .. } => net.started_at = Some(*at),
            Transition::ProcessStarted {
                pid,
                pgid,
                proc_start,
                ..
            } => net.process = Some((*pid, *pgid, *proc_start)),
            Transition::AttemptFinished {
                status,
                at,
                exit_code,
                error,
                artifacts,
                ..
            } => {
                net.end = Some(End {
                    status,
                    at: *at,
                    exit_code: *exit_code,
                    error: error.as_deref(),
                    artifacts,
                });
            }
            _ => {}
        }
    }

    /// Writes the group and empties it.
    pub(crate) async fn flush<DB: crate::bulk::Bulk>(
        &mut self,
        tx: &mut sqlx::Transaction<'_, DB>,
        run_id: &str,
    ) -> Result<()> {
        let nets = std::mem::take(&mut self.nets);
        if nets.is_empty() {
            return Ok(());
        }
        DB::write_attempts(tx, run_id, &nets).await
    }
}

/// Writes `nets` as multi-row `VALUES` statements, at most
/// [`ROWS_PER_STATEMENT`] rows each (SQLite's form, see `bulk.rs`).
pub(crate) async fn write_values(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    run_id: &str,
    nets: &[Net<'_>],
) -> Result<()> {
    for chunk in nets.chunks(ROWS_PER_STATEMENT) {
        write(tx, run_id, chunk).await?;
    }
    Ok(())
}

/// Writes `nets` with one array per column (PostgreSQL's form, see
/// `bulk.rs`).
pub(crate) async fn write_arrays(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    run_id: &str,
    nets: &[Net<'_>],
) -> Result<()> {
    arrays::write(tx, run_id, nets).await
}

/// How an `UPDATE attempts … FROM (VALUES …)` finds its rows.
const ATTEMPT_MATCHES: &str = "attempts.idx = v.column1 AND attempts.attempt = v.column2";

/// The attempt's status for the stage status it ended with.
fn attempt_status(stage_status: &str) -> &'static str {
    if stage_status == "failed" {
        "failed"
    } else {
        "success"
    }
}

/// Which of a group's attempts each statement writes, in either form.
struct Rows<'g, 't> {
    /// New attempts, ended already if their end is in the group.
    started: Vec<&'g Net<'t>>,
    /// Attempts started before the group and ended in it.
    ended: Vec<&'g Net<'t>>,
    /// Attempts started before the group whose process the group records.
    running: Vec<&'g Net<'t>>,
    /// Stages whose state the group changes (a start or an end).
    stages: Vec<&'g Net<'t>>,
    /// The ends, which replace whatever outputs their stage had recorded.
    ends: Vec<&'g Net<'t>>,
    /// The outputs of those ends, with their stage.
    artifacts: Vec<(i64, &'t (String, String, i64))>,
}

impl<'g, 't> Rows<'g, 't> {
    fn of(nets: &'g [Net<'t>]) -> Rows<'g, 't> {
        let select = |keep: fn(&Net<'t>) -> bool| nets.iter().filter(|net| keep(net)).collect();
        let ends: Vec<&Net<'t>> = select(|net| net.end.is_some());
        let artifacts = ends
            .iter()
            .flat_map(|net| {
                let list = net.end.as_ref().map_or(&[][..], |end| end.artifacts);
                list.iter().map(move |artifact| (net.index, artifact))
            })
            .collect();
        Rows {
            started: select(|net| net.started_at.is_some()),
            ended: select(|net| net.started_at.is_none() && net.end.is_some()),
            running: select(|net| net.started_at.is_none() && net.end.is_none()),
            stages: select(|net| net.started_at.is_some() || net.end.is_some()),
            ends,
            artifacts,
        }
    }
}

async fn write(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    run_id: &str,
    nets: &[Net<'_>],
) -> Result<()> {
    let rows = Rows::of(nets);
    let started = &rows.started;
    if !started.is_empty() {
        // New attempts, ended already if their end is in the batch.
        let mut sql = String::from(
            "INSERT INTO attempts (run_id, idx, attempt, status, started_at, finished_at, exit_code, error, pid, pgid, proc_start) VALUES ",
        );
        Placeholders::new(false).rows(&mut sql, started.len(), 11);
        let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sql));
        for net in started {
            let end = net.end.as_ref();
            query = query
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
                .bind(net.process.map(|process| process.2));
        }
        query
            .execute(&mut **tx)
            .await
            .map_err(query_error("record an attempt"))?;
    }
    let ended = &rows.ended;
    if !ended.is_empty() {
        let sql = Placeholders::update_from_values(
            false,
            "attempts",
            "status = v.column3, finished_at = v.column4, exit_code = v.column5, error = v.column6, \
             pid = COALESCE(v.column7, attempts.pid), pgid = COALESCE(v.column8, attempts.pgid), \
             proc_start = COALESCE(v.column9, attempts.proc_start)",
            ended.len(),
            9,
            ATTEMPT_MATCHES,
        );
        let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sql));
        for net in ended {
            let end = net.end.as_ref();
            query = query
                .bind(net.index)
                .bind(net.attempt)
                .bind(end.map_or("success", |end| attempt_status(end.status)))
                .bind(end.map(|end| end.at))
                .bind(end.and_then(|end| end.exit_code))
                .bind(end.and_then(|end| end.error))
                .bind(net.process.map(|process| process.0))
                .bind(net.process.map(|process| process.1))
                .bind(net.process.map(|process| process.2));
        }
        query = query.bind(run_id);
        query
            .execute(&mut **tx)
            .await
            .map_err(query_error("finish an attempt"))?;
    }
    let running = &rows.running;
    if !running.is_empty() {
        let sql = Placeholders::update_from_values(
            false,
            "attempts",
            "pid = v.column3, pgid = v.column4, proc_start = v.column5",
            running.len(),
            5,
            ATTEMPT_MATCHES,
        );
        let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sql));
        for net in running {
            query = query
                .bind(net.index)
                .bind(net.attempt)
                .bind(net.process.map(|process| process.0))
                .bind(net.process.map(|process| process.1))
                .bind(net.process.map(|process| process.2));
        }
        query = query.bind(run_id);
        query
            .execute(&mut **tx)
            .await
            .map_err(query_error("record a process"))?;
    }
    let stages = &rows.stages;
    if !stages.is_empty() {
        // A start sets the attempt count and start time and clears the
        // end; an end sets the status, end time and error.
        let sql = Placeholders::update_from_values(
            false,
            "stages",
            "status = v.column2, attempts = COALESCE(v.column3, stages.attempts), \
             started_at = COALESCE(v.column4, stages.started_at), finished_at = v.column5, error = v.column6",
            stages.len(),
            6,
            "stages.idx = v.column1",
        );
        let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sql));
        for net in stages {
            let end = net.end.as_ref();
            query = query
                .bind(net.index)
                .bind(end.map_or("running", |end| end.status))
                .bind(net.started_at.map(|_| net.attempt))
                .bind(net.started_at)
                .bind(end.map(|end| end.at))
                .bind(end.and_then(|end| end.error));
        }
        query = query.bind(run_id);
        query
            .execute(&mut **tx)
            .await
            .map_err(query_error("record a stage's state"))?;
    }
    let ends = &rows.ends;
    if !ends.is_empty() {
        // An end replaces whatever outputs its stage had recorded.
        let mut marks = Placeholders::new(false);
        let mut sql = String::from("DELETE FROM artifacts WHERE run_id = ");
        marks.push(&mut sql);
        sql.push_str(" AND idx IN (");
        for row in 0..ends.len() {
            if row > 0 {
                sql.push_str(", ");
            }
            marks.push(&mut sql);
        }
        sql.push(')');
        let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sql)).bind(run_id);
        for net in ends {
            query = query.bind(net.index);
        }
        query
            .execute(&mut **tx)
            .await
            .map_err(query_error("replace artifacts"))?;
        let artifacts = &rows.artifacts;
        for chunk in artifacts.chunks(ROWS_PER_STATEMENT) {
            let mut sql =
                String::from("INSERT INTO artifacts (run_id, idx, path, sha256, bytes) VALUES ");
            Placeholders::new(false).rows(&mut sql, chunk.len(), 5);
            let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sql));
            for (index, (path, sha256, bytes)) in chunk {
                query = query
                    .bind(run_id)
                    .bind(*index)
                    .bind(path.as_str())
                    .bind(sha256.as_str())
                    .bind(*bytes);
            }
            query
                .execute(&mut **tx)
                .await
                .map_err(query_error("record an artifact"))?;
        }
    }
    Ok(())
}

/// A statement's placeholders, written in the order they appear in its
/// text and bound in that order: `$1, $2, …` on PostgreSQL, `?` on SQLite.
///
/// SQLite takes `$N` for a name and looks each one up among the names
/// before it, when it parses the statement and again when sqlx binds it:
/// for a statement of a few thousand values, that lookup cost more than
/// everything else the commit did. A `?` is only counted.
pub(crate) struct Placeholders {
    numbered: bool,
    next: usize,
}

impl Placeholders {
    /// Numbered (`$N`, PostgreSQL) or anonymous (`?`, SQLite).
    pub(crate) fn new(numbered: bool) -> Placeholders {
        Placeholders { numbered, next: 1 }
    }

    /// Appends the next placeholder.
    pub(crate) fn push(&mut self, sql: &mut String) {
        if self.numbered {
            use std::fmt::Write;
            let _ = write!(sql, "${}", self.next);
        } else {
            sql.push('?');
        }
        self.next += 1;
    }

    /// `UPDATE table SET set FROM (VALUES rows) AS v WHERE table.run_id = ?
    /// AND matches`: `count` rows of `columns` values, then the run. The
    /// values are `v.column1`, `v.column2`, … in `set` and `matches`.
    pub(crate) fn update_from_values(
        numbered: bool,
        table: &str,
        set: &str,
        count: usize,
        columns: usize,
        matches: &str,
    ) -> String {
        let mut marks = Placeholders::new(numbered);
        let mut sql = format!("UPDATE {table} SET {set} FROM (VALUES ");
        marks.rows(&mut sql, count, columns);
        sql.push_str(") AS v WHERE ");
        sql.push_str(table);
        sql.push_str(".run_id = ");
        marks.push(&mut sql);
        sql.push_str(" AND ");
        sql.push_str(matches);
        sql
    }

    /// Appends `count` rows of `columns` placeholders: `(?, ?), (?, ?)`.
    /// Only placeholders are spliced into the SQL; every value is bound.
    pub(crate) fn rows(&mut self, sql: &mut String, count: usize, columns: usize) {
        self.rows_with(sql, count, columns, "");
    }

    /// [`rows`](Placeholders::rows), each row ending in the constant SQL
    /// `tail`: `(?, ?, 'pending')`.
    pub(crate) fn rows_with(&mut self, sql: &mut String, count: usize, columns: usize, tail: &str) {
        sql.reserve(count * (columns * 6 + tail.len()));
        for row in 0..count {
            if row > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for column in 0..columns {
                if column > 0 {
                    sql.push_str(", ");
                }
                self.push(sql);
            }
            sql.push_str(tail);
            sql.push(')');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Placeholders;

    #[test]
    fn placeholders_follow_the_text_in_either_style() {
        let mut sql = String::new();
        let mut numbered = Placeholders::new(true);
        numbered.rows(&mut sql, 2, 2);
        sql.push_str(" WHERE ");
        numbered.push(&mut sql);
        assert_eq!(sql, "($1, $2), ($3, $4) WHERE $5");
        let mut sql = String::new();
        Placeholders::new(false).rows(&mut sql, 2, 3);
        assert_eq!(sql, "(?, ?, ?), (?, ?, ?)");
        assert_eq!(
            Placeholders::update_from_values(true, "t", "a = v.column2", 2, 2, "t.k = v.column1"),
            "UPDATE t SET a = v.column2 FROM (VALUES ($1, $2), ($3, $4)) AS v WHERE t.run_id = $5 AND t.k = v.column1"
        );
    }
}
