//! Human gates: listing, showing, deciding and editing them, and the state
//! the coordinator schedules by.
//!
//! A gate's artifact is its stage's `writes_to` files; a decision is
//! recorded against the stage's current attempt and the artifact's current
//! hash (see [`artifact`]), so an approval goes stale as soon as the
//! artifact changes (an edit, a rerun) and the run stops at the gate again.
//! Deciding needs no lease — the store keeps exactly one decision per
//! attempt and hash — so people decide while a driver waits at the gate.
//! Edits rewrite the gate's editable output (see [`list`]) and swap its
//! recorded hash in the store, so a resume does not take the edit for a
//! stale output.

mod artifact;
mod diff;
pub(crate) mod edit;
mod error;
pub mod list;
mod show;
mod stage;

use std::path::Path;

use baton_store::{
    GateDecided, GateDecisionRow, NewGateDecision, RunRow, StageRow, Store, Transition,
};
use baton_workflow::Plan;

pub use diff::{Change, OutputDiff, Since};
pub use edit::{Edited, edit};
pub use error::{Error, Result};
pub use list::{GateEdit, ListKind};
pub use show::show;

pub(crate) use crate::run_state::{Gates, rejection_error};
use crate::{clock, owner, workspace};
use stage::{GateStage, find_gate, gate_stage, is_gate, recorded_plan};

/// A decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let the run continue.
    Approve,
    /// End the run.
    Reject,
    /// Run the gate's stage again with the decider's comment in its
    /// prompt; the gate then waits for a decision on the new outputs.
    PushBack,
}

impl Decision {
    /// `approve`, `reject` or `push_back`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
            Decision::PushBack => PUSH_BACK,
        }
    }

    /// The decision a word names, as the CLI, the API and the pages spell
    /// it: `approve`, `reject` or `push-back`.
    pub fn from_name(name: &str) -> Option<Decision> {
        match name {
            "approve" => Some(Decision::Approve),
            "reject" => Some(Decision::Reject),
            "push-back" | PUSH_BACK => Some(Decision::PushBack),
            _ => None,
        }
    }
}

/// A push-back, as stored.
const PUSH_BACK: &str = "push_back";

/// Where a gate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateState {
    /// Succeeded, waiting for a decision.
    Awaiting,
    /// Approved, and the artifact is the one approved.
    Approved,
    /// Rejected.
    Rejected,
    /// Pushed back: its stage runs again (at the next drive, or at once
    /// when a driver waits at the gate).
    PushedBack,
    /// Decided on an artifact or attempt that is no longer current: it needs a new decision.
    Stale,
}

impl GateState {
    /// `awaiting`, `approved`, `rejected`, `pushed_back` or `stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            GateState::Awaiting => "awaiting",
            GateState::Approved => "approved",
            GateState::Rejected => "rejected",
            GateState::PushedBack => "pushed_back",
            GateState::Stale => "stale",
        }
    }
}

/// One gate of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateStatus {
    /// The run.
    pub run_id: String,
    /// The run's status.
    pub run_status: String,
    /// The gate stage.
    pub stage: String,
    /// Its index.
    pub index: i64,
    /// Its current attempt.
    pub attempt: i64,
    /// Where it stands.
    pub state: GateState,
    /// The artifact's hash now.
    pub sha256: String,
    /// The current decision (approved, rejected), or the latest one (stale).
    pub decision: Option<GateDecisionRow>,
}

/// One output of a gate, for `show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Workspace-relative path.
    pub path: String,
    /// Its content (lossy UTF-8), `None` when it is missing.
    pub content: Option<String>,
    /// The list it holds, if this is the editable output.
    pub list: Option<(ListKind, Vec<String>)>,
    /// How it differs from what the gate's latest decision was made on
    /// (`None` before the first decision).
    pub diff: Option<OutputDiff>,
}

/// A gate with its outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateView {
    /// Where it stands.
    pub status: GateStatus,
    /// Its outputs, in `writes_to` order (a directory's files expanded),
    /// then any output decided on that is gone.
    pub outputs: Vec<Output>,
    /// The decision its outputs are compared with: its latest (`None`
    /// while it waits for its first).
    pub since: Option<Since>,
}

