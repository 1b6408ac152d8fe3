//! Observing instead of asking: the ledger of an agent session baton did not
//! start (a Claude Code session feeding hooks) or of a workflow run records
//! what happened, and what happened cannot be refused. [`observe`] folds
//! such an event anyway — the stage moves, the evidence counts — and returns
//! the rule it broke beside the new state, so `baton state check` can list
//! every violation while freshness still follows the real edits and tests.
//!
//! Nothing a broken rule would have granted is granted: a self-review is
//! not an independent review, a re-review by the owner resolves nothing, a
//! repair of a finding that is not open changes nothing.

use super::events::{Action, Event, target};
use super::refusal::Refusal;
use super::rules::{apply, record_edit, set_finding, validate};
use super::state::{FindingStatus, State};

/// An observed event's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The state after the event.
    pub state: State,
    /// What the caller should do.
    pub actions: Vec<Action>,
    /// The rule the event broke, if it broke one.
    pub violation: Option<Refusal>,
}

/// Folds `event` into `state` as a fact: like [`apply`] when the event is
/// legal, and otherwise with the event's own effect but nothing a broken
/// rule would have granted.
pub fn observe(state: &State, event: &Event) -> Observed {
    let refusal = match apply(state, event) {
        Ok((state, actions)) => {
            return Observed {
                state,
                actions,
                violation: None,
            };
        }
        Err(refusal) => refusal,
    };
    let mut next = state.clone();
    next.seq += 1;
    next.stage = target(event);
    let mut actions = Vec::new();
    match event {
        Event::Clarified => next.clarified = true,
        Event::Inspected { path } => {
            next.inspected.insert(path.clone());
        }
        Event::Planned {
            validation_intent,
            validation_claimed,
        } if !validation_intent.trim().is_empty() => {
            next.validation_intent = Some(validation_intent.clone());
            next.validation_claimed = *validation_claimed;
        }
        Event::Edited { path, .. } => record_edit(&mut next, path, &mut actions),
        Event::Validated {
            command,
            exit_code,
            covered,
        } => validate(&mut next, command, *exit_code, covered, &mut actions),
        Event::Reviewed { reviewer, findings } => {
            // Concerns raised are concerns, whoever raised them.
            next.findings
                .extend(findings.iter().map(|f| (f.clone(), FindingStatus::Open)));
            if !state.owner.same_owner(reviewer) {
                next.independent_review = true;
            }
        }
        Event::Repaired { finding } => {
            let repaired = set_finding(
                &mut next,
                *finding,
                FindingStatus::Open,
                FindingStatus::Repaired,
            );
            if repaired.is_ok() {
                actions.push(Action::ReReviewRequired { finding: *finding });
            }
        }
        Event::ReReviewed {
            reviewer,
            finding,
            resolved,
        } if !state.owner.same_owner(reviewer) => {
            let to = if *resolved {
                FindingStatus::Resolved
            } else {
                FindingStatus::Open
            };
            let _ = set_finding(&mut next, *finding, FindingStatus::Repaired, to);
        }
        Event::NewEvidence { path, note } if !note.trim().is_empty() => next.new_evidence(path),
        Event::Closed(closure) => actions.push(Action::Closed(closure.clone())),
        _ => {}
    }
    Observed {
        state: next,
        actions,
        violation: Some(refusal),
    }
}
