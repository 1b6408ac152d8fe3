//! The rules each event must pass: [`apply`] checks an event's evidence
//! and folds it into the state, or refuses it.

use super::events::{Action, Event, Identity, target};
use super::guidance;
use super::refusal::{Refusal, RefusalKind, refuse};
use super::state::{FindingStatus, State, Validation, Visibility};

/// Applies one event. On success returns the new state and what the caller
/// should do; on refusal the state is unchanged (the caller keeps its copy).
pub fn apply(state: &State, event: &Event) -> Result<(State, Vec<Action>), Refusal> {
    let target = target(event);
    if !state.may_follow(target) {
        return Err(refuse(
            RefusalKind::IllegalTransition,
            guidance::missing(state, target),
        ));
    }
    let mut next = state.clone();
    next.seq += 1;
    next.stage = target;
    let mut actions = Vec::new();
    match event {
        Event::Clarified => next.clarified = true,
        Event::Inspected { path } => {
            next.inspected.insert(path.clone());
        }
        Event::Planned {
            validation_intent,
            validation_claimed,
        } => {
            if validation_intent.trim().is_empty() {
                return Err(refuse(
                    RefusalKind::MissingEvidence,
                    "a plan must say how the work will be validated.",
                ));
            }
            next.validation_intent = Some(validation_intent.clone());
            next.validation_claimed = *validation_claimed;
        }
        Event::Edited { path, .. } => edit(&mut next, path, &mut actions)?,
        Event::Validated {
            command,
            exit_code,
            covered,
        } => {
            retry(&next, command, *exit_code)?;
            validate(&mut next, command, *exit_code, covered, &mut actions);
        }
        Event::Reviewed { reviewer, findings } => {
            independent(&state.owner, reviewer)?;
            next.independent_review = true;
            next.findings
                .extend(findings.iter().map(|f| (f.clone(), FindingStatus::Open)));
        }
        Event::Repaired { finding } => {
            set_finding(
                &mut next,
                *finding,
                FindingStatus::Open,
                FindingStatus::Repaired,
            )?;
            actions.push(Action::ReReviewRequired { finding: *finding });
        }
        Event::ReReviewed {
            reviewer,
            finding,
            resolved,
        } => {
            independent(&state.owner, reviewer)?;
            let to = if *resolved {
                FindingStatus::Resolved
            } else {
                FindingStatus::Open
            };
            set_finding(&mut next, *finding, FindingStatus::Repaired, to)?;
        }
        Event::NewEvidence { path, note } => {
            if note.trim().is_empty() {
                return Err(refuse(
                    RefusalKind::MissingEvidence,
                    "new evidence must say what is new.",
                ));
            }
            next.new_evidence(path);
        }
        Event::Released => next.ready_to_close()?,
        Event::HandedOff { next_owner } => {
            if next_owner.trim().is_empty() {
                return Err(refuse(
                    RefusalKind::MissingEvidence,
                    "a handoff must name the next owner.",
                ));
            }
        }
        Event::Closed(closure) => {
            next.ready_to_close()?;
            let fields = [
                ("what is proven", &closure.proven),
                ("what is not proven", &closure.not_proven),
                ("the residual risk", &closure.residual_risk),
                ("the next owner", &closure.next_owner),
            ];
            if let Some((name, _)) = fields.iter().find(|(_, value)| value.trim().is_empty()) {
                return Err(refuse(
                    RefusalKind::MissingEvidence,
                    format!("closure must state {name}."),
                ));
            }
            actions.push(Action::Closed(closure.clone()));
        }
    }
    Ok((next, actions))
}