/// Where a gate stands given its decisions and its artifact hash now.
fn state_of(
    gate: &GateStage,
    sha256: &str,
    decisions: &[GateDecisionRow],
) -> (GateState, Option<GateDecisionRow>) {
    let mine: Vec<&GateDecisionRow> = decisions
        .iter()
        .filter(|decision| decision.index == gate.stage.index)
        .collect();
    let current = mine
        .iter()
        .copied()
        .find(|decision| decision.attempt == gate.stage.attempts && decision.sha256 == sha256);
    match current {
        Some(decision) if decision.decision == "approve" => {
            (GateState::Approved, Some(decision.clone()))
        }
        Some(decision) if decision.decision == PUSH_BACK => {
            (GateState::PushedBack, Some(decision.clone()))
        }
        Some(decision) => (GateState::Rejected, Some(decision.clone())),
        None => match mine.last() {
            // The stage ran again because it was pushed back: its new
            // outputs wait for their first decision.
            Some(latest)
                if latest.decision == PUSH_BACK && latest.attempt < gate.stage.attempts =>
            {
                (GateState::Awaiting, None)
            }
            Some(latest) => (GateState::Stale, Some(GateDecisionRow::clone(latest))),
            None => (GateState::Awaiting, None),
        },
    }
}

fn status_of(run: &RunRow, gate: &GateStage, decisions: &[GateDecisionRow]) -> GateStatus {
    let sha256 = artifact::current_hash(Path::new(&run.workspace), &gate.writes_to);
    let (state, decision) = state_of(gate, &sha256, decisions);
    GateStatus {
        run_id: run.run_id.clone(),
        run_status: run.status.clone(),
        stage: gate.stage.name.clone(),
        index: gate.stage.index,
        attempt: gate.stage.attempts,
        state,
        sha256,
        decision,
    }
}

/// The gates of one run (or of every run) that have run or been decided on.
///
/// # Errors
///
/// No such run, or the store fails.
pub async fn list(store: &Store, run_id: Option<&str>) -> Result<Vec<GateStatus>> {
    let runs = match run_id {
        Some(run_id) => vec![store.run(run_id).await?],
        None => store.runs().await?,
    };
    let mut gates = Vec::new();
    for run in runs {
        let stages = store.stages(&run.run_id).await?;
        gates.extend(of_run(store, &run, &stages).await?);
    }
    Ok(gates)
}

/// The gates of `run`, whose stages the caller has read: as [`list`]
/// finds them, without reading the run and its stages again.
///
/// # Errors
///
/// The store fails.
pub async fn of_run(store: &Store, run: &RunRow, stages: &[StageRow]) -> Result<Vec<GateStatus>> {
    let plan = recorded_plan(run);
    let gated: Vec<GateStage> = stages
        .iter()
        .filter(|stage| is_gate(&plan, stage))
        .map(|stage| gate_stage(&plan, stage))
        .collect();
    // Most runs have no gate: their decisions need no reading.
    if gated.is_empty() {
        return Ok(Vec::new());
    }
    let decisions = store.gate_decisions(&run.run_id).await?;
    Ok(gated
        .iter()
        .filter(|gate| {
            gate.stage.status == "success"
                || decisions
                    .iter()
                    .any(|decision| decision.index == gate.stage.index)
        })
        .map(|gate| status_of(run, gate, &decisions))
        .collect())
}

