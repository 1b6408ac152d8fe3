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
//! ends in one batch is written once, as ended. [`Rows`] sorts the group
//! into the statements each database's module writes (`sqlite/writes.rs`
//! as `VALUES` lists, `postgres/writes.rs` as arrays).

use crate::model::Transition;

/// How an attempt ended.
pub(crate) struct End<'t> {
    pub(crate) status: &'t str,
    pub(crate) at: i64,
    pub(crate) exit_code: Option<i64>,
    pub(crate) error: Option<&'t str>,
    pub(crate) artifacts: &'t [(String, String, i64)],
}

/// The net effect of one attempt's transitions in a group.
pub(crate) struct Net<'t> {
    pub(crate) index: i64,
    pub(crate) attempt: i64,
    pub(crate) started_at: Option<i64>,
    pub(crate) process: Option<(i64, i64, i64)>,
    pub(crate) end: Option<End<'t>>,
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

    /// Empties the group, returning what it gathered.
    pub(crate) fn take(&mut self) -> Vec<Net<'t>> {
        std::mem::take(&mut self.nets)
    }
}

/// The attempt's status for the stage status it ended with.
pub(crate) fn attempt_status(stage_status: &str) -> &'static str {
    if stage_status == "failed" {
        "failed"
    } else {
        "success"
    }
}

/// Which of a group's attempts each statement writes, in either form.
pub(crate) struct Rows<'g, 't> {
    /// New attempts, ended already if their end is in the group.
    pub(crate) started: Vec<&'g Net<'t>>,
    /// Attempts started before the group and ended in it.
    pub(crate) ended: Vec<&'g Net<'t>>,
    /// Attempts started before the group whose process the group records.
    pub(crate) running: Vec<&'g Net<'t>>,
    /// Stages whose state the group changes (a start or an end).
    pub(crate) stages: Vec<&'g Net<'t>>,
    /// The ends, which replace whatever outputs their stage had recorded.
    pub(crate) ends: Vec<&'g Net<'t>>,
    /// The outputs of those ends, with their stage.
    pub(crate) artifacts: Vec<(i64, &'t (String, String, i64))>,
}

impl<'g, 't> Rows<'g, 't> {
    pub(crate) fn of(nets: &'g [Net<'t>]) -> Rows<'g, 't> {
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
