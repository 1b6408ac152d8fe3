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
//! ends in one batch is written once, as ended. [`statements`] sorts the
//! group into the rows of a few many-row statements (`batch.rs`).

use crate::batch::{Rows, Shape, Statement};
use crate::columns::Arg;
use crate::model::Transition;

/// How an attempt ended.
struct End<'t> {
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

    /// Empties the group, returning what it gathered.
    pub(crate) fn take(&mut self) -> Vec<Net<'t>> {
        std::mem::take(&mut self.nets)
    }
}

/// The attempt's status for the stage status it ended with.
fn attempt_status(stage_status: &str) -> &'static str {
    if stage_status == "failed" {
        "failed"
    } else {
        "success"
    }
}

/// How an `UPDATE attempts … FROM (VALUES …)` finds its rows on SQLite.
const ATTEMPT_MATCHES: &str = "attempts.idx = v.column1 AND attempts.attempt = v.column2";

/// New attempts, ended already if their end is in the group.
const INSERT_ATTEMPTS: Statement = Statement {
    sqlite: Shape::Insert {
        into: "attempts (run_id, idx, attempt, status, started_at, finished_at, exit_code, error, \
               pid, pgid, proc_start)",
        tail: "",
        end: "",
    },
    postgres: "INSERT INTO attempts (run_id, idx, attempt, status, started_at, finished_at, \
               exit_code, error, pid, pgid, proc_start) \
               SELECT $1, a.* FROM UNNEST($2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], \
               $6::BIGINT[], $7::BIGINT[], $8::TEXT[], $9::BIGINT[], $10::BIGINT[], $11::BIGINT[]) AS a",
    what: "record an attempt",
};

/// Attempts started before the group and ended in it.
const END_ATTEMPTS: Statement = Statement {
    sqlite: Shape::Update {
        table: "attempts",
        set: "status = v.column3, finished_at = v.column4, exit_code = v.column5, error = v.column6, \
              pid = COALESCE(v.column7, attempts.pid), pgid = COALESCE(v.column8, attempts.pgid), \
              proc_start = COALESCE(v.column9, attempts.proc_start)",
        matches: ATTEMPT_MATCHES,
    },
    postgres: "UPDATE attempts SET status = v.status, finished_at = v.finished_at, \
               exit_code = v.exit_code, error = v.error, pid = COALESCE(v.pid, attempts.pid), \
               pgid = COALESCE(v.pgid, attempts.pgid), \
               proc_start = COALESCE(v.proc_start, attempts.proc_start) \
               FROM UNNEST($2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], \
               $7::TEXT[], $8::BIGINT[], $9::BIGINT[], $10::BIGINT[]) \
               AS v(idx, attempt, status, finished_at, exit_code, error, pid, pgid, proc_start) \
               WHERE attempts.run_id = $1 AND attempts.idx = v.idx AND attempts.attempt = v.attempt",
    what: "finish an attempt",
};

/// The processes of attempts started before the group.
const RECORD_PROCESSES: Statement = Statement {
    sqlite: Shape::Update {
        table: "attempts",
        set: "pid = v.column3, pgid = v.column4, proc_start = v.column5",
        matches: ATTEMPT_MATCHES,
    },
    postgres: "UPDATE attempts SET pid = v.pid, pgid = v.pgid, proc_start = v.proc_start \
               FROM UNNEST($2::BIGINT[], $3::BIGINT[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[]) \
               AS v(idx, attempt, pid, pgid, proc_start) \
               WHERE attempts.run_id = $1 AND attempts.idx = v.idx AND attempts.attempt = v.attempt",
    what: "record a process",
};

/// The stages the group starts or ends: a start sets the attempt count and
/// start time and clears the end; an end sets the status, end time and error.
const SET_STAGES: Statement = Statement {
    sqlite: Shape::Update {
        table: "stages",
        set: "status = v.column2, attempts = COALESCE(v.column3, stages.attempts), \
              started_at = COALESCE(v.column4, stages.started_at), finished_at = v.column5, \
              error = v.column6",
        matches: "stages.idx = v.column1",
    },
    postgres: "UPDATE stages SET status = v.status, attempts = COALESCE(v.attempts, stages.attempts), \
               started_at = COALESCE(v.started_at, stages.started_at), \
               finished_at = v.finished_at, error = v.error \
               FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[], $7::TEXT[]) \
               AS v(idx, status, attempts, started_at, finished_at, error) \
               WHERE stages.run_id = $1 AND stages.idx = v.idx",
    what: "record a stage's state",
};