/// Records a decision on a gate, against its stage's current attempt and
/// its artifact as it is now. A rejection also ends the run as `rejected`
/// at once when no live process drives it (a driver waiting at the gate
/// ends it itself).
///
/// # Errors
///
/// The stage is not a gate or has not succeeded, someone decided on this
/// attempt and artifact first ([`Error::AlreadyDecided`] names them), the
/// run ended, or the store fails.
pub async fn decide(
    store: &Store,
    run_id: &str,
    stage: &str,
    decision: Decision,
    by: &str,
    comment: Option<String>,
) -> Result<GateDecisionRow> {
    let run = store.run(run_id).await?;
    // A decision is made on the edited output, even if the edit's rename
    // was cut short.
    edit::finish_interrupted(Path::new(&run.workspace), &store.artifacts(run_id).await?);
    let stages = store.stages(run_id).await?;
    let gate = find_gate(&run, &stages, stage)?.succeeded()?;
    if decision == Decision::PushBack {
        refuse_push_back(&run, &stages, stage, comment.as_deref())?;
    }
    if matches!(run.status.as_str(), "rejected" | "cancelled") {
        // Whoever ended the run by rejecting this very artifact decided
        // first: say so, as to anyone else who lost that race.
        let sha256 = artifact::current_hash(Path::new(&run.workspace), &gate.writes_to);
        let decisions = store.gate_decisions(run_id).await?;
        if let (_, Some(row)) = state_of(&gate, &sha256, &decisions)
            && row.attempt == gate.stage.attempts
            && row.sha256 == sha256
        {
            return Err(already_decided(stage, row));
        }
        return Err(Error::RunEnded {
            run_id: run_id.to_owned(),
            status: run.status,
        });
    }
    // The outputs are read once: what is kept is what the hash covers.
    let (sha256, outputs) = artifact::snapshot(Path::new(&run.workspace), &gate.writes_to);
    let new = NewGateDecision {
        run_id: run_id.to_owned(),
        index: gate.stage.index,
        attempt: gate.stage.attempts,
        sha256,
        decision: decision.as_str().to_owned(),
        decided_by: by.to_owned(),
        decided_at: clock::now_ms(),
        comment,
        outputs,
    };
    let row = match store.decide_gate(&new).await? {
        GateDecided::Recorded(row) => row,
        GateDecided::AlreadyDecided(row) => return Err(already_decided(stage, row)),
    };
    match decision {
        Decision::Reject => {
            let error =
                rejection_error(stage, &row.decided_by, row.comment.as_deref().unwrap_or(""));
            end_rejected(store, run_id, &error).await?;
        }
        // A driver waiting at the gate sets the stage back itself, and a
        // resume does it from the recorded decision if this is cut short.
        Decision::PushBack => {
            let mut reset = push_back_transitions(gate.stage.index, &row).to_vec();
            reset.push(Transition::RunStatus {
                status: "pending".to_owned(),
                at: clock::now_ms(),
                error: None,
            });
            apply_if_undriven(store, run_id, &reset).await?;
        }
        Decision::Approve => {}
    }
    Ok(row)
}

/// A push-back needs a comment, and is refused once a stage after the
/// gate ran on the outputs pushed back (a rerun of the gate's stage alone
/// would leave it standing on outputs no longer there).
fn refuse_push_back(
    run: &RunRow,
    stages: &[baton_store::StageRow],
    stage: &str,
    comment: Option<&str>,
) -> Result<()> {
    if comment.is_none_or(|text| text.trim().is_empty()) {
        return Err(Error::NoComment {
            stage: stage.to_owned(),
        });
    }
    let dependants = crate::verify::dependants(&run.plan);
    let ran = dependants.get(stage).into_iter().flatten().find(|name| {
        stages
            .iter()
            .any(|row| &row.name == *name && row.status != "pending")
    });
    match ran {
        Some(after) => Err(Error::RanPastGate {
            stage: stage.to_owned(),
            after: after.clone(),
            run_id: run.run_id.clone(),
        }),
        None => Ok(()),
    }
}

fn already_decided(stage: &str, row: GateDecisionRow) -> Error {
    Error::AlreadyDecided {
        stage: stage.to_owned(),
        decision: past_tense(&row.decision).to_owned(),
        by: row.decided_by,
        at: workspace::utc(row.decided_at),
    }
}

fn past_tense(decision: &str) -> &'static str {
    match decision {
        "approve" => "approved",
        PUSH_BACK => "pushed back",
        _ => "rejected",
    }
}

