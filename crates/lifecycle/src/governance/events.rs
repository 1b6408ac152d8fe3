//! What a ledger records (events, with their evidence and who acted) and
//! what the caller is told to do after one.

use super::stages::Stage;

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
