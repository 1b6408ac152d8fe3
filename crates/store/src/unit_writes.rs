//! A batch's unit starts and ends (fan-out children, validation steps)
//! written as two multi-row statements instead of one statement each.
//!
//! A fan-out of many short children commits a few dozen of them at a time;
//! one statement per transition made the store the largest cost of such a
//! run after the children themselves. As for attempts (see `attempts.rs`),
//! a group holds at most one start and one end per unit, the start first,
//! and a transition that does not fit is written after the group. Starts
//! are written before ends, so a unit that starts and ends in one group is
//! counted and then ended, as if written one by one. SQLite takes them as
//! `VALUES` lists, PostgreSQL as one array per column (see `bulk.rs`).

use crate::Result;
use crate::attempts::Placeholders;
use crate::backend::query_error;
use crate::model::Transition;

/// Most units one statement writes (an end binds 7 values a row).
const ROWS_PER_STATEMENT: usize = 500;

/// How an `UPDATE units … FROM (VALUES …)` finds its rows.
const UNIT_MATCHES: &str = "units.idx = v.column1 AND units.unit_key = v.column2";

/// A unit's start in the group.
pub(crate) struct Start<'t> {
    index: i64,
    key: &'t str,
    at: i64,
}

/// A unit's end in the group.
pub(crate) struct End<'t> {
    index: i64,
    key: &'t str,
    status: &'t str,
    at: i64,
    exit_code: Option<i64>,
    error: Option<&'t str>,
    artifacts: String,
}

/// Unit transitions gathered for writing together.
#[derive(Default)]
pub(crate) struct Group<'t> {
    starts: Vec<Start<'t>>,
    ends: Vec<End<'t>>,
}

impl<'t> Group<'t> {
    /// Whether `transition` is a unit's start or end.
    pub(crate) fn kind_of(transition: &Transition) -> bool {
        matches!(
            transition,
            Transition::UnitStarted { .. } | Transition::UnitFinished { .. }
        )
    }

    /// Whether the unit transition `transition` can join the group without
    /// being reordered before another of its unit.
    pub(crate) fn fits(&self, transition: &Transition) -> bool {
        let ended = |index: i64, key: &str| {
            self.ends
                .iter()
                .any(|end| end.index == index && end.key == key)
        };
        match transition {
            Transition::UnitStarted { index, key, .. } => {
                !ended(*index, key)
                    && !self
                        .starts
                        .iter()
                        .any(|start| start.index == *index && start.key == key)
            }
            Transition::UnitFinished { index, key, .. } => !ended(*index, key),
            _ => false,
        }
    }

    /// Adds a unit transition that [`fits`](Group::fits).
    pub(crate) fn add(&mut self, transition: &'t Transition) {
        match transition {
            Transition::UnitStarted { index, key, at } => self.starts.push(Start {
                index: *index,
                key,
                at: *at,
            }),
            Transition::UnitFinished {
                index,
                key,
                status,
                at,
                exit_code,
                error,
                artifacts,
            } => self.ends.push(End {
                index: *index,
                key,
                status,
                at: *at,
                exit_code: *exit_code,
                error: error.as_deref(),
                artifacts: crate::units::artifacts_json(artifacts),
            }),
            _ => {}
        }
    }

    /// Writes the group and empties it.
    pub(crate) async fn flush<DB: crate::bulk::Bulk>(
        &mut self,
        tx: &mut sqlx::Transaction<'_, DB>,
        run_id: &str,
    ) -> Result<()> {
        let starts = std::mem::take(&mut self.starts);
        let ends = std::mem::take(&mut self.ends);
        if starts.is_empty() && ends.is_empty() {
            return Ok(());
        }
        DB::write_units(tx, run_id, &starts, &ends).await
    }
}

/// Writes a group's unit starts, then its ends, as multi-row `VALUES`
/// statements (SQLite's form, see `bulk.rs`).
pub(crate) async fn write_values(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    run_id: &str,
    starts: &[Start<'_>],
    ends: &[End<'_>],
) -> Result<()> {
    for chunk in starts.chunks(ROWS_PER_STATEMENT) {
        let sql = Placeholders::update_from_values(
            false,
            "units",
            "status = 'running', attempts = units.attempts + 1, started_at = v.column3, \
             finished_at = NULL, exit_code = NULL, error = NULL",
            chunk.len(),
            3,
            UNIT_MATCHES,
        );
        let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sql));
        for start in chunk {
            query = query.bind(start.index).bind(start.key).bind(start.at);
        }
        query
            .bind(run_id)
            .execute(&mut **tx)
            .await
            .map_err(query_error("start units"))?;
    }
    for chunk in ends.chunks(ROWS_PER_STATEMENT) {
        let sql = Placeholders::update_from_values(
            false,
            "units",
            "status = v.column3, finished_at = v.column4, exit_code = v.column5, \
             error = v.column6, artifacts = v.column7",
            chunk.len(),
            7,
            UNIT_MATCHES,
        );
        let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sql));
        for end in chunk {
            query = query
                .bind(end.index)
                .bind(end.key)
                .bind(end.status)
                .bind(end.at)
                .bind(end.exit_code)
                .bind(end.error)
                .bind(end.artifacts.as_str());
        }
        query
            .bind(run_id)
            .execute(&mut **tx)
            .await
            .map_err(query_error("finish units"))?;
    }
    Ok(())
}

/// Writes a group's unit starts, then its ends, with one array per column
/// (PostgreSQL's form, see `bulk.rs`).
pub(crate) async fn write_arrays(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    run_id: &str,
    starts: &[Start<'_>],
    ends: &[End<'_>],
) -> Result<()> {
    if !starts.is_empty() {
        sqlx::query(
            "UPDATE units SET status = 'running', attempts = units.attempts + 1, started_at = v.started_at, \
             finished_at = NULL, exit_code = NULL, error = NULL \
             FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::BIGINT[]) AS v(idx, unit_key, started_at) \
             WHERE units.run_id = $1 AND units.idx = v.idx AND units.unit_key = v.unit_key",
        )
        .bind(run_id)
        .bind(starts.iter().map(|start| start.index).collect::<Vec<_>>())
        .bind(starts.iter().map(|start| start.key).collect::<Vec<_>>())
        .bind(starts.iter().map(|start| start.at).collect::<Vec<_>>())
        .execute(&mut **tx)
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
        .bind(ends.iter().map(|end| end.index).collect::<Vec<_>>())
        .bind(ends.iter().map(|end| end.key).collect::<Vec<_>>())
        .bind(ends.iter().map(|end| end.status).collect::<Vec<_>>())
        .bind(ends.iter().map(|end| end.at).collect::<Vec<_>>())
        .bind(ends.iter().map(|end| end.exit_code).collect::<Vec<_>>())
        .bind(ends.iter().map(|end| end.error).collect::<Vec<_>>())
        .bind(ends.iter().map(|end| end.artifacts.as_str()).collect::<Vec<_>>())
        .execute(&mut **tx)
        .await
        .map_err(query_error("finish units"))?;
    }
    Ok(())
}