/// What sets a pushed-back gate's stage back to pending, so that it runs
/// again: recorded by whoever holds the run.
pub(crate) fn push_back_transitions(index: i64, decision: &GateDecisionRow) -> [Transition; 2] {
    [
        Transition::StageReset {
            index,
            note: format!("pushed back at its gate by {}", decision.decided_by),
        },
        // The stage's work starts from scratch, validation cycles and all.
        Transition::UnitsCleared { index },
    ]
}

/// Marks the run rejected if nobody drives it; a driver (or the next
/// resume) does it otherwise, from the recorded decision.
async fn end_rejected(store: &Store, run_id: &str, error: &str) -> Result<()> {
    let ended = Transition::RunStatus {
        status: "rejected".to_owned(),
        at: clock::now_ms(),
        error: Some(error.to_owned()),
    };
    if apply_if_undriven(store, run_id, &[ended]).await? {
        // The child runs of its sub-workflow stages do not go on alone.
        crate::control::cancel_children(store, run_id, true)
            .await
            .map_err(|source| Error::Children {
                run_id: run_id.to_owned(),
                source: Box::new(source),
            })?;
    }
    Ok(())
}

/// Records `transitions` under a short lease of the run's own, unless a
/// driver holds the run (it acts on the decision itself); returns whether
/// they were recorded here.
async fn apply_if_undriven(
    store: &Store,
    run_id: &str,
    transitions: &[Transition],
) -> Result<bool> {
    let lease = match store
        .acquire(run_id, &owner::me(), clock::now_ms(), 10_000, None)
        .await
    {
        Ok(lease) => lease,
        Err(baton_store::Error::Held { .. }) => return Ok(false),
        Err(other) => return Err(other.into()),
    };
    let applied = store.apply(&lease, transitions).await;
    store.release(&lease).await?;
    applied?;
    Ok(true)
}

impl Gates {
    /// Reads the decisions and hashes the gates' artifacts as they are now.
    /// Only gates whose stage has succeeded count; such a stage does not
    /// run again within one drive, so what is loaded stays true for it.
    pub(crate) async fn load(
        store: &Store,
        run_id: &str,
        plan: &Plan,
        workspace: &Path,
    ) -> crate::Result<Gates> {
        // Without a gate there is nothing to look up; reading every stage
        // costs a large run a few milliseconds each time.
        if !plan.stages.iter().any(|stage| stage.spec.human_gate) {
            return Ok(Gates::default());
        }
        let stages = store.stages(run_id).await?;
        let decisions = store.gate_decisions(run_id).await?;
        let mut gates = Gates::default();
        for decision in decisions.iter().filter(|row| row.decision == PUSH_BACK) {
            let Ok(index) = usize::try_from(decision.index) else {
                continue;
            };
            let later = gates
                .push_backs
                .get(&index)
                .is_none_or(|kept| kept.attempt <= decision.attempt);
            if later {
                gates.push_backs.insert(index, decision.clone());
            }
        }
        for stage in plan.stages.iter().filter(|stage| stage.spec.human_gate) {
            let Some(row) = stages
                .get(stage.index)
                .filter(|row| row.status == "success")
            else {
                continue;
            };
            let gate = GateStage {
                stage: row.clone(),
                writes_to: stage
                    .spec
                    .writes_to
                    .iter()
                    .map(|path| path.value.clone())
                    .collect(),
                human_gate: true,
            };
            let sha256 = artifact::current_hash(workspace, &gate.writes_to);
            match state_of(&gate, &sha256, &decisions) {
                (GateState::Approved, _) => gates.approved.push(stage.index),
                (GateState::PushedBack, _) => gates.pushed_back.push(stage.index),
                (GateState::Rejected, Some(decision)) if gates.rejected.is_none() => {
                    gates.rejected = Some((
                        stage.index,
                        decision.comment.unwrap_or_default(),
                        decision.decided_by,
                    ));
                }
                _ => {}
            }
        }
        Ok(gates)
    }
}

