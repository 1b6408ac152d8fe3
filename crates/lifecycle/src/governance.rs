//! The governance state machine (docs/governance.md): the stages of one piece of
//! agent work, the evidence each transition needs, and the rules that keep
//! an agent from approving its own work, closing on stale tests, skipping
//! the re-review of a repair or retrying a failing patch a third time.
//!
//! [`apply`] is the whole machine: a state and an event in, a new state and
//! actions out, or a [`Refusal`] with a reason a person can read. Event
//! order is the only clock: "after" means later in the ledger.

use std::collections::{BTreeMap, BTreeSet};

/// A stage of agent work; exactly one is current at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// Clarifying what is asked.
    Clarify,
    /// Reading repository context.
    Read,
    /// Planning, including how the work will be validated.
    Plan,
    /// Editing files.
    Edit,
    /// Running validation.
    Test,
    /// Review by someone other than the owner.
    Review,
    /// Repairing a finding.
    Repair,
    /// Re-reviewing a repaired finding.
    ReReview,
    /// Releasing the work.
    Release,
    /// Handing the work to its next owner.
    Handoff,
    /// Done; terminal.
    Closed,
}

/// The legal transitions: from a stage, the stages an event may move to.
pub const TRANSITIONS: &[(Stage, &[Stage])] = {
    use Stage::*;
    &[
        (Clarify, &[Clarify, Read]),
        (Read, &[Read, Clarify, Plan]),
        (Plan, &[Plan, Read, Edit, Test]),
        (Edit, &[Edit, Read, Test, Repair]),
        (Test, &[Test, Read, Edit, Review, Repair, ReReview]),
        (Review, &[Review, Read, Repair, Release]),
        (Repair, &[Repair, Read, Edit, Test, ReReview]),
        (ReReview, &[ReReview, Read, Repair, Test, Review, Release]),
        (Release, &[Handoff, Closed]),
        (Handoff, &[Closed]),
        (Closed, &[]),
    ]
};

/// Who acted: an agent profile, its model when configured, and a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The agent profile.
    pub profile: String,
    /// The model, when configured.
    pub model: Option<String>,
    /// The session.
    pub session: String,
}

impl Identity {
    /// Whether `other` is not independent of `self`: the same profile, or
    /// the same model when both name one. Sessions do not matter — a new
    /// session of the same agent is not a second opinion.
    pub fn same_owner(&self, other: &Identity) -> bool {
        self.profile == other.profile
            || matches!((&self.model, &other.model), (Some(a), Some(b)) if a == b)
    }
}

/// What the writer of a ledger can see, which decides the rules that ask
/// for evidence: a rule applies only to what could have been recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Everything is recorded on purpose (a task, a workflow run): every
    /// rule applies.
    Everything,
    /// The tool calls of an agent session (Claude Code hooks): reads, edits
    /// and test commands are seen, clarifying and planning never are. No
    /// rule asks for them, and the test commands stand for the plan's
    /// validation.
    ToolCalls,
}

/// What closure must state (docs/governance.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closure {
    /// What the evidence proves.
    pub proven: String,
    /// What it does not.
    pub not_proven: String,
    /// The risk that remains.
    pub residual_risk: String,
    /// Who owns what comes next.
    pub next_owner: String,
}

/// An event of the ledger, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The request has been clarified.
    Clarified,
    /// A file was inspected.
    Inspected {
        /// The file.
        path: String,
    },
    /// A plan with a validation intent.
    Planned {
        /// How the work will be validated.
        validation_intent: String,
        /// Whether the plan claims validation at all. A workflow that
        /// declares none does not: the freshness rule does not apply to
        /// what nobody claimed to validate.
        validation_claimed: bool,
    },
    /// A file was edited.
    Edited {
        /// The file.
        path: String,
        /// Its content hash after the edit.
        hash: String,
    },
    /// A validation command ran.
    Validated {
        /// The command.
        command: String,
        /// Its exit code; 0 passes.
        exit_code: i32,
        /// The paths it covers (a file or a directory prefix); empty covers
        /// every path.
        covered: Vec<String>,
    },
    /// A review, with its findings.
    Reviewed {
        /// The reviewer.
        reviewer: Identity,
        /// The findings; each gets the next finding number.
        findings: Vec<String>,
    },
    /// A finding was repaired.
    Repaired {
        /// The finding's number (0-based, in order of review).
        finding: usize,
    },
    /// A targeted re-review of a repaired finding.
    ReReviewed {
        /// The reviewer.
        reviewer: Identity,
        /// The finding's number.
        finding: usize,
        /// Whether the repair resolves it.
        resolved: bool,
    },
    /// New evidence about a path, or a changed route: lifts the block on a
    /// path that failed the same way twice.
    NewEvidence {
        /// The path.
        path: String,
        /// What is new.
        note: String,
    },
    /// The work is released.
    Released,
    /// The work is handed to its next owner.
    HandedOff {
        /// The next owner.
        next_owner: String,
    },
    /// The work is closed.
    Closed(Closure),
}