fn edit(next: &mut State, path: &str, actions: &mut Vec<Action>) -> Result<(), Refusal> {
    // Clarifying and planning are asked for only where they can be seen.
    let sees_all = next.visibility == Visibility::Everything;
    let missing = if sees_all && !next.clarified {
        Some("a clarified request: record `clarified`")
    } else if next.inspected.is_empty() {
        Some("inspected context: record `inspected PATH` for what was read")
    } else if sees_all && next.validation_intent.is_none() {
        Some("a plan that says how the edit will be validated: record `planned --intent TEXT`")
    } else {
        None
    };
    if let Some(missing) = missing {
        return Err(refuse(
            RefusalKind::MissingEvidence,
            format!("editing {path} needs {missing}."),
        ));
    }
    if let Some(((_, command, code), _)) = next
        .failures
        .iter()
        .find(|((failed, _, _), count)| failed == path && **count >= 2)
    {
        return Err(refuse(
            RefusalKind::ThirdAttempt,
            format!(
                "{path} failed `{command}` with exit code {code} twice; record new evidence or a changed route (`new-evidence {path} --note TEXT`) before a third attempt."
            ),
        ));
    }
    record_edit(next, path, actions);
    Ok(())
}

/// An edit's effect, once its rules are checked (or, when observing, broken).
pub(super) fn record_edit(next: &mut State, path: &str, actions: &mut Vec<Action>) {
    let was_fresh = next.validations.iter().rev().any(|v| {
        v.exit_code == 0 && v.covers(path) && next.last_edit.get(path).is_none_or(|&e| v.seq > e)
    });
    if was_fresh {
        actions.push(Action::ValidationStale {
            path: path.to_owned(),
        });
    }
    next.last_edit.insert(path.to_owned(), next.seq);
    next.attempt.insert(path.to_owned());
}

/// A third run of a command that failed the same way twice is a retry of
/// the same route, blocked like a third patch until new evidence is
/// recorded. Only a failing run is refused: a pass is not a retry.
fn retry(state: &State, command: &str, exit_code: i32) -> Result<(), Refusal> {
    let failed = state
        .command_failures
        .get(&(command.to_owned(), exit_code))
        .copied()
        .unwrap_or(0);
    if exit_code != 0 && failed >= 2 {
        return Err(refuse(
            RefusalKind::ThirdAttempt,
            format!(
                "`{command}` failed with exit code {exit_code} twice already; record new evidence or a changed route (`new-evidence PATH --note TEXT`) before running it a third time."
            ),
        ));
    }
    Ok(())
}

pub(super) fn validate(
    next: &mut State,
    command: &str,
    exit_code: i32,
    covered: &[String],
    actions: &mut Vec<Action>,
) {
    let validation = Validation {
        seq: next.seq,
        command: command.to_owned(),
        exit_code,
        covered: covered.to_vec(),
    };
    // The paths of the current attempt that this run judged; an attempt
    // ends when its paths are validated.
    let judged: Vec<String> = next
        .attempt
        .iter()
        .filter(|path| validation.covers(path))
        .cloned()
        .collect();
    for path in judged {
        next.attempt.remove(&path);
        if exit_code != 0 {
            let count = next
                .failures
                .entry((path.clone(), command.to_owned(), exit_code))
                .or_insert(0);
            *count += 1;
            if *count == 2 {
                actions.push(Action::AttemptsExhausted { path });
            }
        }
    }
    if exit_code == 0 {
        next.command_failures
            .retain(|(failed, _), _| failed != command);
    } else {
        *next
            .command_failures
            .entry((command.to_owned(), exit_code))
            .or_insert(0) += 1;
    }
    next.validations.push(validation);
}

fn independent(owner: &Identity, reviewer: &Identity) -> Result<(), Refusal> {
    if owner.same_owner(reviewer) {
        return Err(refuse(
            RefusalKind::SelfReview,
            format!(
                "the reviewer ({}) is not independent of the owner ({}): the profile, or the configured model, is the same.",
                reviewer.profile, owner.profile
            ),
        ));
    }
    Ok(())
}

pub(super) fn set_finding(
    next: &mut State,
    finding: usize,
    from: FindingStatus,
    to: FindingStatus,
) -> Result<(), Refusal> {
    match next.findings.get_mut(finding) {
        Some((_, status)) if *status == from => {
            *status = to;
            Ok(())
        }
        Some((text, status)) => Err(refuse(
            RefusalKind::UnknownFinding,
            format!("finding {finding} ({text}) is {status:?}, not {from:?}."),
        )),
        None => Err(refuse(
            RefusalKind::UnknownFinding,
            format!("there is no finding {finding}."),
        )),
    }
}
