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
//! `VALUES` lists, PostgreSQL as one array per column (`sqlite/writes.rs`,
//! `postgres/writes.rs`).

use crate::model::Transition;

/// A unit's start in the group.
pub(crate) struct Start<'t> {
    pub(crate) index: i64,
    pub(crate) key: &'t str,
    pub(crate) at: i64,
}

/// A unit's end in the group.
pub(crate) struct End<'t> {
    pub(crate) index: i64,
    pub(crate) key: &'t str,
    pub(crate) status: &'t str,
    pub(crate) at: i64,
    pub(crate) exit_code: Option<i64>,
    pub(crate) error: Option<&'t str>,
    pub(crate) artifacts: String,
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
                artifacts: artifacts_json(artifacts),
            }),
            _ => {}
        }
    }

    /// Empties the group, returning its starts and ends.
    pub(crate) fn take(&mut self) -> (Vec<Start<'t>>, Vec<End<'t>>) {
        (
            std::mem::take(&mut self.starts),
            std::mem::take(&mut self.ends),
        )
    }
}

/// `[[path, sha256, bytes], …]` as JSON.
fn artifacts_json(artifacts: &[(String, String, i64)]) -> String {
    serde_json::to_string(artifacts).unwrap_or_else(|_| "[]".to_owned())
}