/// What the caller should do after a transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// An edit made earlier passing validation of this path stale.
    ValidationStale {
        /// The edited path.
        path: String,
    },
    /// A repaired finding now needs a targeted re-review.
    ReReviewRequired {
        /// The finding's number.
        finding: usize,
    },
    /// A path has failed the same way twice; a third attempt is blocked
    /// until new evidence is recorded.
    AttemptsExhausted {
        /// The path.
        path: String,
    },
    /// The work is closed with this statement.
    Closed(Closure),
}

/// Why a transition was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The event's stage does not follow the current one.
    IllegalTransition,
    /// Evidence the transition needs is missing.
    MissingEvidence,
    /// The reviewer is the owner.
    SelfReview,
    /// Validation ran before the last edit, failed, or does not cover it.
    StaleValidation,
    /// Findings are open or await re-review.
    OpenFindings,
    /// The finding does not exist or is not in a state for this event.
    UnknownFinding,
    /// A third attempt on a path that failed the same way twice.
    ThirdAttempt,
}

/// A refused transition: a value, not an error; the engine decides how to
/// surface it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refusal {
    /// The rule that refused.
    pub kind: RefusalKind,
    /// A sentence saying why.
    pub reason: String,
}

/// A finding's life: open, repaired and awaiting re-review, or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingStatus {
    /// Not repaired yet (or a re-review rejected the repair).
    Open,
    /// Repaired, awaiting a re-review.
    Repaired,
    /// A re-review accepted the repair.
    Resolved,
}

/// The state of one piece of work, folded from its ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    stage: Stage,
    owner: Identity,
    visibility: Visibility,
    /// Position in the ledger; "after" means a larger number.
    seq: u64,
    clarified: bool,
    inspected: BTreeSet<String>,
    validation_intent: Option<String>,
    /// Whether the freshness rule applies: true until a plan says that
    /// nothing is validated.
    validation_claimed: bool,
    /// Each path's last edit.
    last_edit: BTreeMap<String, u64>,
    /// Paths edited since the last validation: the current attempt.
    attempt: BTreeSet<String>,
    validations: Vec<Validation>,
    /// (path, command, exit code) → how often an attempt on the path failed
    /// that way.
    failures: BTreeMap<(String, String, i32), u32>,
    /// (command, exit code) → how often the command failed that way since
    /// it last passed or new evidence was recorded.
    command_failures: BTreeMap<(String, i32), u32>,
    independent_review: bool,
    findings: Vec<(String, FindingStatus)>,
}

impl State {
    /// A new piece of work owned by `owner`, at Clarify, where everything
    /// is recorded on purpose.
    pub fn new(owner: Identity) -> Self {
        Self::seen_as(owner, Visibility::Everything)
    }

    /// A new piece of work owned by `owner` whose ledger sees `visibility`.
    pub fn seen_as(owner: Identity, visibility: Visibility) -> Self {
        Self {
            stage: Stage::Clarify,
            owner,
            visibility,
            seq: 0,
            clarified: false,
            inspected: BTreeSet::new(),
            validation_intent: None,
            validation_claimed: true,
            last_edit: BTreeMap::new(),
            attempt: BTreeSet::new(),
            validations: Vec::new(),
            failures: BTreeMap::new(),
            command_failures: BTreeMap::new(),
            independent_review: false,
            findings: Vec::new(),
        }
    }

