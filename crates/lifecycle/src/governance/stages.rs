//! The stages of agent work and which may follow which.

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

/// Whether `to` may follow `from`.
pub fn legal(from: Stage, to: Stage) -> bool {
    TRANSITIONS
        .iter()
        .any(|(stage, next)| *stage == from && next.contains(&to))
}

/// The stages that may follow `stage`.
pub fn next_stages(stage: Stage) -> &'static [Stage] {
    TRANSITIONS
        .iter()
        .find(|(from, _)| *from == stage)
        .map_or(&[], |(_, next)| next)
}