/// An end replaces whatever outputs its stage had recorded: first gone…
const DELETE_ARTIFACTS: Statement = Statement {
    sqlite: Shape::DeleteIn {
        table: "artifacts",
        column: "idx",
    },
    postgres: "DELETE FROM artifacts WHERE run_id = $1 AND idx = ANY($2::BIGINT[])",
    what: "replace artifacts",
};

/// … then the end's own.
const INSERT_ARTIFACTS: Statement = Statement {
    sqlite: Shape::Insert {
        into: "artifacts (run_id, idx, path, sha256, bytes)",
        tail: "",
        end: "",
    },
    postgres: "INSERT INTO artifacts (run_id, idx, path, sha256, bytes) \
               SELECT $1, a.* FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[]) AS a",
    what: "record an artifact",
};

/// The statements that write a group, in order, with their rows (some may
/// have none). Each statement's rows touch different stages.
pub(crate) fn statements<'a>(nets: &'a [Net<'a>]) -> [(&'static Statement, Rows<'a>); 6] {
    fn rows<'a, const N: usize>(
        nets: &'a [Net<'a>],
        keep: fn(&Net<'a>) -> bool,
        row: fn(&'a Net<'a>) -> [Arg<'a>; N],
    ) -> Rows<'a> {
        nets.iter().filter(|net| keep(net)).map(row).collect()
    }
    let artifacts = nets
        .iter()
        .flat_map(|net| {
            let list = net.end.as_ref().map_or(&[][..], |end| end.artifacts);
            list.iter().map(|(path, sha256, bytes)| {
                [
                    net.index.into(),
                    path.into(),
                    sha256.into(),
                    (*bytes).into(),
                ]
            })
        })
        .collect();
    [
        (
            &INSERT_ATTEMPTS,
            rows(nets, |net| net.started_at.is_some(), started),
        ),
        (
            &END_ATTEMPTS,
            rows(
                nets,
                |net| net.started_at.is_none() && net.end.is_some(),
                ended,
            ),
        ),
        (
            &RECORD_PROCESSES,
            rows(
                nets,
                |net| net.started_at.is_none() && net.end.is_none(),
                running,
            ),
        ),
        (
            &SET_STAGES,
            rows(
                nets,
                |net| net.started_at.is_some() || net.end.is_some(),
                stage,
            ),
        ),
        (
            &DELETE_ARTIFACTS,
            rows(nets, |net| net.end.is_some(), |net| [net.index.into()]),
        ),
        (&INSERT_ARTIFACTS, artifacts),
    ]
}

/// The process's pid, process group and start time, if the group has them.
fn process<'a>(net: &Net<'_>) -> [Arg<'a>; 3] {
    let part = |pick: fn((i64, i64, i64)) -> i64| net.process.map(pick).into();
    [part(|p| p.0), part(|p| p.1), part(|p| p.2)]
}

/// A row of [`INSERT_ATTEMPTS`].
fn started<'a>(net: &'a Net<'a>) -> [Arg<'a>; 10] {
    let end = net.end.as_ref();
    let [pid, pgid, start_time] = process(net);
    [
        net.index.into(),
        net.attempt.into(),
        end.map_or("running", |end| attempt_status(end.status))
            .into(),
        net.started_at.into(),
        end.map(|end| end.at).into(),
        end.and_then(|end| end.exit_code).into(),
        end.and_then(|end| end.error).into(),
        pid,
        pgid,
        start_time,
    ]
}

/// A row of [`END_ATTEMPTS`].
fn ended<'a>(net: &'a Net<'a>) -> [Arg<'a>; 9] {
    let end = net.end.as_ref();
    let [pid, pgid, start_time] = process(net);
    [
        net.index.into(),
        net.attempt.into(),
        end.map_or("success", |end| attempt_status(end.status))
            .into(),
        end.map(|end| end.at).into(),
        end.and_then(|end| end.exit_code).into(),
        end.and_then(|end| end.error).into(),
        pid,
        pgid,
        start_time,
    ]
}

/// A row of [`RECORD_PROCESSES`].
fn running<'a>(net: &'a Net<'a>) -> [Arg<'a>; 5] {
    let [pid, pgid, start_time] = process(net);
    [net.index.into(), net.attempt.into(), pid, pgid, start_time]
}

/// A row of [`SET_STAGES`].
fn stage<'a>(net: &'a Net<'a>) -> [Arg<'a>; 6] {
    let end = net.end.as_ref();
    [
        net.index.into(),
        end.map_or("running", |end| end.status).into(),
        net.started_at.map(|_| net.attempt).into(),
        net.started_at.into(),
        end.map(|end| end.at).into(),
        end.and_then(|end| end.error).into(),
    ]
}
