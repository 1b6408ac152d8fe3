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

use super::events::{Action, Event};
use super::refusal::Refusal;
use super::rules::fold;
use super::state::State;

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

/// Folds `event` into `state` as a fact: like [`apply`](super::apply)
/// when the event is legal, and otherwise with the event's own effect but
/// nothing a broken rule would have granted.
pub fn observe(state: &State, event: &Event) -> Observed {
    let (state, actions, violation) = fold(state, event, false).expect("observing refuses nothing");
    Observed {
        state,
        actions,
        violation,
    }
}
