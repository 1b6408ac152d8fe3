//! Validation waves and correction cycles of a stage with `validation:`
//! (product.md A5, reference-engine.md §13.4).

use super::{Context, Materialized, Step};
use baton_store::UnitRow;

/// The next step once the primary work and every validation unit so far
/// have finished.
pub(crate) fn step(_context: &Context<'_>, _units: &[UnitRow]) -> Step {
    Step::Done { record: Vec::new() }
}

/// The stage to run for a validation unit.
pub(crate) fn materialize(_context: &Context<'_>, unit: &UnitRow) -> Result<Materialized, String> {
    Err(format!("unknown unit kind '{}'", unit.kind))
}
