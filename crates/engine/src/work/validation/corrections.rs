//! What the corrections of a stage applied, merged into one record.

use baton_store::UnitRow;

use super::findings;
use super::unit::{invalid, spec_of};
use crate::work::context::{Context, Step};

/// Merges every successful correction's log into
/// `validation/corrections-applied.json`.
pub(super) fn apply_corrections(
    context: &Context<'_>,
    corrections: &[&UnitRow],
) -> Result<(), Step> {
    let stage = context.stage.name();
    let mut entries = Vec::new();
    for unit in corrections.iter().filter(|unit| unit.status == "success") {
        let spec = spec_of(unit);
        match findings::read_log(context.workspace, &spec.output, stage, unit.cycle) {
            Ok(log) => entries.extend(log),
            Err(error) => {
                return Err(invalid(
                    context,
                    &[(*unit, error)],
                    "wrote an invalid corrections log",
                ));
            }
        }
    }
    findings::write_applied(context.workspace, stage, &entries).map_err(|error| Step::Fail {
        error,
        record: Vec::new(),
    })
}
