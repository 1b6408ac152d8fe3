//! A refused transition and the rule that refused it.

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

pub(super) fn refuse(kind: RefusalKind, reason: impl Into<String>) -> Refusal {
    Refusal {
        kind,
        reason: reason.into(),
    }
}
