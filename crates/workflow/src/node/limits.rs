//! The budgets a YAML document is read within, shared by both ways of
//! reading it.

/// The most nesting a workflow may have. Real workflows nest about six
/// levels; the bound keeps the recursive tree walk far from the stack limit.
pub const MAX_DEPTH: usize = 32;

/// The most YAML events (scalars, collection starts and ends) a document may
/// produce. A 10 000-stage workflow produces about 200 000.
pub const MAX_EVENTS: usize = 2_000_000;

/// The most events that aliases may replay in total.
pub const MAX_REPLAYED_EVENTS: usize = 100_000;
