//! The decisions a ledger's summary states in words: whether the last
//! transition stands (`allowed`, `blocked`, `stale`, `needs re-review`) and
//! whether the work may close (`ready`, `needs validation`, `needs review`,
//! `blocked`), with everything that blocks closure, each with what to do.

use super::refusal::{Refusal, RefusalKind, refuse};
use super::state::{FindingStatus, State};

/// Where the last transition leaves the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransitionWord {
    /// It broke no rule and nothing it left waits.
    Allowed,
    /// It broke a rule: it would have been refused had it been asked.
    Blocked,
    /// An edited path has no passing validation since its last edit.
    Stale,
    /// A repaired finding waits for its re-review.
    NeedsReReview,
}

impl TransitionWord {
    /// The word in reports and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionWord::Allowed => "allowed",
            TransitionWord::Blocked => "blocked",
            TransitionWord::Stale => "stale",
            TransitionWord::NeedsReReview => "needs re-review",
        }
    }
}

/// Whether the work may be released or closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClosureWord {
    /// Nothing blocks it.
    Ready,
    /// It needs an independent review, or the re-review of a repair.
    NeedsReview,
    /// Its validation is stale, failed or missing.
    NeedsValidation,
    /// A finding is open: it needs a repair before anything else.
    Blocked,
}

impl ClosureWord {
    /// The word in reports and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ClosureWord::Ready => "ready",
            ClosureWord::NeedsReview => "needs review",
            ClosureWord::NeedsValidation => "needs validation",
            ClosureWord::Blocked => "blocked",
        }
    }
}

impl State {
    /// `Ok` when the work may be released or closed, else the refusal of
    /// the first thing that blocks it (see [`State::closure_blockers`]).
    pub fn ready_to_close(&self) -> Result<(), Refusal> {
        match self.closure_blockers().into_iter().next() {
            Some((_, refusal)) => Err(refusal),
            None => Ok(()),
        }
    }

    /// The last transition in a word; `broke_a_rule` says whether the last
    /// event was observed breaking one.
    pub fn transition_word(&self, broke_a_rule: bool) -> TransitionWord {
        if broke_a_rule {
            TransitionWord::Blocked
        } else if self
            .findings
            .iter()
            .any(|(_, status)| *status == FindingStatus::Repaired)
        {
            TransitionWord::NeedsReReview
        } else if !self.last_edit.is_empty() && self.validation_fresh().is_err() {
            TransitionWord::Stale
        } else {
            TransitionWord::Allowed
        }
    }

    /// Closure in a word: the gravest of its blockers, else ready.
    pub fn closure_word(&self) -> ClosureWord {
        self.closure_blockers()
            .into_iter()
            .map(|(word, _)| word)
            .max()
            .unwrap_or(ClosureWord::Ready)
    }

    /// Everything that blocks release and closure, in the order to deal
    /// with it: findings not resolved, then validation, then the review.
    pub fn closure_blockers(&self) -> Vec<(ClosureWord, Refusal)> {
        let mut out = Vec::new();
        let unresolved = self
            .findings
            .iter()
            .enumerate()
            .filter(|(_, (_, status))| *status != FindingStatus::Resolved);
        if let Some((n, (text, status))) = unresolved.clone().next() {
            let word = if unresolved
                .clone()
                .any(|(_, (_, s))| *s == FindingStatus::Open)
            {
                ClosureWord::Blocked
            } else {
                ClosureWord::NeedsReview
            };
            let what = if *status == FindingStatus::Open {
                format!("record `repaired {n}` once it is fixed, then `re-reviewed {n}`")
            } else {
                format!("record `re-reviewed {n}`")
            };
            let reason = format!(
                "finding {n} ({text}) is not resolved: {what} by a reviewer other than the owner."
            );
            out.push((word, refuse(RefusalKind::OpenFindings, reason)));
        }
        if let Err(why) = self.validation_fresh() {
            let reason = format!(
                "the work needs fresh validation first ({why}): run the tests that cover it and record `validated`."
            );
            out.push((
                ClosureWord::NeedsValidation,
                refuse(RefusalKind::StaleValidation, reason),
            ));
        }
        if !self.independent_review {
            let reason = format!(
                "the work needs an independent review first: record `reviewed` by a reviewer whose profile (and model) differ from the owner's ({}).",
                self.owner.profile
            );
            out.push((
                ClosureWord::NeedsReview,
                refuse(RefusalKind::MissingEvidence, reason),
            ));
        }
        out
    }
}
