//! The rules each event must pass: [`apply`] checks an event's evidence
//! and folds it into the state, or refuses it.

use super::events::{Action, Closure, Event, Identity, target};
use super::guidance;
use super::refusal::{Refusal, RefusalKind, refuse};
use super::stages::Stage;
use super::state::{FindingStatus, State, Validation, Visibility};

/// Applies one event. On success returns the new state and what the caller
/// should do; on refusal the state is unchanged (the caller keeps its copy).
pub fn apply(state: &State, event: &Event) -> Result<(State, Vec<Action>), Refusal> {
    fold(state, event, true).map(|(next, actions, _)| (next, actions))
}

/// Folds `event` into `state`, checking each rule on the way. `strict`
/// ([`apply`]): the first rule broken refuses the event. Otherwise
/// ([`super::observe`]): the first rule broken is returned beside the new
/// state, and the event has its own effect but nothing the broken rule
/// would have granted.
pub(super) fn fold(
    state: &State,
    event: &Event,
    strict: bool,
) -> Result<(State, Vec<Action>, Option<Refusal>), Refusal> {
    let mut broken = None;
    // Whether the rule holds; a broken one refuses the event when strict.
    let mut holds = |rule: Result<(), Refusal>| match rule {
        Ok(()) => Ok(true),
        Err(refusal) if strict => Err(refusal),
        Err(refusal) => {
            broken.get_or_insert(refusal);
            Ok(false)
        }
    };
    let target = target(event);
    holds(in_order(state, target))?;
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
            let said = stated(
                validation_intent,
                "a plan must say how the work will be validated.",
            );
            if holds(said)? {
                next.validation_intent = Some(validation_intent.clone());
                next.validation_claimed = *validation_claimed;
            }
        }
        Event::Edited { path, .. } => {
            holds(may_edit(&next, path))?;
            record_edit(&mut next, path, &mut actions);
        }
        Event::Validated {
            command,
            exit_code,
            covered,
        } => {
            holds(retry(&next, command, *exit_code))?;
            validate(&mut next, command, *exit_code, covered, &mut actions);
        }
        Event::Reviewed { reviewer, findings } => {
            // Concerns raised are concerns, whoever raised them.
            next.findings
                .extend(findings.iter().map(|f| (f.clone(), FindingStatus::Open)));
            if holds(independent(&state.owner, reviewer))? {
                next.independent_review = true;
            }
        }
        Event::Repaired { finding } => {
            let open = FindingStatus::Open;
            if holds(set_finding(
                &mut next,
                *finding,
                open,
                FindingStatus::Repaired,
            ))? {
                actions.push(Action::ReReviewRequired { finding: *finding });
            }
        }
        Event::ReReviewed {
            reviewer,
            finding,
            resolved,
        } => {
            if holds(independent(&state.owner, reviewer))? {
                let to = if *resolved {
                    FindingStatus::Resolved
                } else {
                    FindingStatus::Open
                };
                holds(set_finding(
                    &mut next,
                    *finding,
                    FindingStatus::Repaired,
                    to,
                ))?;
            }
        }
        Event::NewEvidence { path, note } => {
            if holds(stated(note, "new evidence must say what is new."))? {
                next.new_evidence(path);
            }
        }
        Event::Released => {
            holds(next.ready_to_close())?;
        }
        Event::HandedOff { next_owner } => {
            holds(stated(next_owner, "a handoff must name the next owner."))?;
        }
        Event::Closed(closure) => {
            holds(next.ready_to_close())?;
            holds(closure_complete(closure))?;
            actions.push(Action::Closed(closure.clone()));
        }
    }
    Ok((next, actions, broken))
}

/// The event's stage may follow the current one.
fn in_order(state: &State, target: Stage) -> Result<(), Refusal> {
    if state.may_follow(target) {
        Ok(())
    } else {
        Err(refuse(
            RefusalKind::IllegalTransition,
            guidance::missing(state, target),
        ))
    }
}

/// Evidence that must not be blank.
fn stated(text: &str, otherwise: &str) -> Result<(), Refusal> {
    if text.trim().is_empty() {
        return Err(refuse(RefusalKind::MissingEvidence, otherwise));
    }
    Ok(())
}

fn closure_complete(closure: &Closure) -> Result<(), Refusal> {
    let fields = [
        ("what is proven", &closure.proven),
        ("what is not proven", &closure.not_proven),
        ("the residual risk", &closure.residual_risk),
        ("the next owner", &closure.next_owner),
    ];
    match fields.iter().find(|(_, value)| value.trim().is_empty()) {
        Some((name, _)) => Err(refuse(
            RefusalKind::MissingEvidence,
            format!("closure must state {name}."),
        )),
        None => Ok(()),
    }
}

/// The rules an edit must pass.
fn may_edit(next: &State, path: &str) -> Result<(), Refusal> {
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
    Ok(())
}

/// An edit's effect, once its rules are checked (or, when observing, broken).
fn record_edit(next: &mut State, path: &str, actions: &mut Vec<Action>) {
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

fn validate(
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

fn set_finding(
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