/// How long a driver waiting at a gate sleeps between looks at the store.
pub(crate) const POLL: std::time::Duration = std::time::Duration::from_millis(300);

/// Waits at gate `index` for a decision, keeping the lease: looks at the
/// store every [`POLL`] and renews the lease on `renew`'s ticks. Returns the
/// gates once the gate is approved, any gate rejected or pushed back, or
/// `None` when a cancel was requested.
///
/// # Errors
///
/// The store fails, or the lease was lost.
pub(crate) async fn wait(
    store: &Store,
    lease: &mut baton_store::Lease,
    plan: &Plan,
    workspace: &Path,
    index: usize,
    renew: &mut tokio::time::Interval,
    ttl_ms: i64,
) -> crate::Result<Option<Gates>> {
    loop {
        tokio::select! {
            _ = renew.tick() => {
                if store.renew(lease, clock::now_ms(), ttl_ms).await? {
                    return Ok(None);
                }
            }
            () = tokio::time::sleep(POLL) => {
                let gates = Gates::load(store, &lease.run_id, plan, workspace).await?;
                if gates.approved(index)
                    || gates.rejected().is_some()
                    || !gates.pushed_back.is_empty()
                {
                    return Ok(Some(gates));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use baton_store::StageRow;

    use super::*;

    fn gate(attempts: i64) -> GateStage {
        GateStage {
            stage: StageRow {
                index: 1,
                name: "review".to_owned(),
                status: "success".to_owned(),
                attempts,
                started_at: None,
                finished_at: None,
                error: None,
                note: None,
            },
            writes_to: vec!["plan.json".to_owned()],
            human_gate: true,
        }
    }

    fn decision(index: i64, attempt: i64, sha256: &str, what: &str) -> GateDecisionRow {
        GateDecisionRow {
            index,
            attempt,
            sha256: sha256.to_owned(),
            decision: what.to_owned(),
            decided_by: "ada".to_owned(),
            decided_at: 0,
            comment: None,
        }
    }

    #[test]
    fn a_decision_counts_for_its_attempt_and_artifact_only() {
        let approved = [decision(1, 1, "h1", "approve")];
        assert_eq!(state_of(&gate(1), "h1", &approved).0, GateState::Approved);
        // The artifact changed (an edit) or the stage ran again.
        assert_eq!(state_of(&gate(1), "h2", &approved).0, GateState::Stale);
        assert_eq!(state_of(&gate(2), "h1", &approved).0, GateState::Stale);
        // Another stage's decision is not this gate's.
        let other = [decision(0, 1, "h1", "approve")];
        assert_eq!(state_of(&gate(1), "h1", &other).0, GateState::Awaiting);
        let rejected = [
            decision(1, 1, "h0", "approve"),
            decision(1, 1, "h1", "reject"),
        ];
        assert_eq!(state_of(&gate(1), "h1", &rejected).0, GateState::Rejected);
    }

    #[test]
    fn a_push_back_holds_until_the_stage_runs_again() {
        let pushed = [decision(1, 1, "h1", "push_back")];
        assert_eq!(state_of(&gate(1), "h1", &pushed).0, GateState::PushedBack);
        // Its rerun's outputs wait for their own first decision.
        assert_eq!(
            state_of(&gate(2), "h2", &pushed),
            (GateState::Awaiting, None)
        );
        // Edited after the push-back, before the rerun: decide again.
        assert_eq!(state_of(&gate(1), "h2", &pushed).0, GateState::Stale);
        let mut gates = Gates::default();
        gates.push_backs.insert(1, pushed[0].clone());
        assert!(gates.push_back_for(1, 2).is_some());
        assert!(gates.push_back_for(1, 1).is_none());
        assert!(gates.push_back_for(1, 3).is_none());
    }

    #[test]
    fn a_rejection_names_who_and_why() {
        assert_eq!(
            rejection_error("review", "bob", "wrong scope"),
            "gate 'review' rejected by bob: wrong scope"
        );
        assert_eq!(
            rejection_error("review", "bob", ""),
            "gate 'review' rejected by bob: (no comment)"
        );
    }
}
