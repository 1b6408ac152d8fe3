//! A batch's unit starts and ends (fan-out children, validation steps)
//! written as two multi-row statements instead of one statement each.
//!
//! A fan-out of many short children commits a few dozen of them at a time;
//! one statement per transition made the store the largest cost of such a
//! run after the children themselves. As for attempts (see `attempts.rs`),
//! a group holds at most one start and one end per unit, the start first,
//! and a transition that does not fit is written after the group. Starts
//! are written before ends, so a unit that starts and ends in one group is
//! counted and then ended, as if written one by one (`batch.rs` has how
//! each database writes them).

use crate::batch::{Rows, Shape, Statement};
use crate::model::Transition;

/// How an `UPDATE units … FROM (VALUES …)` finds its rows on SQLite.
const UNIT_MATCHES: &str = "units.idx = v.column1 AND units.unit_key = v.column2";

/// Unit starts: each counts an attempt and clears the last end.
const START_UNITS: Statement = Statement {
    sqlite: Shape::Update {
        table: "units",
        set: "status = 'running', attempts = units.attempts + 1, started_at = v.column3, \
              finished_at = NULL, exit_code = NULL, error = NULL",
        matches: UNIT_MATCHES,
    },
    postgres: "UPDATE units SET status = 'running', attempts = units.attempts + 1, \
               started_at = v.started_at, finished_at = NULL, exit_code = NULL, error = NULL \
               FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::BIGINT[]) AS v(idx, unit_key, started_at) \
               WHERE units.run_id = $1 AND units.idx = v.idx AND units.unit_key = v.unit_key",
    what: "start units",
};

/// Unit ends.
const END_UNITS: Statement = Statement {
    sqlite: Shape::Update {
        table: "units",
        set: "status = v.column3, finished_at = v.column4, exit_code = v.column5, \
              error = v.column6, artifacts = v.column7",
        matches: UNIT_MATCHES,
    },
    postgres: "UPDATE units SET status = v.status, finished_at = v.finished_at, \
               exit_code = v.exit_code, error = v.error, artifacts = v.artifacts \
               FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], \
               $7::TEXT[], $8::TEXT[]) AS v(idx, unit_key, status, finished_at, exit_code, error, artifacts) \
               WHERE units.run_id = $1 AND units.idx = v.idx AND units.unit_key = v.unit_key",
    what: "finish units",
};

/// A unit's start in the group.
struct Start<'t> {
    index: i64,
    key: &'t str,
    at: i64,
}

/// A unit's end in the group.
struct End<'t> {
    index: i64,
    key: &'t str,
    status: &'t str,
    at: i64,
    exit_code: Option<i64>,
    error: Option<&'t str>,
    /// `[[path, sha256, bytes], …]` as JSON.
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
                artifacts: serde_json::to_string(artifacts).unwrap_or_else(|_| "[]".to_owned()),
            }),
            _ => {}
        }
    }

    /// Whether the group holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.starts.is_empty() && self.ends.is_empty()
    }

    /// The statements that write the group, starts first, with their rows.
    pub(crate) fn statements(&self) -> [(&'static Statement, Rows<'_>); 2] {
        let starts = self
            .starts
            .iter()
            .map(|start| [start.index.into(), start.key.into(), start.at.into()]);
        let ends = self.ends.iter().map(|end| {
            [
                end.index.into(),
                end.key.into(),
                end.status.into(),
                end.at.into(),
                end.exit_code.into(),
                end.error.into(),
                end.artifacts.as_str().into(),
            ]
        });
        [
            (&START_UNITS, starts.collect()),
            (&END_UNITS, ends.collect()),
        ]
    }

    /// Empties the group.
    pub(crate) fn clear(&mut self) {
        self.starts.clear();
        self.ends.clear();
    }
}