    /// The current stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The findings so far, with their status.
    pub fn findings(&self) -> &[(String, FindingStatus)] {
        &self.findings
    }

    /// `Ok` when every edited path's latest validation since its last edit
    /// covers it and passed, and at least one validation passed — or when
    /// the plan claims no validation; otherwise the reason.
    pub fn validation_fresh(&self) -> Result<(), String> {
        if !self.validation_claimed {
            return Ok(());
        }
        // Per path first: the reason names the file and the failing command.
        for (path, &edited) in &self.last_edit {
            let latest = self
                .validations
                .iter()
                .rev()
                .find(|v| v.seq > edited && v.covers(path));
            match latest {
                None => return Err(format!("{path} was edited after its last validation")),
                Some(v) if v.exit_code != 0 => {
                    return Err(format!(
                        "the latest validation of {path} (`{}`) failed with exit code {}",
                        v.command, v.exit_code
                    ));
                }
                Some(_) => {}
            }
        }
        if !self.validations.iter().any(|v| v.exit_code == 0) {
            return Err("no validation has passed".to_owned());
        }
        Ok(())
    }

    /// `Ok` when the work may be released or closed, else the refusal of
    /// the first thing that blocks it (see [`State::closure_blockers`]).
    pub fn ready_to_close(&self) -> Result<(), Refusal> {
        match self.closure_blockers().into_iter().next() {
            Some((_, refusal)) => Err(refusal),
            None => Ok(()),
        }
    }
}

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

impl State {
    /// Whether an event moving to `to` may follow the current stage. Where
    /// clarifying and planning cannot be seen (tool calls), the stages
    /// before planning count as planned: what may follow a plan may follow
    /// them.
    fn may_follow(&self, to: Stage) -> bool {
        legal(self.stage, to)
            || (self.visibility == Visibility::ToolCalls
                && matches!(self.stage, Stage::Clarify | Stage::Read)
                && legal(Stage::Plan, to))
    }

    /// New evidence about `path`: the path's failures no longer block it,
    /// and the route changed, so no failing command counts as retried.
    fn new_evidence(&mut self, path: &str) {
        self.failures.retain(|(failed, _, _), _| failed != path);
        self.command_failures.clear();
    }
}

/// Whether `to` may follow `from`.
pub fn legal(from: Stage, to: Stage) -> bool {
    TRANSITIONS
        .iter()
        .any(|(stage, next)| *stage == from && next.contains(&to))
}

/// The stage an event moves to. New evidence is reading.
pub fn target(event: &Event) -> Stage {
    match event {
        Event::Clarified => Stage::Clarify,
        Event::Inspected { .. } | Event::NewEvidence { .. } => Stage::Read,
        Event::Planned { .. } => Stage::Plan,
        Event::Edited { .. } => Stage::Edit,
        Event::Validated { .. } => Stage::Test,
        Event::Reviewed { .. } => Stage::Review,
        Event::Repaired { .. } => Stage::Repair,
        Event::ReReviewed { .. } => Stage::ReReview,
        Event::Released => Stage::Release,
        Event::HandedOff { .. } => Stage::Handoff,
        Event::Closed(_) => Stage::Closed,
    }
}

/// One recorded validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    /// Its position in the ledger.
    pub seq: u64,
    /// The command.
    pub command: String,
    /// Its exit code.
    pub exit_code: i32,
    /// The paths it covers; empty covers every path.
    pub covered: Vec<String>,
}

impl Validation {
    /// Whether it covers `path` (a file, or a directory prefix).
    pub fn covers(&self, path: &str) -> bool {
        self.covered.is_empty()
            || self.covered.iter().any(|c| {
                let c = c.trim_end_matches('/');
                c == "." || c.is_empty() || path == c || path.starts_with(&format!("{c}/"))
            })
    }
}

fn refuse(kind: RefusalKind, reason: impl Into<String>) -> Refusal {
    Refusal {
        kind,
        reason: reason.into(),
    }
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

mod decision;
mod guidance;
mod observe;
pub use decision::{ClosureWord, TransitionWord};
pub use observe::{Observed, next_stages, observe};

#[cfg(test)]
mod quiet_tests;
#[cfg(test)]
mod tests;
