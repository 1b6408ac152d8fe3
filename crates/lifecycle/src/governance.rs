//! The governance state machine (docs/governance.md): the stages of one piece of
//! agent work, the evidence each transition needs, and the rules that keep
//! an agent from approving its own work, closing on stale tests, skipping
//! the re-review of a repair or retrying a failing patch a third time.
//!
//! [`apply`] is the whole machine: a state and an event in, a new state and
//! actions out, or a [`Refusal`] with a reason a person can read. Event
//! order is the only clock: "after" means later in the ledger.

mod decision;
mod events;
mod guidance;
mod observe;
mod refusal;
mod rules;
mod stages;
mod state;

pub use decision::{ClosureWord, TransitionWord};
pub use events::{Action, Closure, Event, Identity, target};
pub use observe::{Observed, observe};
pub use refusal::{Refusal, RefusalKind};
pub use rules::apply;
pub use stages::{Stage, TRANSITIONS, legal, next_stages};
pub use state::{FindingStatus, State, Validation, Visibility};

#[cfg(test)]
mod quiet_tests;
#[cfg(test)]
mod tests;
